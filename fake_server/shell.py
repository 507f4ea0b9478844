"""A small bash emulator over a sandbox's in-memory :class:`FileSystem`.

Nothing here runs on the host. :meth:`Shell.run` executes one argv the way the real ``/exec``
endpoint does (no shell); ``bash -c SCRIPT`` (and ``sh``) hands the script to a real, if small,
tokenizer + parser + interpreter for a bash subset:

* words with single/double quotes, backslash escapes, ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
  ``$?``, ``$#``, ``$@``, ``$0``..``$9``, a leading ``~``; adjacent parts concatenate;
* ``VAR=value cmd``, bare ``VAR=value``, ``export``, ``unset``, ``set -e``;
* ``;``, newlines, ``&&``, ``||``, ``|`` and ``!``; ``#`` comments;
* redirections ``<``, ``>``, ``>>``, ``2>``, ``2>>``, ``2>&1``, ``>&2``, ``&>``, ``&>>``, with the
  virtual ``/dev/null``, ``/dev/stdin``, ``/dev/stdout`` and ``/dev/stderr``;
* the commands in :data:`BUILTIN_NAMES` plus ``cd``, ``exit``, ``exec``, ``env``, ``timeout``,
  ``bash`` and ``sh``, and any command registered in a :class:`CommandRegistry`.

Deliberate simplifications (documented so nobody mistakes them for bugs):

* unquoted expansions are **not** word-split or globbed: ``$A`` is always one argument
  (except a word that is exactly ``$@``/``"$@"``, which becomes one argument per parameter);
* there are no arrays, functions, arithmetic, ``if``/``for``, subshells, here-documents,
  background jobs or command substitution: they fail like syntax errors (exit 2, nothing runs);
* a script is parsed completely before it runs, so a syntax error anywhere means nothing runs;
* pipelines run their stages one after another, each stage's output buffered into the next
  stage's stdin; each stage of a multi-stage pipeline runs in a copy of the shell state;
* the builtins implement the options real scripts use, not all of them: ``ls`` prints every
  name one per line, ``wc`` separates counts by one space, ``set`` only honours ``-e``.

Example:
    >>> import asyncio
    >>> fs, out = FileSystem(), BufferSink()
    >>> ctx = CommandContext(fs, "/root", {}, StdinReader(), out, BufferSink(), asyncio.sleep)
    >>> shell = Shell(CommandRegistry.with_builtins())
    >>> asyncio.run(shell.run("bash", ["-c", "cd /tmp && echo hi > x; cat x"], ctx))
    0
    >>> out.getvalue()
    b'hi\\n'
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import posixpath
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, NoReturn, Protocol, TypeVar

from fake_server.filesystem import FileSystem, FsError

__all__ = [
    "BUILTIN_NAMES",
    "BufferSink",
    "CommandContext",
    "CommandHandler",
    "CommandRegistry",
    "OutputSink",
    "Shell",
    "StdinReader",
]

# -- user-facing messages -------------------------------------------------------------------------

COMMAND_NOT_FOUND = "bash: {name}: command not found"
NO_SUCH_FILE = "bash: {name}: No such file or directory"
EXEC_NOT_FOUND = "bash: exec: {name}: not found"
ENV_NOT_FOUND = "env: '{name}': No such file or directory"
TIMEOUT_NOT_FOUND = "timeout: failed to run command '{name}': No such file or directory"
SYNTAX_ERROR = "syntax error near unexpected token `{token}'"
UNEXPECTED_EOF = "syntax error: unexpected end of file"
UNMATCHED_QUOTE = "unexpected EOF while looking for matching `{quote}'"
BAD_SUBSTITUTION = "${{{text}}}: bad substitution"
UNSUPPORTED = "{what} is not supported by the fake shell"
BAD_FD = "{fd}: Bad file descriptor"
AMBIGUOUS_REDIRECT = "{target}: ambiguous redirect"
CD_ERROR = "bash: cd: {path}: {reason}"
NOT_AN_IDENTIFIER = "bash: {command}: `{name}': not a valid identifier"
EXIT_NOT_NUMERIC = "bash: exit: {arg}: numeric argument required"
BASH_OPTION_NEEDS_ARG = "-c: option requires an argument"
STDIN_FED_AFTER_CLOSE = "stdin is closed"
INVALID_OPTION = "invalid option -- '{option}'"
UNRECOGNIZED_OPTION = "unrecognized option '{option}'"
OPTION_NEEDS_ARG = "option requires an argument -- '{option}'"
MISSING_OPERAND = "missing operand"
INVALID_INTERVAL = "invalid time interval '{value}'"
INVALID_COUNT = "invalid number of lines: '{value}'"
INVALID_NUMBER = "bash: printf: {value}: invalid number"
PRINTF_USAGE = "usage: printf [-v var] format [arguments]"
TEST_ERROR = "bash: {command}: {reason}"
NOT_A_DIRECTORY_TARGET = "target '{path}' is not a directory"
CANNOT_STAT = "cannot stat '{path}': No such file or directory"

#: Directories whose executables are looked up by basename (``/bin/cat`` is ``cat``).
BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})

#: ``timeout``'s exit status when the command ran out of time (137 when the signal is KILL).
TIMEOUT_STATUS = 124
TIMEOUT_KILL_STATUS = 137

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_SUFFIX_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_T = TypeVar("_T")


# -- streams ------------------------------------------------------------------------------------


class StdinReader:
    """A command's stdin: bytes fed over time, then closed (EOF).

    Example:
        >>> import asyncio
        >>> reader = StdinReader(closed=False)
        >>> reader.feed(b"a")
        >>> reader.close()
        >>> asyncio.run(reader.read())
        b'a'
    """

    def __init__(self, data: bytes = b"", *, closed: bool = True) -> None:
        self._buffer = bytearray(data)
        self._closed = closed
        # Created on first wait so a reader can be built outside a running loop.
        self._changed: asyncio.Event | None = None

    @property
    def closed(self) -> bool:
        """Whether EOF has been signalled (buffered bytes may still be unread)."""
        return self._closed

    def feed(self, data: bytes) -> None:
        """Append ``data`` for the reader; a ``ValueError`` once closed."""
        if self._closed:
            raise ValueError(STDIN_FED_AFTER_CLOSE)
        self._buffer += data
        self._wake()

    def close(self) -> None:
        """Signal EOF (idempotent)."""
        self._closed = True
        self._wake()

    async def read(self) -> bytes:
        """Everything until EOF: waits for :meth:`close`, at once if already closed."""
        while not self._closed:
            await self._wait()
        return self._take()

    async def read_chunk(self) -> bytes:
        """Whatever is buffered, waiting for some if needed; ``b""`` means EOF.

        This lets ``cat`` or ``tee`` echo input as it arrives (an interactive process).
        """
        while not self._buffer and not self._closed:
            await self._wait()
        return self._take()

    def _take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data

    async def _wait(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.clear()
        await self._changed.wait()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()


class OutputSink(Protocol):
    """Where a command's stdout or stderr bytes go, as they are written.

    Example:
        >>> class Lines:
        ...     def __init__(self) -> None:
        ...         self.lines: list[bytes] = []
        ...     def write(self, data: bytes) -> None:
        ...         self.lines.extend(data.splitlines())
    """

    def write(self, data: bytes) -> None: ...


class BufferSink:
    """An :class:`OutputSink` that collects everything written.

    Example:
        >>> sink = BufferSink()
        >>> sink.write(b"a"); sink.write(b"b")
        >>> sink.getvalue()
        b'ab'
    """

    def __init__(self) -> None:
        self._data = bytearray()

    def write(self, data: bytes) -> None:
        self._data += data

    def getvalue(self) -> bytes:
        return bytes(self._data)


class _NullSink:
    """``/dev/null``: writes vanish."""

    def write(self, data: bytes) -> None:
        pass


class _FileSink:
    """Appends each write to a file, reporting the first failure (e.g. ``EFBIG``) once."""

    def __init__(self, fs: FileSystem, path: str, display: str, errors: OutputSink) -> None:
        self._fs = fs
        self._path = path
        self._display = display
        self._errors: OutputSink | None = errors

    def write(self, data: bytes) -> None:
        try:
            self._fs.write(self._path, data, append=True)
        except FsError as exc:
            if self._errors is not None:
                _say(self._errors, f"{self._display}: {exc}")
                self._errors = None


# -- commands -----------------------------------------------------------------------------------


@dataclass
class CommandContext:
    """Everything a command sees: filesystem, cwd, environment, streams and the clock's sleep.

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
_Builtin = Callable[[CommandContext, list[str]], Awaitable[int]]


