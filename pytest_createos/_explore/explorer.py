"""Explore a workload's interleavings, shrink a failing one, replay a schedule.

Example::

    report = await explore(kit, make_host, "release-resume")
    report.assert_ok()   # ConformanceError with the shrunk timeline and its schedule string
    replayed = await replay(kit, make_host, "release-resume: POST L1/pause > GET L1")
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_createos import _kit_messages as text
from pytest_createos._explore.quiescence import ExploreError
from pytest_createos._explore.remote import DEFAULT_EXPLORE_SETTLE_S
from pytest_createos._explore.runner import DEFAULT_HORIZON_S, HostFactory, Runner, RunResult
from pytest_createos._explore.strategies import (
    PCT,
    Exhaustive,
    FollowSchedule,
    format_schedule,
    parse_schedule,
)
from pytest_createos._explore.workloads import Workload, find_workload
from pytest_createos._scenario_run import ConformanceError

if TYPE_CHECKING:
    from pytest_createos.kit import ConformanceKit

__all__ = [
    "DEFAULT_MAX_SCHEDULES",
    "DEFAULT_MAX_STEPS",
    "STRATEGIES",
    "ExploreReport",
    "RunReport",
    "explore",
    "replay",
]

#: The race decisions the exhaustive search branches on (later ones take the default).
DEFAULT_MAX_STEPS = 12
#: Schedules one exploration runs at most.
DEFAULT_MAX_SCHEDULES = 500
#: PCT's bug depth: how many ordering constraints a bug may need.
DEFAULT_DEPTH = 3
STRATEGIES = ("exhaustive", "pct")


@dataclass
class RunReport:
    """One run of a schedule: its schedule string, what the checks found and the timeline.

    Example::

        report = await createos_kit.replay(make_host, schedule)
        assert report.failed_checks == {"no-resume-during-cleanup"}
    """

    schedule: str
    result: RunResult

    @property
    def ok(self) -> bool:
        """True when the checks found nothing."""
        return not self.result.violations

    @property
    def failed_checks(self) -> set[str]:
        """Names of the checks that found something."""
        return self.result.failed_checks

    @property
    def steps(self) -> int:
        """How many steps the schedule string names."""
        return len(parse_schedule(self.schedule)[1])

    def timeline(self) -> str:
        """The run, step by step: each step the explorer took (``*``: the schedule chose it),
        the fake's journal lines it caused, and when each host call ended; the first request
        a check flags is pointed at."""
        flagged = _first_flagged(self.result)
        lines = [text.TIMELINE_HEADER]
        for index, line in enumerate(self.result.timeline):
            lines.append(line + (text.FIRST_FLAGGED if index == flagged else ""))
        return "\n".join(lines)

    def format(self) -> str:
        """Violations, timeline and how to replay."""
        parts = [self.result.format_violations(), self.timeline()]
        parts.append(text.REPLAY_HINT.format(schedule=self.schedule))
        return "\n".join(part for part in parts if part)

    def assert_ok(self) -> None:
        """Raise :class:`ConformanceError` with :meth:`format` if anything was found."""
        if self.result.violations:
            raise ConformanceError(self.format(), self.result.violations)


@dataclass
class ExploreReport:
    """What an exploration found: how many schedules ran and, if one failed, the shrunk run.

    Example::

        report = await createos_kit.explore(make_host, "release-resume")
        print(report.schedules, report.summary())
        report.assert_ok()
    """

    workload: Workload
    strategy: str
    #: Distinct schedules run (redundant ones not counted).
    schedules: int
    #: Runs skipped as equivalent to one already run (partial-order reduction).
    redundant: int
    #: Whether the search stopped at its budget rather than covering everything.
    bounded: bool
    budget: int
    failure: RunReport | None = None
    #: The failing run's length before shrinking, and its number among the runs.
    original_steps: int = 0
    found_at: int = 0

    @property
    def ok(self) -> bool:
        """True when no schedule failed."""
        return self.failure is None

    def summary(self) -> str:
        """One line: what was explored and what was found."""
        if self.failure is None:
            more = text.EXPLORE_PRUNED.format(pruned=self.redundant) if self.redundant else ""
            if self.bounded:
                more += text.EXPLORE_BOUNDED.format(budget=self.budget)
            return text.EXPLORE_OK.format(
                workload=self.workload.name,
                ops=self.workload.describe(),
                total=self.schedules,
                strategy=self.strategy,
                more=more,
            )
        return text.EXPLORE_VIOLATIONS_HEADER.format(
            workload=self.workload.name,
            ops=self.workload.describe(),
            count=len(self.failure.result.violations),
            number=self.found_at,
            total=self.schedules,
            strategy=self.strategy,
            original=self.original_steps,
            steps=self.failure.steps,
        )

    def format(self) -> str:
        """The summary, then the shrunk failing run (if any)."""
        if self.failure is None:
            return self.summary()
        return "\n".join([self.summary(), self.failure.format()])

    def assert_ok(self) -> None:
        """Raise :class:`ConformanceError` with :meth:`format` if a schedule failed."""
        if self.failure is not None:
            raise ConformanceError(self.format(), self.failure.result.violations)


def _first_flagged(result: RunResult) -> int | None:
    """The timeline line of the request where the host went wrong: in the first violation that
    shows requests (of the race, if it shows any), the first one that arrived while another one
    it shows was in flight (a resume during the pause), else its first request."""
    for violation in result.violations:
        shown = [entry for entry in violation.entries if entry.kind == "request"]
        # The set-up's requests are the default order's; the race's are where orders differ.
        requests = [entry for entry in shown if entry.opened > result.race_seq] or shown
        if not requests:
            continue
        racing = [
            entry
            for entry in requests
            if any(other.opened < entry.opened < other.seq for other in requests)
        ]
        culprit = min(racing or requests, key=lambda entry: entry.opened)
        return result.entry_lines.get(culprit.seq)
    return None


async def explore(
    kit: ConformanceKit,
    make_host: HostFactory,
    workload: str | Workload,
    *,
    strategy: str = "exhaustive",
    max_steps: int = DEFAULT_MAX_STEPS,
    max_schedules: int = DEFAULT_MAX_SCHEDULES,
    depth: int = DEFAULT_DEPTH,
    seed: int = 0,
    horizon_s: float = DEFAULT_HORIZON_S,
    settle_s: float = DEFAULT_EXPLORE_SETTLE_S,
) -> ExploreReport:
    """Run ``workload`` under many schedules (see :meth:`ConformanceKit.explore`)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if max_steps < 0 or max_schedules < 1:
        raise ValueError("max_steps must be at least 0 and max_schedules at least 1")
    chosen = find_workload(workload)
    runner = Runner(kit, make_host, chosen, horizon_s=horizon_s, settle_s=settle_s)
    with runner:
        if strategy == "exhaustive":
            return await _exhaustive(runner, max_steps, max_schedules)
        return await _pct(runner, depth, seed, max_schedules)


