"""The explorer end to end, on the fake in the test's own loop: the reference host passes every
built-in workload; small hosts written here show a bug found, shrunk and replayed, a call that
never finishes, host sleeps taken in virtual time, and every refusal."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from pytest_createos._explore import runner
from pytest_createos.kit import (
    WORKLOADS,
    ConformanceError,
    ConformanceKit,
    ExploreError,
    HostFactory,
    Workload,
    reference_host,
    release,
    resume,
    run,
    shutdown,
)
from pytest_createos.server import CreateosServer

#: Set to explore every built-in workload completely (slow: about a minute).
FULL = os.environ.get("CREATEOS_EXPLORE_FULL") == "1"
#: The schedules of each built-in workload the normal suite explores.
BOUNDED = 8

explored = pytest.mark.createos(manual_clock=True)


@pytest.fixture
def kit(createos_aiohttp_server: CreateosServer) -> ConformanceKit:
    return ConformanceKit(createos_aiohttp_server)


class RawHost:
    """A host on the bare API: leases are sandbox ids. Subclasses make the mistakes."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        async with self.session.request(method, "/v1/sandboxes" + path, json=body) as answer:
            envelope = await answer.json()
            if answer.status >= 400:
                raise RuntimeError(f"{answer.status}: {envelope.get('message')}")
            data: dict[str, Any] = envelope["data"]
            return data

    async def acquire(self) -> str:
        return str((await self.call("POST", "", {"shape": "s-1vcpu-1gb"}))["id"])

    async def release(self, lease: str) -> None:
        await self.call("POST", f"/{lease}/pause")

    async def status(self, lease: str) -> str:
        return str((await self.call("GET", f"/{lease}"))["status"])

    async def resume(self, lease: str) -> str:
        # Polls, as hosts do: the fake's state is on the other side of HTTP.
        while await self.status(lease) == "pausing":  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        await self.call("POST", f"/{lease}/resume")
        while await self.status(lease) != "running":  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        return lease

    async def run(self, lease: str, command: str) -> object:
        return await self.call(
            "POST", f"/{lease}/exec", {"cmd": "/bin/bash", "args": ["-c", command]}
        )


class SleepyHost(RawHost):
    """Gives a pause in flight a fixed 0.2 s instead of waiting until it is paused."""

    async def resume(self, lease: str) -> str:
        if await self.status(lease) == "pausing":
            await asyncio.sleep(0.2)
        return await super().resume(lease)


class ProcessHost(RawHost):
    """Runs commands as managed processes, and releases a lease by pausing it at once: a
    command still running is neither aborted nor waited for."""

    async def run(self, lease: str, command: str) -> object:
        body = {"cmd": "/bin/bash", "args": ["-c", command]}
        started = await self.call("POST", f"/{lease}/processes", body)
        path = f"/{lease}/processes/{started['process_id']}"
        await self.call("POST", f"{path}/stdin/close", {})
        async with self.session.get(f"/v1/sandboxes{path}/connect") as stream:
            return await stream.read()


class StuckHost(RawHost):
    """Its resume waits for an event nothing ever sets."""

    async def resume(self, lease: str) -> str:
        await asyncio.Event().wait()
        return lease


class SlowHost(RawHost):
    """Sleeps three seconds between looking at the lease and resuming it."""

    async def resume(self, lease: str) -> str:
        await self.status(lease)
        await asyncio.sleep(3)
        return await super().resume(lease)


class CoinHost(RawHost):
    """Lists its sandboxes first or not, as a coin falls: not deterministic."""

    async def resume(self, lease: str) -> str:
        if random.random() < 0.5:
            await self.call("GET", "")
        return await super().resume(lease)


class PollingHost(RawHost):
    """Polls for a status the sandbox never reaches."""

    async def resume(self, lease: str) -> str:
        while await self.status(lease) != "resumed":  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        return lease


def factory(host_class: type[RawHost]) -> HostFactory:
    @contextlib.asynccontextmanager
    async def make_host(kit: ConformanceKit) -> AsyncIterator[RawHost]:
        headers = {"X-Api-Key": kit.server.api_key}
        async with aiohttp.ClientSession(kit.server.url, headers=headers) as session:
            yield host_class(session)

    return make_host


# -- the reference host ---------------------------------------------------------------------


@explored
@pytest.mark.parametrize("workload", [workload.name for workload in WORKLOADS])
async def test_the_reference_host_passes_every_workload(kit: ConformanceKit, workload: str) -> None:
    budget = 100_000 if FULL else BOUNDED
    report = await kit.explore(reference_host(), workload, max_schedules=budget)
    print(report.summary())
    report.assert_ok()
    assert report.schedules >= 1
    if FULL:
        assert not report.bounded, report.summary()


