"""examples/ passes the way its own downstream project runs it -- its own pytest configuration
(pytest-asyncio strict mode, strict xfail, warnings as errors) -- so the suite covers it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_createos.kit import SCENARIOS

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_examples_project_passes(pytester: pytest.Pytester) -> None:
    # Two workers: most of its time is waiting (Retry-After seconds, transitions), not CPU, so
    # the project's 30 s alone take ~15 s beside the suite's own workers.
    result = pytester.runpytest_subprocess(str(EXAMPLES), "-n", "2", timeout=300)
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    # The naive host fails every scenario (strict xfail): the kit still catches each bug.
    assert outcomes["xfailed"] == len(SCENARIOS)
