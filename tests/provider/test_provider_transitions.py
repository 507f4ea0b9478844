"""transition(): poll through pausing/resuming, submit once, reconcile 409s, stay bounded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_createos.errors import TransitionError
from pytest_createos.provider import Lease

from .conftest import FakeEnv


@pytest.fixture
def transition_ms() -> float:
    return 30.0


async def hold_transition_until_seen(env: FakeEnv, lease: Lease, action: Any, status: str) -> None:
    """Run ``action`` with the sandbox's transition held, release it only once the provider has
    polled and seen ``status``: the provider must wait through it, however slow the machine."""
    sandbox = env.sandbox(lease)
    env.fake.state_faults.stick(sandbox)
    task = asyncio.ensure_future(action(lease))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while not any(
        e.sandbox_status == status
        for e in env.fake.journal.requests(route="GET /v1/sandboxes/{id}")
    ):
        assert loop.time() < deadline, f"the provider never polled a {status} sandbox"
        await asyncio.sleep(0.001)
    assert not task.done()
    env.fake.state_faults.unstick(sandbox)
    await task


async def test_pause_and_resume_wait_through_intermediate_states(env: FakeEnv) -> None:
    lease = await env.acquire()
    sandbox_id = lease.provider_lease_id
    await hold_transition_until_seen(env, lease, env.release, "pausing")
    assert env.status(lease) == "paused"
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/pause", times=1)

    await hold_transition_until_seen(env, lease, env.resume, "resuming")
    assert env.status(lease) == "running"
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/resume", times=1)
    transitions = [(t.before, t.after) for t in env.fake.journal.transitions(sandbox_id)]
    assert ("paused", "resuming") in transitions
    assert ("resuming", "running") in transitions


async def test_lingering_old_status_after_submit_is_tolerated(env: FakeEnv) -> None:
    """The newer Paperclip sequence: paused, paused, resuming, running — one resume POST."""
    lease = await env.acquire()
    await env.release(lease)
    # The lookup GET and the first poll (both before the POST) are honest; the poll right after
    # the POST is stale and still says `paused`.
    stale = env.fake.faults.stale_read(route="GET /v1/sandboxes/{id}", times=1, after=2)
    sandbox = env.sandbox(lease)
    env.fake.state_faults.stick(sandbox)
    mark = env.last_seq()
    task = asyncio.ensure_future(env.resume(lease))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while len(env.fake.journal.requests(route="GET /v1/sandboxes/{id}", since=mark)) < 4:
        assert loop.time() < deadline
        await asyncio.sleep(0.001)
    assert stale.fired == 1
    assert not task.done()
    env.fake.state_faults.unstick(sandbox)
    resumed = await task
    assert resumed.provider_lease_id == lease.provider_lease_id
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/resume", times=1)


async def test_no_post_when_already_running(env: FakeEnv) -> None:
    lease = await env.acquire()
    mark = env.last_seq()
    await env.resume(lease)
    assert env.routes(mark) == [
        "GET /v1/sandboxes/{id}",
        "GET /v1/sandboxes/{id}",
        "POST /v1/sandboxes/{id}/exec",
    ]


async def test_no_post_when_already_paused(env: FakeEnv) -> None:
    lease = await env.acquire()
    await env.release(lease)
    mark = env.last_seq()
    await env.release(lease)
    assert env.routes(mark) == ["GET /v1/sandboxes/{id}"]


async def test_conflict_on_submit_is_retried_not_counted(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(409, route="POST /v1/sandboxes/{id}/pause", times=1)
    await env.release(lease)
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/pause", times=2)
    assert env.status(lease) == "paused"


async def test_stuck_transition_times_out_retryably(env: FakeEnv) -> None:
    lease = await env.acquire()
    # The provider's budget covers its requests too: short enough to keep the test quick,
    # long enough that a loaded machine does not time out the pause request itself (150 ms
    # did, once, at load 6 on 2 cores: a transport error instead of the stuck transition).
    env.config["timeoutMs"] = 1000
    env.fake.state_faults.stick(env.sandbox(lease))
    with pytest.raises(TransitionError, match="did not reach paused: status pausing") as info:
        await env.release(lease)
    assert info.value.retryable
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/pause", times=1)
    env.fake.state_faults.unstick(env.sandbox(lease))


async def test_transition_into_error_is_reported(env: FakeEnv) -> None:
    from fake_server import Status

    lease = await env.acquire()
    env.fake.state_faults.fail_transition(env.sandbox(lease), Status("error"))
    with pytest.raises(TransitionError, match="did not reach paused: status error") as info:
        await env.release(lease)
    assert not info.value.retryable


async def test_pause_of_a_vanished_sandbox_counts_as_released(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(404, route="POST /v1/sandboxes/{id}/pause")
    await env.release(lease)
    env.fake.journal.assert_not_requested("DELETE /v1/sandboxes/{id}")
