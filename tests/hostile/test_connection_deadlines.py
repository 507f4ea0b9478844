"""Clients that stall cannot hold the fake's sockets or memory: a connection that does not
finish a request's headers in time is closed, a request whose body stops arriving is answered
408 and closed, a client that stops reading its answer is cut off (and what was buffered for
it dropped), while slow but live clients are served.

The server runs in the test's own loop, so its deadlines and the test's waits are timers of one
loop: they fire in deadline order, whatever the machine's speed."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
import pytest

from fake_server import FakeCreateOS, ServerConfig, errors, serve
from tests.conftest import eventually

DEADLINE = 0.2
KEY = {"X-Api-Key": "skp_deadlines"}


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeCreateOS, str]]:
    config = ServerConfig(
        seed=1,
        transition_ms=0,
        header_timeout_s=DEADLINE,
        body_timeout_s=DEADLINE,
        write_timeout_s=DEADLINE,
    )
    fake = FakeCreateOS(config)
    async with serve(fake) as url:
        yield fake, url


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


async def connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(*address(url))


async def uploaded(session: aiohttp.ClientSession, content: bytes) -> str:
    """The files API path of ``content``, uploaded to a new sandbox."""
    async with session.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as response:
        sandbox = (await response.json())["data"]["id"]
    path = f"/v1/sandboxes/{sandbox}/files?path=/big"
    async with session.put(path, data=io.BytesIO(content)) as response:
        assert response.status == 200
    return path


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent until it closed the connection (fails if it never does)."""
    return await asyncio.wait_for(reader.read(), timeout=10)


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /healthz HTTP/1.1\r\nHost: x\r\n", b"GET /heal"],
    ids=["nothing", "a head without its end", "half a request line"],
)
async def test_a_connection_without_a_complete_head_in_time_is_closed(
    served: tuple[FakeCreateOS, str], sent: bytes
) -> None:
    _, url = served
    reader, writer = await connect(url)
    writer.write(sent)
    assert await closed_by_server(reader) == b""
    writer.close()


async def test_a_kept_alive_connection_that_starts_a_request_and_stalls_is_closed(
    served: tuple[FakeCreateOS, str],
) -> None:
    _, url = served
    reader, writer = await connect(url)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = await reader.readuntil(b'"up":true}}')
    assert first.startswith(b"HTTP/1.1 200")
    writer.write(b"GET /healthz HTTP/1.1\r\n")  # the next request's head never ends
    assert await closed_by_server(reader) == b""
    writer.close()


async def test_a_head_sent_slowly_within_the_deadline_is_served(
    served: tuple[FakeCreateOS, str],
) -> None:
    _, url = served
    reader, writer = await connect(url)
    for part in (b"GET /healthz HTTP/1.1\r\n", b"Host: x\r\n", b"Connection: close\r\n\r\n"):
        writer.write(part)
        await writer.drain()
    answer = await closed_by_server(reader)
    assert answer.startswith(b"HTTP/1.1 200")
    writer.close()


async def test_a_request_held_longer_than_the_header_deadline_is_answered(
    served: tuple[FakeCreateOS, str],
) -> None:
    fake, url = served
    gate = fake.faults.gate("slow", route="GET /v1/whoami")
    async with aiohttp.ClientSession(url, headers=KEY) as session:
        answer = asyncio.ensure_future(session.get("/v1/whoami"))
        await gate.wait_held(1)
        # Twice the header deadline passes on the server's own loop while the request is held.
        await asyncio.sleep(DEADLINE * 2)
        gate.release()
        async with await answer as response:
            assert response.status == 200


def head(method: str, path: str, length: int) -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: skp_deadlines\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


async def test_a_body_that_stops_arriving_is_answered_408_and_closed(
    served: tuple[FakeCreateOS, str],
) -> None:
    fake, url = served
    async with aiohttp.ClientSession(url, headers=KEY) as session:
        files = (await uploaded(session, b"")).replace("/big", "/stalled")
    for method, path in (("POST", "/v1/sandboxes"), ("PUT", files)):
        reader, writer = await connect(url)
        writer.write(head(method, path, 1000) + b"{")  # announces 1000 bytes, sends one
        answer = await closed_by_server(reader)
        writer.close()
        status_line, _, body = answer.partition(b"\r\n")
        assert status_line == b"HTTP/1.1 408 Request Timeout"
        envelope = json.loads(body.partition(b"\r\n\r\n")[2])
        assert envelope["code"] == 408
        assert envelope["message"] == errors.BODY_STALLED.format(seconds=DEADLINE)
    assert [entry.status for entry in fake.journal.requests()][-2:] == [408, 408]
    async with (
        aiohttp.ClientSession(url, headers=KEY) as session,
        session.get("/v1/sandboxes") as response,
    ):
        listed = (await response.json())["data"]
    assert len(listed["data"]) == 1  # the stalled create made nothing


async def test_a_body_sent_slowly_but_steadily_is_read(served: tuple[FakeCreateOS, str]) -> None:
    _, url = served
    body = json.dumps({"shape": "s-1vcpu-1gb"}).encode()
    reader, writer = await connect(url)
    writer.write(head("POST", "/v1/sandboxes", len(body)))
    # Longer than the deadline in all, never that long without a byte.
    for start in range(0, len(body), len(body) // 4 + 1):
        await asyncio.sleep(DEADLINE / 2)
        writer.write(body[start : start + len(body) // 4 + 1])
    status_line = await reader.readline()
    writer.close()
    assert status_line.startswith(b"HTTP/1.1 200")


async def test_a_client_that_stops_reading_is_cut_off_and_its_answer_dropped(
    served: tuple[FakeCreateOS, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fake_server")
    _, url = served
    size = 8_000_000
    async with aiohttp.ClientSession(url, headers=KEY) as session:
        path = await uploaded(session, b"x" * size)
    # A small receive buffer, and the client never reads: the server's writes stall.
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(address(url))
    reader, writer = await asyncio.open_connection(sock=raw)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: skp_deadlines\r\n\r\n".encode())
    await eventually(lambda: "stopped reading" in caplog.text)
    received = b""
    with contextlib.suppress(ConnectionResetError):  # an abort may reach us as a reset
        received = await closed_by_server(reader)
    assert len(received) < size
    writer.close()


async def test_a_client_that_reads_a_big_answer_gets_all_of_it(
    served: tuple[FakeCreateOS, str],
) -> None:
    size = 8_000_000
    _, url = served
    async with aiohttp.ClientSession(url, headers=KEY) as session:
        path = await uploaded(session, b"y" * size)
        async with session.get(path) as response:
            body = await response.read()
    assert body == b"y" * size
