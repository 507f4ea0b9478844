"""The control API lets a client over HTTP pick one held request (by its id) and say how it goes
on, and end one transition now: what the schedule explorer needs against a fake it cannot look
into."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from fake_server import FakeCreateOS, ServerConfig
from fake_server.gates import Gate, HeldRequest, outcomes_for
from tests.conftest import Client, create_sandbox
from tests.test_api_sandboxes import expect_error


@pytest.fixture
def fake_config() -> ServerConfig:
    # Transitions take a minute of a clock nobody moves: only `finish` ends them.
    return ServerConfig(seed=1234, transition_ms=60_000, create_ms=0, manual_clock=True)


async def holding(
    fake: FakeCreateOS, client: Client, count: int, gate: str = "g"
) -> list[dict[str, Any]]:
    """The gate's held requests as the control API lists them, once ``count`` are held (the
    gate's own wait: no polling)."""
    await fake.faults.gates[gate].wait_held(count)
    return list((await (await client.get(f"/_fake/gates/{gate}")).json())["data"]["holding"])


async def test_a_chosen_held_request_goes_on_by_its_id(fake: FakeCreateOS, client: Client) -> None:
    first = (await create_sandbox(client))["id"]
    second = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    pause_first = asyncio.ensure_future(client.post(f"/v1/sandboxes/{first}/pause"))
    await holding(fake, client, 1)
    pause_second = asyncio.ensure_future(client.post(f"/v1/sandboxes/{second}/pause"))
    held = await holding(fake, client, 2)
    assert [h["sandbox"] for h in held] == [first, second]
    assert held[0]["id"] != held[1]["id"]
    # The younger one goes on first, as chosen; the older one stays held.
    answer = await client.post(
        "/_fake/gates/g/release", json={"request": held[1]["id"], "outcome": "proceed"}
    )
    assert (await answer.json())["data"]["released"] == 1
    assert (await pause_second).status == 200
    assert not pause_first.done()
    assert [h["id"] for h in await holding(fake, client, 1)] == [held[0]["id"]]
    # ``lost``: the pause takes effect, and the client gets no answer.
    await client.post("/_fake/gates/g/release", json={"request": held[0]["id"], "outcome": "lost"})
    with pytest.raises(aiohttp.ClientError):
        await pause_first
    assert fake.find_sandbox(first).status.value == "pausing"


async def test_a_release_answers_what_the_gate_holds_after_it(
    fake: FakeCreateOS, client: Client
) -> None:
    # The answer of a release counted a request it had just let go as still held (and listed
    # it under `holding`): "held": 1 beside "released": 1, until the request ran again.
    first = (await create_sandbox(client))["id"]
    second = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    pauses = [
        asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox}/pause"))
        for sandbox in (first, second)
    ]
    held = await holding(fake, client, 2)
    answer = (await (await client.post("/_fake/gates/g/release", json={"count": 1})).json())["data"]
    assert (answer["released"], answer["held"], answer["passed"]) == (1, 1, 1)
    assert [h["id"] for h in answer["holding"]] == [held[1]["id"]]
    one = {"request": held[1]["id"], "outcome": "proceed"}
    answer = (await (await client.post("/_fake/gates/g/release", json=one)).json())["data"]
    assert (answer["released"], answer["held"], answer["passed"]) == (1, 0, 2)
    assert answer["holding"] == []
    assert [(await pause).status for pause in pauses] == [200, 200]


async def test_a_held_request_released_with_error_has_no_effect(
    fake: FakeCreateOS, client: Client
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox}/pause"))
    [held] = await holding(fake, client, 1)
    await client.post("/_fake/gates/g/release", json={"request": held["id"], "outcome": "error"})
    await expect_error(await pause, 503)
    assert fake.find_sandbox(sandbox).status.value == "running"


async def test_releasing_one_request_refuses_what_it_cannot_do(
    fake: FakeCreateOS, client: Client
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="GET /v1/sandboxes/{id}")
    read = asyncio.ensure_future(client.get(f"/v1/sandboxes/{sandbox}"))
    [held] = await holding(fake, client, 1)
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