class CommandRegistry:
    """Commands by name: user-registered handlers shadow the built-in ones.

    Example:
        >>> registry = CommandRegistry.with_builtins()
        >>> registry.register("python3", lambda ctx, args: 0)
        >>> registry.get("python3") is not None, registry.get("nope")
        (True, None)
    """

    def __init__(self) -> None:
        self._user: dict[str, CommandHandler] = {}
        self._builtins: dict[str, CommandHandler] = {}

    @classmethod
    def with_builtins(cls) -> CommandRegistry:
        """A registry holding the commands in :data:`BUILTIN_NAMES`."""
        registry = cls()
        registry._builtins = {name: _guarded(name, fn) for name, fn in _BUILTINS.items()}
        return registry

    def register(self, name: str, handler: CommandHandler) -> None:
        """Add (or replace) a user command, sync or async; it wins over a builtin."""
        self._user[name] = handler

    def unregister(self, name: str) -> None:
        """Remove the user command ``name`` (re-exposing a builtin it shadowed), or else the
        builtin itself; unknown names are ignored so teardown code can be unconditional."""
        if self._user.pop(name, None) is None:
            self._builtins.pop(name, None)

    def get(self, name: str) -> CommandHandler | None:
        """The handler for ``name``, user commands first."""
        return self._user.get(name) or self._builtins.get(name)

    def copy(self) -> CommandRegistry:
        """An independent registry with the same commands."""
        copy = CommandRegistry()
        copy._user = dict(self._user)
        copy._builtins = dict(self._builtins)
        return copy


class _UsageError(Exception):
    """A command was invoked wrongly; its builtin wrapper reports ``NAME: message`` and exits
    with ``status``, or the command's usual usage status if ``None``."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _ShellSyntaxError(Exception):
    """The script cannot be parsed (exit 2)."""


class _ScriptExit(Exception):
    """``exit``/``exec``/``set -e`` ends the running script with ``status``."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _say(sink: OutputSink, text: str) -> None:
    sink.write(_encode(text + "\n"))


def _error(ctx: CommandContext, text: str) -> int:
    """Report ``text`` on stderr; returns 1 so builtins can ``status = _error(...)``."""
    _say(ctx.stderr, text)
    return 1


def _encode(text: str) -> bytes:
    # surrogateescape carries raw bytes from octal/hex escapes (printf '\377') through str.
    return text.encode("utf-8", "surrogateescape")


def _guarded(name: str, builtin: _Builtin, usage_status: int = 1) -> CommandHandler:
    async def handler(ctx: CommandContext, args: list[str]) -> int:
        try:
            return await builtin(ctx, args)
        except _UsageError as exc:
            _say(ctx.stderr, f"{name}: {exc}")
            return usage_status if exc.status is None else exc.status

    return handler


def _parse_options(
    args: list[str],
    flags: str,
    valued: str = "",
    *,
    long: Mapping[str, str] | None = None,
    stop_at_operand: bool = False,
) -> tuple[dict[str, str], list[str]]:
    """GNU-style options: clusters (``-rf``), values (``-n 3``/``-n3``/``--long=V``), ``--``.

    ``long`` maps long options to their letter. Options may follow operands unless
    ``stop_at_operand`` (for commands whose operands include another command's argv).
    Returns ``({letter: value or ""}, operands)``.
    """
    options: dict[str, str] = {}
    operands: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            operands.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
            if stop_at_operand:
                operands.extend(rest)
                break
            continue
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            letter = (long or {}).get(name)
            if letter is None:
                raise _UsageError(UNRECOGNIZED_OPTION.format(option=arg))
            arg = f"-{letter}{value}" if has_value else f"-{letter}"
        for index, letter in enumerate(arg[1:], start=2):
            if letter in valued:
                option_value = arg[index:] or next(rest, None)
                if option_value is None:
                    raise _UsageError(OPTION_NEEDS_ARG.format(option=letter))
                options[letter] = option_value
                break
            if letter not in flags:
                raise _UsageError(INVALID_OPTION.format(option=letter))
            options[letter] = ""
    return options, operands


def _resolve_path(ctx: CommandContext, path: str) -> str:
    return FileSystem.normalize(path, ctx.cwd)


async def _stdin_chunks(ctx: CommandContext) -> AsyncIterator[bytes]:
    while chunk := await ctx.stdin.read_chunk():
        yield chunk


async def _read_operand(ctx: CommandContext, operand: str) -> bytes:
    """A file operand's bytes: ``-`` is stdin, ``/dev/null`` is empty."""
    if operand in ("-", "/dev/stdin"):
        return await ctx.stdin.read()
    if operand == "/dev/null":
        return b""
    return ctx.fs.read(_resolve_path(ctx, operand))


def _parse_duration(text: str) -> float | None:
    """``sleep``/``timeout`` intervals: a non-negative number with an optional s/m/h/d suffix."""
    multiplier = _SUFFIX_SECONDS.get(text[-1:], 1.0)
    number = text[:-1] if text[-1:] in _SUFFIX_SECONDS else text
    try:
        seconds = float(number) * multiplier
    except ValueError:
        return None
    return None if math.isnan(seconds) or seconds < 0 else seconds


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
}
# Sets, not strings: ``"" in "0123"`` is true, and slices past the end are "".
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")


def _byte(value: int) -> str:
    # Bytes >= 0x80 ride as surrogates so _encode() restores the exact byte.
    return chr(value) if value < 0x80 else chr(0xDC00 + value)


