"""The kit against the JavaScript providers in examples/node, over the bridge: the guarded one
passes every provider scenario, and each gets the verdict of its Python equivalent -- the
reference provider, and the reference provider without its guard."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pytest_createos.bridge import SubprocessProvider
from pytest_createos.kit import PROVIDER_SCENARIOS, ConformanceKit, ProviderConformance
from pytest_createos.provider import LeaseProvider
from pytest_createos.server import CreateosServer
from tests.kit.test_scenarios import GUARD_SCENARIOS, GuardlessProvider

NODE = shutil.which("node")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "node"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (Debian: nodejs)")


def node_provider(program: str, server: CreateosServer) -> SubprocessProvider:
    assert NODE is not None
    return SubprocessProvider([NODE, str(EXAMPLES / program)], server=server, name=program)


class TestGuardedNodeProvider(ProviderConformance):
    @pytest_asyncio.fixture
    async def provider(self, createos_server: CreateosServer) -> AsyncIterator[SubprocessProvider]:
        async with node_provider("guarded_provider.mjs", createos_server) as provider:
            yield provider


#: Played by TestGuardedNodeProvider already, and each run waits out its Retry-After twice
#: (~4 s a pair): the verdicts it compares would be the same two passes.
_WAITED_OUT = "lifecycle-rate-limited"


@pytest.mark.parametrize("scenario", [s.name for s in PROVIDER_SCENARIOS if s.name != _WAITED_OUT])
@pytest.mark.parametrize(
    ("program", "python"),
    [("guarded_provider.mjs", LeaseProvider), ("naive_provider.mjs", GuardlessProvider)],
)
async def test_node_providers_get_their_python_equivalents_verdict(
    scenario: str,
    program: str,
    python: type[LeaseProvider],
    createos_kit: ConformanceKit,
    createos_server: CreateosServer,
    createos_lease_params: dict[str, Any],
) -> None:
    async with python() as reference:
        expected = await createos_kit.run_provider(scenario, reference, createos_lease_params)
    async with node_provider(program, createos_server) as provider:
        report = await createos_kit.run_provider(scenario, provider, createos_lease_params)
    assert report.failed_checks == expected.failed_checks, report.format()
    # Without the guard, every scenario that races it catches it by the check made for it.
    caught = program == "naive_provider.mjs" and scenario in GUARD_SCENARIOS
    assert ("provider-refuses-resume" in report.failed_checks) is caught
