"""One program under test, spoken to over the bridge protocol: JSON lines on its stdin/stdout.

The program announces itself with one line (``{"bridge": 1, "methods": [...]}``); then every
request the kit writes (``{"id": 7, "method": "resume", "params": {...}}``) gets one answer
line with the same id (``{"id": 7, "result": ...}`` or ``{"id": 7, "error": {...}}``), in any
order, several in flight at once. Everything the program writes to stderr is kept (bounded)
for the kit's report. A program that dies, writes anything but a bridge message to stdout,
answers an id nobody waits for, or does not answer in time fails with a :class:`BridgeError`
that says so and ends with what it wrote to stderr -- never a hang.

Internal: :mod:`pytest_createos.bridge` is the public side.

Example::

    program = Program(["node", "host.mjs"], name="host.mjs", env={}, ...)
    await program.start()
    lease = await program.call("acquire", {})
    await program.close()
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, Final

from pytest_createos.errors import (
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CommandCancelledError,
    LeaseError,
    LeaseOwnershipError,
    ProviderShutDownError,
)

__all__ = [
    "API_KEY_ENV",
    "API_URL_ENV",
    "PROTOCOL_VERSION",
    "BridgeError",
    "BridgeTimeoutError",
    "Program",
    "ProgramError",
]

#: The version a program announces in its first line (``{"bridge": 1, ...}``).
PROTOCOL_VERSION: Final = 1
#: Where the program finds the fake's base URL and its tenant's API key.
API_URL_ENV: Final = "CREATEOS_API_URL"
API_KEY_ENV: Final = "CREATEOS_API_KEY"
#: The longest line either side may write (an ``execute`` result carries command output).
MAX_LINE_BYTES: Final = 16 * 2**20
#: How many of the program's last stderr lines are kept: the most a report shows.
MAX_STDERR_LINES: Final = 100
#: How many of the last stderr lines a :class:`BridgeError` quotes.
STDERR_TAIL_LINES: Final = 8
#: How much of one stderr line is kept.
MAX_STDERR_LINE_CHARS: Final = 1_000
#: How much of a bad stdout line an error quotes.
MAX_QUOTED_CHARS: Final = 120

# -- messages -----------------------------------------------------------------------------------

CANNOT_START: Final = "{name} could not be started: {error}"
NO_HELLO: Final = (
    "{name} did not announce itself within {timeout:g} s: its first line on stdout must be "
    '{{"bridge": 1, "methods": [...]}}'
)
BAD_HELLO: Final = (
    "{name} announced itself with {line}, not "
    '{{"bridge": 1, "methods": [<method names>]}} (this kit speaks bridge protocol 1)'
)
MISSING_METHODS: Final = "{name} does not offer {missing} (it offers: {offered})"
GARBAGE: Final = (
    "{name} wrote a line to stdout that is not a bridge message: {line} (stdout carries only "
    "the protocol; write logs to stderr)"
)
BAD_ANSWER: Final = (
    '{name} answered with {line}, which has neither "result" nor an "error" object with a "message"'
)
UNKNOWN_ID: Final = "{name} answered id {id}, which no call is waiting for: {line}"
LINE_TOO_LONG: Final = "{name} wrote a line longer than {limit} bytes to stdout"
EXITED: Final = "{name} exited with code {code} while {calls} {were} in flight"
EXITED_IDLE: Final = "{name} exited with code {code}"
CLOSED: Final = "{name} was closed"
STARTED: Final = "{name} was started already: a program is started once"
NOT_STARTED: Final = "{name} was not started: use `async with` or `await ....start()` first"
TIMED_OUT: Final = "{name} did not answer {call} within {timeout:g} s"
CANNOT_SEND: Final = "{name} accepts no JSON for {method}(): {error}"
STDERR_TAIL: Final = "; its stderr ended with:\n{lines}"
STDERR_EMPTY: Final = "; it wrote nothing to stderr"
STDERR_OMITTED: Final = "... {count} earlier line(s) not shown"
STDERR_TOO_LONG: Final = "[a line longer than {limit} bytes, not kept]\n"


class BridgeError(Exception):
    """The program under test broke the bridge protocol: it could not start, died, wrote
    something that is not a bridge message, answered an unknown id, or was closed. The message
    says which, and ends with the last lines the program wrote to stderr.

    Example:
        >>> str(BridgeError("host.mjs exited with code 1"))
        'host.mjs exited with code 1'
    """


class BridgeTimeoutError(BridgeError):
    """The program did not answer one call in time (it keeps running; later calls may work).

    Example:
        >>> isinstance(BridgeTimeoutError("host.mjs did not answer resume #3"), BridgeError)
        True
    """


class ProgramError(LeaseError):
    """The program answered a call with an error whose ``kind`` is not one of the kit's
    (for example a JavaScript ``TypeError``); ``kind`` and ``retryable`` are as it sent them.

    Example:
        >>> error = ProgramError("HTTP 409: sandbox is pausing", kind="ApiError")
        >>> str(error), error.kind, error.retryable
        ('ApiError: HTTP 409: sandbox is pausing', 'ApiError', False)
    """

    def __init__(self, message: str, *, kind: str | None, retryable: bool | None = None) -> None:
        super().__init__(f"{kind}: {message}" if kind else message, retryable=retryable)
        self.kind = kind


def program_error(error: Mapping[str, Any]) -> LeaseError:
    """The exception an ``error`` answer stands for: the kit's own type when ``kind`` names
    one (so ``CleanupPendingError`` and friends map back), else :class:`ProgramError`. The
    program's message is kept as it sent it.

    Example:
        >>> program_error({"message": "CreateOS lease cleanup must finish before resume.",
        ...                "kind": "CleanupPendingError", "reason": "unconfirmed"}).reason
        'unconfirmed'
    """
    message = str(error["message"])
    kind = error.get("kind")
    retryable = error.get("retryable")
    retryable = retryable if isinstance(retryable, bool) else None
    mapped: LeaseError
    if kind == "CleanupPendingError":
        unconfirmed = error.get("reason") == "unconfirmed"
        mapped = CleanupPendingError(reason="unconfirmed" if unconfirmed else "closing")
    elif kind == "CleanupInProgressError":
        mapped = CleanupInProgressError()
    elif kind == "CleanupUnconfirmedError":
        sandbox = error.get("sandbox_id")
        mapped = CleanupUnconfirmedError(message, sandbox_id=str(sandbox) if sandbox else None)
    elif kind == "LeaseOwnershipError":
        mapped = LeaseOwnershipError(message)
    elif kind == "ProviderShutDownError":
        mapped = ProviderShutDownError()
    elif kind == "CommandCancelledError":
        mapped = CommandCancelledError()
    elif kind == "LeaseError":
        mapped = LeaseError(message)
    else:
        return ProgramError(message, kind=str(kind) if kind else None, retryable=retryable)
    # The fixed-message types say what the program said, not what the kit would have.
    mapped.args, mapped.message = (message,), message
    if retryable is not None:
        mapped.retryable = retryable
    return mapped


def _jsonable(value: object) -> object:
    """What ``json.dumps`` cannot write itself: dates (ISO 8601), and nothing else."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _quoted(line: str) -> str:
    shown = line if len(line) <= MAX_QUOTED_CHARS else line[: MAX_QUOTED_CHARS - 3] + "..."
    return repr(shown)


