"""The kit's scenarios against real code: the reference provider and host pass, and each
deliberately broken variant is caught by the check made for its bug."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from pytest_createos import _kit_messages as text
from pytest_createos._checks import MAX_EVIDENCE
from pytest_createos.errors import CleanupPendingError
from pytest_createos.host import LeaseHost
from pytest_createos.kit import (
    PROVIDER_SCENARIOS,
    SCENARIOS,
    ConformanceError,
    ConformanceKit,
    HostConformance,
    LeaseHostAdapter,
    ProviderConformance,
)
from pytest_createos.provider import Lease, LeaseProvider
from pytest_createos.server import CreateosServer


class TestReferenceProvider(ProviderConformance):
    @pytest.fixture
    def provider(self, createos_provider: LeaseProvider) -> LeaseProvider:
        return createos_provider


class TestReferenceHostDeletingOnRelease(HostConformance):
    """examples/ runs the reference host keeping leases warm; here it deletes on release, on a
    provider the kit watches (its calls are checked along with the journal)."""

    @pytest.fixture
    def host(
        self,
        createos_kit: ConformanceKit,
        createos_provider: LeaseProvider,
        createos_lease_params: dict[str, Any],
    ) -> LeaseHostAdapter:
        provider = createos_kit.watch(createos_provider)
        return LeaseHostAdapter(LeaseHost(provider, **createos_lease_params))


class BackgroundReleaseHost(LeaseHostAdapter):
    """Correct, though its release() only schedules the reference release and returns; its
    resume() waits for that release to end first (how it ended is the release's business)."""

    def __init__(self, host: LeaseHost) -> None:
        super().__init__(host)
        self.releasing: dict[str | None, asyncio.Task[None]] = {}

    async def release(self, lease: Lease) -> None:
        self.releasing[lease.provider_lease_id] = asyncio.create_task(self.host.release(lease))

    async def resume(self, lease: Lease) -> Lease:
        releasing = self.releasing.pop(lease.provider_lease_id, None)
        if releasing is not None:
            await asyncio.gather(releasing, return_exceptions=True)
        return await self.host.resume(lease)


class TestBackgroundReleaseHost(HostConformance):
    """Its pause reaches the fake after release() returned: the kit still sees whose it is."""

    @pytest.fixture
    def host(self, createos_provider: LeaseProvider, warm_params: dict[str, Any]) -> Any:
        return BackgroundReleaseHost(LeaseHost(createos_provider, **warm_params))


def lease_params(params: dict[str, Any], reuse: bool) -> dict[str, Any]:
    """``params`` whose released leases are kept warm (paused; ``reuse``) or deleted."""
    return {**params, "config": {**params["config"], "reuseLease": reuse}}


@pytest.fixture
def warm_params(createos_lease_params: dict[str, Any]) -> dict[str, Any]:
    """Lease parameters that keep released leases warm (paused) instead of deleting them."""
    return lease_params(createos_lease_params, True)


# -- providers that get the guard wrong --------------------------------------------------------


class GuardlessProvider(LeaseProvider):
    """Forgets the guard: resumes whatever the lease's cleanup is doing."""

    def _check_cleanup(self, key: Any) -> None:
        return None


class StubbornProvider(LeaseProvider):
    """Refuses every resume of a lease it ever released, even once the release finished."""

    def __init__(self) -> None:
        super().__init__()
        self.released: set[str | None] = set()

    async def release(self, **kwargs: Any) -> None:
        self.released.add(kwargs["provider_lease_id"])
        await super().release(**kwargs)

    async def resume(self, **kwargs: Any) -> Lease:
        if kwargs["provider_lease_id"] in self.released:
            raise CleanupPendingError()
        return await super().resume(**kwargs)


class WaitingProvider(LeaseProvider):
    """Makes resume wait for the release instead of refusing it."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = asyncio.Lock()

    async def release(self, **kwargs: Any) -> None:
        async with self.lock:
            await super().release(**kwargs)

    async def resume(self, **kwargs: Any) -> Lease:
        async with self.lock:
            return await super().resume(**kwargs)


class OptimisticProvider(LeaseProvider):
    """Hands the lease straight back on resume, without looking at anything."""

    async def resume(self, **kwargs: Any) -> Lease:
        return Lease(kwargs["provider_lease_id"], dict(kwargs["lease_metadata"]))


#: The provider scenarios that race the guard (the others refuse a request for now, and a
#: provider without the guard still gets those right).
REFUSAL_SCENARIOS = ("resume-refused-with-409", "lifecycle-rate-limited")
GUARD_SCENARIOS = [s.name for s in PROVIDER_SCENARIOS if s.name not in REFUSAL_SCENARIOS]


@pytest.mark.parametrize("scenario", GUARD_SCENARIOS)
async def test_a_provider_without_the_guard_is_caught(
    scenario: str, createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    async with GuardlessProvider() as provider:
        report = await createos_kit.run_provider(scenario, provider, createos_lease_params)
    refused = [v for v in report.violations if v.check == "provider-refuses-resume"]
    assert len(refused) == 1, report.format()
    assert refused[0].what.endswith(
        "sent a resume or work request to the sandbox instead of refusing at once."
    )
    assert refused[0].fix == text.PROVIDER_REFUSAL_FIX


async def test_a_provider_that_refuses_forever_is_caught(
    createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    async with StubbornProvider() as provider:
        report = await createos_kit.run_provider(
            "resume-while-release-in-flight", provider, createos_lease_params
        )
    assert report.failed_checks == {"provider-refusal-lifted"}, report.format()
    assert report.violations[0].what.endswith(
        "was still refused with 'CreateOS lease cleanup must finish before resume.' after "
        "the release finished."
    )


async def test_a_provider_that_resumes_blindly_is_caught(
    createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    async with OptimisticProvider() as provider:
        report = await createos_kit.run_provider(
            "resume-after-failed-delete", provider, createos_lease_params
        )
    assert report.failed_checks == {"provider-refuses-resume"}, report.format()
    assert report.violations[0].what.endswith(
        "resume() after its delete failed returned instead of refusing with "
        "'CreateOS lease cleanup must finish before resume.'."
    )


async def test_a_provider_that_waits_instead_of_refusing_is_caught(
    createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> None:
    async with WaitingProvider() as provider:
        report = await createos_kit.run_provider(
            "resume-while-release-in-flight", provider, createos_lease_params
        )
    assert report.failed_checks == {"provider-refuses-resume"}, report.format()
    assert "neither refused nor returned within 0.2 s" in report.violations[0].what


# -- hosts that get it wrong, beyond the naive host of examples/ ------------------------------


class ForgetfulHost(LeaseHostAdapter):
    """Replaces a lease on resume, but never destroys the old one."""

    async def resume(self, lease: Lease) -> Lease:
        return await self.host.acquire()


class SilentReleaseHost(LeaseHostAdapter):
    """Whose release does nothing at all."""

    async def release(self, lease: Lease) -> None:
        return None


class HangingHost(LeaseHostAdapter):
    """Whose resume never returns."""

    async def resume(self, lease: Lease) -> Lease:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class GuardRetryingHost(LeaseHostAdapter):
    """Without a lock per lease: a resume that the provider's own guard refuses (before
    sending anything) is retried after each of ``delays``, then once more."""

    def __init__(self, host: LeaseHost, delays: list[float]) -> None:
        super().__init__(host)
        self.delays = delays

    async def resume(self, lease: Lease) -> Lease:
        args = self.host._lease_args(lease)  # what LeaseHost itself sends for this lease
        for delay in self.delays:
            try:
                return await self.host.provider.resume(**args)
            except CleanupPendingError:
                await asyncio.sleep(delay)
        return await self.host.provider.resume(**args)


class ImaginaryHost:
    """Whose leases are not sandboxes at all."""

    fail_acquire = False

    async def acquire(self) -> str:
        if self.fail_acquire:
            raise RuntimeError("no capacity")
        return "lease-1"

    async def release(self, lease: str) -> None:
        return None

    async def resume(self, lease: str) -> str:
        return lease

    async def run(self, lease: str, command: str) -> None:
        return None


@pytest.fixture
def reference(createos_provider: LeaseProvider, warm_params: dict[str, Any]) -> LeaseHost:
    """The reference host keeping leases warm, for the broken hosts to build on."""
    return LeaseHost(createos_provider, **warm_params)


async def test_a_host_that_leaks_the_replaced_sandbox_is_caught(
    createos_kit: ConformanceKit, reference: LeaseHost
) -> None:
    report = await createos_kit.run("resume-while-release-in-flight", ForgetfulHost(reference))
    assert report.failed_checks == {"no-leaked-sandbox"}, report.format()
    (leak,) = report.violations
    assert leak.what.startswith(f"{leak.sandbox} was left paused")
    assert f"acquire() created {leak.sandbox}" in report.steps


@pytest.fixture
def watched(
    createos_kit: ConformanceKit, createos_provider: LeaseProvider, warm_params: dict[str, Any]
) -> LeaseHost:
    """The reference host keeping leases warm, on a provider the kit watches."""
    return LeaseHost(createos_kit.watch(createos_provider), **warm_params)


async def test_a_hot_loop_on_the_providers_own_refusals_is_caught(
    createos_kit: ConformanceKit, watched: LeaseHost
) -> None:
    host = GuardRetryingHost(watched, [0.001] * 100)
    report = await createos_kit.run("resume-while-release-in-flight", host)
    # Not one refused resume reached the fake: only the provider's calls show them.
    assert not createos_kit.journal().requests(route="/v1/sandboxes/{id}/resume")
    (loop,) = [v for v in report.violations if v.check == "retries-back-off"]
    sandbox = loop.sandbox
    assert loop.what.startswith(f"{sandbox}: the provider's resume() was called again ")
    assert loop.what.endswith(
        "after it failed (at most 10 attempts per second are acceptable). It last raised "
        "CleanupPendingError: CreateOS lease cleanup must finish before resume."
    )
    assert len(loop.calls) == MAX_EVIDENCE  # the first and the last few of 100
    lines = loop.describe().splitlines()
    assert lines[1] == "  provider calls, oldest first:"
    assert lines[2] == (
        f"    +0.000 s resume({sandbox}) raised CleanupPendingError: CreateOS lease cleanup "
        "must finish before resume."
    )
    assert lines[-1] == f"  fix: {text.BACKOFF_FIX}"


async def test_a_host_backing_off_on_the_providers_refusals_passes(
    createos_kit: ConformanceKit, watched: LeaseHost
) -> None:
    # Doubling from 50 ms up to 0.5 s, for as long as the release may take on a loaded machine.
    host = GuardRetryingHost(watched, [0.05, 0.1, 0.2, 0.4] + [0.5] * 20)
    report = await createos_kit.run("resume-while-release-in-flight", host)
    assert report.ok, report.format()
    # It was refused by the provider while the release was held, and then resumed.
    assert [(c.hook, c.failed) for c in createos_kit.calls if c.hook == "resume"][-2:] == [
        ("resume", True),
        ("resume", False),
    ]


@pytest.mark.parametrize(
    "scenario", ["resume-while-release-in-flight", "resume-after-failed-release"]
)
async def test_a_release_that_sends_nothing_is_reported(
    scenario: str, createos_kit: ConformanceKit, reference: LeaseHost
) -> None:
    report = await createos_kit.run(scenario, SilentReleaseHost(reference))
    assert report.failed_checks == {"scenario"}, report.format()
    (problem,) = report.violations
    assert problem.what == (
        f"{problem.sandbox}: release(lease on {problem.sandbox}) sent no pause or delete for "
        "the sandbox"
    )


async def test_scenario_problems_are_reported_not_raised(createos_kit: ConformanceKit) -> None:
    imaginary = await createos_kit.run("concurrent-resumes", ImaginaryHost())
    assert [v.what for v in imaginary.violations] == [text.NOTHING_CREATED]
    failing = ImaginaryHost()
    failing.fail_acquire = True
    refused = await createos_kit.run("resume-unconfirmed-lease", failing)
    assert [v.what for v in refused.violations] == [
        "acquire() failed, so the scenario could not start: "
        "acquire() raised RuntimeError: no capacity"
    ]


async def test_a_hung_call_is_reported_with_the_kits_timeout(
    createos_server: CreateosServer, reference: LeaseHost
) -> None:
    impatient = ConformanceKit(createos_server, timeout_s=0.3)
    # Each resume is waited for twice (when it ends, then for its lease): the kit's own cancel
    # is still reported as the timeout, never as an error the host raised.
    hung = await impatient.run("concurrent-resumes", HangingHost(reference))
    sandbox = next(v.sandbox for v in hung.violations if v.check == "resumed-or-replaced")
    timed_out = "did not finish within 0.3 s"
    # (On a loaded machine the release may outlast 0.3 s too: only the resumes are judged.)
    assert [v.what for v in hung.violations if v.what.startswith("resume(")] == [
        f"resume(lease on {sandbox}) #{n} {timed_out} after the kit let everything through"
        for n in (1, 2)
    ], hung.format()
    assert [v.what for v in hung.violations if v.check == "resumed-or-replaced"] == [
        f"{sandbox}: resume() gave back no usable lease: resume() {timed_out}."
    ] * 2
    assert "CancelledError" not in hung.format()


async def test_hosts_without_shutdown_skip_that_scenario(createos_kit: ConformanceKit) -> None:
    report = await createos_kit.run(SCENARIOS[-1], ImaginaryHost())
    assert (report.skipped, report.ok) == (text.NO_SHUTDOWN, True)


async def test_unknown_scenarios_name_the_known_ones(createos_kit: ConformanceKit) -> None:
    with pytest.raises(ValueError, match="unknown scenario 'resume-soon'; the scenarios are: "):
        await createos_kit.run("resume-soon", ImaginaryHost())


# -- the kit's checks over a test's own journal -------------------------------------------------


@asynccontextmanager
async def a_sandbox(server: CreateosServer) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A session with the fake's key, and a sandbox it created: a test's own requests."""
    headers = {"X-Api-Key": server.api_key}
    async with aiohttp.ClientSession(server.url, headers=headers) as session:
        # Every response is read to the end: an unread one holds its connection (older aiohttp
        # warns about it when the session closes).
        async with session.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as created:
            sandbox = (await created.json())["data"]["id"]
        yield session, sandbox