async def _exhaustive(runner: Runner, max_steps: int, budget: int) -> ExploreReport:
    search = Exhaustive(max_steps)
    schedules = 0
    while schedules < budget:
        choose = search.next_chooser()
        if choose is None:
            return _report(runner, "exhaustive", schedules, search.redundant, False, budget)
        result = await runner.run(choose)
        if result.diverged is not None:
            # Once more first: a loaded machine may deliver a request a moment late.
            result = await runner.run(search.again())
        if result.diverged is not None:
            raise ExploreError(text.NOT_DETERMINISTIC.format(why=result.diverged))
        if search.ran(result):
            schedules += 1
            if result.failed:
                report = _report(runner, "exhaustive", schedules, search.redundant, True, budget)
                return await _with_failure(runner, report, result)
    return _report(runner, "exhaustive", schedules, search.redundant, True, budget)


async def _pct(runner: Runner, depth: int, seed: int, budget: int) -> ExploreReport:
    # The default run's length sizes the random change points.
    first = await runner.run(lambda position, steps: None)
    if first.failed:
        report = _report(runner, "pct", 1, 0, True, budget)
        return await _with_failure(runner, report, first)
    search = PCT(random.Random(seed), depth=depth, length=len(first.decisions))
    for number in range(2, budget + 1):
        result = await runner.run(search.next_chooser())
        if result.failed:
            return await _with_failure(
                runner, _report(runner, "pct", number, 0, True, budget), result
            )
    return _report(runner, "pct", budget, 0, True, budget)


def _report(
    runner: Runner, strategy: str, schedules: int, redundant: int, bounded: bool, budget: int
) -> ExploreReport:
    return ExploreReport(runner.workload, strategy, schedules, redundant, bounded, budget)


async def _with_failure(runner: Runner, report: ExploreReport, result: RunResult) -> ExploreReport:
    labels, shrunk = await shrink(runner, result)
    report.failure = RunReport(format_schedule(runner.workload.name, labels), shrunk)
    report.original_steps = len(result.decisions)
    report.found_at = report.schedules
    return report


def _same_failure(result: RunResult, checks: set[str]) -> bool:
    return result.failed and bool(result.failed_checks & checks)


async def shrink(runner: Runner, failing: RunResult) -> tuple[list[str], RunResult]:
    """The shortest schedule found that still fails one of the same checks: first the shortest
    prefix of the failing run's steps (the default completes it), then without each step that
    is not needed, until none can go. Returns its step labels and its run."""
    checks = failing.failed_checks
    best, best_result = failing.labels(), failing
    for length in range(len(best)):
        result = await runner.run(FollowSchedule(best[:length]))
        if _same_failure(result, checks):
            best, best_result = best[:length], result
            break
    changed = True
    while changed:
        changed = False
        for index in range(len(best)):
            candidate = best[:index] + best[index + 1 :]
            result = await runner.run(FollowSchedule(candidate))
            if _same_failure(result, checks):
                best, best_result, changed = candidate, result, True
                break
    return best, best_result


async def replay(
    kit: ConformanceKit,
    make_host: HostFactory,
    schedule: str,
    *,
    workloads: Sequence[Workload] = (),
    horizon_s: float = DEFAULT_HORIZON_S,
    settle_s: float = DEFAULT_EXPLORE_SETTLE_S,
) -> RunReport:
    """Run one schedule string (see :meth:`ConformanceKit.replay`)."""
    name, labels = parse_schedule(schedule)
    workload = find_workload(name, workloads)
    runner = Runner(kit, make_host, workload, horizon_s=horizon_s, settle_s=settle_s)
    with runner:
        result = await runner.run(FollowSchedule(labels))
        if result.diverged is not None:
            # Once more first: a loaded machine may deliver a request a moment late.
            result = await runner.run(FollowSchedule(labels))
    if result.diverged is not None:
        raise ExploreError(result.diverged)
    return RunReport(format_schedule(workload.name, labels), result)
