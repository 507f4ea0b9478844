"""LeaseHost decisions against a scripted provider (no HTTP: this is the host's own logic).

The same host is exercised against the fake server in test_host_races.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_createos.errors import (
    CLEANUP_PENDING_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CreateosApiError,
    CreateosTransportError,
)
from pytest_createos.host import LeaseHost
from pytest_createos.provider import ExecuteResult, Lease

OLD = Lease("sb_old", {"companyId": "co", "environmentId": "env"})


class ScriptedProvider:
    """Answers each hook from a script; records the calls in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.resume_script: list[Lease | BaseException] = []
        self.release_script: list[BaseException | None] = []
        self.destroy_script: list[BaseException | None] = []
        self.release_gate: asyncio.Event | None = None
        self.acquired = 0

    async def acquire(self, **kwargs: Any) -> Lease:
        self.calls.append("acquire")
        self.acquired += 1
        return Lease(f"sb_new{self.acquired}", {"companyId": "co"})

    async def resume(self, **kwargs: Any) -> Lease:
        self.calls.append("resume")
        outcome = self.resume_script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def release(self, **kwargs: Any) -> None:
        self.calls.append("release")
        if self.release_gate is not None:
            await self.release_gate.wait()
            self.calls.append("release-done")
        outcome = self.release_script.pop(0) if self.release_script else None
        if outcome is not None:
            raise outcome

    async def destroy(self, **kwargs: Any) -> None:
        self.calls.append("destroy")
        outcome = self.destroy_script.pop(0) if self.destroy_script else None
        if outcome is not None:
            raise outcome

    async def execute(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        lease: Lease,
        command: str,
        args: Sequence[str] = (),
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        timeout_ms: int | None = None,
    ) -> ExecuteResult:
        self.calls.append(f"execute {command}")
        return ExecuteResult(0, None, False, "", "", {})

    async def shutdown(self) -> None:
        self.calls.append("shutdown")


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def make_host(provider: ScriptedProvider, sleeps: Sleeps, **kwargs: Any) -> LeaseHost:
    return LeaseHost(
        provider, company_id="co", environment_id="env", config={}, sleep=sleeps, **kwargs
    )


async def test_backs_off_while_cleanup_is_pending_then_resumes() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    resumed = Lease("sb_old", {"resumedLease": True})
    provider.resume_script = [CleanupPendingError(), CleanupPendingError(), resumed]
    host = make_host(provider, sleeps, base_delay_ms=100, max_delay_ms=1_000)
    assert await host.resume(OLD) == resumed
    assert provider.calls == ["resume", "resume", "resume"]
    assert len(sleeps.delays) == 2
    assert 0.05 <= sleeps.delays[0] <= 0.1
    assert 0.1 <= sleeps.delays[1] <= 0.2
    assert [e.action for e in host.events] == [
        "resume",
        "backoff",
        "resume",
        "backoff",
        "resume",
        "resumed",
    ]


async def test_backoff_is_bounded_and_reproducible_from_the_seed() -> None:
    def delays(seed: int) -> list[float]:
        host = make_host(ScriptedProvider(), Sleeps(), seed=seed, base_delay_ms=10, max_delay_ms=80)
        return [host.backoff_delay(n) for n in range(1, 10)]

    first = delays(3)
    assert first == delays(3)
    assert first != delays(4)
    assert all(0.04 <= d <= 0.08 for d in first[3:])  # capped at max_delay_ms
    assert first[0] < first[3]


async def test_gives_up_after_max_attempts() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.resume_script = [CleanupPendingError() for _ in range(3)]
    host = make_host(provider, sleeps, max_attempts=3)
    with pytest.raises(CleanupPendingError):
        await host.resume(OLD)
    assert provider.calls == ["resume"] * 3
    assert len(sleeps.delays) == 2


async def test_message_match_is_enough_for_foreign_providers() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.resume_script = [RuntimeError(CLEANUP_PENDING_MESSAGE), Lease("sb_old", {})]
    host = make_host(provider, sleeps)
    assert (await host.resume(OLD)).provider_lease_id == "sb_old"
    assert len(sleeps.delays) == 1


