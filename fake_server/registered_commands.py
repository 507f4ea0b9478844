"""Commands users add to every sandbox's shell (``fake.register_command``): what such a command
sees (:class:`CommandContext`), the registry that holds them by name, and how one is called.

Example:
    >>> registry = CommandRegistry()
    >>> async def hello(ctx: CommandContext, args: list[str]) -> int:
    ...     ctx.stdout.write(b"hello\\n")
    ...     return 0
    >>> registry.register("hello", hello)
    >>> sorted(registry.names())
    ['hello']
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, KeysView
from dataclasses import dataclass

from fake_server.filesystem import FileSystem
from fake_server.streams import OutputSink, StdinReader

__all__ = ["UNSHADOWED", "CommandContext", "CommandHandler", "CommandRegistry", "call_handler"]

#: Names a registered command cannot take: the shell's keywords, and the builtins (the shells
#: among them) that the sandbox's interpreter always runs itself. Registered, it would never run.
UNSHADOWED = frozenset(
    {
        # keywords
        "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi",
        "for", "function", "if", "in", "select", "then", "time", "until", "while",
        # builtins the interpreter keeps
        ".", "bash", "builtin", "command", "declare", "eval", "exec", "export", "getopts",
        "let", "local", "return", "sh", "source", "unset",
    }
)  # fmt: skip


@dataclass
class CommandContext:
    """Everything a registered command sees: filesystem, cwd, environment, streams and the
    clock's sleep.

    Example:
        >>> async def hello(ctx: CommandContext, args: list[str]) -> int:
        ...     ctx.stdout.write(f"hello {ctx.env.get('USER', 'root')}\\n".encode())
        ...     return 0
    """

    fs: FileSystem
    cwd: str
    env: dict[str, str]
    stdin: StdinReader
    stdout: OutputSink
    stderr: OutputSink
    #: The fake clock's sleep; commands must wait on it, never on ``asyncio.sleep``.
    sleep: Callable[[float], Awaitable[None]]


#: A command: ``handler(ctx, args)`` (args exclude argv[0]) returns or resolves to the status.
CommandHandler = Callable[[CommandContext, list[str]], Awaitable[int] | int]


class CommandRegistry:
    """Commands users add to every sandbox's shell, by name; they shadow bash's own commands
    and most builtins (not those of :data:`UNSHADOWED`, which are refused).

    Example:
        >>> registry = CommandRegistry()
        >>> registry.register("python3", lambda ctx, args: 0)
        >>> registry.get("python3") is not None, registry.get("nope")
        (True, None)
    """

    def __init__(self) -> None:
        self._handlers: dict[str, CommandHandler] = {}

    def register(self, name: str, handler: CommandHandler) -> None:
        """Add (or replace) a command, sync or async."""
        if not name or "/" in name or any(c.isspace() for c in name):
            raise ValueError(f"not a command name: {name!r}")
        if name in UNSHADOWED:
            raise ValueError(
                f"{name!r} is run by the sandbox's shell itself (a keyword, or a builtin its"
                f" interpreter keeps): a registered {name} would never run"
            )
        self._handlers[name] = handler

    def unregister(self, name: str) -> None:
        """Remove ``name``; unknown names are ignored so teardown code can be unconditional."""
        self._handlers.pop(name, None)

    def get(self, name: str) -> CommandHandler | None:
        return self._handlers.get(name)

    def names(self) -> KeysView[str]:
        """The registered names, as a live view: it follows later registrations."""
        return self._handlers.keys()

    def items(self) -> list[tuple[str, CommandHandler]]:
        return list(self._handlers.items())

    def copy(self) -> CommandRegistry:
        """An independent registry with the same commands."""
        copy = CommandRegistry()
        copy._handlers = dict(self._handlers)
        return copy


async def call_handler(handler: CommandHandler, ctx: CommandContext, args: list[str]) -> int:
    """Call a registered command, sync or async."""
    result = handler(ctx, args)
    if inspect.isawaitable(result):
        result = await result
    return int(result)
