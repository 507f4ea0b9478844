"""The explorer as a test class: one test per built-in workload, for any host.

Example::

    class TestMyHost(HostConformance, HostExploration):
        @pytest.fixture
        def explore_host(self):
            return my_host_factory
"""

from __future__ import annotations

import pytest

from pytest_createos import _kit_messages as text
from pytest_createos._explore.explorer import DEFAULT_MAX_SCHEDULES, DEFAULT_MAX_STEPS
from pytest_createos._explore.quiescence import ExploreError
from pytest_createos._explore.runner import HostFactory
from pytest_createos._explore.workloads import WORKLOADS
from pytest_createos.server import CreateosServer

__all__ = ["HostExploration"]


class HostExploration:
    """Subclass it (next to :class:`HostConformance`) and provide an ``explore_host`` fixture
    (a :data:`HostFactory`: ``make_host(kit)``, an async context manager yielding a fresh
    host); every built-in workload becomes a test, ``test_host_explores[<workload>]``, that
    explores its schedules on a fake of its own (``createos_aiohttp_server``, manual clock)
    and fails with the shrunk timeline and its schedule string. ``explore_budget`` bounds the
    schedules per workload; workloads that need ``shutdown()`` skip hosts without one.

    Example::

        import contextlib
        from pytest_createos.kit import HostConformance, HostExploration

        class TestMyHost(HostConformance, HostExploration):
            @pytest.fixture
            def explore_host(self):
                @contextlib.asynccontextmanager
                async def make_host(kit):
                    async with MyHost(kit.server.url, kit.server.api_key) as host:
                        yield host
                return make_host
    """

    #: Schedules explored per workload at most.
    explore_budget = DEFAULT_MAX_SCHEDULES
    #: Race decisions the exhaustive search branches on.
    explore_max_steps = DEFAULT_MAX_STEPS

    @pytest.mark.asyncio
    @pytest.mark.createos(manual_clock=True)
    @pytest.mark.parametrize("workload", [workload.name for workload in WORKLOADS])
    async def test_host_explores(
        self, workload: str, explore_host: HostFactory, createos_aiohttp_server: CreateosServer
    ) -> None:
        from pytest_createos.kit import ConformanceKit

        kit = ConformanceKit(createos_aiohttp_server)
        try:
            report = await kit.explore(
                explore_host,
                workload,
                max_schedules=self.explore_budget,
                max_steps=self.explore_max_steps,
            )
        except ExploreError as exc:
            if str(exc) == text.NO_SHUTDOWN_WORKLOAD.format(workload=workload):
                pytest.skip(str(exc))
            raise
        print(report.summary())  # the number of schedules, in the test's captured output
        report.assert_ok()
