"""Knowing that the host has sent all it will send, without sleeping: the fake runs on the
test's own event loop, so the explorer can look at that loop.

The host is *quiescent* when the loop has nothing ready to run (no callback, no socket with
data) and no timer of the host's is due soon. The host's timers are told apart by a context
variable the explorer sets in every host task (timers inherit their creator's context). A host
that sleeps (a poll interval, a backoff) is not waited for in real time: the loop's clock is
moved to the timer instead (:class:`VirtualTime`), and the fake's manual clock with it, so
every clock the host and the checks read agrees.

A command of the fake's that sleeps on its manual clock (``sleep 3``) runs until nothing else
can happen: then the clocks move to the host's next timer or to the command's wake-up,
whichever is first (:meth:`Quiescence.jump_to_next_timer`).

This reads two attributes private to asyncio's own event loop (its ready queue and its timer
heap); another loop (uvloop) is refused with a clear error.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["HOST_TASK", "ExploreError", "Quiescence", "VirtualTime", "host_task"]

T = TypeVar("T")

#: Set in every task the explorer starts for the host (and so in every task and timer the
#: host creates from there).
HOST_TASK: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "createos_host_task", default=False
)
#: Loop turns with nothing to run before the loop counts as idle: a request written to a
#: loopback socket is readable at the next turn's select.
IDLE_TURNS = 2
#: Loop turns one settling may take before the host is declared never settling.
MAX_TURNS = 200_000
#: How long (real seconds) the explorer lets the fake's shell work on another thread while
#: the loop is idle, before it counts what still runs as long-lived: the one real wait of the
#: explorer. Commands waiting on the loop (for their stdin, in a ``sleep`` on the clock) are
#: known not to compute and never cost it; a busy machine may hold a computing thread back.
DEFAULT_BUSY_SETTLE_S = 1.0
#: How often the loop is looked at again meanwhile (real seconds).
BUSY_POLL_S = 0.0002

UNSUPPORTED_LOOP = (
    "the explorer needs asyncio's own event loop (it reads its ready queue and timers to know "
    "when the host has settled); this test runs on {loop}"
)
NEVER_SETTLES = (
    "the host never settled: after {turns} event-loop turns something was still ready to run "
    "(a busy loop that never awaits a request or a timer?)"
)


class ExploreError(RuntimeError):
    """The explorer cannot run here (wrong fake or loop), or the host never settles.

    Example:
        >>> str(ExploreError("no fake"))
        'no fake'
    """


async def _marked(coroutine: Coroutine[Any, Any, T]) -> T:
    HOST_TASK.set(True)
    return await coroutine


def host_task(coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start ``coroutine`` as a host task: it, and every task and timer it creates, carries
    :data:`HOST_TASK`."""
    return asyncio.ensure_future(_marked(coroutine))


class VirtualTime:
    """The running loop's clock, shifted forward on demand (``loop.time`` is replaced while
    installed); ``on_jump(seconds)`` is told of every shift.

    Example::

        with VirtualTime(loop, fake.clock.advance) as time:
            time.jump(0.5)   # host sleeps of 0.5 s are now due
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, on_jump: Callable[[float], Any]) -> None:
        self._loop = loop
        self._on_jump = on_jump
        self.offset = 0.0
        self._real = loop.time

    def __enter__(self) -> VirtualTime:
        real = self._real

        def shifted() -> float:
            return real() + self.offset

        self._loop.time = shifted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self._loop.time  # the class's own method shows through again

    def jump(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (nothing for zero or less)."""
        if seconds > 0:
            self.offset += seconds
            self._on_jump(seconds)


class Quiescence:
    """Waits until the host is quiescent, moving virtual time to host timers due within
    ``horizon_s`` (later ones are timeouts, not the host's next move). While ``busy()`` (the
    fake's shell runs a command on its interpreter's thread), an idle loop may only be waiting
    for that thread: it is looked at again for up to ``busy_settle_s`` real seconds.
    ``fake_wake_up()`` says in how many seconds the fake's next sleeper (a ``sleep`` command
    on its clock) wakes, if any: :meth:`jump_to_next_timer` may move time there.

    Example::

        settle = Quiescence(loop, time, horizon_s=5.0, busy=lambda: shell.computing > 0)
        await settle()
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        time: VirtualTime,
        horizon_s: float,
        *,
        busy: Callable[[], bool] = lambda: False,
        busy_settle_s: float = DEFAULT_BUSY_SETTLE_S,
        fake_wake_up: Callable[[], float | None] = lambda: None,
        max_turns: int = MAX_TURNS,
    ):
        ready = getattr(loop, "_ready", None)
        scheduled = getattr(loop, "_scheduled", None)
        if ready is None or scheduled is None:
            raise ExploreError(UNSUPPORTED_LOOP.format(loop=type(loop).__name__))
        self._loop = loop
        self._ready = ready
        self._time = time
        self.horizon_s = horizon_s
        self._busy = busy
        self.busy_settle_s = busy_settle_s
        self._fake_wake_up = fake_wake_up
        self.max_turns = max_turns
        #: Loop turns spent settling so far (the benchmark reports them).
        self.turns = 0

    def next_host_timer(self, horizon_s: float | None) -> float | None:
        """When the host's next timer is due (loop time), if within ``horizon_s`` (any, for
        ``None``)."""
        now = self._loop.time()
        # Read afresh every time: the loop replaces its timer heap when it sheds cancelled
        # timers.
        scheduled: list[asyncio.TimerHandle] = self._loop._scheduled  # type: ignore[attr-defined]
        due = [
            timer.when()
            for timer in scheduled
            if not timer.cancelled() and timer._context.get(HOST_TASK)  # type: ignore[attr-defined]  # asyncio's own
        ]
        if not due:
            return None
        soonest = min(due)
        if horizon_s is not None and soonest - now > horizon_s:
            return None
        return soonest

    def jump_to_next_timer(self) -> bool:
        """Move virtual time, however far, to the host's next timer (a timeout) or the fake's
        next sleeper, whichever is first: for when the host waits for nothing else. Returns
        whether there was one."""
        delays = []
        due = self.next_host_timer(None)
        if due is not None:
            delays.append(due - self._loop.time())
        wake_up = self._fake_wake_up()
        if wake_up is not None:
            delays.append(wake_up)
        if not delays:
            return False
        self._time.jump(min(delays))
        return True

    async def __call__(self) -> None:
        """Return once the loop is idle and no host timer is due within the horizon."""
        horizon = self.horizon_s
        idle = 0
        busy_since: float | None = None
        for _ in range(self.max_turns):
            await asyncio.sleep(0)
            self.turns += 1
            if self._ready:
                idle, busy_since = 0, None
                continue
            idle += 1
            if idle < IDLE_TURNS:
                continue
            due = self.next_host_timer(horizon)
            if due is not None:
                self._time.jump(due - self._loop.time())
                idle = 0
                continue
            if not self._busy():
                return
            now = time.monotonic()
            busy_since = now if busy_since is None else busy_since
            if now - busy_since >= self.busy_settle_s:
                return
            await asyncio.sleep(BUSY_POLL_S)
            idle = 0
        raise ExploreError(NEVER_SETTLES.format(turns=self.max_turns))