async def test_kit_checks_the_tests_own_journal(
    createos_server: CreateosServer, createos_kit: ConformanceKit
) -> None:
    async with a_sandbox(createos_server) as (session, sandbox):
        createos_kit.assert_ok(keep=[sandbox])
        async with session.delete(f"/v1/sandboxes/{sandbox}") as deleted:
            assert deleted.status == 200
        createos_kit.assert_ok()
        async with session.post(f"/v1/sandboxes/{sandbox}/exec", json={"cmd": "true"}) as late:
            assert late.status == 409
    with pytest.raises(ConformanceError) as raised:
        createos_kit.assert_ok()
    assert [v.check for v in raised.value.violations] == ["no-work-on-closing-sandbox"]
    message = str(raised.value)
    assert message.startswith("1 conformance violation(s)\n[no-work-on-closing-sandbox] sb_")
    assert f"POST /v1/sandboxes/{sandbox}/exec -> 409 (sandbox destroy" in message
    assert "keep=" not in message  # nothing leaked: no hint about kept sandboxes


async def test_a_sandbox_still_in_use_is_a_leak_unless_kept(
    createos_kit: ConformanceKit, createos_provider: LeaseProvider, warm_params: dict[str, Any]
) -> None:
    host = LeaseHost(createos_provider, **warm_params)
    lease = await host.acquire()
    await host.release(lease)  # paused, kept warm for the next run
    with pytest.raises(ConformanceError) as raised:
        createos_kit.assert_ok()
    assert [v.check for v in raised.value.violations] == ["no-leaked-sandbox"]
    # The error says how to mark it, with the very ids to pass.
    assert str(raised.value).splitlines()[-1] == (
        "If a sandbox reported as left alive is still in use on purpose, list it in keep=: "
        f"createos_kit.assert_ok(keep=[{lease.provider_lease_id!r}])"
    )
    createos_kit.assert_ok(keep=[str(lease.provider_lease_id)])
    await host.destroy(lease)
    createos_kit.assert_ok()