async def test_a_request_held_after_its_effect_takes_the_outcomes_left_to_it(
    fake: FakeCreateOS, client: Client
) -> None:
    # Released "lost" or "error" after its effect, a request was answered 200 as if released
    # plainly: the outcome was dropped without a word.
    first, second, third = [(await create_sandbox(client))["id"] for _ in range(3)]
    fake.faults.gate("g", when="after", route="POST /v1/sandboxes/{id}/pause")
    release = "/_fake/gates/g/release"
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{first}/pause"))
    [held] = await holding(fake, client, 1)
    assert held["outcomes"] == ["error", "lost"]
    assert fake.find_sandbox(first).status.value == "pausing"  # held after the effect
    # What only changes a request before its effect is refused, and the request stays held.
    for outcome in ("stuck", "survives"):
        refused = await client.post(release, json={"request": held["id"], "outcome": outcome})
        await expect_error(refused, 400, f"outcome '{outcome}' cannot apply")
    assert not pause.done()
    await client.post(release, json={"request": held["id"], "outcome": "lost"})
    with pytest.raises(aiohttp.ClientError):
        await pause
    # "error": the client is answered 503, and the effect stays.
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{second}/pause"))
    [held] = await holding(fake, client, 1)
    await client.post(release, json={"request": held["id"], "outcome": "error"})
    await expect_error(await pause, 503)
    assert fake.find_sandbox(second).status.value == "pausing"
    # No outcome: the answer as the handler made it.
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{third}/pause"))
    [held] = await holding(fake, client, 1)
    await client.post(release, json={"request": held["id"], "outcome": "proceed"})
    assert (await pause).status == 200


