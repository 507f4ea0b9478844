"""Cleanup must finish before resume: the races, reproduced with gates (no sleeps)."""

from __future__ import annotations

import asyncio

import pytest

from pytest_createos.errors import (
    CLEANUP_PENDING_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CreateosApiError,
    LeaseError,
    is_cleanup_pending,
)

from .conftest import FakeEnv


async def test_resume_during_gated_release_is_refused_then_succeeds(env: FakeEnv) -> None:
    lease = await env.acquire()
    gate = env.fake.faults.gate("release", route="POST /v1/sandboxes/{id}/pause")
    release = asyncio.create_task(env.release(lease))
    await gate.wait_held(1)
    assert env.provider.is_closing(lease.provider_lease_id or "")

    sent_before = len(env.recorded.sent)
    with pytest.raises(CleanupPendingError) as info:
        await env.resume(lease)
    assert str(info.value) == CLEANUP_PENDING_MESSAGE
    assert info.value.reason == "closing"
    assert info.value.retryable
    assert is_cleanup_pending(info.value)
    assert len(env.recorded.sent) == sent_before  # refused without a request

    gate.open()
    await release
    assert not env.provider.is_closing(lease.provider_lease_id or "")
    resumed = await env.resume(lease)
    assert resumed.metadata["resumedLease"] is True


async def test_resume_during_gated_destroy_is_refused_then_expires(env: FakeEnv) -> None:
    lease = await env.acquire()
    gate = env.fake.faults.gate("destroy", route="DELETE /v1/sandboxes/{id}")
    destroy = asyncio.create_task(env.destroy(lease))
    await gate.wait_held(1)
    with pytest.raises(CleanupPendingError):
        await env.resume(lease)
    gate.open()
    await destroy
    assert (await env.resume(lease)).expired


async def test_no_work_is_accepted_while_closing(env: FakeEnv) -> None:
    lease = await env.acquire()
    gate = env.fake.faults.gate("release", route="POST /v1/sandboxes/{id}/pause")
    release = asyncio.create_task(env.release(lease))
    await gate.wait_held(1)
    sent_before = len(env.recorded.sent)
    with pytest.raises(LeaseError, match="being released"):
        await env.execute(lease, "true")
    with pytest.raises(CleanupInProgressError):
        await env.release(lease)
    with pytest.raises(CleanupInProgressError):
        await env.destroy(lease)
    assert len(env.recorded.sent) == sent_before
    gate.open()
    await release


async def test_resume_after_failed_delete_is_refused_until_destroy(env: FakeEnv) -> None:
    env.config["reuseLease"] = False
    lease = await env.acquire()
    env.fake.faults.error(500, route="DELETE /v1/sandboxes/{id}", times=1)
    with pytest.raises(CreateosApiError, match="delete sandbox failed: HTTP 500"):
        await env.release(lease)
    assert not env.provider.is_closing(lease.provider_lease_id or "")  # cleared in finally
    with pytest.raises(CleanupPendingError) as info:
        await env.resume(lease)
    assert info.value.reason == "unconfirmed"
    await env.destroy(lease)
    assert (await env.resume(lease)).expired


async def test_delete_404_counts_as_deleted_and_clears_unconfirmed(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(502, route="POST /v1/sandboxes/{id}/processes", times=1)
    with pytest.raises(LeaseError):
        await env.execute(lease, "true")
    assert env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")
    env.fake.faults.error(404, route="DELETE /v1/sandboxes/{id}", times=1)
    await env.destroy(lease)
    assert not env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")


async def test_failed_pause_keeps_the_lease_resumable(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(503, route="POST /v1/sandboxes/{id}/pause", times=1)
    with pytest.raises(CreateosApiError, match="pause sandbox failed: HTTP 503"):
        await env.release(lease)
    # A failed pause proves nothing was torn down: no unconfirmed state, resume works.
    assert (await env.resume(lease)).provider_lease_id == lease.provider_lease_id


async def test_release_cancels_an_inflight_resume(env: FakeEnv) -> None:
    lease = await env.acquire()
    await env.release(lease)
    gate = env.fake.faults.gate("resume", route="POST /v1/sandboxes/{id}/resume", times=1)
    resume = asyncio.create_task(env.resume(lease))
    await gate.wait_held(1)
    release = asyncio.create_task(env.release(lease))
    with pytest.raises(CleanupPendingError):
        await resume
    gate.open()
    await release
    assert env.status(lease) == "paused"


async def test_concurrent_resumes_submit_once(env: FakeEnv) -> None:
    lease = await env.acquire()
    await env.release(lease)
    first, second = await asyncio.gather(env.resume(lease), env.resume(lease))
    assert first.provider_lease_id == second.provider_lease_id == lease.provider_lease_id
    posts = env.fake.journal.requests(route="POST /v1/sandboxes/{id}/resume")
    assert 1 <= len(posts) <= 2
    assert all(p.status in (200, 409) for p in posts)
