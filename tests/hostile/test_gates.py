"""A gate is bound to its rule: a request that fired a gate rule never waits on a gate that was
removed (and re-created by name) meanwhile, and a client that gives up is no longer held."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from fake_server import FakeCreateOS, ManualClock, ServerConfig, serve
from tests.conftest import ClientFactory, eventually

WHOAMI = "GET /v1/whoami"
KEY = {"X-Api-Key": "skp_gates"}
RULES = [
    {"match": {"route": WHOAMI}, "action": {"type": "latency", "ms": 1000}},
    {"id": "held", "match": {"route": WHOAMI}, "action": {"type": "gate", "name": "g"}},
]


@pytest.mark.parametrize("removal", ["reset", "delete the rule", "clear the rules"])
async def test_a_request_in_latency_passes_a_gate_removed_meanwhile(
    aiohttp_client: ClientFactory, removal: str
) -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, manual_clock=True, transition_ms=0))
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    fake.faults.add_all(RULES)
    client = await aiohttp_client(fake.app(), headers=KEY)
    request = asyncio.ensure_future(client.get("/v1/whoami"))
    await eventually(lambda: clock.pending == 1)  # waiting in the latency fault
    if removal == "reset":
        assert (await client.post("/_fake/reset")).status == 200
    elif removal == "delete the rule":
        assert (await client.delete("/_fake/faults/held")).status == 200
    else:
        assert (await client.delete("/_fake/faults")).status == 200
    clock.advance(1)
    # Before the fix it waited forever on a fresh gate of the same name.
    response = await asyncio.wait_for(request, timeout=10)
    assert response.status == 200
    assert "g" not in fake.faults.gates


async def test_a_client_that_gives_up_is_no_longer_held() -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    gate = fake.faults.gate("g", route=WHOAMI)
    async with serve(fake) as url, aiohttp.ClientSession(url, headers=KEY) as session:
        request = asyncio.ensure_future(session.get("/v1/whoami"))
        await gate.wait_held(1)
        request.cancel()  # the client closes its connection
        with pytest.raises(asyncio.CancelledError):
            await request
        await eventually(lambda: gate.held == 0)
        await eventually(lambda: bool(fake.journal.requests(route=WHOAMI)))
        assert fake.journal.requests(route=WHOAMI)[-1].detail == "client closed the connection"
        # The gate still holds the next request, and releases it.
        second = asyncio.ensure_future(session.get("/v1/whoami"))
        await gate.wait_held(1)
        assert gate.release() == 1
        async with await second as response:
            assert response.status == 200


async def test_a_cancelled_handler_is_journaled_as_such(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    gate = fake.faults.gate("g", route=WHOAMI)
    client = await aiohttp_client(fake.app(), headers=KEY)
    request = asyncio.ensure_future(client.get("/v1/whoami"))
    await gate.wait_held(1)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    await eventually(lambda: gate.held == 0)
    await eventually(lambda: bool(fake.journal.requests(route=WHOAMI)))
    detail = fake.journal.requests(route=WHOAMI)[-1].detail
    assert detail is not None
    assert "cancelled" in detail or "closed" in detail
