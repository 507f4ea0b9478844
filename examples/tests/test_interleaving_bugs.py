"""Three hosts that pass every scripted scenario, and the orders that break them.

Each host below is :class:`RobustHost` with one mistake real schedulers make. The kit's five
scripted races pass (the ``HostConformance`` subclasses); the schedule explorer finds the order
that breaks each host within its default budget, shrinks it to a handful of steps, and the
printed schedule string replays it exactly, every time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from example_hosts import CheckThenRunHost, FixedWaitHost, RobustHost, SandboxApi, StdinWindowHost

from pytest_createos import CreateosServer
from pytest_createos.kit import (
    ConformanceKit,
    HostConformance,
    HostExploration,
    HostFactory,
    LeaseHostAdapter,
)

#: A shrunk failing schedule names at most this many steps.
HANDFUL = 6
#: How often each shrunk schedule is replayed: every replay must fail the same way.
REPLAYS = 100
#: Over HTTP every step waits this long for the fake to settle: a few replays only.
REMOTE_SETTLE_S = 0.01
REMOTE_REPLAYS = 3


def host_factory(host_class: Callable[..., RobustHost]) -> HostFactory:
    """Fresh hosts of ``host_class`` on the kit's fake, one per explored run."""

    @contextlib.asynccontextmanager
    async def make_host(kit: ConformanceKit) -> AsyncIterator[Any]:
        api = SandboxApi(kit.server.url, kit.server.api_key)
        try:
            yield host_class(api, seed=1)
        finally:
            await api.close()

    return make_host


class TestFixedWaitHostPassesTheScenarios(HostConformance):
    @pytest_asyncio.fixture
    async def host(self, createos_server: CreateosServer) -> AsyncIterator[FixedWaitHost]:
        api = SandboxApi(createos_server.url, createos_server.api_key)
        yield FixedWaitHost(api, seed=createos_server.seed)
        await api.close()


class TestStdinWindowHostPassesTheScenarios(HostConformance):
    @pytest_asyncio.fixture
    async def host(self, createos_server: CreateosServer) -> AsyncIterator[StdinWindowHost]:
        api = SandboxApi(createos_server.url, createos_server.api_key)
        yield StdinWindowHost(api, seed=createos_server.seed)
        await api.close()


class TestCheckThenRunHostPassesTheScenarios(HostConformance):
    @pytest_asyncio.fixture
    async def host(self, createos_server: CreateosServer) -> AsyncIterator[CheckThenRunHost]:
        api = SandboxApi(createos_server.url, createos_server.api_key)
        yield CheckThenRunHost(api, seed=createos_server.seed)
        await api.close()


BUGS = [
    pytest.param(FixedWaitHost, "release-resume", "no-resume-during-cleanup", id="fixed-wait"),
    pytest.param(StdinWindowHost, "run-shutdown", "no-orphan-process", id="stdin-window"),
    pytest.param(
        CheckThenRunHost, "release-resume-run", "no-work-on-closing-sandbox", id="check-then-run"
    ),
]


@pytest.mark.asyncio
@pytest.mark.createos(manual_clock=True)
@pytest.mark.parametrize(("host_class", "workload", "check"), BUGS)
async def test_the_explorer_finds_shrinks_and_replays_the_bug(
    createos_aiohttp_server: CreateosServer,
    host_class: Callable[..., RobustHost],
    workload: str,
    check: str,
) -> None:
    kit = ConformanceKit(createos_aiohttp_server)
    make_host = host_factory(host_class)
    report = await kit.explore(make_host, workload)  # the default budget
    assert report.failure is not None, report.summary()
    assert check in report.failure.failed_checks, report.format()
    assert report.failure.steps <= HANDFUL, report.format()
    # The report points at the first request the checks flag, and says how to replay it.
    assert "<-- the first request the checks flag" in report.format()
    assert report.failure.schedule in report.format()
    for _ in range(REPLAYS):
        replayed = await kit.replay(make_host, report.failure.schedule)
        assert check in replayed.failed_checks, replayed.format()


