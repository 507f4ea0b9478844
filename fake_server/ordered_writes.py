"""Sync ``write(bytes)`` for a Python command's stdout and stderr (a registered command's
``ctx.stdout.write``) over the interpreter's async outputs, in the order they were made.

Example::

    writes = OrderedWrites()
    stdout, stderr = writes.sink(ctx.stdout), writes.sink(ctx.stderr)
    stdout.write(b"hi\\n")
    await writes.drain()
"""

from __future__ import annotations

import asyncio
from collections import deque

import bashkit

__all__ = ["OrderedSink", "OrderedWrites"]


class OrderedWrites:
    """Sync ``write(bytes)`` for a command's stdout and stderr over the interpreter's async
    outputs: writes go out in the order they were made, across both streams (a terminal shows
    them merged, and two pumps would race), while the command keeps running (a handler that
    writes and then waits still streams). The pump runs only while writes are pending, so
    nothing outlives the command."""

    def __init__(self) -> None:
        self._pending: deque[tuple[bashkit.CommandOutput, bytes]] = deque()
        self._gone: list[bashkit.CommandOutput] = []
        self._pump: asyncio.Task[None] | None = None

    def sink(self, output: bashkit.CommandOutput) -> OrderedSink:
        """The sink that writes to ``output`` in this order."""
        return OrderedSink(self, output)

    def write(self, output: bashkit.CommandOutput, data: bytes) -> None:
        if data and not any(output is gone for gone in self._gone):
            self._pending.append((output, bytes(data)))
            if self._pump is None or self._pump.done():
                self._pump = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        while self._pending:
            output, data = self._pending.popleft()
            try:
                await output.write(data)
            except (BrokenPipeError, RuntimeError):
                # The reader is gone, or the command's output was revoked: nobody can read it.
                self._gone.append(output)
                self._pending = deque(item for item in self._pending if item[0] is not output)

    async def drain(self) -> None:
        if self._pump is not None:
            await self._pump

    def close(self) -> None:
        """Drop what was not sent (the command was stopped)."""
        self._pending.clear()
        if self._pump is not None:
            self._pump.cancel()


class OrderedSink:
    """One stream of an :class:`OrderedWrites` (an :class:`~fake_server.streams.OutputSink`)."""

    def __init__(self, writes: OrderedWrites, output: bashkit.CommandOutput) -> None:
        self._writes = writes
        self._output = output

    def write(self, data: bytes) -> None:
        self._writes.write(self._output, data)
