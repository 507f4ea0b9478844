"""The manual clock: timers fire in due order, sleepers wake, time never goes backwards."""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta, timezone

import pytest

from fake_server.clock import MANUAL_EPOCH, ManualClock, RealClock


def test_timers_fire_in_due_order_at_their_due_time() -> None:
    clock = ManualClock()
    fired: list[tuple[str, float]] = []
    clock.call_later(2, lambda: fired.append(("late", clock.now())))
    clock.call_later(1, lambda: fired.append(("early", clock.now())))
    assert clock.advance(1.5) == 1
    assert fired == [("early", 1.0)]
    assert clock.now() == 1.5
    clock.advance(10)
    assert fired == [("early", 1.0), ("late", 2.0)]


def test_cancelled_timer_never_fires() -> None:
    clock = ManualClock()
    fired: list[int] = []
    handle = clock.call_later(1, fired.append, 1)
    handle.cancel()
    assert clock.advance(5) == 0
    assert fired == []
    assert clock.pending == 0


def test_wall_time_follows_the_clock() -> None:
    clock = ManualClock()
    clock.advance(90)
    assert (clock.wall() - MANUAL_EPOCH).total_seconds() == 90


def test_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        ManualClock().advance(-1)


async def test_sleep_waits_for_advance() -> None:
    clock = ManualClock()
    sleeper = asyncio.ensure_future(clock.sleep(5))
    await asyncio.sleep(0)
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(0.1)
    await asyncio.wait_for(sleeper, 1)


async def test_cancelled_sleep_leaves_no_timer() -> None:
    clock = ManualClock()
    sleeper = asyncio.ensure_future(clock.sleep(5))
    await asyncio.sleep(0)
    sleeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeper
    assert clock.pending == 0


async def test_the_next_wake_up_is_the_first_sleepers_not_a_timers() -> None:
    clock = ManualClock()
    clock.call_later(1, lambda: None)  # a transition's end, say: not a sleeper
    assert clock.next_wake_up() is None
    later = asyncio.ensure_future(clock.sleep(5))
    sooner = asyncio.ensure_future(clock.sleep(3))
    forever = asyncio.ensure_future(clock.sleep(math.inf))
    await asyncio.sleep(0)
    assert clock.next_wake_up() == 3
    clock.advance(3)
    assert clock.next_wake_up() == 5  # the woken sleeper no longer counts, resumed or not
    await sooner
    later.cancel()
    await asyncio.sleep(0)
    assert clock.next_wake_up() is None  # a sleep that never ends has no wake-up
    forever.cancel()


def test_wall_at_turns_a_reading_into_the_wall_time_of_that_moment() -> None:
    clock = ManualClock()
    clock.advance(3)
    assert clock.wall() == clock.wall_at(clock.now()) == MANUAL_EPOCH + timedelta(seconds=3)
    real = RealClock()
    before = datetime.now(timezone.utc)
    derived = real.wall_at(real.now())
    after = datetime.now(timezone.utc)
    # Derived from one offset read at construction: within any clock step since then.
    assert before - timedelta(seconds=1) <= derived <= after + timedelta(seconds=1)
    assert real.wall_at(real.now() + 60) - derived >= timedelta(seconds=59)
