"""Keep Python 3.10's asyncio backport from handing a test's context to the fake's thread.

On Python 3.10, pytest-asyncio runs each test through ``backports.asyncio.runner``, whose
``Runner.run`` creates the test's task while it has replaced the process-wide
``contextvars.copy_context`` with ``lambda: context`` (its ``_patch_object``). Any other thread
that makes an asyncio handle in that window (the background fake's loop does so all the time)
gets the test's own context instead of a copy; when that thread runs the handle while the
test's first step enters the same context, the step fails ("cannot enter context: ... is
already entered", logged, not raised) and the test hangs, its task never started.

:func:`shield` makes that patch apply to the patching thread only: ``copy_context`` becomes a
function that answers the thread's override when it has one, else a real copy. Nothing changes
on Python 3.11 and later, or without the backport.

Example::

    shield()   # before a background loop starts; idempotent
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["shield"]

#: The real ``copy_context``, taken before anything patches it.
_copy_context = contextvars.copy_context
#: Per thread: what ``copy_context`` answers while the backport patches it in that thread.
_overrides = threading.local()


def copy_context() -> contextvars.Context:
    """``contextvars.copy_context`` for the thread that calls it. Named like the original: the
    backport patches the attribute ``contextvars.copy_context.__name__``."""
    override: Callable[[], contextvars.Context] | None = getattr(_overrides, "copy", None)
    return override() if override is not None else _copy_context()


def _thread_scoped(patch: Callable[..., Any]) -> Callable[..., Any]:
    """The backport's ``_patch_object``, but a patch of ``contextvars.copy_context`` stays in
    the thread that makes it."""

    @contextlib.contextmanager
    def patch_object(target: Any, attribute: str, new: Any) -> Iterator[None]:
        if target is not contextvars or attribute != "copy_context":
            with patch(target, attribute, new):
                yield
            return
        previous = getattr(_overrides, "copy", None)
        _overrides.copy = new
        try:
            yield
        finally:
            _overrides.copy = previous

    patch_object.shields = True  # type: ignore[attr-defined]
    return patch_object


def shield() -> None:
    """Confine the asyncio backport's patch of ``contextvars.copy_context`` to its own thread
    (Python 3.10 with ``backports.asyncio.runner``; nothing otherwise).

    Example::

        shield()
        shield()   # a second call changes nothing
    """
    if sys.version_info >= (3, 11):
        return
    runner = sys.modules.get("backports.asyncio.runner.runner")
    patch = getattr(runner, "_patch_object", None)
    if patch is None or getattr(patch, "shields", False):
        return
    contextvars.copy_context = copy_context
    runner._patch_object = _thread_scoped(patch)  # type: ignore[union-attr]
