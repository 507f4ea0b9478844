"""The search strategies on a simulated system: threads of steps, each step on a sandbox, the
next step of a thread possible once its previous one is taken. No fake, no host: what is
checked is which orders each strategy runs."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from pytest_createos._explore.runner import Chooser, Diverged, Redundant, RunResult
from pytest_createos._explore.steps import Step
from pytest_createos._explore.strategies import (
    PCT,
    Exhaustive,
    FollowSchedule,
    format_schedule,
    parse_schedule,
)

Thread = list[tuple[str, str | None]]


def simulate(threads: Sequence[Thread], choose: Chooser) -> list[str]:
    """One run: the labels taken, in order (the default is the oldest possible step; a step's
    ``order`` is its thread's number, so the first thread's steps are the oldest)."""
    positions = [0] * len(threads)
    taken: list[str] = []
    while True:
        steps = [
            Step(*thread[position], order=index)
            for index, (thread, position) in enumerate(zip(threads, positions, strict=True))
            if position < len(thread)
        ]
        if not steps:
            return taken
        try:
            step = choose(len(taken), steps) or steps[0]
        except Redundant:
            return taken  # cut short: an equivalent order ran already
        taken.append(step.label)
        positions[step.order] += 1


def deviations(threads: Sequence[Thread], order: list[str]) -> int:
    """How many of the order's steps are not the default (oldest) step where they are taken."""
    count = 0

    def choose(position: int, steps: Sequence[Step]) -> Step:
        nonlocal count
        step = next(s for s in steps if s.label == order[position])
        count += step is not steps[0]
        return step

    simulate(threads, choose)
    return count


def explore_all(threads: Sequence[Thread], max_steps: int = 20) -> tuple[list[list[str]], int]:
    search = Exhaustive(max_steps)
    orders = []
    while (choose := search.next_chooser()) is not None:
        order = simulate(threads, choose)
        if search.ran(RunResult()):
            orders.append(order)
    return orders, search.redundant


def test_steps_on_one_sandbox_run_in_every_order() -> None:
    threads = [[("a1", "L1"), ("a2", "L1")], [("b1", "L1")]]
    orders, redundant = explore_all(threads)
    assert sorted(orders) == [["a1", "a2", "b1"], ["a1", "b1", "a2"], ["b1", "a1", "a2"]]
    assert redundant == 0


def test_steps_on_different_sandboxes_commute_and_run_once() -> None:
    threads = [[("a1", "L1"), ("a2", "L1")], [("b1", "L2")]]
    orders, redundant = explore_all(threads)
    assert orders == [["a1", "a2", "b1"]]
    assert redundant >= 1  # the other orders were started, found equivalent, not counted


def test_a_step_on_no_sandbox_commutes_with_nothing() -> None:
    threads = [[("create", None)], [("b1", "L2")]]
    orders, _ = explore_all(threads)
    assert sorted(orders) == [["b1", "create"], ["create", "b1"]]


def test_the_step_bound_leaves_later_decisions_to_the_default() -> None:
    threads = [[("a1", "L1"), ("a2", "L1")], [("b1", "L1"), ("b2", "L1")]]
    assert len(explore_all(threads)[0]) == 6  # all interleavings of 2 and 2
    orders, _ = explore_all(threads, max_steps=1)
    assert sorted(orders) == [["a1", "a2", "b1", "b2"], ["b1", "a1", "a2", "b2"]]


def test_fewer_deviations_from_the_default_run_first() -> None:
    threads = [[("a1", "L1"), ("a2", "L1")], [("b1", "L1"), ("b2", "L1")]]
    orders, _ = explore_all(threads)
    counts = [deviations(threads, order) for order in orders]
    assert counts == sorted(counts) == [0, 1, 1, 2, 2, 2]


def test_pct_covers_every_order_of_a_small_system_and_is_seeded() -> None:
    threads = [[("a1", "L1"), ("a2", "L1")], [("b1", "L1")]]
    first = PCT(random.Random(7), depth=2, length=3)
    orders = {tuple(simulate(threads, first.next_chooser())) for _ in range(60)}
    assert orders == {("a1", "a2", "b1"), ("a1", "b1", "a2"), ("b1", "a1", "a2")}
    again = PCT(random.Random(7), depth=2, length=3)
    replayed = [simulate(threads, again.next_chooser()) for _ in range(5)]
    third = PCT(random.Random(7), depth=2, length=3)
    assert replayed == [simulate(threads, third.next_chooser()) for _ in range(5)]


def test_pct_refuses_a_depth_below_one() -> None:
    with pytest.raises(ValueError, match="depth"):
        PCT(random.Random(0), depth=0, length=3)


def test_a_schedule_is_followed_then_the_default_takes_over() -> None:
    threads = [[("a1", "L1"), ("a2", "L1")], [("b1", "L1")]]
    assert simulate(threads, FollowSchedule(["b1"])) == ["b1", "a1", "a2"]
    with pytest.raises(Diverged, match="step 1 is 'c1'"):
        simulate(threads, FollowSchedule(["c1"]))


def test_schedule_strings_round_trip() -> None:
    labels = ["start release(L1)", "POST L1/pause", "GET L1#2", "finish L1 pausing"]
    text = format_schedule("release-resume", labels)
    assert text == (
        "release-resume: start release(L1) > POST L1/pause > GET L1#2 > finish L1 pausing"
    )
    assert parse_schedule(text) == ("release-resume", labels)
    assert parse_schedule("release-resume:") == ("release-resume", [])


@pytest.mark.parametrize("bad", ["no separator", ": GET L1", "w: GET L1 >  > GET L1", "w: a\nb"])
def test_a_malformed_schedule_string_is_refused_with_its_form(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a schedule: write '<workload>: <step>"):
        parse_schedule(bad)
