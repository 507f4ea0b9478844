"""Work that must not hold the event loop, on a thread a stopping server does not wait for.

``asyncio.to_thread`` runs it on the loop's executor, whose threads are joined when the loop
ends (``asyncio.run``) and again when Python exits: a shell's parse of its longest command
(~1 s, which nothing can cut short) kept ``fake-createos serve`` from exiting until it was
done, for a result nobody wanted any more. Here each call has a daemon thread of its own; a
result that comes after its caller gave up, or after the loop closed, is dropped.

Example::

    parse = await off_loop(analyze, bash, text)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["off_loop"]

_T = TypeVar("_T")


async def off_loop(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` on a daemon thread; its result or exception, awaited on the loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # cancelled: its caller ended first
            outcome()

    def work() -> None:
        outcome: Callable[[], None]
        try:
            outcome = functools.partial(done.set_result, function(*args))
        except BaseException as exc:  # handed to the awaiting caller
            outcome = functools.partial(done.set_exception, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="fake-createos-worker", daemon=True).start()
    return await done