async def test_unconfirmed_cleanup_is_destroyed_and_replaced() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.resume_script = [CleanupPendingError(reason="unconfirmed")]
    host = make_host(provider, sleeps)
    fresh = await host.resume(OLD)
    assert fresh.provider_lease_id == "sb_new1"
    assert provider.calls == ["resume", "destroy", "acquire"]
    assert sleeps.delays == []


async def test_expired_resume_is_replaced_by_a_fresh_lease() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.resume_script = [Lease(None, {"expired": True})]
    host = make_host(provider, sleeps)
    assert (await host.resume(OLD)).provider_lease_id == "sb_new1"
    assert provider.calls == ["resume", "acquire"]


async def test_expired_lease_is_replaced_without_resuming() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    host = make_host(provider, sleeps)
    assert (await host.resume(Lease(None, {"expired": True}))).provider_lease_id == "sb_new1"
    assert provider.calls == ["acquire"]
    await host.release(Lease(None, {"expired": True}))
    await host.destroy(Lease(None, {"expired": True}))
    assert provider.calls == ["acquire"]


async def test_a_lost_or_failed_resume_answer_is_asked_again_backed_off() -> None:
    # The resume may have taken effect before its answer was lost (the explorer found the old
    # host giving up here): asking again finds the sandbox resuming or running.
    provider, sleeps = ScriptedProvider(), Sleeps()
    resumed = Lease("sb_old", {"resumedLease": True})
    provider.resume_script = [
        CreateosTransportError("resume sandbox", "connection error"),
        CreateosApiError(503, "resume sandbox"),
        resumed,
    ]
    host = make_host(provider, sleeps)
    assert await host.resume(OLD) == resumed
    assert provider.calls == ["resume", "resume", "resume"]
    assert len(sleeps.delays) == 2
    assert sleeps.delays[1] > 0


async def test_errors_that_cannot_pass_propagate_at_once() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.resume_script = [CreateosApiError(404, "get sandbox")]
    host = make_host(provider, sleeps)
    with pytest.raises(CreateosApiError):
        await host.resume(OLD)
    assert provider.calls == ["resume"]
    assert sleeps.delays == []


async def test_a_lasting_transient_error_ends_after_max_attempts() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.resume_script = [CreateosApiError(503, "resume sandbox")] * 10
    host = make_host(provider, sleeps)
    with pytest.raises(CreateosApiError):
        await host.resume(OLD)
    assert provider.calls == ["resume"] * host.max_attempts


async def test_a_lost_release_answer_is_asked_again_under_the_lock() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.release_script = [CreateosTransportError("pause sandbox", "connection error"), None]
    host = make_host(provider, sleeps)
    await host.release(OLD)
    assert provider.calls == ["release", "release"]
    assert len(sleeps.delays) == 1


async def test_resume_waits_for_the_hosts_inflight_release() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.release_gate = asyncio.Event()
    provider.resume_script = [Lease("sb_old", {"resumedLease": True})]
    host = make_host(provider, sleeps)
    release = asyncio.create_task(host.release(OLD))
    await asyncio.sleep(0)
    resume = asyncio.create_task(host.resume(OLD))
    for _ in range(5):
        await asyncio.sleep(0)
    assert provider.calls == ["release"]  # resume is queued behind the release
    provider.release_gate.set()
    await release
    assert (await resume).metadata == {"resumedLease": True}
    assert provider.calls == ["release", "release-done", "resume"]


async def test_release_destroys_when_reuse_is_refused() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.release_script = [CleanupUnconfirmedError(sandbox_id="sb_old")]
    host = make_host(provider, sleeps)
    await host.release(OLD)
    assert provider.calls == ["release", "destroy"]


async def test_cleanup_in_progress_elsewhere_is_retried() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    provider.destroy_script = [CleanupInProgressError(), CleanupInProgressError(), None]
    host = make_host(provider, sleeps)
    await host.destroy(OLD)
    assert provider.calls == ["destroy"] * 3
    assert len(sleeps.delays) == 2


async def test_execute_and_shutdown_pass_through() -> None:
    provider, sleeps = ScriptedProvider(), Sleeps()
    host = make_host(provider, sleeps)
    assert (await host.execute(OLD, "true")).exit_code == 0
    await host.shutdown()
    assert provider.calls == ["execute true", "shutdown"]


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        make_host(ScriptedProvider(), Sleeps(), max_attempts=0)