@explored
async def test_a_release_under_a_running_command_is_found(kit: ConformanceKit) -> None:
    # The contract: a release aborts the lease's running commands, and waits for their
    # process trees to be gone, before it pauses or deletes the sandbox.
    report = await kit.explore(factory(ProcessHost), "run-release")
    assert report.failure is not None, report.summary()
    assert "no-orphan-process" in report.failure.failed_checks, report.format()
    assert "POST /v1/sandboxes/L1/pause -> 200" in report.format()
    # The reference host terminates the command's process first, in every order.
    report = await kit.explore(reference_host(), "run-release")
    report.assert_ok()
    assert not report.bounded, report.summary()


@explored
async def test_a_workload_of_your_own_on_two_leases(kit: ConformanceKit) -> None:
    both = Workload("release-both", ops=(release(0), release(1)), leases=2)
    report = await kit.explore(reference_host(), both, max_steps=6)
    print(report.summary())
    report.assert_ok()
    assert not report.bounded
    # Two releases of different sandboxes commute: most of their orders are one order.
    assert report.redundant > 0
    replayed = await kit.replay(reference_host(), "release-both:", workloads=[both])
    assert replayed.ok, replayed.format()


# -- a bug found, shrunk, replayed ----------------------------------------------------------


@explored
async def test_a_bug_that_needs_an_order_is_found_shrunk_and_replayed(kit: ConformanceKit) -> None:
    make_host = factory(SleepyHost)
    # The default order (every pause finishes as soon as it can) passes.
    assert (await kit.replay(make_host, "release-resume:")).ok
    report = await kit.explore(make_host, "release-resume")
    assert report.failure is not None, report.summary()
    assert report.found_at > 1
    # Its resume meets the pause, and the lease it gives back is no good either.
    assert report.failure.failed_checks == {"no-resume-during-cleanup", "resumed-or-replaced"}
    assert report.failure.steps <= 5
    text = report.format()
    assert "fails: 2 violation(s) in schedule #" in text
    # What the fake answered, and the request where the host went wrong: its resume, sent
    # while the pause was in flight.
    assert "POST /v1/sandboxes/L1/pause -> 200 (sandbox running)\n" in text
    assert "POST /v1/sandboxes/L1/resume -> 409 (sandbox running)   <-- the first" in text
    assert f"await createos_kit.replay(make_host, {report.failure.schedule!r})" in text
    with pytest.raises(ConformanceError, match="no-resume-during-cleanup"):
        report.assert_ok()
    for _ in range(20):
        again = await kit.replay(make_host, report.failure.schedule)
        assert again.failed_checks == report.failure.failed_checks
        assert (
            again.result.labels()[: report.failure.steps]
            == report.failure.result.labels()[: report.failure.steps]
        )


@explored
async def test_answers_lost_or_failed_are_explored_as_steps(kit: ConformanceKit) -> None:
    lossy = Workload("release-resume-lossy", (release(0), resume(0)), outcomes=("lost", "error"))
    report = await kit.explore(factory(RawHost), lossy)
    assert report.failure is not None, report.summary()
    # The plain host gives up when its resume's answer is lost or fails: no lease comes back.
    assert "resumed-or-replaced" in report.failure.failed_checks
    last = report.failure.result.labels()[report.failure.steps - 1]
    assert last.endswith(("[lost]", "[error]")), report.format()
    assert "POST /v1/sandboxes/L1/resume -> " in report.format()
    again = await kit.replay(factory(RawHost), report.failure.schedule, workloads=[lossy])
    assert again.failed_checks == report.failure.failed_checks


@explored
async def test_pct_finds_it_too(kit: ConformanceKit) -> None:
    report = await kit.explore(factory(SleepyHost), "release-resume", strategy="pct", seed=3)
    assert report.failure is not None, report.summary()
    assert "no-resume-during-cleanup" in report.failure.failed_checks
    assert "(pct)" in report.summary()


@explored
async def test_a_call_that_never_finishes_is_reported(kit: ConformanceKit) -> None:
    report = await kit.explore(factory(StuckHost), "release-resume", max_schedules=1)
    assert report.failure is not None
    assert "host-call-finishes" in report.failure.failed_checks
    assert "resume(L1) never finished" in report.format()


@explored
async def test_host_sleeps_pass_in_virtual_time(kit: ConformanceKit) -> None:
    report = await kit.replay(factory(SlowHost), "release-resume:")
    assert report.ok, report.format()
    # The fake's clock moved with the host's sleep: its GET and its resume are 3 s apart (less
    # the loop's own real time, a few microseconds, the sleep started after).
    reads = [e for e in kit.journal().requests() if e.method in ("GET", "POST")]
    resume_at = next(e.at for e in reads if e.path and e.path.endswith("/resume"))
    assert resume_at - max(e.at for e in reads if e.at < resume_at) >= 2.99


