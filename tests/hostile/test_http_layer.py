"""What aiohttp answers before any route runs (requests it cannot parse) comes in the API's
envelope too, quotes nothing the client sent (an API key in a broken header) and is logged in
one line without a traceback; paths with encoded newlines reach the catch-all route."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from fake_server import FakeCreateOS, ServerConfig, errors, serve

SECRET = b"skp_do_not_echo_me"


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeCreateOS, str]]:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    async with serve(fake) as url:
        yield fake, url


async def exchange(url: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` bytes on a fresh connection; the answer's status, headers and body."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(raw)
        answer = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /v1/sandboxes HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: " + SECRET + b"\r1\r\n\r\n",
        b"GET /v1/sandboxes HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: " + SECRET + b"\x01\r\n\r\n",
        b"BLAH " + SECRET + b"\r\n\r\n",
        b"GET /" + SECRET + b" HTTP/9.9\r\n\r\n",
    ],
)
async def test_unparsable_requests_get_the_envelope_and_no_echo(
    served: tuple[FakeCreateOS, str], raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _, url = served
    status, headers, body = await exchange(url, raw)
    assert status == 400
    assert headers["Content-Type"].startswith("application/json")
    message = "malformed HTTP request: its request line or a header could not be parsed"
    assert json.loads(body) == {"status": "fail", "message": message, "code": 400, "data": message}
    assert SECRET not in body
    assert not any(SECRET.decode() in record.getMessage() for record in caplog.records)
    assert not any(record.exc_info for record in caplog.records)
    # The journal has it too, quoting nothing.
    (entry,) = [e for e in served[0].journal.entries() if e.status == 400]
    assert entry.detail == errors.REQUEST_UNPARSABLE
    assert SECRET.decode() not in json.dumps(entry.as_json())
    # And the fake goes on serving.
    status, _, _ = await exchange(
        url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 200


#: What a client trying HTTP/2 without negotiation first sends: the connection preface, then
#: its SETTINGS frame.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


async def test_an_http2_preface_is_declined_without_a_journal_entry(
    served: tuple[FakeCreateOS, str], caplog: pytest.LogCaptureFixture
) -> None:
    """The TypeScript SDK tries HTTP/2 on every request over http:// and falls back to
    HTTP/1.1 on the refusal: the probe gets a plain answer, and stays out of the journal (over a
    third of its entries were these) and out of the log's info lines."""
    caplog.set_level(logging.INFO)
    fake, url = served
    status, headers, body = await exchange(url, HTTP2_PREFACE)
    assert status == 400
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["message"] == errors.HTTP2_DECLINED
    assert fake.journal.entries() == []
    assert not any("fake-createos" in record.getMessage() for record in caplog.records)
    # The HTTP/1.1 request that follows is served.
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert (await exchange(url, raw))[0] == 200


async def test_a_path_with_an_encoded_newline_reaches_the_catch_all(
    served: tuple[FakeCreateOS, str],
) -> None:
    fake, url = served
    raw = b"GET /v1/a%0ab HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    status, headers, body = await exchange(url, raw)
    assert status == 404
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["message"] == "route not found"
    assert [entry.path for entry in fake.journal.requests()] == ["/v1/a\nb"]


async def test_the_aiohttp_server_fixture_answers_parse_errors_in_the_envelope(
    createos_aiohttp_server: Any,
) -> None:
    # pytest-aiohttp builds that fixture's runner: it gets the fake's connection handling too.
    raw = b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + SECRET + b"\x01\r\n\r\n"
    status, headers, body = await exchange(createos_aiohttp_server.url, raw)
    assert status == 400
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["message"] == errors.REQUEST_UNPARSABLE
    assert SECRET not in body


@pytest.mark.parametrize(
    ("request_line", "path"),
    [
        (b"CONNECT 127.0.0.1:22 HTTP/1.1", "127.0.0.1:22"),
        (b"OPTIONS * HTTP/1.1", "*"),
    ],
)
async def test_a_target_that_is_not_a_path_reaches_the_catch_all(
    served: tuple[FakeCreateOS, str], request_line: bytes, path: str
) -> None:
    """Authority-form (CONNECT) and asterisk-form (OPTIONS *) targets match no route's path:
    they get the envelope and a journal entry, as any request no route serves does."""
    fake, url = served
    raw = request_line + b"\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    status, headers, body = await exchange(url, raw)
    assert status == 404
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["message"] == errors.ROUTE_NOT_FOUND
    [entry] = fake.journal.requests()
    assert (entry.method, entry.path, entry.status) == (request_line.split()[0].decode(), path, 404)
