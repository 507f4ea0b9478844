"""Clocks for the fake: real time by default, or a manual clock that tests step forward.

Everything in the fake that waits (lifecycle transitions, ``sleep`` commands, latency faults,
long-poll timeouts) waits on a :class:`Clock`, never on ``asyncio.sleep`` directly, so a test with
a :class:`ManualClock` can move time forward and see the effect without real waiting.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Protocol

__all__ = ["Clock", "ManualClock", "RealClock", "TimerHandle", "isoformat"]

#: Where a manual clock starts its wall time: fixed, so seeded runs are reproducible byte for byte.
MANUAL_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
#: How far a manual clock may go (dates past it stop being representable a few steps later).
LATEST = datetime(9000, 1, 1, tzinfo=timezone.utc)


def isoformat(moment: datetime) -> str:
    """RFC 3339 with a ``Z`` suffix, the form every client parses."""
    return moment.isoformat().replace("+00:00", "Z")


class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """What the fake needs from time.

    Example::

        clock = ManualClock()
        clock.call_later(2.0, fired.append, "done")
        clock.advance(2.0)   # fires the callback
    """

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> datetime:
        """The current UTC wall time (for ``created_at`` and friends)."""
        ...

    def wall_at(self, moment: float) -> datetime:
        """The UTC wall time at ``moment`` (a reading of :meth:`now`), so that a hot path can
        keep the cheap monotonic reading and turn it into a date only when someone looks."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...

    def call_later(
        self, delay: float, callback: Callable[..., object], *args: object
    ) -> TimerHandle:
        """Run ``callback(*args)`` after ``delay`` seconds of this clock's time."""
        ...


class RealClock:
    """Real time on the running event loop.

    Example::

        clock = RealClock()
        await clock.sleep(0.01)
    """

    manual = False

    def __init__(self) -> None:
        # Wall time minus monotonic time, read once: ``wall_at`` is then exact up to whatever
        # the system clock is stepped or slewed by later (nothing a journal reader can see).
        self._epoch = time.time() - time.monotonic()

    #: The event loop's own clock (asyncio's loop.time() is time.monotonic()), as the builtin
    #: itself: the request layer reads it twice per request, and a method around it would add
    #: a Python call each time.
    now = staticmethod(time.monotonic)

    def wall(self) -> datetime:
        return datetime.now(timezone.utc)

    def wall_at(self, moment: float) -> datetime:
        return datetime.fromtimestamp(self._epoch + moment, timezone.utc)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(
        self, delay: float, callback: Callable[..., object], *args: object
    ) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback, *args)


class _ManualTimer:
    __slots__ = ("args", "callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[..., object], args: tuple[object, ...]):
        self.when = when
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when the test calls :meth:`advance`.

    Timers fire in due order during ``advance``; tasks sleeping on the clock wake up once the
    event loop runs again. Must be used from the fake's event loop (the thread-mode handle of
    :mod:`fake_server.runner` hands calls to that loop for you).

    Example::

        clock = ManualClock()
        fake = FakeCreateOS(ServerConfig(manual_clock=True))
        ...
        fake.clock.advance(5)   # pausing sandboxes become paused, `sleep 5` returns
    """

    manual = True

    def __init__(self, start: datetime = MANUAL_EPOCH) -> None:
        self._start = start
        self._now = 0.0
        self._timers: list[tuple[float, int, _ManualTimer]] = []
        self._order = itertools.count()
        #: The timers of the tasks in :meth:`sleep` now (see next_wake_up).
        self._sleeps: set[_ManualTimer] = set()

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return self.wall_at(self._now)

    def wall_at(self, moment: float) -> datetime:
        return self._start + timedelta(seconds=moment)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self._schedule(seconds, _resolve, (future,))
        self._sleeps.add(timer)
        try:
            await future
        finally:
            timer.cancel()
            self._sleeps.discard(timer)

    def call_later(
        self, delay: float, callback: Callable[..., object], *args: object
    ) -> TimerHandle:
        return self._schedule(delay, callback, args)

    def _schedule(
        self, delay: float, callback: Callable[..., object], args: tuple[object, ...]
    ) -> _ManualTimer:
        timer = _ManualTimer(self._now + max(0.0, delay), callback, args)
        heapq.heappush(self._timers, (timer.when, next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> int:
        """Move time forward by ``seconds`` and fire every timer now due; return how many fired.

        Raises ``ValueError`` (and changes nothing) for a negative or non-finite step, or one
        that would take the wall time past the year 9000: every date the fake shows must stay
        a date.
        """
        if seconds < 0:
            raise ValueError("the clock cannot go backwards")
        target = self._now + seconds
        if not math.isfinite(target) or target > (LATEST - self._start).total_seconds():
            raise ValueError(f"the clock cannot pass {LATEST.year}: advance by less")
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            # Time steps to each timer's due time so callbacks see the moment they were due.
            self._now = max(self._now, when)
            timer.callback(*timer.args)
            fired += 1
        self._now = target
        return fired

    def next_wake_up(self) -> float | None:
        """When (clock time) the first task sleeping on this clock (:meth:`sleep`: a ``sleep``
        command, a latency fault) wakes, if one ever does; timers set with :meth:`call_later`
        (a transition's end) do not count. A schedule explorer moves the clock there when
        nothing else can happen.

        Example::

            clock = ManualClock()
            napping = asyncio.ensure_future(clock.sleep(3))
            await asyncio.sleep(0)
            assert clock.next_wake_up() == 3.0
        """
        # A timer already fired (its sleeper not yet resumed) is behind the clock.
        due = [t.when for t in self._sleeps if not t.cancelled and t.when > self._now]
        soonest = min(due, default=math.inf)
        return soonest if math.isfinite(soonest) else None

    @property
    def pending(self) -> int:
        """How many timers are still waiting."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
