"""How the explorer picks schedules: exhaustively, with partial-order reduction, or at random
with PCT's probabilistic guarantee; and how it follows a given schedule.

Every strategy is a source of :class:`~pytest_createos._explore.runner.Chooser` s, one per run,
that learns from the decisions each run recorded.

Example::

    search = Exhaustive(max_steps=12)
    while (choose := search.next_chooser()) is not None:
        result = await runner.run(choose)
        search.ran(result)
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_createos import _kit_messages as text
from pytest_createos._explore.runner import Chooser, Diverged, Redundant, RunResult
from pytest_createos._explore.steps import Step

__all__ = ["PCT", "Exhaustive", "FollowSchedule", "format_schedule", "parse_schedule"]

#: Separates a schedule's workload from its steps, and one step from the next.
WORKLOAD_SEPARATOR = ": "
STEP_SEPARATOR = " > "


def format_schedule(workload: str, labels: Sequence[str]) -> str:
    """The schedule string a report prints and :func:`parse_schedule` reads.

    Example:
        >>> format_schedule("release-resume", ["GET L1", "POST L1/pause"])
        'release-resume: GET L1 > POST L1/pause'
    """
    return f"{workload}{WORKLOAD_SEPARATOR}{STEP_SEPARATOR.join(labels)}".rstrip()


def parse_schedule(schedule: str) -> tuple[str, list[str]]:
    """``(workload, step labels)`` of a schedule string; ``ValueError`` if it is none.

    Example:
        >>> parse_schedule("release-resume: GET L1 > POST L1/pause")
        ('release-resume', ['GET L1', 'POST L1/pause'])
    """
    workload, separator, steps = schedule.partition(WORKLOAD_SEPARATOR.strip())
    if not separator or not workload.strip() or "\n" in schedule:
        raise ValueError(text.BAD_SCHEDULE.format(schedule=schedule))
    labels = [label.strip() for label in steps.split(STEP_SEPARATOR.strip())]
    if labels == [""]:
        labels = []
    if any(not label for label in labels):
        raise ValueError(text.BAD_SCHEDULE.format(schedule=schedule))
    return workload.strip(), labels


class FollowSchedule:
    """Takes the steps a schedule names, in order, then the default (oldest) step; a step the
    run does not offer at its place raises :class:`Diverged`.

    Example::

        result = await runner.run(FollowSchedule(["POST L1/pause", "GET L1"]))
    """

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)

    def __call__(self, position: int, steps: Sequence[Step]) -> Step | None:
        if position >= len(self.labels):
            return None
        wanted = self.labels[position]
        for step in steps:
            if step.label == wanted:
                return step
        raise Diverged(
            text.SCHEDULE_DIVERGED.format(
                position=position + 1, label=wanted, enabled=[s.label for s in steps]
            )
        )


@dataclass(order=True)
class _Branch:
    """A schedule still to run: the steps of its prefix (the last one is the branch taken)
    and the sleep set below it; explored fewest deviations from the default first."""

    deviations: int
    length: int
    number: int
    prefix: list[str] = field(compare=False)
    sleep: dict[str, Step] = field(compare=False)
    #: The steps that were possible at each step of the prefix: a run that finds others has
    #: a host that is not deterministic.
    seen: list[tuple[str, ...]] = field(compare=False, default_factory=list)


def _child_sleep(sleep: dict[str, Step], earlier: Sequence[Step], chosen: Step) -> dict[str, Step]:
    """The sleep set below ``chosen``: every step asleep here or taken here before it (an
    earlier sibling) that commutes with it (an order starting with it is covered there)."""
    candidates = {**sleep, **{step.label: step for step in earlier}}
    candidates.pop(chosen.label, None)
    return {label: step for label, step in candidates.items() if step.independent_of(chosen)}


class Exhaustive:
    """Every order of the race's first ``max_steps`` decisions (later ones take the default),
    with sleep sets: of two orders that differ only in steps on different sandboxes, one is
    run. Schedules with fewer deviations from the default order run first, so a bug that
    needs one unusual step is found before the search wanders deep.

    Example::

        search = Exhaustive(max_steps=10)
    """

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self._frontier: list[_Branch] = [_Branch(0, 0, 0, [], {})]
        self._numbers = itertools.count(1)
        self._branch: _Branch | None = None
        self._decisions: list[tuple[tuple[Step, ...], dict[str, Step], Step]] = []
        #: Runs whose every possible step was asleep from some point on: an equivalent order
        #: ran already (they are run to the end, but not counted as new schedules).
        self.redundant = 0
        self._redundant_run = False

    def next_chooser(self) -> Chooser | None:
        """The chooser of the next run, or ``None`` once every order is covered."""
        if not self._frontier:
            return None
        self._branch = heapq.heappop(self._frontier)
        self._decisions = []
        self._redundant_run = False
        return self._choose

    def again(self) -> Chooser:
        """The chooser of the last run's branch once more (a run that diverged is run again
        before the host is called not deterministic)."""
        self._decisions = []
        self._redundant_run = False
        return self._choose

    def ran(self, result: RunResult) -> bool:
        """Take note of a finished run (its new decision points become branches to run);
        returns whether it was a new schedule."""
        branch = self._branch
        assert branch is not None, "ran() follows a run of next_chooser()'s chooser"
        deviations = branch.deviations
        path = list(branch.prefix)
        seen = list(branch.seen)
        for steps, sleep, chosen in self._decisions:
            seen.append(tuple(step.label for step in steps))
            awake = [step for step in steps if step.label not in sleep]
            for index, sibling in enumerate(awake):
                if sibling is chosen or index == 0:
                    continue
                extra = 0 if sibling is steps[0] else 1
                heapq.heappush(
                    self._frontier,
                    _Branch(
                        deviations + extra,
                        len(path) + 1,
                        next(self._numbers),
                        [*path, sibling.label],
                        _child_sleep(sleep, awake[:index], sibling),
                        list(seen),
                    ),
                )
            deviations += 0 if chosen is steps[0] else 1
            path.append(chosen.label)
        if self._redundant_run:
            self.redundant += 1
            return False
        return True

    def _choose(self, position: int, steps: Sequence[Step]) -> Step | None:
        branch = self._branch
        assert branch is not None
        if position < len(branch.prefix):
            wanted = branch.prefix[position]
            labels = tuple(step.label for step in steps)
            for step in steps:
                if step.label == wanted and labels == branch.seen[position]:
                    return step
            raise Diverged(
                text.SCHEDULE_DIVERGED.format(
                    position=position + 1, label=wanted, enabled=[s.label for s in steps]
                )
            )
        if position >= self.max_steps:
            return None
        if self._decisions:
            previous_steps, previous_sleep, previous = self._decisions[-1]
            awake_before = [s for s in previous_steps if s.label not in previous_sleep]
            earlier = awake_before[: awake_before.index(previous)]
            sleep = _child_sleep(previous_sleep, earlier, previous)
        else:
            sleep = branch.sleep
        awake = [step for step in steps if step.label not in sleep]
        if not awake:
            self._redundant_run = True
            raise Redundant
        self._decisions.append((tuple(steps), sleep, awake[0]))
        return awake[0]


class PCT:
    """Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010), over steps: every
    step gets a random priority when it first becomes possible, the highest goes first, and at
    ``depth - 1`` random positions among the first ``length`` decisions the step taken is
    demoted below all others. A bug that needs ``depth`` ordering constraints among ``n`` steps
    is hit by one run with probability at least ``1 / (n * length ** (depth - 1))``.

    Example::

        search = PCT(random.Random(0), depth=3, length=20)
    """

    def __init__(self, rng: random.Random, *, depth: int, length: int) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self.rng = rng
        self.depth = depth
        self.length = max(length, depth)

    def next_chooser(self) -> Chooser:
        """The chooser of one more random run."""
        points = self.rng.sample(range(self.length), self.depth - 1)
        demote = {position: rank for rank, position in enumerate(sorted(points), start=1)}
        priority: dict[str, float] = {}
        rng = self.rng
        depth = self.depth

        def choose(position: int, steps: Sequence[Step]) -> Step:
            for step in steps:
                if step.label not in priority:
                    priority[step.label] = depth + rng.random()
            if position in demote:  # a change point: what would go on now is pre-empted
                best = max(steps, key=lambda step: priority[step.label])
                priority[best.label] = depth - demote[position]
            return max(steps, key=lambda step: priority[step.label])

        return choose