class Program:
    """The program's process and the calls in flight to it.

    ``required`` are the methods the program must offer; ``start_timeout_s`` bounds its
    announcement, ``call_timeout_s`` every call, ``close_timeout_s`` its exit once its stdin
    is closed (then it is killed).
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str,
        env: Mapping[str, str],
        cwd: str | Path | None,
        required: Sequence[str],
        start_timeout_s: float,
        call_timeout_s: float,
        close_timeout_s: float,
    ) -> None:
        self.command = list(command)
        self.name = name
        self.env = {**os.environ, **env}
        self.cwd = cwd
        self.required = list(required)
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.close_timeout_s = close_timeout_s
        #: What the program announced it offers.
        self.methods: frozenset[str] = frozenset()
        self._process: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        # Calls the kit gave up on (timed out or cancelled): their late answers are dropped.
        self._abandoned: set[int] = set()
        self._hello: asyncio.Future[dict[str, Any]] | None = None
        self._failure: str | None = None
        self._closing = False
        self._stderr: deque[str] = deque(maxlen=MAX_STDERR_LINES)
        self._stderr_total = 0
        self._stdout_reader: asyncio.Task[None] | None = None
        self._stderr_reader: asyncio.Task[None] | None = None
        self._drain = asyncio.Lock()

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited."""
        return None if self._process is None else self._process.returncode

    # -- stderr -----------------------------------------------------------------------------

    def stderr_mark(self) -> int:
        """How many lines the program has written to stderr so far."""
        return self._stderr_total

    def stderr_since(self, mark: int, limit: int = MAX_STDERR_LINES) -> list[str]:
        """The last ``limit`` (at most :data:`MAX_STDERR_LINES`) stderr lines written after
        ``mark``, after a note of how many earlier ones are not shown."""
        written = self._stderr_total - mark
        shown = list(self._stderr)[-min(written, limit) :] if written > 0 else []
        omitted = written - len(shown)
        return [STDERR_OMITTED.format(count=omitted), *shown] if omitted > 0 else shown

    def _tail(self) -> str:
        lines = self.stderr_since(0, STDERR_TAIL_LINES)
        if not lines:
            return STDERR_EMPTY
        return STDERR_TAIL.format(lines="\n".join(f"  {line}" for line in lines))

    # -- life ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the program and wait for its announcement (:class:`BridgeError` otherwise)."""
        if self._process is not None:
            raise BridgeError(STARTED.format(name=self.name))
        loop = asyncio.get_running_loop()
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                limit=MAX_LINE_BYTES,
            )
        except (OSError, ValueError) as error:
            self._failure = CANNOT_START.format(name=self.name, error=error)
            raise BridgeError(self._failure) from None
        self._hello = loop.create_future()
        self._stdout_reader = asyncio.ensure_future(self._read_stdout())
        self._stderr_reader = asyncio.ensure_future(self._read_stderr())
        done, _ = await asyncio.wait({self._hello}, timeout=self.start_timeout_s)
        if not done:
            await self._fail(NO_HELLO.format(name=self.name, timeout=self.start_timeout_s))
        if self._failure is not None:
            raise BridgeError(self._failure)
        missing = [method for method in self.required if method not in self.methods]
        if missing:
            offered = ", ".join(sorted(self.methods)) or "nothing"
            await self._fail(
                MISSING_METHODS.format(name=self.name, missing=", ".join(missing), offered=offered)
            )
            raise BridgeError(self._failure)

    async def close(self) -> None:
        """Close the program's stdin (its cue to exit), wait for it, kill it if it lingers.
        Calls still in flight fail; later calls fail at once."""
        process = self._process
        if process is None or self._closing:
            return
        self._closing = True
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        await self._end(process)
        await self._settle_failure(CLOSED.format(name=self.name))

    async def _end(self, process: asyncio.subprocess.Process) -> None:
        """Wait (bounded) for the process and its pipes to finish; kill it if it lingers."""
        try:
            await asyncio.wait_for(process.wait(), self.close_timeout_s)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        readers = [r for r in (self._stdout_reader, self._stderr_reader) if r is not None]
        current = asyncio.current_task()
        others = [reader for reader in readers if reader is not current]
        if others:
            # The pipes end with the process; a grandchild holding them open does not hold us.
            _, lingering = await asyncio.wait(others, timeout=self.close_timeout_s)
            for reader in lingering:
                reader.cancel()
            if lingering:
                await asyncio.wait(lingering)
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()

    async def _fail(self, what: str) -> None:
        """The program broke the protocol: stop it, fail every call in flight with ``what``
        (and its stderr), and every later call too."""
        if self._failure is not None:
            return
        self._failure = what  # at once: nothing more is read as an answer
        process = self._process
        if process is not None and process.returncode is None:
            process.kill()
        if process is not None:
            await self._end(process)
        await self._settle_failure(what)

    async def _settle_failure(self, what: str) -> None:
        if self._failure is None or self._failure == what:
            self._failure = what + self._tail()
        error = BridgeError(self._failure)
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(error)
            self._hello.exception()  # retrieved: start() reads self._failure instead
        for _, future in self._pending.values():
            if not future.done():
                future.set_exception(BridgeError(self._failure))
        self._pending.clear()

    # -- reading ------------------------------------------------------------------------------

    async def _read_stderr(self) -> None:
        assert self._process is not None
        assert self._process.stderr is not None
        stderr = self._process.stderr
        while True:  # bounded by the pipe: it ends when the process does
            try:
                line = (await stderr.readline()).decode("utf-8", "replace")
            except ValueError:  # the reader has dropped the line already
                line = STDERR_TOO_LONG.format(limit=MAX_LINE_BYTES)
            if not line:
                return
            line = line.rstrip("\r\n")
            if len(line) > MAX_STDERR_LINE_CHARS:
                line = line[: MAX_STDERR_LINE_CHARS - 3] + "..."
            self._stderr.append(line)
            self._stderr_total += 1

    async def _read_stdout(self) -> None:
        assert self._process is not None
        assert self._process.stdout is not None
        stdout = self._process.stdout
        while self._failure is None:  # bounded by the pipe: it ends when the process does
            try:
                line = await stdout.readline()
            except ValueError:
                await self._fail(LINE_TOO_LONG.format(name=self.name, limit=MAX_LINE_BYTES))
                return
            if not line:
                await self._exited()
                return
            await self._receive(line.decode("utf-8", "replace").strip())

    async def _exited(self) -> None:
        process = self._process
        assert process is not None
        if self._closing:
            return  # close() settles everything
        await self._end(process)
        calls = [f"{method}() #{id_}" for id_, (method, _) in sorted(self._pending.items())]
        if calls:
            what = EXITED.format(
                name=self.name,
                code=process.returncode,
                calls=", ".join(calls),
                were="was" if len(calls) == 1 else "were",
            )
        else:
            what = EXITED_IDLE.format(name=self.name, code=process.returncode)
        await self._fail(what)

    async def _receive(self, line: str) -> None:
        if not line:
            return  # blank lines carry nothing
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            await self._fail(GARBAGE.format(name=self.name, line=_quoted(line)))
            return
        assert self._hello is not None
        if not self._hello.done():
            await self._announced(message, line)
            return
        id_ = message.get("id")
        if isinstance(id_, int) and id_ in self._abandoned:
            self._abandoned.discard(id_)
            return
        waiting = self._pending.pop(id_, None) if isinstance(id_, int) else None
        if waiting is None or not isinstance(id_, int):
            await self._fail(UNKNOWN_ID.format(name=self.name, id=id_, line=_quoted(line)))
            return
        _, future = waiting
        error = message.get("error")
        if "result" in message and error is None:
            future.set_result(message["result"])
        elif isinstance(error, dict) and isinstance(error.get("message"), str):
            future.set_exception(program_error(error))
        else:
            self._pending[id_] = waiting  # still in flight: _fail fails it with the reason
            await self._fail(BAD_ANSWER.format(name=self.name, line=_quoted(line)))

    async def _announced(self, message: dict[str, Any], line: str) -> None:
        assert self._hello is not None
        methods = message.get("methods")
        if (
            message.get("bridge") != PROTOCOL_VERSION
            or not isinstance(methods, list)
            or not all(isinstance(method, str) for method in methods)
        ):
            await self._fail(BAD_HELLO.format(name=self.name, line=_quoted(line)))
            return
        self.methods = frozenset(methods)
        self._hello.set_result(message)

    # -- calls --------------------------------------------------------------------------------

    async def call(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send one request and wait for its answer: the ``result``, or the ``error`` raised
        as the matching exception (see :func:`program_error`)."""
        if self._process is None:
            raise BridgeError(NOT_STARTED.format(name=self.name))
        if self._failure is not None:
            raise BridgeError(self._failure)
        id_ = next(self._ids)
        try:
            line = json.dumps({"id": id_, "method": method, "params": params}, default=_jsonable)
        except (TypeError, ValueError) as error:
            refused = CANNOT_SEND.format(name=self.name, method=method, error=error)
            raise TypeError(refused) from None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[id_] = (method, future)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout_s
        try:
            # A program that stops reading its stdin blocks the write: that counts too.
            await asyncio.wait_for(self._write(line), self.call_timeout_s)
            done, _ = await asyncio.wait({future}, timeout=max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            done = set()
        except asyncio.CancelledError:
            self._abandon(id_)
            raise
        if not done:
            self._abandon(id_)
            call = f"{method}() #{id_}"
            what = TIMED_OUT.format(name=self.name, call=call, timeout=self.call_timeout_s)
            raise BridgeTimeoutError(what + self._tail())
        return future.result()

    async def _write(self, line: str) -> None:
        process = self._process
        assert process is not None
        assert process.stdin is not None
        if process.stdin.is_closing():
            return  # the reader reports why (the program exited, or broke the protocol)
        process.stdin.write(line.encode() + b"\n")
        try:
            # One drain at a time: older Pythons refuse concurrent drains of one writer.
            async with self._drain:
                await process.stdin.drain()
        except ConnectionError:
            pass  # the program is gone: its stdout ends, and the reader reports how

    def _abandon(self, id_: int) -> None:
        """Give up on call ``id_``: its late answer is dropped, and the program is told (a
        ``cancel`` notification, which needs no answer) in case it can stop the work."""
        if self._pending.pop(id_, None) is None:
            return  # answered (or failed) already
        self._abandoned.add(id_)
        process = self._process
        if process is not None and process.stdin is not None and not process.stdin.is_closing():
            notice = {"method": "cancel", "params": {"id": id_}}
            process.stdin.write(json.dumps(notice).encode() + b"\n")
