"""The kit catches every bug of the naive host, each by the check made for it -- in Python, and
in JavaScript (node/naive_host.mjs, over the kit's bridge protocol) with the same verdict."""

from __future__ import annotations

import pytest
from example_hosts import NaiveHost

from pytest_createos.bridge import SubprocessHost
from pytest_createos.kit import ConformanceKit, ScenarioReport

EXPECTED = {
    # bug 1: the resume and the command race the held pause
    "resume-while-release-in-flight": {
        "no-resume-during-cleanup",
        "no-work-on-closing-sandbox",
        "resumed-or-replaced",
    },
    # bugs 1-3: hammers a pausing sandbox, then hands it out and runs on it
    "resume-after-failed-release": {
        "no-resume-during-cleanup",
        "retries-back-off",
        "no-work-on-closing-sandbox",
        "resumed-or-replaced",
    },
    # bug 3: pauses and resumes a lease whose process cleanup is unconfirmed
    "resume-unconfirmed-lease": {"unconfirmed-destroyed"},
    # bug 2: two resumes at once, then a hot loop on the 409s
    "concurrent-resumes": {"resumes-serialised", "retries-back-off"},
    # bugs 2-3: asks again at once after the 409, then hands the lease out while it resumes
    "resume-refused-for-now": {"resumed-or-replaced"},
    # bug 4: the command outlives the shutdown
    "shutdown-during-run": {"no-orphan-process"},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
async def test_kit_catches_the_naive_host(
    scenario: str, naive_host: NaiveHost, createos_kit: ConformanceKit
) -> None:
    report = await createos_kit.run(scenario, naive_host)
    print(report.format())
    assert EXPECTED[scenario] <= report.failed_checks, report.format()


def verdict(scenario: str, report: ScenarioReport) -> tuple[bool, set[str]]:
    """Whether the host passed, and which of the checks made for its bugs caught it (how the
    race plays out may add a consequence or two, such as a leak, to either)."""
    return report.ok, EXPECTED[scenario] & report.failed_checks


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
async def test_the_javascript_naive_host_gets_the_same_verdict(
    scenario: str,
    naive_host: NaiveHost,
    node_naive_host: SubprocessHost,
    createos_kit: ConformanceKit,
) -> None:
    python = await createos_kit.run(scenario, naive_host)
    javascript = await createos_kit.run(scenario, node_naive_host)
    print(javascript.format())
    assert verdict(scenario, javascript) == verdict(scenario, python), javascript.format()
    assert verdict(scenario, javascript) == (False, EXPECTED[scenario])
