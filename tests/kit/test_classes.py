"""The test classes as a downstream project uses them, black-box with pytester: subclass,
provide a fixture, get one clearly named test per scenario (pytest-asyncio strict mode)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

DOWNSTREAM = """
import pytest
import pytest_asyncio

from pytest_createos import LeaseHost, LeaseProvider
from pytest_createos.kit import HostConformance, ProviderConformance


class WithoutShutdown:
    def __init__(self, host):
        self.host = host

    async def acquire(self):
        return await self.host.acquire()

    async def release(self, lease):
        await self.host.release(lease)

    async def resume(self, lease):
        return await self.host.resume(lease)

    async def run(self, lease, command):
        program, *args = command.split()
        return await self.host.execute(lease, program, args=args)


class GuardlessProvider(LeaseProvider):
    def _check_cleanup(self, key):
        return None


class TestMyHost(HostConformance):
    @pytest.fixture
    def host(self, createos_kit, createos_provider, createos_lease_params):
        provider = createos_kit.watch(createos_provider)
        return WithoutShutdown(LeaseHost(provider, **createos_lease_params))


class TestMyProvider(ProviderConformance):
    @pytest_asyncio.fixture
    async def provider(self):
        async with GuardlessProvider() as provider:
            yield provider
"""


def test_subclasses_get_one_named_test_per_scenario(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        # The plugin is imported already in this process, so inline runs cannot rewrite it.
        "filterwarnings = ignore::pytest.PytestAssertRewriteWarning\n"
    )
    pytester.makepyfile(test_downstream=DOWNSTREAM)
    result = pytester.runpytest("-v", "-rs", "--strict-markers")
    # Each provider scenario runs for a release that deletes and one that pauses (the lease
    # kept warm): the pause path was never met by default.
    # The provider without a guard still gets the requests refused for now right.
    result.assert_outcomes(passed=9, skipped=1, failed=8)
    result.stdout.fnmatch_lines_random(
        [
            "*TestMyHost::test_host_scenario[[]resume-while-release-in-flight[]] PASSED*",
            "*TestMyHost::test_host_scenario[[]resume-after-failed-release[]] PASSED*",
            "*TestMyHost::test_host_scenario[[]resume-unconfirmed-lease[]] PASSED*",
            "*TestMyHost::test_host_scenario[[]concurrent-resumes[]] PASSED*",
            "*TestMyHost::test_host_scenario[[]resume-refused-for-now[]] PASSED*",
            "*TestMyHost::test_host_scenario[[]shutdown-during-run[]] SKIPPED*",
            "*TestMyProvider::test_provider_scenario[[]release-deletes-resume-while-release-in"
            "-flight[]] FAILED*",
            "*TestMyProvider::test_provider_scenario[[]release-pauses-resume-while-release-in"
            "-flight[]] FAILED*",
            "*TestMyProvider::test_provider_scenario[[]release-pauses-resume-after-failed-delete[]]"
            " FAILED*",
            "*TestMyProvider::test_provider_scenario[[]release-pauses-resume-refused-with-409[]]"
            " PASSED*",
            "*TestMyProvider::test_provider_scenario[[]release-deletes-lifecycle-rate-limited[]]"
            " PASSED*",
            "SKIPPED*the host has no async shutdown() method",
        ]
    )
    # A failure says what happened, to which sandbox, in what order, and what to change.
    result.stdout.fnmatch_lines(
        [
            "E*ConformanceError: scenario resume-while-release-in-flight: 2 violation(s)",
            "E*[[]provider-refuses-resume[]] sb_*: resume() while its release is in flight sent*",
            "E*fix: While a release or destroy of a lease is in flight*",
            "E*[[]no-work-on-closing-sandbox[]] sb_*",
            "E*journal, in arrival order:",
            "E*DELETE /v1/sandboxes/sb_* -> 200 (sandbox running)*[[]arrived at #*]",
            "E*POST /v1/sandboxes/sb_*/exec -> 200 (sandbox running)*",
            "E*what the host did:",
            "E*acquire() created sb_*",
        ]
    )
