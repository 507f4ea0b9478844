"""Managed processes: a command running in the sandbox shell, its bounded output journal, and the
operations the API offers on it (connect with replay, input, stdin close, signal, wait, delete).

Plain asyncio: the HTTP layer only turns frames into NDJSON lines.

Example::

    process = ManagedProcess(
        process_id="proc_1", pid=100, cmd="/bin/bash", args=["-lc", "echo hi"], cwd="/",
        clock=clock, created_at=clock.wall(),
    )
    process.start(shell, Invocation(process.cmd, process.args, fs=sandbox.fs))
    async for frame in process.connect(after=0, heartbeat_s=5):
        ...   # {"type": "data", "seq": 1, ...}, then {"type": "exit", "exit_code": 0, ...}

A live follower costs the fake little per frame: the frames at hand are taken (and written) as
one batch, a busy follower gathers the next ones for a moment (see ``GATHER_S``) instead of
waking for each chunk the interpreter hands over, and a data frame's NDJSON line is built
without the JSON encoder.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fake_server import errors
from fake_server.clock import Clock, TimerHandle, isoformat
from fake_server.errors import ApiError
from fake_server.shell import Invocation, Shell, Terminal
from fake_server.streams import StdinReader

__all__ = [
    "ALLOWED_SIGNALS",
    "DEFAULT_OUTPUT_CAP",
    "ManagedProcess",
    "OutputEvicted",
    "OutputFrame",
    "OutputJournal",
    "ProcessState",
]

DEFAULT_OUTPUT_CAP = 1 << 20
ALLOWED_SIGNALS = (
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGKILL",
    "SIGTERM",
    "SIGUSR1",
    "SIGUSR2",
    "SIGWINCH",
)
#: Signals that end the emulated process tree: each one's default action but SIGWINCH's (a
#: window change, ignored). The interpreter has no signals, so a script's `trap` never runs:
#: the default action is what a process that sets none gets.
_TERMINATING = frozenset(ALLOWED_SIGNALS) - {"SIGWINCH"}
#: Frames ``connect`` takes from the journal at a time: a replay of a large window (tiny frames
#: of a PTY's echo, a raised cap) then never copies the whole window in one step.
CONNECT_BATCH = 256
#: Real seconds a busy follower (one that wrote its last batch less than this ago) lets new
#: output gather before it takes it: the interpreter hands output over ~4 KiB at a time, and a
#: follower woken for each chunk spent more on the waking and the writing than on the bytes.
#: Real time, not the fake's clock: it is how the fake writes, not something a sandbox does
#: (a manual clock that never moves must not hold a stream). A follower that was quiet gets
#: its first frame at once.
GATHER_S = 0.001
#: Bytes that end a gathering at once (their base64 is one write slice of the stream writer), and
#: never more than half the journal's cap: a follower must not gather until its output is evicted.
GATHER_BYTES = 48 << 10


log = logging.getLogger("fake_server")
#: What a process whose run failed inside the fake writes before it ends (status 1).
_INTERNAL_ERROR = b"fake-createos: internal error in the fake (its log has the traceback)\n"


class ProcessState(str, enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    TERMINATING = "terminating"
    EXITED = "exited"
    FAILED = "failed"


class OutputEvicted(Exception):
    """The requested cursor is older than the oldest retained output frame."""

    def __init__(self, oldest_available_seq: int) -> None:
        super().__init__(errors.OUTPUT_EVICTED)
        self.oldest_available_seq = oldest_available_seq


@dataclass(frozen=True, slots=True)
class OutputFrame:
    seq: int
    stream: str
    data: bytes

    def as_json(self) -> dict[str, Any]:
        return {
            "type": "data",
            "seq": self.seq,
            "stream": self.stream,
            "data_base64": base64.b64encode(self.data).decode("ascii"),
        }

    def ndjson(self) -> bytes:
        """:meth:`as_json` as one compact NDJSON line, built directly: base64 needs no JSON
        escaping, and the encoder cost four times the base64 itself.

        Example:
            >>> OutputFrame(7, "stdout", b"hi").ndjson()
            b'{"type":"data","seq":7,"stream":"stdout","data_base64":"aGk="}\\n'
        """
        return _DATA_LINE % (self.seq, self.stream.encode(), base64.b64encode(self.data))


_DATA_LINE = b'{"type":"data","seq":%d,"stream":"%s","data_base64":"%s"}\n'


class OutputJournal:
    """Output frames numbered from 1 across stdout and stderr, the oldest evicted past a byte cap.

    The retained frames always carry consecutive numbers, ``oldest_seq`` to ``newest_seq``
    (each append takes the next number; eviction only ever drops the oldest), so they are kept
    by number and :meth:`since` looks up the frames it returns instead of scanning the window:
    O(1 + returned). A live follower asks for the few newest frames after every write; a scan
    made each of those calls cost the whole window.

    Example:
        >>> output = OutputJournal(cap=10)
        >>> output.append("stdout", b"hello").seq
        1
        >>> [(frame.seq, frame.data) for frame in output.since(0)]
        [(1, b'hello')]
        >>> output.append("stderr", b"world!").seq  # 11 bytes: frame 1 no longer fits
        2
        >>> output.window()
        {'oldest_seq': 2, 'newest_seq': 2, 'bytes': 6}
        >>> output.since(0)
        Traceback (most recent call last):
        fake_server.processes.OutputEvicted: output_offset_expired
    """

    def __init__(self, cap: int = DEFAULT_OUTPUT_CAP) -> None:
        self.cap = cap
        #: The retained frames by number: ``oldest_seq`` to ``newest_seq``, none missing.
        self._frames: dict[int, OutputFrame] = {}
        self.bytes = 0
        self.newest_seq = 0
        #: Bytes ever appended, evicted ones included: how far the output has got.
        self.appended_bytes = 0

    @property
    def oldest_seq(self) -> int:
        """The oldest retained frame's number (``newest_seq`` while there is none)."""
        return self.newest_seq - len(self._frames) + 1 if self._frames else self.newest_seq

    def append(self, stream: str, data: bytes) -> OutputFrame:
        """Add the next frame, then evict the oldest while over the cap (the newest always
        stays, however large)."""
        self.newest_seq += 1
        frame = OutputFrame(self.newest_seq, stream, data)
        self._frames[frame.seq] = frame
        self.bytes += len(data)
        self.appended_bytes += len(data)
        while self.bytes > self.cap and len(self._frames) > 1:
            self.bytes -= len(self._frames.pop(self.oldest_seq).data)
        return frame

    def since(self, after: int, limit: int | None = None) -> list[OutputFrame]:
        """Frames with ``seq > after``, oldest first, at most ``limit`` of them; raises
        :class:`OutputEvicted` if some of them were dropped.

        Example:
            >>> output = OutputJournal()
            >>> for data in (b"a", b"b", b"c"):
            ...     _ = output.append("stdout", data)
            >>> [frame.seq for frame in output.since(0, limit=2)], output.since(3)
            ([1, 2], [])
        """
        first = after + 1
        if first <= self.newest_seq and (not self._frames or first < self.oldest_seq):
            raise OutputEvicted(self.oldest_seq if self._frames else self.newest_seq + 1)
        last = self.newest_seq if limit is None else min(self.newest_seq, after + limit)
        frames = self._frames
        return [frames[seq] for seq in range(first, last + 1)]

    def window(self) -> dict[str, int]:
        return {"oldest_seq": self.oldest_seq, "newest_seq": self.newest_seq, "bytes": self.bytes}


