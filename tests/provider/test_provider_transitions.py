"""transition(): poll through pausing/resuming, submit once, reconcile 409s, stay bounded."""

from __future__ import annotations

import pytest

from pytest_createos.errors import TransitionError

from .conftest import FakeEnv


@pytest.fixture
def transition_ms() -> float:
    return 30.0


async def test_pause_and_resume_wait_through_intermediate_states(env: FakeEnv) -> None:
    lease = await env.acquire()
    sandbox_id = lease.provider_lease_id
    await env.release(lease)
    assert env.status(lease) == "paused"
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/pause", times=1)
    seen = [e.sandbox_status for e in env.fake.journal.requests(route="GET /v1/sandboxes/{id}")]
    assert "pausing" in seen

    resumed = await env.resume(lease)
    assert resumed.provider_lease_id == sandbox_id
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/resume", times=1)
    seen = [e.sandbox_status for e in env.fake.journal.requests(route="GET /v1/sandboxes/{id}")]
    assert "resuming" in seen
    transitions = [(t.before, t.after) for t in env.fake.journal.transitions(sandbox_id)]
    assert ("paused", "resuming") in transitions
    assert ("resuming", "running") in transitions


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
    env.config["timeoutMs"] = 150
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
