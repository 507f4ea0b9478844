"""The reference host passes the same race scenarios against the fake."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_createos.errors import CleanupPendingError
from pytest_createos.host import LeaseHost

from .conftest import FakeEnv


def make_host(env: FakeEnv, **kwargs: Any) -> LeaseHost:
    return LeaseHost(
        env.provider,
        company_id="co",
        environment_id="env",
        config=env.config,
        seed=1,
        base_delay_ms=1,
        max_delay_ms=5,
        **kwargs,
    )


async def test_resume_waits_for_the_hosts_own_release(env: FakeEnv) -> None:
    host = make_host(env)
    lease = await host.acquire()
    gate = env.fake.faults.gate("release", route="POST /v1/sandboxes/{id}/pause")
    release = asyncio.create_task(host.release(lease))
    await gate.wait_held(1)
    resume = asyncio.create_task(host.resume(lease))
    await asyncio.sleep(0.01)
    assert not resume.done()
    gate.open()
    await release
    resumed = await resume
    assert resumed.provider_lease_id == lease.provider_lease_id
    assert [e.action for e in host.events].count("backoff") == 0
    # The resume never overlapped the pause: it started after the release finished.
    pause = env.fake.journal.requests(route="POST /v1/sandboxes/{id}/pause")[0]
    post_resume = env.fake.journal.requests(route="POST /v1/sandboxes/{id}/resume")[0]
    assert not env.fake.journal.overlapping(pause, post_resume)


async def test_resume_backs_off_while_another_worker_releases(env: FakeEnv) -> None:
    lease = await env.acquire()
    gate = env.fake.faults.gate("release", route="POST /v1/sandboxes/{id}/pause")
    release = asyncio.create_task(env.release(lease))  # another worker, same provider
    await gate.wait_held(1)
    sleeps: list[float] = []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)
        if len(sleeps) == 3:
            gate.open()
            await release
        await asyncio.sleep(0)

    host = make_host(env, sleep=sleep)
    resumed = await host.resume(lease)
    assert resumed.metadata["resumedLease"] is True
    assert len(sleeps) == 3
    assert sleeps[0] < sleeps[2]  # exponential, not a hot loop
    assert [e.action for e in host.events].count("backoff") == 3


async def test_host_gives_up_with_the_refusal_when_cleanup_never_finishes(env: FakeEnv) -> None:
    lease = await env.acquire()
    gate = env.fake.faults.gate("release", route="POST /v1/sandboxes/{id}/pause")
    release = asyncio.create_task(env.release(lease))
    await gate.wait_held(1)
    host = make_host(env, max_attempts=3)
    with pytest.raises(CleanupPendingError):
        await host.resume(lease)
    gate.open()
    await release


async def test_unconfirmed_lease_is_destroyed_and_replaced(env: FakeEnv) -> None:
    host = make_host(env)
    lease = await host.acquire()
    env.fake.faults.error(502, route="POST /v1/sandboxes/{id}/processes", times=1)
    with pytest.raises(Exception, match="could not be confirmed"):
        await host.execute(lease, "true")
    fresh = await host.resume(lease)
    assert fresh.provider_lease_id not in (None, lease.provider_lease_id)
    assert env.status(lease) in ("destroying", "destroyed")
    assert [e.action for e in host.events][-4:] == ["resume", "destroy", "replace", "acquire"]
    assert (await host.execute(fresh, "echo", args=["ok"])).stdout == "ok\n"


async def test_release_of_unconfirmed_lease_destroys_it(env: FakeEnv) -> None:
    host = make_host(env)
    lease = await host.acquire()
    env.fake.faults.error(502, route="POST /v1/sandboxes/{id}/processes", times=1)
    with pytest.raises(Exception, match="could not be confirmed"):
        await host.execute(lease, "true")
    await host.release(lease)
    env.fake.journal.assert_not_requested("POST /v1/sandboxes/{id}/pause")
    assert env.status(lease) in ("destroying", "destroyed")
    replaced = await host.resume(lease)
    assert replaced.provider_lease_id != lease.provider_lease_id


async def test_expired_lease_is_replaced(env: FakeEnv) -> None:
    host = make_host(env)
    lease = await host.acquire()
    await host.release(lease)
    env.fake.state_faults.marker(env.sandbox(lease), "replace")
    fresh = await host.resume(lease)
    assert fresh.provider_lease_id != lease.provider_lease_id


async def test_concurrent_host_resumes_are_serialised(env: FakeEnv) -> None:
    host = make_host(env)
    lease = await host.acquire()
    await host.release(lease)
    first, second = await asyncio.gather(host.resume(lease), host.resume(lease))
    assert first.provider_lease_id == second.provider_lease_id == lease.provider_lease_id
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/resume", times=1)