async def test_a_stream_held_after_its_answer_went_out_takes_no_outcome(
    fake: FakeCreateOS, client: Client, api_key: str
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", when="after", route="POST /v1/sandboxes/{id}/exec")
    # A session of its own: the held connection has sent a whole answer, and the control
    # requests below must not be queued behind the held request on it.
    async with aiohttp.ClientSession(headers={"X-Api-Key": api_key}) as streaming:
        url = client.make_url(f"/v1/sandboxes/{sandbox}/exec?stream=true")
        stream = asyncio.ensure_future(streaming.post(url, json={"cmd": "echo", "args": ["hi"]}))
        try:
            [held] = await holding(fake, client, 1)
            assert held["outcomes"] == []
            refused = await client.post(
                "/_fake/gates/g/release", json={"request": held["id"], "outcome": "lost"}
            )
            await expect_error(refused, 400, "its answer has been sent")
            gate = fake.faults.gates["g"]
            with pytest.raises(ValueError, match="cannot apply"):
                gate.release_request(gate.holding[0], "error")
            assert gate.release_request(gate.holding[0]) is True
        finally:
            fake.faults.gates["g"].open()
        async with await stream as response:
            assert response.status == 200
            assert b'"exit_code":0' in await response.read()


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


async def test_a_process_delete_released_as_survives_ends_nothing(
    fake: FakeCreateOS, client: Client
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    started = await client.post(f"/v1/sandboxes/{sandbox}/processes", json={"cmd": "cat"})
    process = (await started.json())["data"]["process_id"]
    fake.faults.gate("g", route="DELETE /v1/sandboxes/{id}/processes/{pid}")
    path = f"/v1/sandboxes/{sandbox}/processes/{process}"
    delete = asyncio.ensure_future(client.delete(path))
    [held] = await holding(fake, client, 1)
    await client.post("/_fake/gates/g/release", json={"request": held["id"], "outcome": "survives"})
    answer = await delete
    assert answer.status == 200
    assert (await answer.json())["data"]["tree_exited"] is False
    assert (await (await client.get(path)).json())["data"]["state"] == "running"


async def test_a_pause_released_as_stuck_never_finishes_and_a_refused_one_holds_nothing(
    fake: FakeCreateOS, client: Client
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox}/pause"))
    [held] = await holding(fake, client, 1)
    await client.post("/_fake/gates/g/release", json={"request": held["id"], "outcome": "stuck"})
    assert (await pause).status == 200
    record = fake.find_sandbox(sandbox)
    assert record.pending is not None
    assert record.pending.stuck
    finished = await client.post(f"/_fake/sandboxes/{sandbox}/finish")
    assert (await finished.json())["data"]["finished"] is False
    assert record.status.value == "pausing"
    # A resume of a running sandbox is refused (409): released as stuck, it starts nothing and
    # leaves nothing held for a later transition.
    fake.faults.clear()
    other = (await create_sandbox(client))["id"]
    fake.faults.gate("r", route="POST /v1/sandboxes/{id}/resume")
    resume = asyncio.ensure_future(client.post(f"/v1/sandboxes/{other}/resume"))
    [held_resume] = await holding(fake, client, 1, gate="r")
    release = {"request": held_resume["id"], "outcome": "stuck"}
    await client.post("/_fake/gates/r/release", json=release)
    await expect_error(await resume, 409)
    await client.post(f"/v1/sandboxes/{other}/pause")
    assert (await (await client.post(f"/_fake/sandboxes/{other}/finish")).json())["data"][
        "finished"
    ] is True


@pytest.mark.parametrize(
    ("method", "path", "outcomes"),
    [
        ("GET", "/v1/sandboxes/sb_1", set()),
        ("POST", "/v1/sandboxes/sb_1/exec", {"lost", "error"}),
        ("DELETE", "/v1/sandboxes/sb_1/processes/p_1", {"lost", "error", "survives"}),
        ("POST", "/v1/sandboxes/sb_1/pause", {"lost", "error", "stuck"}),
        ("POST", "/v1/sandboxes/sb_1/fork", {"lost", "error", "stuck"}),
        ("DELETE", "/v1/sandboxes/sb_1", {"lost", "error", "stuck"}),
        ("POST", "/v1/sandboxes/sb_1", {"lost", "error"}),
    ],
)
def test_each_outcome_is_offered_only_where_it_changes_something(
    method: str, path: str, outcomes: set[str]
) -> None:
    assert outcomes_for(method, path) == outcomes


async def test_a_release_skips_a_request_whose_client_just_left() -> None:
    # Cancelled (its client gone) but not yet forgotten: the release goes to the next one.
    gate = Gate("g")
    gone = asyncio.ensure_future(gate.hold(HeldRequest("GET", "/gone", since="t0")))
    stays = asyncio.ensure_future(gate.hold(HeldRequest("GET", "/stays", since="t1")))
    await gate.wait_held(2)
    gone.cancel()
    assert gate.release(1) == 1
    assert await stays is None
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert (gate.held, gate.passed, gate.holding) == (0, 1, [])


async def test_a_gate_answers_once_it_holds_the_requests_asked_for(
    fake: FakeCreateOS, client: Client
) -> None:
    # A client outside Python had to poll the gate to learn that a request was held.
    sandbox = (await create_sandbox(client))["id"]
    fake.faults.gate("g", route="POST /v1/sandboxes/{id}/pause")
    # Nothing held: no answer until its timeout (a plain read would say held 0 at once).
    nothing = await client.get("/_fake/gates/g?held=1&timeout_ms=10")
    await expect_error(nothing, 408, "gate 'g': 0 request(s) held after 0.01s, expected 1")
    waiting = asyncio.ensure_future(client.get("/_fake/gates/g?held=1"))
    pause = asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox}/pause"))
    answer = await waiting
    assert (await answer.json())["data"]["held"] == 1
    timed_out = await client.get("/_fake/gates/g?held=2&timeout_ms=10")
    await expect_error(timed_out, 408, "gate 'g': 1 request(s) held after 0.01s, expected 2")
    await expect_error(await client.get("/_fake/gates/g?held=lots"), 400, "held")
    await expect_error(await client.get("/_fake/gates/nope?held=1"), 404)
    fake.faults.gates["g"].open()
    assert (await pause).status == 200
