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

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_createos import _kit_messages as text
from pytest_createos._explore.runner import Chooser, Diverged, RunResult
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


@dataclass
class _Node:
    """A decision point of the search tree: the steps possible there, the ones asleep (already
    covered by an equivalent order), the ones tried, and the one the current branch takes."""

    steps: tuple[Step, ...]
    sleep: dict[str, Step]
    chosen: Step
    done: dict[str, Step] = field(default_factory=dict)

    def child_sleep(self) -> dict[str, Step]:
        """The sleep set below the chosen step: every step asleep or tried here that commutes
        with it (an order starting with it is covered where it was tried)."""
        candidates = {**self.sleep, **self.done}
        candidates.pop(self.chosen.label, None)
        return {
            label: step for label, step in candidates.items() if step.independent_of(self.chosen)
        }


class Exhaustive:
    """Depth-first search of the race's first ``max_steps`` decisions (later ones take the
    default), with sleep sets: of two orders that differ only in steps on different sandboxes,
    one is run.

    Example::

        search = Exhaustive(max_steps=10)
    """

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self._stack: list[_Node] = []
        self._branch = 0
        self._started = False
        #: Runs whose every possible step was asleep from some point on: an equivalent order
        #: ran already (they are run to the end, but not counted as new schedules).
        self.redundant = 0
        self._redundant_run = False

    def next_chooser(self) -> Chooser | None:
        """The chooser of the next run, or ``None`` once the tree is covered."""
        if self._started and not self._backtrack():
            return None
        self._started = True
        self._redundant_run = False
        return self._choose

    def ran(self, result: RunResult) -> bool:
        """Take note of a finished run; returns whether it was a new schedule."""
        if self._redundant_run:
            self.redundant += 1
            return False
        return True

    def _backtrack(self) -> bool:
        for index in range(len(self._stack) - 1, -1, -1):
            node = self._stack[index]
            for step in node.steps:
                if step.label not in node.done and step.label not in node.sleep:
                    node.done[step.label] = step
                    node.chosen = step
                    del self._stack[index + 1 :]
                    self._branch = index + 1
                    return True
        return False

    def _choose(self, position: int, steps: Sequence[Step]) -> Step | None:
        if position >= self.max_steps or self._redundant_run:
            return None
        if position < self._branch:
            node = self._stack[position]
            if [s.label for s in steps] != [s.label for s in node.steps]:
                raise Diverged(
                    text.SCHEDULE_DIVERGED.format(
                        position=position + 1,
                        label=node.chosen.label,
                        enabled=[s.label for s in steps],
                    )
                )
            return next(s for s in steps if s.label == node.chosen.label)
        sleep = self._stack[-1].child_sleep() if self._stack else {}
        awake = [step for step in steps if step.label not in sleep]
        if not awake:
            self._redundant_run = True
            return None
        node = _Node(tuple(steps), sleep, awake[0], {awake[0].label: awake[0]})
        self._stack.append(node)
        self._branch = len(self._stack)
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