async def test_the_provider_classs_paused_variant_meets_a_pause_in_flight(
    createos_kit: ConformanceKit,
    createos_provider: LeaseProvider,
    createos_server: CreateosServer,
    warm_params: dict[str, Any],
) -> None:
    # ProviderConformance's `release-pauses` runs (reuseLease true) race resume against a pause,
    # which no provider scenario sent by default (a release deleted).
    report = await createos_kit.run_provider(
        "resume-while-release-in-flight", createos_provider, warm_params
    )
    report.assert_ok()
    createos_server.journal.assert_requested("POST /v1/sandboxes/{id}/pause", times=1)
    createos_server.journal.assert_not_requested("DELETE /v1/sandboxes/{id}")


async def test_a_provider_scenario_gives_a_providers_fix(
    createos_kit: ConformanceKit, warm_params: dict[str, Any]
) -> None:
    # Its journal's checks told a provider a host's remedies ("stop accepting commands once a
    # release starts", "serialise lifecycle calls per lease"), not what to change in itself.
    fixes: dict[str, set[str]] = {}
    for scenario in ("resume-while-release-in-flight", "resume-while-destroy-in-flight"):
        async with GuardlessProvider() as provider:
            report = await createos_kit.run_provider(scenario, provider, warm_params)
        for violation in report.violations:
            fixes.setdefault(violation.check, set()).add(violation.fix)
    assert fixes[text.NO_WORK_ON_CLOSING] == {text.PROVIDER_WORK_ON_CLOSING_FIX}
    assert fixes[text.PROVIDER_REFUSES_RESUME] == {text.PROVIDER_REFUSAL_FIX}
    # Every provider scenario gives a provider's advice for the checks a host's would be given.
    for scenario in PROVIDER_SCENARIOS:
        assert scenario.fixes[text.NO_RESUME_DURING_CLEANUP] == (
            text.PROVIDER_RESUME_DURING_CLEANUP_FIX
        )