@explored
async def test_a_commands_sleep_on_the_fakes_clock_ends_at_its_own_time(
    kit: ConformanceKit,
) -> None:
    # run() waits for a `sleep 3` of the fake's: nothing else can happen, so the clocks move to
    # its wake-up, and it ends 3 s after it started on the fake's clock. It once ended at
    # whichever host timer was next (a connection pool's keep-alive, some 12 s away, less the
    # real time the explorer had waited on the sleeping command as if it computed).
    sleepy = Workload("run-sleep", (run(0, "sleep 3"),))
    report = await kit.replay(reference_host(), "run-sleep:", workloads=[sleepy])
    assert report.ok, report.format()
    assert "run(L1, sleep 3) returned" in report.timeline()
    process = kit.journal().entries(kind="process")
    assert [e.detail for e in process] == ["start", "exit code=0 signal=None"], process
    assert process[1].at - process[0].at == 3.0


# -- refusals -------------------------------------------------------------------------------


async def test_a_fake_without_a_manual_clock_is_refused(kit: ConformanceKit) -> None:
    with pytest.raises(ExploreError, match=r"manual_clock=True"):
        await kit.explore(reference_host(), "release-resume")


async def test_a_fake_over_http_without_a_manual_clock_is_refused(
    createos_server: CreateosServer,
) -> None:
    with pytest.raises(ExploreError, match="--manual-clock"):
        await ConformanceKit(createos_server).explore(reference_host(), "release-resume")


@explored
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "bfs"}, "strategy must be one of exhaustive, pct"),
        ({"max_schedules": 0}, "max_schedules at least 1"),
    ],
)
async def test_bad_options_are_refused(
    kit: ConformanceKit, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await kit.explore(reference_host(), "release-resume", **options)


@explored
async def test_an_unknown_workload_is_refused_with_the_names(kit: ConformanceKit) -> None:
    with pytest.raises(ValueError, match="no workload 'nope'; the workloads are: release-resume"):
        await kit.explore(reference_host(), "nope")


@explored
async def test_a_schedule_the_host_does_not_fit_is_refused(kit: ConformanceKit) -> None:
    with pytest.raises(ExploreError, match="step 1 is 'GET L9', but the possible steps"):
        await kit.replay(reference_host(), "release-resume: GET L9")


@explored
async def test_a_workload_with_shutdown_needs_a_host_with_one(kit: ConformanceKit) -> None:
    with pytest.raises(ExploreError, match="has no shutdown"):
        await kit.explore(factory(RawHost), "run-shutdown")


@explored
async def test_a_host_factory_that_fails_is_reported(kit: ConformanceKit) -> None:
    @contextlib.asynccontextmanager
    async def broken(kit: ConformanceKit) -> AsyncIterator[RawHost]:
        raise RuntimeError("no credentials")
        yield  # an async generator, as a factory is

    failed = r"make_host\(kit\) failed to build a host: raised RuntimeError"
    with pytest.raises(ExploreError, match=failed):
        await kit.explore(broken, "release-resume")


@explored
async def test_a_host_that_is_not_deterministic_is_refused(kit: ConformanceKit) -> None:
    random.seed(1)  # fixed: the coin falls both ways within a few runs, every time
    with pytest.raises(ExploreError, match="the host is not deterministic"):
        await kit.explore(factory(CoinHost), "release-resume")


@explored
async def test_a_host_that_never_stops_sending_is_cut_off(
    kit: ConformanceKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "MAX_STEPS_PER_RUN", 60)  # 600 by default: a slower test
    report = await kit.explore(factory(PollingHost), "release-resume", max_schedules=1)
    assert report.failure is not None
    assert "the run took more than 60 steps" in report.format()


def test_a_workload_is_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="no operations"):
        Workload("empty", ops=())
    with pytest.raises(ValueError, match=r"outside L1\.\.L1: declare leases=2"):
        Workload("too-far", ops=(resume(1), run(0)))
    with pytest.raises(ValueError, match="outcome 'late' is not one of lost, error"):
        Workload("late", ops=(resume(0),), outcomes=("late",))


@explored
async def test_the_reference_host_survives_lost_and_failed_answers(kit: ConformanceKit) -> None:
    # Once, a lost or 503 resume answer made LeaseHost.resume raise, and a lost pause answer
    # let a run slip in during the release: the explorer found both in its first schedules.
    lossy = Workload("release-resume-lossy", (release(0), resume(0)), outcomes=("lost", "error"))
    report = await kit.explore(reference_host(), lossy, max_schedules=40)
    report.assert_ok()
    assert report.schedules == 40


@explored
async def test_a_process_that_survives_its_delete_is_explored_where_it_can_happen(
    kit: ConformanceKit,
) -> None:
    surviving = Workload("run-shutdown-surviving", (run(0), shutdown()), outcomes=("survives",))
    report = await kit.explore(reference_host(), surviving, max_schedules=40)
    report.assert_ok()
    plain = await kit.explore(reference_host(), "run-shutdown", max_schedules=40)
    # The [survives] variants add schedules (only a process DELETE takes them).
    assert report.schedules > plain.schedules
