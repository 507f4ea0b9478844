"""Async callbacks handed to the interpreter that leave nothing behind if it drops a call.

bashkit takes the fake's commands (and output sinks) as coroutine functions: it calls one on
its own thread, which creates a coroutine, and schedules that coroutine on the fake's loop. A
call it gives up between the two (the command was stopped, the loop is closing) leaves a
coroutine that was never awaited, and Python warns about it whenever the garbage collector
finds it: in a test suite run with ``-W error``, in whatever test happens to be running then.

A :class:`LazyCoroutineFunction` looks like a coroutine function to ``inspect`` (which is what
bashkit checks), but calling it only makes a small awaitable; the coroutine is created when
that is awaited, so a dropped call drops nothing that warns.

Example::

    bash.add_command("__fake_cat", lazy(commands.cat))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

__all__ = ["LazyCoroutineFunction", "lazy"]

_T = TypeVar("_T")


async def _coroutine_function_template(*args: Any) -> Any:
    """Only its code object is used: the flags that make ``inspect`` see a coroutine function."""


class _Deferred(Generic[_T]):
    """An awaitable that calls its coroutine function only when awaited."""

    __slots__ = ("_args", "_function")

    def __init__(self, function: Callable[..., Awaitable[_T]], args: tuple[Any, ...]):
        self._function = function
        self._args = args

    def __await__(self) -> Generator[Any, None, _T]:
        return self._function(*self._args).__await__()


class LazyCoroutineFunction(Generic[_T]):
    """``function`` behind a call that makes no coroutine until the result is awaited.

    ``inspect.iscoroutinefunction`` says yes to it: it is "function-like" (it carries the
    attributes inspect reads, with a coroutine function's code object).
    """

    __code__ = _coroutine_function_template.__code__
    __defaults__ = None
    __kwdefaults__ = None
    __annotations__: dict[str, Any] = {}  # read by inspect, never changed

    def __init__(self, function: Callable[..., Awaitable[_T]]) -> None:
        self._function = function
        self.__name__ = getattr(function, "__name__", "callback")

    def __call__(self, *args: Any) -> _Deferred[_T]:
        return _Deferred(self._function, args)


def lazy(function: Callable[..., Awaitable[_T]]) -> LazyCoroutineFunction[_T]:
    """``function`` as a :class:`LazyCoroutineFunction`.

    Example:
        >>> import inspect
        >>> async def hello() -> str:
        ...     return "hi"
        >>> inspect.iscoroutinefunction(lazy(hello))
        True
    """
    return LazyCoroutineFunction(function)
