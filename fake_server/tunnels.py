"""TCP tunnels into a sandbox: the services that listen on its ports, and one connection's bytes.

``POST /v1/sandboxes/{id}/tunnel/{port}`` with ``Upgrade: tcp-tunnel`` relays raw bytes between
the client and whatever listens on that port in the sandbox. Nothing in a fake sandbox listens
by itself, and a tunnel never reaches the host or the network: a test registers the service
for a sandbox and port (a Python coroutine, or a built-in one by name through the control API).

Example::

    async def greeter(connection: TunnelConnection) -> None:
        name = await connection.read()
        await connection.write(b"hello " + name)

    fake.tunnels.listen(sandbox_id, 8080, greeter)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

__all__ = ["BUILT_IN", "MAX_PORT", "TunnelConnection", "TunnelService", "Tunnels", "echo"]

MAX_PORT = 65535
#: Bytes a connection holds from its client before the client is told to wait (TCP's own
#: flow control: the fake stops reading from the socket until the service reads).
_BUFFERED = 256 << 10


class TunnelConnection:
    """One tunnel as its service sees it: bytes from the client, bytes back.

    ``read()`` returns ``b""`` once the client closed its side; ``write()`` returns once the
    bytes are on their way (it waits while the client reads slower than the service writes).
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        *,
        pause: Callable[[], None] = lambda: None,
        resume: Callable[[], None] = lambda: None,
    ) -> None:
        self._send = send
        self._pause = pause
        self._resume = resume
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._held = 0
        self._paused = False
        self._closed = False

    # -- the client's side (the route feeds these) ----------------------------------------------

    def received(self, data: bytes) -> None:
        """Bytes from the client."""
        if self._closed or not data:
            return
        self._chunks.put_nowait(data)
        self._held += len(data)
        if self._held > _BUFFERED and not self._paused:
            self._paused = True
            self._pause()

    def client_closed(self) -> None:
        """The client closed its side: the service reads ``b""`` after what was sent."""
        if not self._closed:
            self._closed = True
            self._chunks.put_nowait(b"")

    # -- the service's side ---------------------------------------------------------------------

    async def read(self) -> bytes:
        """The next bytes from the client, or ``b""`` once it closed its side.

        Example::

            while data := await connection.read():
                await connection.write(data)
        """
        data = await self._chunks.get()
        if not data:
            self._chunks.put_nowait(b"")  # every later read sees the end too
            return data
        self._held -= len(data)
        if self._paused and self._held <= _BUFFERED // 2:
            self._paused = False
            self._resume()
        return data

    async def write(self, data: bytes) -> None:
        """Send ``data`` to the client."""
        if data:
            await self._send(data)


class TunnelService(Protocol):
    """What listens on a port: it serves one connection and returns when done with it (the
    tunnel then closes)."""

    def __call__(self, connection: TunnelConnection) -> Awaitable[None]: ...


async def echo(connection: TunnelConnection) -> None:
    """Send every byte back until the client closes its side.

    Example::

        fake.tunnels.listen(sandbox_id, 7, echo)
    """
    while data := await connection.read():
        await connection.write(data)


#: The services the control API can start by name.
BUILT_IN: dict[str, TunnelService] = {"echo": echo}


class Tunnels:
    """Which service listens on which port of which sandbox."""

    def __init__(self) -> None:
        self._services: dict[tuple[str, int], TunnelService] = {}

    def listen(self, sandbox_id: str, port: int, service: TunnelService) -> None:
        """Serve tunnels to ``port`` of the sandbox with ``service`` (replacing any before).

        Example::

            fake.tunnels.listen("sb_...", 8080, echo)
        """
        if not 1 <= port <= MAX_PORT:
            raise ValueError(f"port must be between 1 and {MAX_PORT}")
        self._services[(sandbox_id, port)] = service

    def close(self, sandbox_id: str, port: int) -> bool:
        """Stop serving ``port`` of the sandbox; whether something listened there."""
        return self._services.pop((sandbox_id, port), None) is not None

    def service(self, sandbox_id: str, port: int) -> TunnelService | None:
        return self._services.get((sandbox_id, port))

    def ports(self, sandbox_id: str) -> list[int]:
        """The ports that have a service in the sandbox, in order."""
        return sorted(port for sandbox, port in self._services if sandbox == sandbox_id)

    def forget(self, sandbox_id: str) -> None:
        """A sandbox went away: so did what listened in it."""
        for key in [key for key in self._services if key[0] == sandbox_id]:
            del self._services[key]

    def clear(self) -> None:
        self._services.clear()