def _decode_escapes(text: str, *, in_format: bool) -> tuple[str, bool]:
    """Backslash escapes as ``echo -e``/``%b`` (``\\0NNN``) or a printf format (``\\NNN``, ``\\"``)
    interpret them. Returns the text and whether ``\\c`` asked to stop all output."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        following = text[index + 1 : index + 2]
        index += 1
        if char != "\\" or not following:
            out.append(char)
            continue
        index += 1
        if following in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[following])
        elif following == "c" and not in_format:
            return "".join(out), True
        elif following == '"' and in_format:
            out.append('"')
        elif following in _OCTAL and (in_format or following == "0"):
            # printf reads up to 3 octal digits after the backslash; echo up to 3 after a 0.
            start = index - 1 if in_format else index
            end = start
            while end < min(start + 3, len(text)) and text[end] in _OCTAL:
                end += 1
            out.append(_byte(int(text[start:end] or "0", 8) & 0xFF))
            index = end
        elif following == "x" and text[index : index + 1] in _HEX:
            end = index + 1 + (text[index + 1 : index + 2] in _HEX)
            out.append(_byte(int(text[index:end], 16)))
            index = end
        else:
            out.append("\\" + following)
    return "".join(out), False


# -- builtins -------------------------------------------------------------------------------------


async def _true(ctx: CommandContext, args: list[str]) -> int:
    return 0


async def _false(ctx: CommandContext, args: list[str]) -> int:
    return 1


async def _echo(ctx: CommandContext, args: list[str]) -> int:
    newline, escapes = True, False
    first = 0
    while first < len(args) and re.fullmatch(r"-[neE]+", args[first]):
        for letter in args[first][1:]:
            newline = newline and letter != "n"
            escapes = letter == "e" or (escapes and letter != "E")
        first += 1
    text = " ".join(args[first:])
    stopped = False
    if escapes:
        text, stopped = _decode_escapes(text, in_format=False)
    ctx.stdout.write(_encode(text + ("\n" if newline and not stopped else "")))
    return 0


_FORMAT_SPEC = re.compile(r"%([-+ 0#]*)(\d*)(?:\.(\d*))?([sbcdiouxXfeEgG%])")


def _printf_number(value: str, conversion: str) -> int | float | None:
    """A printf numeric argument (ints with 0x/0 prefixes, floats, ``'c`` char codes), or
    ``None`` if ``value`` is not a number."""
    if value[:1] in ("'", '"'):
        return ord(value[1:2]) if value[1:] else 0
    try:
        if conversion in "feEgG":
            return float(value or 0)
        if re.fullmatch(r"[-+]?0[0-7]+", value):
            return int(value, 8)
        return int(value or "0", 0)
    except ValueError:
        return None


async def _printf(ctx: CommandContext, args: list[str]) -> int:
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        raise _UsageError(PRINTF_USAGE, status=2)
    fmt, values = args[0], args[1:]
    out: list[str] = []
    used = 0
    status = 0
    while True:
        consumed_any = False
        position = 0
        while position < len(fmt):
            match = _FORMAT_SPEC.match(fmt, position) if fmt[position] == "%" else None
            if match is None:
                # A literal run up to the next conversion; escapes apply to the format only.
                end = fmt.find("%", position + 1)
                end = len(fmt) if end == -1 else end
                out.append(_decode_escapes(fmt[position:end], in_format=True)[0])
                position = end
                continue
            position = match.end()
            flags, width, precision, conversion = match.groups()
            if conversion == "%":
                out.append("%")
                continue
            value = values[used] if used < len(values) else ""
            used += 1
            consumed_any = True
            spec = f"%{flags}{width}" + (f".{precision or 0}" if precision is not None else "")
            if conversion in "sbc":
                if conversion == "b":
                    value, stopped = _decode_escapes(value, in_format=False)
                    if stopped:
                        out.append((spec + "s") % value)
                        ctx.stdout.write(_encode("".join(out)))
                        return status
                out.append((spec + "s") % (value[:1] if conversion == "c" else value))
                continue
            number = _printf_number(value, conversion)
            if number is None:
                status = _error(ctx, INVALID_NUMBER.format(value=value))
                number = 0
            python_conversion = {"i": "d", "u": "d"}.get(conversion, conversion)
            out.append((spec + python_conversion) % number)
        if not consumed_any or used >= len(values):
            break
    ctx.stdout.write(_encode("".join(out)))
    return status


async def _pwd(ctx: CommandContext, args: list[str]) -> int:
    _say(ctx.stdout, ctx.cwd)
    return 0


async def _cat(ctx: CommandContext, args: list[str]) -> int:
    _, operands = _parse_options(args, "")
    status = 0
    for operand in operands or ["-"]:
        if operand in ("-", "/dev/stdin"):
            async for chunk in _stdin_chunks(ctx):
                ctx.stdout.write(chunk)
            continue
        try:
            ctx.stdout.write(await _read_operand(ctx, operand))
        except FsError as exc:
            status = _error(ctx, f"cat: {operand}: {exc}")
    return status


def _each_operand(
    ctx: CommandContext,
    operands: list[str],
    action: Callable[[str], object],
    failure: str,
) -> int:
    """Apply ``action`` to each resolved operand; a failing one is reported with ``failure``
    (formatted with ``operand`` and ``error``) and makes the status 1, the rest still run."""
    status = 0
    for operand in operands:
        try:
            action(_resolve_path(ctx, operand))
        except FsError as exc:
            status = _error(ctx, failure.format(operand=operand, error=exc))
    return status


async def _mkdir(ctx: CommandContext, args: list[str]) -> int:
    options, operands = _parse_options(args, "p")
    if not operands:
        raise _UsageError(MISSING_OPERAND)
    parents = "p" in options
    return _each_operand(
        ctx,
        operands,
        lambda path: ctx.fs.mkdir(path, parents=parents),
        "mkdir: cannot create directory '{operand}': {error}",
    )


async def _rm(ctx: CommandContext, args: list[str]) -> int:
    options, operands = _parse_options(args, "frR")
    force = "f" in options
    if not operands and not force:
        raise _UsageError(MISSING_OPERAND)
    recursive = "r" in options or "R" in options
    return _each_operand(
        ctx,
        operands,
        lambda path: ctx.fs.remove(path, recursive=recursive, force=force),
        "rm: cannot remove '{operand}': {error}",
    )


async def _touch(ctx: CommandContext, args: list[str]) -> int:
    _, operands = _parse_options(args, "")
    if not operands:
        raise _UsageError(MISSING_OPERAND)
    # An empty append creates a missing file and leaves an existing one alone.
    return _each_operand(
        ctx,
        operands,
        lambda path: ctx.fs.write(path, b"", append=True),
        "touch: cannot touch '{operand}': {error}",
    )


async def _ls(ctx: CommandContext, args: list[str]) -> int:
    # -1/-a/-A are accepted for compatibility: output is always one name per line, all names.
    _, operands = _parse_options(args, "1aA")
    status = 0
    for operand in operands or ["."]:
        try:
            path = _resolve_path(ctx, operand)
            if not ctx.fs.exists(path):
                raise FsError("ENOENT", path)
        except FsError as exc:
            _error(ctx, f"ls: cannot access '{operand}': {exc}")
            status = 2
            continue
        names = ctx.fs.listdir(path) if ctx.fs.is_dir(path) else [operand]
        ctx.stdout.write(b"".join(_encode(name + "\n") for name in names))
    return status


_UNARY_TESTS: dict[str, Callable[[CommandContext, str], bool]] = {
    "-n": lambda ctx, value: value != "",
    "-z": lambda ctx, value: value == "",
    "-e": lambda ctx, value: _path_check(ctx, value, FileSystem.exists),
    "-f": lambda ctx, value: _path_check(ctx, value, FileSystem.is_file),
    "-d": lambda ctx, value: _path_check(ctx, value, FileSystem.is_dir),
    "-s": lambda ctx, value: _path_check(
        ctx, value, lambda fs, path: fs.is_file(path) and bool(fs.read(path))
    ),
}
_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "=": str.__eq__,
    "==": str.__eq__,
    "!=": str.__ne__,
}
_INTEGER_TESTS: dict[str, Callable[[int, int], bool]] = {
    "-eq": int.__eq__,
    "-ne": int.__ne__,
    "-lt": int.__lt__,
    "-le": int.__le__,
    "-gt": int.__gt__,
    "-ge": int.__ge__,
}


def _path_check(ctx: CommandContext, value: str, check: Callable[[FileSystem, str], bool]) -> bool:
    try:
        return check(ctx.fs, _resolve_path(ctx, value))
    except FsError:
        return False


def _integer(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise _UsageError(f"{value}: integer expression expected") from None


def _evaluate_test(ctx: CommandContext, args: list[str]) -> bool:
    """POSIX ``test`` by argument count (no ``-a``/``-o``/parentheses)."""
    if len(args) == 0:
        return False
    if len(args) == 1:
        return args[0] != ""
    if args[0] == "!" and len(args) != 3:
        return not _evaluate_test(ctx, args[1:])
    if len(args) == 2:
        if args[0] not in _UNARY_TESTS:
            raise _UsageError(f"{args[0]}: unary operator expected")
        return _UNARY_TESTS[args[0]](ctx, args[1])
    if len(args) == 3:
        left, operator, right = args
        if operator in _STRING_TESTS:
            return _STRING_TESTS[operator](left, right)
        if operator in _INTEGER_TESTS:
            return _INTEGER_TESTS[operator](_integer(left), _integer(right))
        if left == "!":
            return not _evaluate_test(ctx, args[1:])
        raise _UsageError(f"{operator}: binary operator expected")
    raise _UsageError("too many arguments")


def _test_command(name: str) -> _Builtin:
    """``test`` or ``[`` (which insists on a closing ``]``); errors exit 2 like bash."""

    async def handler(ctx: CommandContext, args: list[str]) -> int:
        if name == "[":
            if args[-1:] != ["]"]:
                _say(ctx.stderr, TEST_ERROR.format(command=name, reason="missing `]'"))
                return 2
            args = args[:-1]
        try:
            return 0 if _evaluate_test(ctx, args) else 1
        except _UsageError as exc:
            _say(ctx.stderr, TEST_ERROR.format(command=name, reason=exc))
            return 2

    return handler


async def _sleep(ctx: CommandContext, args: list[str]) -> int:
    if not args:
        raise _UsageError(MISSING_OPERAND)
    total = 0.0
    for arg in args:
        seconds = _parse_duration(arg)
        if seconds is None:
            raise _UsageError(INVALID_INTERVAL.format(value=arg))
        total += seconds
    await ctx.sleep(total)
    return 0


def _head_tail(name: str) -> _Builtin:
    """``head``/``tail`` with ``-n N``, ``-N``, ``-c N`` (and ``tail -n +N``)."""

    async def handler(ctx: CommandContext, args: list[str]) -> int:
        args = [f"-n{arg[1:]}" if re.fullmatch(r"-\d+", arg) else arg for arg in args]
        options, operands = _parse_options(args, "", valued="nc")
        unit = "c" if "c" in options else "n"
        raw = options.get(unit, "10")
        try:
            count = int(raw)
        except ValueError:
            raise _UsageError(INVALID_COUNT.format(value=raw)) from None
        status = 0
        for operand in operands or ["-"]:
            try:
                data = await _read_operand(ctx, operand)
            except FsError as exc:
                status = _error(ctx, f"{name}: cannot open '{operand}' for reading: {exc}")
                continue
            items: Sequence[bytes] = (
                [data[i : i + 1] for i in range(len(data))]
                if unit == "c"
                else data.splitlines(keepends=True)
            )
            if name == "head":
                chosen = items[:count]
            elif raw.startswith("+"):
                chosen = items[max(count - 1, 0) :]
            else:
                chosen = items[len(items) - abs(count) :] if count else []
            ctx.stdout.write(b"".join(chosen))
        return status

    return handler


async def _wc(ctx: CommandContext, args: list[str]) -> int:
    options, operands = _parse_options(args, "clw")
    wanted = [letter for letter in "lwc" if letter in options] or ["l", "w", "c"]
    status = 0
    for operand in operands or ["-"]:
        try:
            data = await _read_operand(ctx, operand)
        except FsError as exc:
            status = _error(ctx, f"wc: {operand}: {exc}")
            continue
        counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data)}
        fields = [str(counts[letter]) for letter in wanted] + ([operand] if operands else [])
        _say(ctx.stdout, " ".join(fields))
    return status


def _transfers(ctx: CommandContext, operands: list[str]) -> list[tuple[str, str, str]]:
    """``mv``/``cp`` operands as ``(source as given, source path, destination path)``."""
    if len(operands) < 2:
        raise _UsageError(MISSING_OPERAND)
    *sources, target = operands
    target_path = _resolve_path(ctx, target)
    into_dir = ctx.fs.is_dir(target_path)
    if len(sources) > 1 and not into_dir:
        raise _UsageError(NOT_A_DIRECTORY_TARGET.format(path=target))
    transfers = []
    for source in sources:
        source_path = _resolve_path(ctx, source)
        destination = (
            posixpath.join(target_path, posixpath.basename(source_path))
            if into_dir
            else target_path
        )
        transfers.append((source, source_path, destination))
    return transfers


async def _mv(ctx: CommandContext, args: list[str]) -> int:
    _, operands = _parse_options(args, "f")
    status = 0
    for source, source_path, destination in _transfers(ctx, operands):
        if not ctx.fs.exists(source_path):
            status = _error(ctx, f"mv: {CANNOT_STAT.format(path=source)}")
            continue
        try:
            ctx.fs.rename(source_path, destination)
        except FsError as exc:
            status = _error(ctx, f"mv: cannot move '{source}' to '{destination}': {exc}")
    return status


def _copy_tree(fs: FileSystem, source: str, destination: str) -> None:
    if not fs.is_dir(source):
        fs.write(destination, fs.read(source))
        return
    fs.mkdir(destination, parents=True)
    for name in fs.listdir(source):
        _copy_tree(fs, posixpath.join(source, name), posixpath.join(destination, name))


async def _cp(ctx: CommandContext, args: list[str]) -> int:
    options, operands = _parse_options(args, "rRaf")
    recursive = bool(options.keys() & {"r", "R", "a"})
    status = 0
    for source, source_path, destination in _transfers(ctx, operands):
        if not ctx.fs.exists(source_path):
            status = _error(ctx, f"cp: {CANNOT_STAT.format(path=source)}")
        elif ctx.fs.is_dir(source_path) and not recursive:
            status = _error(ctx, f"cp: -r not specified; omitting directory '{source}'")
        elif destination.startswith(source_path + "/"):
            status = _error(ctx, f"cp: cannot copy a directory, '{source}', into itself")
        else:
            try:
                _copy_tree(ctx.fs, source_path, destination)
            except FsError as exc:
                status = _error(ctx, f"cp: cannot create '{destination}': {exc}")
    return status


def _strip_slashes(path: str) -> str:
    return path.rstrip("/") or path[:1]


async def _basename(ctx: CommandContext, args: list[str]) -> int:
    if not args:
        raise _UsageError(MISSING_OPERAND)
    name = posixpath.basename(_strip_slashes(args[0])) or "/"
    if len(args) > 1 and name != args[1] and name.endswith(args[1]):
        name = name[: -len(args[1])]
    _say(ctx.stdout, name)
    return 0


async def _dirname(ctx: CommandContext, args: list[str]) -> int:
    if not args:
        raise _UsageError(MISSING_OPERAND)
    for arg in args:
        _say(ctx.stdout, _strip_slashes(posixpath.dirname(_strip_slashes(arg))) or ".")
    return 0


async def _tee(ctx: CommandContext, args: list[str]) -> int:
    options, operands = _parse_options(args, "a")
    sinks: list[OutputSink] = [ctx.stdout]
    status = 0
    for operand in operands:
        try:
            path = _resolve_path(ctx, operand)
            ctx.fs.write(path, b"", append="a" in options)
        except FsError as exc:
            status = _error(ctx, f"tee: {operand}: {exc}")
            continue
        sinks.append(_FileSink(ctx.fs, path, f"tee: {operand}", ctx.stderr))
    async for chunk in _stdin_chunks(ctx):
        for sink in sinks:
            sink.write(chunk)
    return status


_BUILTINS: dict[str, _Builtin] = {
    "true": _true,
    ":": _true,
    "false": _false,
    "echo": _echo,
    "printf": _printf,
    "pwd": _pwd,
    "cat": _cat,
    "mkdir": _mkdir,
    "rm": _rm,
    "touch": _touch,
    "ls": _ls,
    "test": _test_command("test"),
    "[": _test_command("["),
    "sleep": _sleep,
    "head": _head_tail("head"),
    "tail": _head_tail("tail"),
    "wc": _wc,
    "mv": _mv,
    "cp": _cp,
    "basename": _basename,
    "dirname": _dirname,
    "tee": _tee,
}

#: The commands :meth:`CommandRegistry.with_builtins` provides.
BUILTIN_NAMES = frozenset(_BUILTINS)


# -- tokenizer ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Literal:
    text: str
    #: Quoted or escaped text is never an assignment, ``!`` or ``~``.
    quoted: bool


@dataclass(frozen=True)
class _Param:
    """``$name``; with ``default``, ``${name-default}`` (``${name:-default}`` if ``colon``)."""

    name: str
    default: str | None = None
    colon: bool = False


_Part = _Literal | _Param
_HOME = _Param("HOME", default="/root", colon=True)


@dataclass(frozen=True)
class _Word:
    parts: tuple[_Part, ...]


@dataclass(frozen=True)
class _Operator:
    text: str
    #: The explicit file descriptor of a redirection (``2`` in ``2>``).
    fd: int | None = None


_Token = _Word | _Operator

# Longest first, so ``&&`` is not read as two ``&``.
_OPERATORS = ("&>>", "&&", "&>", "||", ">>", ">&", ">", "<", "|", ";", "&", "(", ")", "\n")
_REDIRECTIONS = frozenset({"<", ">", ">>", ">&", "&>", "&>>"})
_WORD_END = frozenset(" \t\n;&|<>()")
_SPECIAL_PARAMS = frozenset("?#@*")
# What a backslash escapes inside double quotes (before anything else it stays literal).
_DQUOTE_ESCAPABLE = frozenset('$`"\\\n')
# Characters with no special meaning, consumed as one run (a ``~`` is special only first).
_PLAIN_UNQUOTED = re.compile(r"[^ \t\n;&|<>()'\"\\$`]+")
_PLAIN_DQUOTED = re.compile(r'[^"\\$`]+')
# A leading ``~`` means $HOME when it stands alone or before a ``/``.
_TILDE_END = frozenset({"", "/"}) | _WORD_END
# Valid bash this emulator does not do: say so rather than report a syntax error.
_UNSUPPORTED_OPERATORS = {"&": "background jobs (&)", "(": "subshells ( )"}
# Compound commands are out of scope; naming them beats a confusing "command not found".
_RESERVED_WORDS = frozenset(
    [
        "if",
        "then",
        "elif",
        "else",
        "fi",
        "for",
        "while",
        "until",
        "do",
        "done",
        "case",
        "esac",
        "function",
        "{",
        "}",
        "[[",
        "]]",
    ]
)


class _Lexer:
    """Splits a script into words (quote-aware, with their expansions kept symbolic) and
    operators."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._pos = 0

    def tokens(self) -> list[_Token]:
        tokens: list[_Token] = []
        while True:
            self._skip_blanks()
            if self._pos >= len(self._source):
                return tokens
            if self._source[self._pos] == "#":
                end = self._source.find("\n", self._pos)
                self._pos = len(self._source) if end == -1 else end
                continue
            tokens.append(self._operator() or self._word())

    def _skip_blanks(self) -> None:
        while self._pos < len(self._source):
            if self._source[self._pos] in " \t":
                self._pos += 1
            elif self._source.startswith("\\\n", self._pos):
                self._pos += 2
            else:
                return

    def _operator(self) -> _Operator | None:
        if self._source.startswith("<<", self._pos):
            raise _ShellSyntaxError(UNSUPPORTED.format(what="here-documents (<<)"))
        digits = self._pos
        while digits < len(self._source) and self._source[digits].isdigit():
            digits += 1
        fd = None
        if digits > self._pos and self._source[digits : digits + 1] in ("<", ">"):
            fd = int(self._source[self._pos : digits])
        start = digits if fd is not None else self._pos
        for text in _OPERATORS:
            if self._source.startswith(text, start):
                self._pos = start + len(text)
                return _Operator(text, fd)
        return None

    def _word(self) -> _Word:
        parts: list[_Part] = []
        start = self._pos
        source = self._source
        while self._pos < len(source) and source[self._pos] not in _WORD_END:
            char = source[self._pos]
            plain = _PLAIN_UNQUOTED.match(source, self._pos)
            if char == "~" and self._pos == start and source[start + 1 : start + 2] in _TILDE_END:
                parts.append(_HOME)
                self._pos += 1
            elif plain is not None:
                parts.append(_Literal(plain.group(), quoted=False))
                self._pos = plain.end()
            elif char == "'":
                end = source.find("'", self._pos + 1)
                if end == -1:
                    raise _ShellSyntaxError(UNMATCHED_QUOTE.format(quote="'"))
                parts.append(_Literal(source[self._pos + 1 : end], quoted=True))
                self._pos = end + 1
            elif char == '"':
                self._double_quoted(parts)
            elif char == "\\":
                escaped = source[self._pos + 1 : self._pos + 2]
                self._pos += 2
                if escaped != "\n":  # backslash-newline is a line continuation
                    parts.append(_Literal(escaped or "\\", quoted=True))
            elif char == "$":
                self._dollar(parts)
            else:
                raise _ShellSyntaxError(UNSUPPORTED.format(what="command substitution"))
        return _Word(tuple(parts))

    def _double_quoted(self, parts: list[_Part]) -> None:
        source = self._source
        self._pos += 1
        while True:
            if self._pos >= len(source):
                raise _ShellSyntaxError(UNMATCHED_QUOTE.format(quote='"'))
            char = source[self._pos]
            if char == '"':
                self._pos += 1
                return
            if char == "\\" and source[self._pos + 1 : self._pos + 2] in _DQUOTE_ESCAPABLE:
                escaped = source[self._pos + 1]
                self._pos += 2
                if escaped != "\n":
                    parts.append(_Literal(escaped, quoted=True))
            elif char == "$":
                self._dollar(parts)
            elif char == "`":
                raise _ShellSyntaxError(UNSUPPORTED.format(what="command substitution"))
            else:
                # Runs, not characters: a long quoted payload must not cost quadratic time.
                run = _PLAIN_DQUOTED.match(source, self._pos)
                end = self._pos + 1 if run is None else run.end()
                parts.append(_Literal(source[self._pos : end], quoted=True))
                self._pos = end

    def _dollar(self, parts: list[_Part]) -> None:
        source = self._source
        following = source[self._pos + 1 : self._pos + 2]
        if following == "{":
            end = source.find("}", self._pos + 2)
            if end == -1:
                raise _ShellSyntaxError(UNMATCHED_QUOTE.format(quote="}"))
            parts.append(_braced_param(source[self._pos + 2 : end]))
            self._pos = end + 1
            return
        if following == "(":
            raise _ShellSyntaxError(UNSUPPORTED.format(what="command substitution"))
        name = _NAME.match(source, self._pos + 1)
        if name is not None:
            parts.append(_Param(name.group()))
            self._pos = name.end()
        elif following.isdigit() or (following and following in _SPECIAL_PARAMS):
            parts.append(_Param(following))
            self._pos += 2
        else:
            parts.append(_Literal("$", quoted=False))
            self._pos += 1


def _braced_param(text: str) -> _Param:
    name = _NAME.match(text) or re.match(r"\d+|[?#@*]", text)
    if name is None:
        raise _ShellSyntaxError(BAD_SUBSTITUTION.format(text=text))
    rest = text[name.end() :]
    if not rest:
        return _Param(name.group())
    colon = rest.startswith(":")
    if rest[colon:][:1] != "-":
        raise _ShellSyntaxError(BAD_SUBSTITUTION.format(text=text))
    return _Param(name.group(), default=rest[colon + 1 :], colon=colon)


# -- parser -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Redirect:
    operator: str
    fd: int | None
    target: _Word


@dataclass
class _Command:
    assignments: list[tuple[str, _Word]] = field(default_factory=list)
    words: list[_Word] = field(default_factory=list)
    redirects: list[_Redirect] = field(default_factory=list)


@dataclass
class _Pipeline:
    commands: list[_Command]
    negated: bool


@dataclass
class _AndOr:
    first: _Pipeline
    rest: list[tuple[str, _Pipeline]]


class _Parser:
    """Recursive descent over the tokens:

    ``script := and_or ((';' | NEWLINE) and_or)*``, ``and_or := pipeline (('&&'|'||') pipeline)*``,
    ``pipeline := ['!'] command ('|' command)*``, ``command := (assignment|redirect)* word*``.
    """

    def __init__(self, tokens: list[_Token]) -> None:
        self._tokens = tokens
        self._pos = 0

    def script(self) -> list[_AndOr]:
        items: list[_AndOr] = []
        while True:
            self._skip_newlines()
            if self._peek() is None:
                return items
            items.append(self._and_or())
            token = self._peek()
            if token is None:
                return items
            if not _is_operator(token, ";", "\n"):
                self._unexpected(token)
            self._pos += 1

    def _and_or(self) -> _AndOr:
        first = self._pipeline()
        rest: list[tuple[str, _Pipeline]] = []
        while _is_operator(token := self._peek(), "&&", "||"):
            assert isinstance(token, _Operator)
            self._pos += 1
            rest.append((token.text, self._continuation(self._pipeline)))
        return _AndOr(first, rest)

    def _pipeline(self) -> _Pipeline:
        token = self._peek()
        negated = isinstance(token, _Word) and _bare_text(token) == "!"
        if negated:
            self._pos += 1
        commands = [self._command()]
        while _is_operator(self._peek(), "|"):
            self._pos += 1
            commands.append(self._continuation(self._command))
        return _Pipeline(commands, negated)

    def _continuation(self, parse: Callable[[], _T]) -> _T:
        """After ``&&``, ``||`` or ``|``: newlines may follow, end of input may not."""
        self._skip_newlines()
        if self._peek() is None:
            raise _ShellSyntaxError(UNEXPECTED_EOF)
        return parse()

    def _command(self) -> _Command:
        command = _Command()
        while (token := self._peek()) is not None:
            if isinstance(token, _Word):
                self._pos += 1
                assignment = None if command.words else _split_assignment(token)
                if assignment is not None:
                    command.assignments.append(assignment)
                    continue
                reserved = _bare_text(token)
                if not command.words and reserved in _RESERVED_WORDS:
                    raise _ShellSyntaxError(UNSUPPORTED.format(what=f"`{reserved}'"))
                command.words.append(token)
            elif token.text in _REDIRECTIONS:
                self._pos += 1
                target = self._peek()
                if not isinstance(target, _Word):
                    self._unexpected(target)
                self._pos += 1
                command.redirects.append(_Redirect(token.text, token.fd, target))
            else:
                break
        if command == _Command():
            self._unexpected(self._peek())
        return command

    def _peek(self) -> _Token | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _skip_newlines(self) -> None:
        while _is_operator(self._peek(), "\n"):
            self._pos += 1

    @staticmethod
    def _unexpected(token: _Token | None) -> NoReturn:
        if token is None or _is_operator(token, "\n"):
            raise _ShellSyntaxError(SYNTAX_ERROR.format(token="newline"))
        assert isinstance(token, _Operator)  # a word is never unexpected in this grammar
        if token.text in _UNSUPPORTED_OPERATORS:
            raise _ShellSyntaxError(UNSUPPORTED.format(what=_UNSUPPORTED_OPERATORS[token.text]))
        raise _ShellSyntaxError(SYNTAX_ERROR.format(token=token.text))


def _bare_text(word: _Word) -> str | None:
    """The text of a word that is one unquoted literal (a candidate reserved word)."""
    match word.parts:
        case (_Literal(text=text, quoted=False),):
            return text
    return None


def _is_operator(token: _Token | None, *texts: str) -> bool:
    return isinstance(token, _Operator) and token.text in texts


def _split_assignment(word: _Word) -> tuple[str, _Word] | None:
    first = word.parts[0] if word.parts else None
    if not isinstance(first, _Literal) or first.quoted:
        return None
    match = _ASSIGNMENT.match(first.text)
    if match is None:
        return None
    value = first.text[match.end() :]
    rest = word.parts[1:]
    return match.group(1), _Word(((_Literal(value, quoted=False),) if value else ()) + rest)


def _parse(script: str) -> list[_AndOr]:
    return _Parser(_Lexer(script).tokens()).script()


# -- interpreter --------------------------------------------------------------------------------


class _Streams(NamedTuple):
    stdin: StdinReader
    stdout: OutputSink
    stderr: OutputSink


class _RedirectError(Exception):
    """A redirection could not be set up; the command does not run (exit 1)."""


@dataclass
class _State:
    """One running script: its own cwd, variables and (after ``exec >f``) streams."""

    fs: FileSystem
    cwd: str
    #: Exported variables: what commands see as their environment.
    env: dict[str, str]
    #: ``$0``, ``$1``, ...
    positional: list[str]
    streams: _Streams
    sleep: Callable[[float], Awaitable[None]]
    #: Unexported shell variables (``A=1`` without ``export``).
    variables: dict[str, str] = field(default_factory=dict)
    status: int = 0
    errexit: bool = False

    def fork(self, streams: _Streams) -> _State:
        """A copy for a pipeline stage, which (like bash's subshell) cannot affect this one."""
        return dataclasses.replace(
            self,
            env=dict(self.env),
            variables=dict(self.variables),
            positional=list(self.positional),
            streams=streams,
        )

    def lookup(self, name: str) -> str | None:
        if name == "?":
            return str(self.status)
        if name == "#":
            return str(len(self.positional) - 1)
        if name in ("@", "*"):
            return " ".join(self.positional[1:])
        if name.isdigit():
            index = int(name)
            return self.positional[index] if index < len(self.positional) else None
        return self.variables.get(name, self.env.get(name))

    def assign(self, name: str, value: str) -> None:
        """``name=value``: stays exported if it already was."""
        if name in self.env:
            self.env[name] = value
        else:
            self.variables[name] = value

    def expand(self, word: _Word) -> list[str]:
        """A word's arguments: one, except ``$@``/``"$@"`` which gives one per parameter."""
        if word.parts == (_Param("@"),):
            return self.positional[1:]
        return [self.expand_one(word)]

    def expand_one(self, word: _Word) -> str:
        return "".join(
            part.text if isinstance(part, _Literal) else self._parameter(part)
            for part in word.parts
        )

    def _parameter(self, param: _Param) -> str:
        value = self.lookup(param.name)
        if param.default is not None and (value is None or (param.colon and not value)):
            return param.default
        return value or ""

    def context(self, streams: _Streams, assignments: dict[str, str]) -> CommandContext:
        return CommandContext(
            fs=self.fs,
            cwd=self.cwd,
            env={**self.env, **assignments},
            stdin=streams.stdin,
            stdout=streams.stdout,
            stderr=streams.stderr,
            sleep=self.sleep,
        )


def _cd(state: _State, args: list[str], streams: _Streams) -> int:
    if len(args) > 1:
        _say(streams.stderr, "bash: cd: too many arguments")
        return 1
    target = args[0] if args else state.lookup("HOME") or "/root"
    try:
        path = FileSystem.normalize(target, state.cwd)
        if not state.fs.is_dir(path):
            raise FsError("ENOTDIR" if state.fs.exists(path) else "ENOENT", path)
    except FsError as exc:
        _say(streams.stderr, CD_ERROR.format(path=target, reason=exc))
        return 1
    state.cwd = path
    state.assign("PWD", path)
    return 0


def _export(state: _State, args: list[str], streams: _Streams) -> int:
    if not args:
        for name, value in sorted(state.env.items()):
            _say(streams.stdout, f'declare -x {name}="{value}"')
        return 0
    status = 0
    for arg in args:
        name, has_value, value = arg.partition("=")
        if not _NAME.fullmatch(name):
            _say(streams.stderr, NOT_AN_IDENTIFIER.format(command="export", name=arg))
            status = 1
        elif has_value:
            state.variables.pop(name, None)
            state.env[name] = value
        elif name in state.variables:
            state.env[name] = state.variables.pop(name)
    return status


def _unset(state: _State, args: list[str], streams: _Streams) -> int:
    for name in args:
        state.env.pop(name, None)
        state.variables.pop(name, None)
    return 0


def _exit(state: _State, args: list[str], streams: _Streams) -> int:
    if not args:
        raise _ScriptExit(state.status)
    try:
        status = int(args[0])
    except ValueError:
        _say(streams.stderr, EXIT_NOT_NUMERIC.format(arg=args[0]))
        status = 2
    raise _ScriptExit(status & 0xFF)


def _set(state: _State, args: list[str], streams: _Streams) -> int:
    """Only errexit matters (``-e``, ``+e``, ``-o errexit``); other options are accepted and
    ignored. ``set -- ARGS`` replaces the positional parameters."""
    rest = iter(args)
    for arg in rest:
        if arg == "--" or arg[:1] not in ("-", "+"):
            state.positional[1:] = [arg] if arg != "--" else []
            state.positional.extend(rest)
            break
        enable = arg[0] == "-"
        letters = arg[1:]
        # -o takes the next argument as an option name, also inside a cluster (-euo pipefail).
        if "o" in letters and next(rest, "") == "errexit":
            letters += "e"
        if "e" in letters:
            state.errexit = enable
    return 0


_SPECIAL_BUILTINS: dict[str, Callable[[_State, list[str], _Streams], int]] = {
    "cd": _cd,
    "export": _export,
    "unset": _unset,
    "exit": _exit,
    "set": _set,
}


async def _call(handler: CommandHandler, ctx: CommandContext, args: list[str]) -> int:
    result = handler(ctx, args)
    if inspect.isawaitable(result):
        result = await result
    return int(result)


def _decode_script(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _set_output(outputs: dict[int, OutputSink], fd: int, sink: OutputSink) -> None:
    if fd not in outputs:
        raise _RedirectError(BAD_FD.format(fd=fd))
    outputs[fd] = sink


class Shell:
    """Runs commands and scripts against a :class:`CommandRegistry`.

    Lookup order for a command name: the special builtins ``cd``, ``export``, ``unset``,
    ``exit``, ``exec`` and ``set`` (inside scripts only: they change the script's own state);
    then the registry (user commands, then builtins); then ``env``, ``timeout``, ``bash`` and
    ``sh``, which live here because they run other commands. A name with a ``/`` is looked up
    as given in the registry, by basename if its directory is in :data:`BIN_DIRS`, and finally
    run as a script if it is a file in the sandbox's filesystem.

    Example:
        >>> import asyncio
        >>> out = BufferSink()
        >>> ctx = CommandContext(FileSystem(), "/root", {}, StdinReader(), out, out, asyncio.sleep)
        >>> shell = Shell(CommandRegistry.with_builtins())
        >>> asyncio.run(shell.run_script("A='x y'; echo \\"$A\\" && false || nope", ctx))
        127
        >>> out.getvalue()
        b'x y\\nbash: nope: command not found\\n'
    """

    def __init__(self, registry: CommandRegistry) -> None:
        self.registry = registry
        self._commands: dict[str, CommandHandler] = {
            "env": _guarded("env", self._env, usage_status=125),
            "timeout": _guarded("timeout", self._timeout, usage_status=125),
            "bash": _guarded("bash", self._bash, usage_status=2),
            "sh": _guarded("sh", self._bash, usage_status=2),
        }

    async def run(self, cmd: str, args: Sequence[str], ctx: CommandContext) -> int:
        """Execute one argv without a shell, like the real ``/exec`` endpoint.

        Example:
            >>> import asyncio
            >>> out = BufferSink()
            >>> ctx = CommandContext(FileSystem(), "/", {}, StdinReader(), out, out, asyncio.sleep)
            >>> shell = Shell(CommandRegistry.with_builtins())
            >>> asyncio.run(shell.run("/bin/echo", ["ready"], ctx)), out.getvalue()
            (0, b'ready\\n')
        """
        return await self._invoke(cmd, list(args), ctx)

    async def run_script(self, script: str, ctx: CommandContext) -> int:
        """Run ``script`` as ``bash -c`` would, in a copy of ``ctx``'s cwd and environment.

        Example:
            >>> import asyncio
            >>> out = BufferSink()
            >>> ctx = CommandContext(FileSystem(), "/", {}, StdinReader(), out, out, asyncio.sleep)
            >>> asyncio.run(Shell(CommandRegistry.with_builtins()).run_script("exit 3", ctx))
            3
        """
        return await self._run_script(script, ctx, ["bash"])

    # -- command lookup ---------------------------------------------------------------------

    def _resolve(self, name: str, ctx: CommandContext) -> CommandHandler | None:
        if "/" not in name:
            return self._lookup(name)
        try:
            path = FileSystem.normalize(name, ctx.cwd)
        except FsError:
            return None
        directory, basename = posixpath.split(path)
        handler = self.registry.get(path) or (
            self._lookup(basename) if directory in BIN_DIRS else None
        )
        if handler is None and ctx.fs.is_file(path):
            handler = self._script_file(path)
        return handler

    def _lookup(self, name: str) -> CommandHandler | None:
        return self.registry.get(name) or self._commands.get(name)

    def _script_file(self, path: str) -> CommandHandler:
        async def handler(ctx: CommandContext, args: list[str]) -> int:
            script = _decode_script(ctx.fs.read(path))
            return await self._run_script(script, ctx, [path, *args])

        return handler

    async def _invoke(
        self, name: str, args: list[str], ctx: CommandContext, not_found: str | None = None
    ) -> int:
        handler = self._resolve(name, ctx)
        if handler is None:
            template = not_found or (NO_SUCH_FILE if "/" in name else COMMAND_NOT_FOUND)
            _say(ctx.stderr, template.format(name=name))
            return 127
        return await _call(handler, ctx, args)

    # -- commands that run commands ---------------------------------------------------------

    async def _env(self, ctx: CommandContext, args: list[str]) -> int:
        env = dict(ctx.env)
        rest = iter(args)
        command: list[str] = []
        for arg in rest:
            if arg in ("-i", "-", "--ignore-environment"):
                env = {}
            elif arg in ("-u", "--unset"):
                env.pop(next(rest, ""), None)
            elif arg == "--":
                command = list(rest)
            elif _ASSIGNMENT.match(arg):
                name, _, value = arg.partition("=")
                env[name] = value
            elif arg.startswith("-"):
                raise _UsageError(UNRECOGNIZED_OPTION.format(option=arg))
            else:
                command = [arg, *rest]
        if not command:
            ctx.stdout.write(b"".join(_encode(f"{k}={v}\n") for k, v in sorted(env.items())))
            return 0
        child = dataclasses.replace(ctx, env=env)
        return await self._invoke(command[0], command[1:], child, ENV_NOT_FOUND)

    async def _timeout(self, ctx: CommandContext, args: list[str]) -> int:
        options, operands = _parse_options(
            args,
            "fv",
            valued="sk",
            long={"--signal": "s", "--kill-after": "k", "--foreground": "f", "--verbose": "v"},
            stop_at_operand=True,
        )
        if len(operands) < 2:
            raise _UsageError(MISSING_OPERAND)
        duration = _parse_duration(operands[0])
        for interval in (operands[0], options.get("k", "0")):
            if _parse_duration(interval) is None:
                raise _UsageError(INVALID_INTERVAL.format(value=interval))
        handler = self._resolve(operands[1], ctx)
        if handler is None:
            _say(ctx.stderr, TIMEOUT_NOT_FOUND.format(name=operands[1]))
            return 127
        if not duration:  # coreutils: a zero duration disables the timeout
            return await _call(handler, ctx, operands[2:])
        command = asyncio.ensure_future(_call(handler, ctx, operands[2:]))
        timer = asyncio.ensure_future(ctx.sleep(duration))
        try:
            await asyncio.wait((command, timer), return_when=asyncio.FIRST_COMPLETED)
            finished = command.done()
        finally:
            # Also on our own cancellation: never leave the command running unowned.
            timer.cancel()
            command.cancel()
            await asyncio.wait((command, timer))
        if finished:
            return command.result()
        signal = options.get("s", "TERM").upper().removeprefix("SIG")
        return TIMEOUT_KILL_STATUS if signal in ("KILL", "9") else TIMEOUT_STATUS

    async def _bash(self, ctx: CommandContext, args: list[str]) -> int:
        """``bash [-lceuxi] [-o OPT] [-c SCRIPT [$0 [$1...]] | FILE [ARGS] ]``, else stdin."""
        options, operands = _parse_options(
            args,
            "lceuxi",
            valued="o",
            long={"--login": "l", "--noprofile": "l", "--norc": "l"},
            stop_at_operand=True,
        )
        errexit = "e" in options or options.get("o") == "errexit"
        if "c" in options:
            if not operands:
                raise _UsageError(BASH_OPTION_NEEDS_ARG)
            return await self._run_script(
                operands[0], ctx, operands[1:] or ["bash"], errexit=errexit
            )
        if operands:
            try:
                script = _decode_script(ctx.fs.read(_resolve_path(ctx, operands[0])))
            except FsError as exc:
                _say(ctx.stderr, f"bash: {operands[0]}: {exc}")
                return 127
            return await self._run_script(script, ctx, operands, errexit=errexit)
        script = _decode_script(await ctx.stdin.read())
        return await self._run_script(script, ctx, ["bash"], errexit=errexit)

    # -- scripts ----------------------------------------------------------------------------

    async def _run_script(
        self, script: str, ctx: CommandContext, positional: list[str], *, errexit: bool = False
    ) -> int:
        try:
            program = _parse(script)
        except _ShellSyntaxError as exc:
            _say(ctx.stderr, f"bash: {exc}")
            return 2
        state = _State(
            fs=ctx.fs,
            cwd=ctx.cwd,
            env=dict(ctx.env),
            positional=list(positional),
            streams=_Streams(ctx.stdin, ctx.stdout, ctx.stderr),
            sleep=ctx.sleep,
            errexit=errexit,
        )
        try:
            for item in program:
                await self._run_and_or(item, state)
        except _ScriptExit as exc:
            return exc.status
        return state.status

    async def _run_and_or(self, item: _AndOr, state: _State) -> None:
        last = item.first
        status = await self._run_pipeline(last, state)
        for operator, pipeline in item.rest:
            if (status == 0) == (operator == "&&"):
                last = pipeline
                status = await self._run_pipeline(pipeline, state)
        # set -e ignores failures of conditions: only the list's final pipeline counts.
        final = item.rest[-1][1] if item.rest else item.first
        if state.errexit and status and last is final and not last.negated:
            raise _ScriptExit(status)

    async def _run_pipeline(self, pipeline: _Pipeline, state: _State) -> int:
        if len(pipeline.commands) == 1:
            status = await self._run_command(pipeline.commands[0], state)
        else:
            stdin = state.streams.stdin
            for index, command in enumerate(pipeline.commands):
                buffer = BufferSink()
                is_last = index == len(pipeline.commands) - 1
                stdout: OutputSink = state.streams.stdout if is_last else buffer
                stage = state.fork(state.streams._replace(stdin=stdin, stdout=stdout))
                try:
                    status = await self._run_command(command, stage)
                except _ScriptExit as exc:
                    status = exc.status
                stdin = StdinReader(buffer.getvalue())
        if pipeline.negated:
            status = int(status == 0)
        state.status = status
        return status

    async def _run_command(self, command: _Command, state: _State) -> int:
        words = [arg for word in command.words for arg in state.expand(word)]
        assignments = {name: state.expand_one(value) for name, value in command.assignments}
        try:
            streams = self._redirect(command.redirects, state)
        except _RedirectError as exc:
            _say(state.streams.stderr, f"bash: {exc}")
            return 1
        if not words:
            for name, value in assignments.items():
                state.assign(name, value)
            return 0
        name, args = words[0], words[1:]
        if name == "exec":
            if not args:  # `exec >log 2>&1`: the redirections stay for the rest of the script
                state.streams = streams
                return 0
            child = state.context(streams, assignments)
            raise _ScriptExit(await self._invoke(args[0], args[1:], child, EXEC_NOT_FOUND))
        special = _SPECIAL_BUILTINS.get(name)
        if special is not None:
            return special(state, args, streams)
        return await self._invoke(name, args, state.context(streams, assignments))

    # -- redirections -----------------------------------------------------------------------

    def _redirect(self, redirects: list[_Redirect], state: _State) -> _Streams:
        stdin = state.streams.stdin
        outputs: dict[int, OutputSink] = {1: state.streams.stdout, 2: state.streams.stderr}
        for redirect in redirects:
            target = state.expand_one(redirect.target)
            operator = redirect.operator
            if operator == "<":
                if redirect.fd not in (None, 0):
                    raise _RedirectError(BAD_FD.format(fd=redirect.fd))
                stdin = self._open_input(target, state, stdin)
            elif operator == ">&" and target.isdigit():
                if int(target) not in outputs:
                    raise _RedirectError(BAD_FD.format(fd=target))
                _set_output(outputs, redirect.fd or 1, outputs[int(target)])
            elif operator == ">&" and redirect.fd is not None:
                raise _RedirectError(AMBIGUOUS_REDIRECT.format(target=target))
            elif operator in (">&", "&>", "&>>"):
                outputs[1] = outputs[2] = self._open_output(
                    target, operator == "&>>", state, outputs
                )
            else:
                sink = self._open_output(target, operator == ">>", state, outputs)
                _set_output(outputs, 1 if redirect.fd is None else redirect.fd, sink)
        return _Streams(stdin, outputs[1], outputs[2])

    @staticmethod
    def _open_input(target: str, state: _State, current: StdinReader) -> StdinReader:
        if target == "/dev/null":
            return StdinReader()
        if target == "/dev/stdin":
            return current
        try:
            return StdinReader(state.fs.read(FileSystem.normalize(target, state.cwd)))
        except FsError as exc:
            raise _RedirectError(f"{target}: {exc}") from None

    @staticmethod
    def _open_output(
        target: str, append: bool, state: _State, outputs: dict[int, OutputSink]
    ) -> OutputSink:
        if target == "/dev/null":
            return _NullSink()
        if target in ("/dev/stdout", "/dev/stderr"):
            return outputs[1 if target == "/dev/stdout" else 2]
        try:
            path = FileSystem.normalize(target, state.cwd)
            # Truncate (or create) now, as bash does before the command starts.
            state.fs.write(path, b"", append=append)
        except FsError as exc:
            raise _RedirectError(f"{target}: {exc}") from None
        return _FileSink(state.fs, path, f"bash: {target}", state.streams.stderr)