@pytest.mark.asyncio
@pytest.mark.createos(manual_clock=True)
async def test_the_explorer_finds_the_bug_over_http_too(createos_server: CreateosServer) -> None:
    """``createos_server`` with a manual clock runs the fake in a background thread, reached
    over HTTP as with ``--createos-url``: the explorer cannot look at its loop, and waits for
    it to settle before every step (``settle_s``; a short one, the fake is a loopback hop
    away). It finds, shrinks and replays the same bug there."""
    kit = ConformanceKit(createos_server)
    make_host = host_factory(FixedWaitHost)
    report = await kit.explore(make_host, "release-resume", settle_s=REMOTE_SETTLE_S)
    assert report.failure is not None, report.summary()
    assert "no-resume-during-cleanup" in report.failure.failed_checks, report.format()
    assert report.failure.steps <= HANDFUL, report.format()
    for _ in range(REMOTE_REPLAYS):
        replayed = await kit.replay(make_host, report.failure.schedule, settle_s=REMOTE_SETTLE_S)
        assert "no-resume-during-cleanup" in replayed.failed_checks, replayed.format()


@pytest.mark.asyncio
@pytest.mark.createos(manual_clock=True)
async def test_a_printed_schedule_replays_as_written(
    createos_aiohttp_server: CreateosServer,
) -> None:
    kit = ConformanceKit(createos_aiohttp_server)
    schedule = "run-shutdown: start run(L1, cat) > POST L1/processes"
    report = await kit.replay(host_factory(StdinWindowHost), schedule)
    assert report.failed_checks == {"no-orphan-process"}
    # The same host with the stdin close inside its guard passes the same order.
    report = await kit.replay(host_factory(RobustHost), "run-shutdown: start run(L1, cat)")
    assert report.ok, report.format()


CLOSE_STDIN = "POST /v1/sandboxes/{id}/processes/{pid}/stdin/close"


@pytest.mark.asyncio
async def test_a_command_that_ends_before_its_stdin_is_closed_still_runs(
    createos_aiohttp_server: CreateosServer,
) -> None:
    """The window this host shows is shutdown() landing in it, nothing else: a command that
    ends before its stdin close arrives (409, as on a loaded machine) has still run. Once,
    the host took that 409 for a failed run, and its scenarios failed now and then."""
    server = createos_aiohttp_server
    api = SandboxApi(server.url, server.api_key)
    host = StdinWindowHost(api, seed=server.seed)
    gate = server.faults.gate("close", route=CLOSE_STDIN)
    lease = await host.acquire()
    try:
        run = asyncio.ensure_future(host.run(lease, "echo done"))
        await gate.async_wait_held()
        (process,) = (await api.call("GET", f"/v1/sandboxes/{lease}/processes"))["processes"]
        path = f"/v1/sandboxes/{lease}/processes/{process['process_id']}/wait"
        await api.call("GET", path, timeout_ms="5000")  # it has ended; its close is held
        gate.release()
        assert await asyncio.wait_for(run, 10) == 0
        assert [entry.status for entry in server.journal.requests(route=CLOSE_STDIN)] == [409]
    finally:
        await host.destroy(lease)
        await api.close()


class TestReferenceHostExplored(HostExploration):
    """The reference ``LeaseHost`` over every built-in workload (a bounded search here; the
    plugin's own suite explores each workload completely)."""

    explore_budget = 8

    @pytest.fixture
    def explore_host(self, createos_lease_params: dict[str, Any]) -> HostFactory:
        from pytest_createos import LeaseHost, LeaseProvider
        from pytest_createos.kit import lease_params

        @contextlib.asynccontextmanager
        async def make_host(kit: ConformanceKit) -> AsyncIterator[LeaseHostAdapter]:
            params = lease_params(kit, reuseLease=True)
            async with LeaseProvider() as provider:
                yield LeaseHostAdapter(LeaseHost(kit.watch(provider), **params, base_delay_ms=5))

        return make_host
