"""What the fake gained for the explorer: a particular held request let go, a transition
finished now, the newest journal entries read from the end, a command known to wait for its
stdin, and the fake itself handed over when it runs on the test's loop."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from fake_server.clock import ManualClock
from fake_server.gates import Gate, HeldRequest
from fake_server.journal import Entry, Journal
from fake_server.lifecycle import Durations, Lifecycle, Status
from fake_server.streams import StdinReader
from pytest_createos.server import CreateosServer
from tests.test_lifecycle import make_sandbox


def held(path: str = "/v1/sandboxes/sb_1") -> HeldRequest:
    return HeldRequest("GET", path, since="2026-01-01T00:00:00Z", tenant="usr_1")


async def test_one_particular_held_request_goes_on_even_when_two_are_equal() -> None:
    gate = Gate("all")
    first, second = held(), held()
    assert first == second
    assert first is not second
    waiting = [asyncio.ensure_future(gate.hold(request)) for request in (first, second)]
    await gate.wait_held(2)
    assert gate.release_request(second)
    await asyncio.wait({waiting[1]})
    assert not waiting[0].done()
    assert len(gate.holding) == 1
    assert gate.holding[0] is first  # the other one, by identity
    assert not gate.release_request(second)  # gone already
    assert gate.release() == 1
    await asyncio.wait({waiting[0]})
    assert (gate.held, gate.passed) == (0, 2)


async def test_a_request_never_held_cannot_be_let_go() -> None:
    assert not Gate("all").release_request(held())


def test_a_transition_finishes_now_without_moving_the_clock() -> None:
    clock = ManualClock()
    machine = Lifecycle(clock, Durations.uniform(5.0))
    sandbox = make_sandbox(Status.RUNNING)
    machine.pause(sandbox)
    assert machine.finish_now(sandbox)
    assert (sandbox.status, sandbox.pending, clock.now()) == (Status.PAUSED, None, 0.0)
    assert clock.advance(10) == 0  # its timer is gone: nothing finishes it twice
    assert not machine.finish_now(sandbox)  # none in flight


def test_a_stuck_transition_does_not_finish_now() -> None:
    machine = Lifecycle(ManualClock(), Durations.uniform(5.0))
    sandbox = make_sandbox(Status.RUNNING)
    machine.hold(sandbox)
    machine.pause(sandbox)
    assert not machine.finish_now(sandbox)
    assert sandbox.status is Status.PAUSING


def entry(seq: int, tenant: str) -> Entry:
    return Entry(seq=seq, opened=seq, kind="transition", at=0.0, time="t", tenant=tenant)


def test_the_newest_entries_are_read_from_the_end() -> None:
    journal = Journal()
    assert (journal.last_seq, journal.newer_than(0)) == (0, [])
    for seq, tenant in [(1, "a"), (2, "b"), (3, "a"), (4, "b")]:
        journal.record(entry(seq, tenant))
    assert journal.last_seq == 4
    assert [e.seq for e in journal.newer_than(1)] == [2, 3, 4]
    assert [e.seq for e in journal.newer_than(1, tenant="a")] == [3]
    assert journal.newer_than(4) == []


async def test_a_reader_waiting_for_stdin_says_so() -> None:
    reader = StdinReader(closed=False)
    reading = asyncio.ensure_future(reader.read())
    await asyncio.sleep(0)
    assert reader.waiting
    reader.close()
    assert await reading == b""
    assert not reader.waiting


@pytest.mark.asyncio
async def test_the_fake_is_handed_over_only_on_the_tests_own_loop(
    createos_aiohttp_server: CreateosServer, createos_server: CreateosServer
) -> None:
    same_loop: Any = createos_aiohttp_server.channel
    assert same_loop.same_loop_fake is same_loop.fake
    threaded: Any = createos_server.channel
    assert threaded.same_loop_fake is None


async def test_a_held_request_goes_on_with_the_outcome_it_was_let_go_with() -> None:
    gate = Gate("all")
    request = held()
    holding = asyncio.ensure_future(gate.hold(request))
    await gate.wait_held(1)
    refusal = "outcome must be one of lost, error, survives, stuck, not 'late'"
    with pytest.raises(ValueError, match=refusal):
        gate.release_request(request, "late")
    assert gate.release_request(request, "lost")
    assert await holding == "lost"


@pytest.mark.asyncio
@pytest.mark.createos(leak_check=False)  # the sandbox is what the test looks at afterwards
@pytest.mark.parametrize(
    ("outcome", "answer", "status"),
    [("error", 503, "running"), ("lost", None, "pausing"), (None, 200, "pausing")],
)
async def test_a_pause_let_go_with_an_outcome(
    createos_aiohttp_server: CreateosServer, outcome: str | None, answer: int | None, status: str
) -> None:
    server = createos_aiohttp_server
    fake: Any = server.channel.same_loop_fake  # type: ignore[attr-defined]
    headers = {"X-Api-Key": server.api_key}
    async with aiohttp.ClientSession(server.url, headers=headers) as session:
        async with session.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as created:
            sandbox = (await created.json())["data"]["id"]
        handle = server.faults.gate("pause", route="POST /v1/sandboxes/{id}/pause")
        pausing = asyncio.ensure_future(session.post(f"/v1/sandboxes/{sandbox}/pause"))
        await handle.async_wait_held(1)
        gate = fake.faults.gates[handle.full_name]
        assert gate.release_request(gate.holding[0], outcome)
        if answer is None:
            with pytest.raises(aiohttp.ClientConnectionError):
                await pausing
        else:
            async with await pausing as reply:
                assert reply.status == answer
    assert fake.find_sandbox(sandbox).status.value == status
