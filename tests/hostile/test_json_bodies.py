"""Bodies no real client sends, each refused with a 400 in the envelope before any effect, and
the fake readable afterwards (each of these once answered 500, some for good)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import Client, ClientFactory, create_sandbox
from tests.test_api_sandboxes import expect_error

SHAPE = "s-1vcpu-1gb"
JSON = {"Content-Type": "application/json"}


async def still_readable(client: Client) -> None:
    """Every read that a poisoned state used to break answers 200."""
    for path in ("/v1/sandboxes", "/_fake/state", "/_fake/faults", "/_fake/journal"):
        response = await client.get(path)
        assert response.status == 200, (path, await response.text())
        await response.json()


async def listed(client: Client) -> list[dict[str, Any]]:
    """The tenant's sandboxes, as the list endpoint shows them."""
    body = await (await client.get("/v1/sandboxes")).json()
    items: list[dict[str, Any]] = body["data"]["data"]
    return items


@pytest.mark.parametrize(
    "body",
    [
        {"shape": SHAPE, "egress": ["\ud800"]},
        {"shape": SHAPE, "name": "a\udfff"},
        {"shape": SHAPE, "envs": {"A": "\ud83d"}},
        {"shape": SHAPE, "\ud800": 1},  # an unknown field whose name is not text
    ],
)
async def test_a_lone_surrogate_creates_nothing(client: Client, body: dict[str, Any]) -> None:
    await expect_error(await client.post("/v1/sandboxes", json=body), 400, "lone surrogate")
    assert await listed(client) == []
    await still_readable(client)


async def test_a_surrogate_sent_as_raw_utf8_bytes_creates_nothing(client: Client) -> None:
    raw = b'{"shape": "s-1vcpu-1gb", "name": "a\xed\xa0\x80"}'  # not an escape: raw bytes
    response = await client.post("/v1/sandboxes", data=raw, headers=JSON)
    await expect_error(response, 400, "lone surrogate")
    assert await listed(client) == []


async def test_a_lone_surrogate_in_process_args_starts_nothing(client: Client) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    base = f"/v1/sandboxes/{sandbox_id}/processes"
    body = {"cmd": "echo", "args": ["\ud800"]}
    await expect_error(await client.post(base, json=body), 400, "lone surrogate")
    listing = await (await client.get(base)).json()
    assert listing["data"]["processes"] == []
    await still_readable(client)


async def test_a_lone_surrogate_in_a_rule_adds_no_rule(client: Client, fake: FakeCreateOS) -> None:
    rule = {"match": {"route": "GET /v1/sandboxes"}, "action": {"type": "error", "status": 503}}
    rule["action"]["message"] = "\ud800"  # type: ignore[index]
    await expect_error(await client.post("/_fake/faults", json=rule), 400, "lone surrogate")
    assert list(fake.faults) == []
    await still_readable(client)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"shape": "s-1vcpu-1gb", "disk_mib": NaN}', "not finite"),
        (b'{"shape": "s-1vcpu-1gb", "disk_mib": Infinity}', "not finite"),
        (b'{"shape": "s-1vcpu-1gb", "disk_mib": -Infinity}', "not finite"),
        (b'{"shape": "s-1vcpu-1gb", "disk_mib": 1e999}', "not finite"),
        (b'{"shape": "s-1vcpu-1gb", "disk_mib": ' + b"9" * 4000 + b"}", "64-bit"),
        (b'{"shape": "s-1vcpu-1gb", "disk_mib": 9223372036854775808}', "64-bit"),
        (b'{"shape": ' * 1000 + b"1" + b"}" * 1000, "nests deeper"),
        (b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
        (b'{"shape": ' + b"[" * 40 + b"]" * 40 + b"}", "nests deeper"),
    ],
)
async def test_numbers_and_nesting_out_of_range(client: Client, raw: bytes, fragment: str) -> None:
    await expect_error(await client.post("/v1/sandboxes", data=raw, headers=JSON), 400, fragment)
    assert await listed(client) == []
    await still_readable(client)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"match": {"route": "GET /v1/sandboxes"}, "action": {"type": "error", "status": 429,'
        b' "retry_after": ' + b"7" * 4000 + b"}}",
        b"[" * 5000 + b"]" * 5000,
        b'{"match": {"route": "GET /v1/sandboxes"}, "action": {"type": "latency", "ms": NaN}}',
    ],
)
async def test_rules_out_of_range_are_refused(
    client: Client, fake: FakeCreateOS, raw: bytes
) -> None:
    await expect_error(await client.post("/_fake/faults", data=raw, headers=JSON), 400)
    assert list(fake.faults) == []
    await still_readable(client)


async def test_ordinary_bodies_still_parse(client: Client) -> None:
    raw = json.dumps(
        {"shape": SHAPE, "envs": {"GREETING": "caf\u00e9 \U0001f600"}, "egress": ["*"]}
    )
    created = await client.post("/v1/sandboxes", data=raw.encode(), headers=JSON)
    assert created.status == 200, await created.text()
    nested = {"match": {"route": "GET /v1/sandboxes"}, "action": {"type": "latency", "ms": 1.5}}
    added = await client.post("/_fake/faults", json=nested)
    assert added.status == 200, await added.text()


async def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_cap(
    client: Client, fake: FakeCreateOS
) -> None:
    more = asyncio.Event()  # never set: the rest of the body would never come

    async def past_the_cap_then_stalls() -> Any:  # chunked: no declared length
        yield b'{"shape": "s-1vcpu-1gb", "name": "' + b"x" * (fake.config.max_json_bytes + 1)
        await more.wait()

    # Before, the whole body was read before any check: this answer never came.
    posting = client.post("/v1/sandboxes", data=past_the_cap_then_stalls(), headers=JSON)
    response = await asyncio.wait_for(posting, timeout=10)
    await expect_error(response, 413, "too large")
    assert await listed(client) == []


async def test_a_chunked_upload_is_refused_as_soon_as_it_passes_the_cap(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0, max_file_bytes=1024))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_upload"})
    sandbox = (await create_sandbox(client))["id"]
    more = asyncio.Event()

    async def past_the_cap_then_stalls() -> Any:
        yield b"x" * 2048
        await more.wait()

    files = f"/v1/sandboxes/{sandbox}/files"
    putting = client.put(files, params={"path": "/tmp/big"}, data=past_the_cap_then_stalls())
    await expect_error(await asyncio.wait_for(putting, timeout=10), 413)
    missing = await client.get(files, params={"path": "/tmp/big"})
    assert missing.status == 404
