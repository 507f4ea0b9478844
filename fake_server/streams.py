"""Byte streams between the fake and the commands it runs: stdin fed over time, output sinks.

Plain asyncio, no interpreter: the shell, the managed processes and user-registered commands
all share these.

Example:
    >>> import asyncio
    >>> reader = StdinReader(b"one\\ntwo")
    >>> asyncio.run(reader.read_until(b"\\n"))
    (b'one', True)
    >>> asyncio.run(reader.read())
    b'two'
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

__all__ = ["BufferSink", "CappedSink", "LoopBudget", "OutputSink", "StdinReader"]

STDIN_FED_AFTER_CLOSE = "stdin is closed"


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
        #: Whether a read is waiting for data right now (the command is blocked on its
        #: stdin, not computing: what a schedule explorer needs to tell the two apart).
        self.waiting = False

    @property
    def closed(self) -> bool:
        """Whether EOF has been signalled (buffered bytes may still be unread)."""
        return self._closed

    def has_data(self) -> bool:
        """Whether unread bytes are buffered."""
        return bool(self._buffer)

    @property
    def buffered(self) -> int:
        """How many bytes are buffered, not read yet."""
        return len(self._buffer)

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
        return self._take(len(self._buffer))

    async def read_chunk(self) -> bytes:
        """Whatever is buffered, waiting for some if needed; ``b""`` means EOF.

        This lets ``cat`` echo input as it arrives (an interactive process).
        """
        while not self._buffer and not self._closed:
            await self._wait()
        return self._take(len(self._buffer))

    async def read_until(self, delimiter: bytes) -> tuple[bytes, bool]:
        """Bytes up to ``delimiter`` (consumed, not returned), and whether it was found: at
        EOF without it, the rest and False (what ``read`` needs for its exit status)."""
        while True:
            index = self._buffer.find(delimiter)
            if index >= 0:
                data = self._take(index)
                self._take(len(delimiter))
                return data, True
            if self._closed:
                return self._take(len(self._buffer)), False
            await self._wait()

    async def read_count(self, count: int) -> bytes:
        """Up to ``count`` bytes: fewer only at EOF."""
        while len(self._buffer) < count and not self._closed:
            await self._wait()
        return self._take(count)

    def unread(self, data: bytes) -> None:
        """Put ``data`` back in front (a reader took more than it needed)."""
        self._buffer[:0] = data

    def _take(self, count: int) -> bytes:
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def _wait(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.clear()
        self.waiting = True
        try:
            await self._changed.wait()
        finally:
            self.waiting = False

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


class CappedSink:
    """Collects up to ``cap`` bytes shared with its siblings; past that it drops the rest and
    calls ``on_overflow`` once (the buffered ``/exec`` stops the command there).

    Example:
        >>> hits = []
        >>> out = CappedSink(4, on_overflow=lambda: hits.append(1))
        >>> err = out.sibling()
        >>> out.write(b"abc"); err.write(b"de")
        >>> out.getvalue(), err.getvalue(), out.overflowed, hits
        (b'abc', b'd', True, [1])
    """

    def __init__(self, cap: int, *, on_overflow: Callable[[], None] | None = None) -> None:
        self._data = bytearray()
        self._budget = [cap]
        self._overflowed = [False]
        self._on_overflow = on_overflow

    def sibling(self) -> CappedSink:
        """Another sink drawing on the same budget (stdout and stderr share one cap)."""
        sibling = CappedSink(0, on_overflow=self._on_overflow)
        sibling._budget = self._budget
        sibling._overflowed = self._overflowed
        return sibling

    @property
    def overflowed(self) -> bool:
        return self._overflowed[0]

    def write(self, data: bytes) -> None:
        room = self._budget[0]
        if len(data) <= room:  # the usual write: all of it fits
            self._data += data
            self._budget[0] = room - len(data)
            return
        self._data += data[:room]
        self._budget[0] = 0
        if not self._overflowed[0]:
            self._overflowed[0] = True
            if self._on_overflow is not None:
                self._on_overflow()

    def getvalue(self) -> bytes:
        return bytes(self._data)


class LoopBudget:
    """How much work a task does before it lets the event loop run the others: :meth:`spend`
    counts the work and, each time ``budget`` is used up, gives the loop one turn.

    A stream writer needs this: aiohttp's ``write`` waits only while the transport is paused
    (a client that does not keep up), so frames already at hand for a client that reads fast
    (a replay, a command writing 10 MiB) were all written in one go, and every other request
    waited for the whole stream.

    Example:
        >>> import asyncio
        >>> async def stream() -> None:
        ...     budget = LoopBudget(64 << 10)
        ...     for _ in range(48):
        ...         await budget.spend(4096)  # a 4 KiB write: a turn for others every 16
        >>> async def turns_others_had() -> int:
        ...     writer, turns = asyncio.ensure_future(stream()), 0
        ...     while not writer.done():
        ...         await asyncio.sleep(0)
        ...         turns += 1
        ...     return turns
        >>> asyncio.run(turns_others_had())  # 3 during the stream, and the one it ended in
        4
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._spent = 0

    async def spend(self, amount: int) -> None:
        """Count ``amount`` of work; yield one loop turn once the budget is used up."""
        self._spent += amount
        if self._spent >= self.budget:
            self._spent = 0
            await asyncio.sleep(0)
