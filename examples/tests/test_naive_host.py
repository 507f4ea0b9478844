"""The kit catches every bug of the naive host, each by the check made for it."""

from __future__ import annotations

import pytest
from example_hosts import NaiveHost

from pytest_createos.kit import ConformanceKit

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
