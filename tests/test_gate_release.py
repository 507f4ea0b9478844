"""The control API lets a client over HTTP pick one held request (by its id) and say how it goes
on, and end one transition now: what the schedule explorer needs against a fake it cannot look
into."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import Client, create_sandbox
from tests.test_api_sandboxes import expect_error


@pytest.fixture
def fake_config() -> ServerConfig:
    # Transitions take a minute of a clock nobody moves: only `finish` ends them.
    return ServerConfig(seed=1234, transition_ms=60_000, create_ms=0, manual_clock=True)


async def holding(client: Client, count: int) -> list[dict[str, Any]]:
    """The gate's held requests, once ``count`` are held (bounded: 500 looks)."""
    for _ in range(500):
        gate = (await (await client.get("/_fake/gates/g")).json())["data"]
        if gate["held"] >= count:
            return list(gate["holding"])
        await asyncio.sleep(0.002)
    raise AssertionError(f"fewer than {count} request(s) held")


async def test_a_chosen_held_request_goes_on_by_its_id(fake: FakeCreateOS, client: Client) -> None:
    first = (await create_sandbox(client))["id"]
    second = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    pause_first = asyncio.ensure_future(client.post(f"/v1/sandboxes/{first}/pause"))
    await holding(client, 1)
    pause_second = asyncio.ensure_future(client.post(f"/v1/sandboxes/{second}/pause"))
    held = await holding(client, 2)
    assert [h["sandbox"] for h in held] == [first, second]
    assert held[0]["id"] != held[1]["id"]
    # The younger one goes on first, as chosen; the older one stays held.
    answer = await client.post(
        "/_fake/gates/g/release", json={"request": held[1]["id"], "outcome": "proceed"}
    )
    assert (await answer.json())["data"]["released"] == 1
    assert (await pause_second).status == 200
    assert not pause_first.done()
    assert [h["id"] for h in await holding(client, 1)] == [held[0]["id"]]
    # ``lost``: the pause takes effect, and the client gets no answer.
    await client.post("/_fake/gates/g/release", json={"request": held[0]["id"], "outcome": "lost"})
    with pytest.raises(aiohttp.ClientError):
        await pause_first
    assert fake.find_sandbox(first).status.value == "pausing"


async def test_a_held_request_released_with_error_has_no_effect(
    fake: FakeCreateOS, client: Client
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox}/pause"))
    [held] = await holding(client, 1)
    await client.post("/_fake/gates/g/release", json={"request": held["id"], "outcome": "error"})
    await expect_error(await pause, 503)
    assert fake.find_sandbox(sandbox).status.value == "running"


async def test_releasing_one_request_refuses_what_it_cannot_do(
    fake: FakeCreateOS, client: Client
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="GET /v1/sandboxes/{id}")
    read = asyncio.ensure_future(client.get(f"/v1/sandboxes/{sandbox}"))
    [held] = await holding(client, 1)
    release = "/_fake/gates/g/release"
    await expect_error(await client.post(release, json={"request": held["id"] + 1}), 404, "no")
    await expect_error(await client.post("/_fake/gates/nope/release", json={"request": 1}), 404)
    await expect_error(await client.post(release, json={"outcome": "lost"}), 400, "request")
    await expect_error(
        await client.post(release, json={"request": held["id"], "count": 1}), 400, "not both"
    )
    await expect_error(
        await client.post(release, json={"request": held["id"], "open": True}), 400, "not both"
    )
    await expect_error(
        await client.post(release, json={"request": held["id"], "outcome": "late"}), 400
    )
    await expect_error(await client.post(release, json={"request": 0}), 400)
    assert not read.done()  # nothing refused let it go
    gone = await client.post(release, json={"request": held["id"]})  # outcome: proceed
    assert (await gone.json())["data"]["released"] == 1
    assert (await read).status == 200
    # Gone on already: its id names nothing any more.
    await expect_error(await client.post(release, json={"request": held["id"]}), 404)


async def test_finish_ends_the_transition_in_flight_now(fake: FakeCreateOS, client: Client) -> None:
    sandbox = (await create_sandbox(client))["id"]
    finish = f"/_fake/sandboxes/{sandbox}/finish"
    view = (await (await client.post(f"/v1/sandboxes/{sandbox}/pause")).json())["data"]
    assert view["status"] == "pausing"
    finished = (await (await client.post(finish)).json())["data"]
    assert finished["finished"] is True
    assert finished["sandbox"]["status"] == "paused"
    [ended] = [e for e in fake.journal.transitions(sandbox) if e.after == "paused"]
    assert ended.cause == "pause"  # an ordinary end, not a forced status
    # A stuck transition stays stuck; with nothing in flight, finish does nothing.
    await client.post(f"/v1/sandboxes/{sandbox}/resume")
    await client.post(f"/_fake/sandboxes/{sandbox}/state", json={"stuck": True})
    held = (await (await client.post(finish)).json())["data"]
    assert (held["finished"], held["sandbox"]["status"]) == (False, "resuming")
    await client.post(f"/_fake/sandboxes/{sandbox}/state", json={"stuck": False})
    assert (await (await client.post(finish)).json())["data"]["finished"] is True
    idle = (await (await client.post(finish)).json())["data"]
    assert (idle["finished"], idle["sandbox"]["status"]) == (False, "running")
    await expect_error(await client.post("/_fake/sandboxes/sb_nope/finish"), 404)