class _OutputSink:
    __slots__ = ("_process", "_stream")

    def __init__(self, process: ManagedProcess, stream: str) -> None:
        self._process = process
        self._stream = stream

    def write(self, data: bytes) -> None:
        if data:
            self._process.output.append(self._stream, data)
            self._process.notify()


class ManagedProcess:
    """One managed process in a sandbox."""

    def __init__(
        self,
        *,
        process_id: str,
        pid: int,
        cmd: str,
        args: list[str],
        cwd: str,
        clock: Clock,
        created_at: datetime,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        stdin_cap: int | None = None,
        terminal: Terminal | None = None,
        on_exit: Callable[[ManagedProcess], None] = lambda process: None,
    ) -> None:
        self.process_id = process_id
        self.pid = pid
        self.cmd = cmd
        self.args = args
        self.cwd = cwd
        #: A PTY process's terminal (its size, its echo); None for a pipe process.
        self.terminal = terminal
        self.kind = "process" if terminal is None else "pty"
        self.clock = clock
        self.created_at = created_at
        self.output = OutputJournal(output_cap)
        self.stdin = StdinReader(closed=False)
        #: Unread input the process may hold (None: any): a client that sends more than it
        #: reads is refused rather than fill the fake's memory.
        self.stdin_cap = stdin_cap
        self.state = ProcessState.STARTING
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.finished_at: datetime | None = None
        self.input_seq = 0
        #: Called once when the process exits (the fake journals it).
        self.on_exit = on_exit
        self._task: asyncio.Task[None] | None = None
        #: Followers waiting for output: each future and the ``appended_bytes`` it waits for.
        self._waiters: list[tuple[asyncio.Future[bool], int]] = []
        self._exited = asyncio.Event()

    # -- running ----------------------------------------------------------------------------

    def start(self, shell: Shell, invocation: Invocation) -> None:
        """Start the invocation in the shell as a task on the running loop; its output goes
        to this process's journal (one ``pty`` stream for a PTY, as a terminal merges them)."""
        if self.terminal is None:
            invocation.stdout = _OutputSink(self, "stdout")
            invocation.stderr = _OutputSink(self, "stderr")
        else:
            invocation.stdout = invocation.stderr = _OutputSink(self, "pty")
        self.state = ProcessState.RUNNING
        self._task = asyncio.get_running_loop().create_task(self._run(shell, invocation))

    async def _run(self, shell: Shell, invocation: Invocation) -> None:
        try:
            code = await shell.run(invocation)
        except asyncio.CancelledError:
            # Cancelled by terminate(), which records the signal itself.
            return
        except Exception:
            # A bug of the fake's: the process still ends (one left "running" kept every
            # wait and follower waiting), saying why, and the server goes on.
            log.exception("fake-createos: process %s failed inside the fake", self.process_id)
            if self.terminal is None:
                self.output.append("stderr", _INTERNAL_ERROR)
            else:
                self.output.append("pty", _INTERNAL_ERROR.replace(b"\n", b"\r\n"))
            code = 1
        self._finish(exit_code=code, signal=None)

    def _finish(self, *, exit_code: int | None, signal: str | None) -> None:
        if self.exited:
            return
        self.exit_code = exit_code
        self.signal = signal
        self.state = ProcessState.EXITED
        self.finished_at = self.clock.wall()
        self.stdin.close()
        self._exited.set()
        self.notify()
        self.on_exit(self)

    @property
    def exited(self) -> bool:
        return self.state is ProcessState.EXITED

    def terminate(self, signal: str = "SIGTERM") -> None:
        """End the whole process tree with ``signal`` (no-op once exited)."""
        if self.exited:
            return
        self.state = ProcessState.TERMINATING
        if self._task is not None:
            self._task.cancel()
        self._finish(exit_code=None, signal=signal)

    # -- API operations ----------------------------------------------------------------------

    def send_input(self, data: bytes) -> int:
        if self.exited:
            raise ApiError(409, errors.PROCESS_EXITED)
        if self.stdin.closed:
            raise ApiError(409, errors.PROCESS_STDIN_CLOSED)
        cap = self.stdin_cap
        if cap is not None and self.stdin.buffered + len(data) > cap:
            unread = self.stdin.buffered
            raise ApiError(409, errors.PROCESS_STDIN_FULL.format(unread=unread, cap=cap))
        if self.terminal is not None and self.terminal.echo:
            # The terminal echoes what is typed, whoever reads it (and maps NL to CR NL).
            self.output.append("pty", data.replace(b"\r", b"\n").replace(b"\n", b"\r\n"))
            self.notify()
        self.stdin.feed(data.replace(b"\r", b"\n") if self.terminal is not None else data)
        self.input_seq += 1
        return self.input_seq

    def close_stdin(self) -> None:
        if self.kind == "pty":
            raise ApiError(409, errors.PROCESS_IS_PTY)
        if self.exited:
            raise ApiError(409, errors.PROCESS_EXITED)
        if self.stdin.closed:
            raise ApiError(409, errors.PROCESS_STDIN_CLOSED)
        self.stdin.close()

    def deliver_signal(self, signal: str) -> None:
        if signal not in ALLOWED_SIGNALS:
            raise ApiError.invalid(
                "signal", errors.SIGNAL_INVALID.format(allowed=", ".join(ALLOWED_SIGNALS))
            )
        if self.exited:
            raise ApiError(409, errors.PROCESS_EXITED)
        if signal in _TERMINATING:
            self.terminate(signal)

    async def wait(self, timeout_s: float | None) -> None:
        """Wait for the exit; 408 once ``timeout_s`` of clock time passes first."""
        if self.exited:
            return
        waiter = asyncio.ensure_future(self._exited.wait())
        timer = asyncio.ensure_future(self.clock.sleep(timeout_s)) if timeout_s else None
        try:
            pending = {waiter} | ({timer} if timer else set())
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiter, timer):
                if task is not None and not task.done():
                    task.cancel()
        if not self.exited:
            raise ApiError(408, errors.WAIT_TIMEOUT)

    def connect(
        self, *, after: int, heartbeat_s: float
    ) -> AsyncIterator[OutputFrame | dict[str, Any]]:
        """Replay frames after ``after``, follow live output, then the exit frame.

        Data frames are :class:`OutputFrame` (``.as_json()`` is the wire form); heartbeat, exit
        and error frames are already wire dicts.
        Raises :class:`OutputEvicted` at once when the cursor is too old (so the answer can be a
        410 without waiting for output); if output the reader still needed is evicted while it
        follows, an in-stream ``output_offset_expired`` error frame ends the stream instead.
        """
        return _one_by_one(self.connect_batches(after=after, heartbeat_s=heartbeat_s))

    def connect_batches(
        self, *, after: int, heartbeat_s: float, gather_s: float = GATHER_S
    ) -> AsyncIterator[list[OutputFrame] | dict[str, Any]]:
        """:meth:`connect` with the data frames taken together as lists (never empty), for a
        writer that writes each list in one go; ``gather_s``: see :data:`GATHER_S`.

        Example::

            async for batch in process.connect_batches(after=0, heartbeat_s=5):
                ...   # [OutputFrame(1, ...), OutputFrame(2, ...)], then {"type": "exit", ...}
        """
        frames = self.output.since(after, CONNECT_BATCH)
        return self._follow(after, frames, heartbeat_s, gather_s)

    async def _follow(
        self, cursor: int, frames: list[OutputFrame], heartbeat_s: float, gather_s: float
    ) -> AsyncIterator[list[OutputFrame] | dict[str, Any]]:
        loop = asyncio.get_running_loop()
        written_at = loop.time()
        while True:
            if frames:
                yield frames
                cursor = frames[-1].seq
                written_at = loop.time()  # the consumer asks for more once it wrote them
            if self.exited and cursor >= self.output.newest_seq:
                yield self.exit_frame()
                return
            if cursor >= self.output.newest_seq:
                taken = self.output.appended_bytes
                if not await self._changed(heartbeat_s):
                    yield {"type": "heartbeat"}
                elif not self.exited and loop.time() - written_at < gather_s:
                    await self._gathered(taken, gather_s)
            try:
                frames = self.output.since(cursor, CONNECT_BATCH)
            except OutputEvicted as evicted:
                yield {
                    "type": "error",
                    "error": errors.OUTPUT_EVICTED,
                    "oldest_available_seq": evicted.oldest_available_seq,
                }
                return

    def exit_frame(self) -> dict[str, Any]:
        return {"type": "exit", "exit_code": self.exit_code, "signal": self.signal}

    # -- change notification ------------------------------------------------------------------

    def notify(self) -> None:
        """Wake the followers waiting for what the output (or the exit) now is."""
        if not self._waiters:
            return
        appended = self.output.appended_bytes
        waiting = []
        for future, enough in self._waiters:
            if appended >= enough or self.exited:
                _settle(future, True)
            elif not future.done():
                waiting.append((future, enough))
        self._waiters = waiting

    async def _changed(self, timeout_s: float) -> bool:
        """Wait for new output or the exit; False when ``timeout_s`` passed with neither."""
        timer = self.clock.call_later
        return await self._output(self.output.appended_bytes + 1, timeout_s, timer)

    async def _gathered(self, taken: int, timeout_s: float) -> None:
        """Let output gather: until ``GATHER_BYTES`` (at most half the cap) wait past
        ``taken`` (the ``appended_bytes`` the follower has), the exit, or ``timeout_s`` real
        seconds."""
        enough = taken + min(GATHER_BYTES, max(1, self.output.cap // 2))
        await self._output(enough, timeout_s, asyncio.get_running_loop().call_later)

    async def _output(
        self, enough: int, timeout_s: float, call_later: Callable[..., TimerHandle]
    ) -> bool:
        """Wait until ``appended_bytes`` reaches ``enough`` or the exit (True: ``notify`` let
        the wait go), or until ``call_later`` runs out ``timeout_s`` (False)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiter = (future, enough)
        self._waiters.append(waiter)
        timer = call_later(timeout_s, _settle, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            if future.cancelled() or not future.result():
                with contextlib.suppress(ValueError):  # a notify meanwhile let it go
                    self._waiters.remove(waiter)

    # -- views -----------------------------------------------------------------------------------

    def view(self) -> dict[str, Any]:
        view: dict[str, Any] = {
            "process_id": self.process_id,
            "kind": self.kind,
            "pid": self.pid,
            "state": self.state.value,
            "leader_exited": self.exited,
            "tree_exited": self.exited,
            "created_at": isoformat(self.created_at),
            "exit_code": self.exit_code,
            "cmd": self.cmd,
            "args": list(self.args),
            "cwd": self.cwd,
            "output": self.output.window(),
        }
        if self.finished_at is not None:
            view["finished_at"] = isoformat(self.finished_at)
        if self.signal is not None:
            view["signal"] = self.signal
        return view


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


async def _one_by_one(
    batches: AsyncIterator[list[OutputFrame] | dict[str, Any]],
) -> AsyncIterator[OutputFrame | dict[str, Any]]:
    async for batch in batches:
        if isinstance(batch, list):
            for frame in batch:
                yield frame
        else:
            yield batch
