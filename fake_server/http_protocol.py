"""The fake's HTTP connections: what happens before a route runs, and to clients that stall.

- A request aiohttp cannot parse (a header with a stray ``\\r``, a method that is not one, a
  request line too long) never reaches the app: aiohttp answers it itself, in plain text that
  quotes the offending bytes (an API key in a header, say), and logs it with a traceback. A
  client of the fake gets the API's JSON envelope instead, with a message that quotes nothing
  it sent; the log gets one line without the request's bytes, and the journal an entry.
- A connection that does not finish a request's headers within ``header_timeout_s`` is closed
  (slow-header clients would otherwise hold sockets until the process runs out of them).
- A request body that a route is reading and that makes no progress for ``body_timeout_s`` is
  answered 408 and its connection closed (:class:`BodyDeadline`; a client announcing more
  than it sends would otherwise hold its socket and its handler forever).
- A client that stops reading an answer for ``write_timeout_s`` is cut off, and the part of
  the answer buffered for it is dropped (otherwise every stalled download stays in memory).
- A server that stops cancels the requests its connections are handling at once (aiohttp
  waits for them first, and a stream or a request held at a gate never ends by itself).
- A handler may ask to end with its client (:func:`end_with_client`): aiohttp does not cancel
  handlers whose client left, and a buffered ``/exec`` would run its command on for nobody. A
  request that waits learns that its client left from the same signal (:func:`connection_closed`)
  rather than by asking the transport over and over.

Example::

    runner = web.AppRunner(fake.app())
    await runner.setup()
    harden_connections(runner, fake)
"""

from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from fake_server import errors
from fake_server.errors import ApiError
from fake_server.json_body import encode

if TYPE_CHECKING:
    from fake_server.fake import FakeCreateOS

__all__ = [
    "BodyDeadline",
    "BodyStalled",
    "connection_closed",
    "end_with_client",
    "harden_connections",
]

log = logging.getLogger("fake_server")


class _HardenedRequestHandler(RequestHandler):
    """aiohttp's per-connection protocol, with its own error answers in the envelope, a
    deadline for request headers and one for a client that stops reading."""

    _manager: _HardenedServer

    def __init__(self, manager: _HardenedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        #: How many requests had arrived when the header deadline was set.
        self._header_deadline_count = 0
        self._write_deadline: asyncio.TimerHandle | None = None
        #: Whether the request being handled ends when its client leaves (end_with_client).
        self.ends_with_client = False
        #: Done once the connection is lost; made when a request first asks (connection_closed).
        self._lost: asyncio.Future[None] | None = None

    # -- headers -----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        # Called on every packet: the base class named directly costs less than super().
        RequestHandler.data_received(self, data)
        if self._messages:  # a request's headers are complete (the usual packet): not waiting
            return
        stale = self._header_deadline is None or self._header_deadline_count != self._request_count
        if stale and self._waiting_for_headers():
            self._await_headers()  # the start of a next request on a kept-alive connection

    def _waiting_for_headers(self) -> bool:
        # Idle in aiohttp's request loop (its waiter pending) with no parsed request queued:
        # either nothing came yet or a request's head is still incomplete. While a request is
        # handled there is no waiter.
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._messages

    def _await_headers(self) -> None:
        timeout = self._manager.fake.config.header_timeout_s
        if timeout is not None:
            self._cancel_header_deadline()
            self._header_deadline_count = self._request_count
            self._header_deadline = self._loop.call_later(timeout, self._headers_due)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_due(self) -> None:
        self._header_deadline = None
        if self._request_count == self._header_deadline_count and self._waiting_for_headers():
            log.info("fake-createos: closed a connection that sent no complete request in time")
            self.force_close()

    # -- writes ------------------------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        timeout = self._manager.fake.config.write_timeout_s
        if timeout is not None and self._write_deadline is None:
            self._write_deadline = self._loop.call_later(timeout, self._write_due)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_deadline()

    def _write_due(self) -> None:
        self._write_deadline = None
        log.info("fake-createos: cut off a client that stopped reading its answer")
        transport = self.transport
        if transport is not None:
            transport.abort()  # drops what is buffered for it; close() would wait to send it

    def _cancel_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_deadline()
        self._cancel_write_deadline()
        if self.ends_with_client and self._task_handler is not None:
            # What aiohttp's handler_cancellation does for every request, for this one only
            # (most handlers are better left to finish what they started).
            self._task_handler.cancel()
        super().connection_lost(exc)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def lost(self) -> asyncio.Future[None]:
        """A future done once this connection is lost (already done if it is)."""
        if self._lost is None:
            self._lost = self._loop.create_future()
            if self.transport is None:
                self._lost.set_result(None)
        return self._lost

    # -- stopping ----------------------------------------------------------------------------

    async def shutdown(self, timeout: float | None = 15.0) -> None:
        """Close this connection for a server that stops, cancelling the request it is handling
        (``timeout`` bounds how long that request may take to unwind)."""
        # aiohttp waits up to `timeout` for the request in progress to end by itself (recent
        # releases as long again once they have cancelled it): a stream, a long-poll, a request
        # held at a gate or by a hang fault never ends by itself, so each held a stopping server
        # for both waits (2 s with the runner's 1 s; 2 min for aiohttp's TestServer).
        # Cancelled now, the request ends at its next await: a gate lets go of it, an exec
        # stops its command, a stream ends, and its client sees the connection close.
        transport = self.transport
        handler = self._task_handler
        if handler is not None and not handler.done():
            handler.cancel()
        await super().shutdown(timeout)
        if transport is not None and transport.get_write_buffer_size():
            # A client that stopped reading: close() would keep the socket open until what
            # is buffered for it is sent, which a server whose loop ends next never does.
            transport.abort()

    # -- answers aiohttp gives itself --------------------------------------------------------

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # Neither ``message`` nor ``exc`` is shown or logged: both may quote the request.
        if request.writer.output_size > 0:  # an answer is already on its way: nothing to add
            raise ConnectionError("the response was already being sent")
        if _opens_http2(exc):
            # A client trying HTTP/2 first (the TypeScript SDK does, on every request over
            # http://) falls back to HTTP/1.1 on this answer: a probe, not a request of the
            # API, so neither journaled (over a third of its entries were these) nor logged as one.
            log.debug("fake-createos: declined an HTTP/2 connection preface")
            text = errors.HTTP2_DECLINED
        else:
            log.info("fake-createos: answered %d to a request it could not parse", status)
            text = errors.REQUEST_UNPARSABLE if status < 500 else HTTPStatus(status).phrase.lower()
            self._manager.journal_unparsable(status, text)
        body = encode(ApiError(status, text).envelope())
        response = web.Response(status=status, body=body, content_type="application/json")
        response.force_close()  # what follows a request that could not be parsed is noise
        return response


class BodyStalled(Exception):
    """None of a request's body arrived for its deadline (raised where the route reads it)."""


class BodyDeadline:
    """Ends the wait for a request body that makes no progress: once none of it has arrived
    for ``timeout_s`` (on the loop's time, as the header deadline), the read waiting for it
    raises :class:`BodyStalled`. Each :meth:`progress` starts the wait anew; :meth:`cancel`
    when the body is read. Set only while a route reads a body not yet whole: a body that
    came with its head (most do) costs nothing, and a request held before it reads its body
    (at a gate) is not cut off for it.

    Example::

        deadline = BodyDeadline(request.content, 15.0)
        try:
            while chunk := await request.content.readany():
                deadline.progress()
        finally:
            deadline.cancel()
    """

    __slots__ = ("_content", "_handle", "_last", "_loop", "_received", "_timeout")

    def __init__(self, content: StreamReader, timeout_s: float) -> None:
        self._content = content
        self._timeout = timeout_s
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._received = content.total_bytes
        self._handle = self._loop.call_at(self._last + timeout_s, self._due)

    def progress(self) -> None:
        """Some of the body was read (one clock read; the timer is moved only when it fires)."""
        self._last = self._loop.time()
        self._received = self._content.total_bytes

    def cancel(self) -> None:
        self._handle.cancel()

    def _due(self) -> None:
        received = self._content.total_bytes
        if received != self._received:
            # Bytes arrived that the route has not read yet: the loop may run this timer before
            # the read they woke (a loop that was held up finds both due at once).
            self._received = received
            self._last = self._loop.time()
        due = self._last + self._timeout
        if self._loop.time() < due:  # it progressed since: wait for the rest of its time
            self._handle = self._loop.call_at(due, self._due)
            return
        log.info("fake-createos: answered 408 to a request whose body stopped arriving")
        self._content.set_exception(BodyStalled())


def _opens_http2(exc: BaseException | None) -> bool:
    """Whether aiohttp's parser stopped at an HTTP/2 connection preface (``PRI * HTTP/2.0``):
    its C parser says so in these words (elsewhere it is just unparsable)."""
    return isinstance(exc, BadHttpMessage) and exc.message.startswith("Pause on PRI/Upgrade")


class _HardenedServer(web.Server):
    """The protocol factory of a runner, making :class:`_HardenedRequestHandler` protocols."""

    #: The fake served: its journal, and its config's deadlines.
    fake: FakeCreateOS

    def __call__(self) -> RequestHandler:
        return _HardenedRequestHandler(self, loop=self._loop, **self._kwargs)

    def journal_unparsable(self, status: int, text: str) -> None:
        """Journal a request aiohttp could not parse: no method, path or tenant is known."""
        journal = self.fake.journal
        now = self.fake.clock.now()
        journal.request(
            journal.ticket(), now, "", None, "", None, None, None, status, now, (), text
        )


def end_with_client(request: web.Request, ending: bool) -> None:
    """While ``ending``, a client that closes its connection cancels the handler of
    ``request`` (on a connection :func:`harden_connections` made; elsewhere nothing changes).

    Example::

        end_with_client(request, True)
        try:
            result = await runtime.exec(sandbox, spec)   # cancelled if the client leaves
        finally:
            end_with_client(request, False)
    """
    protocol = request.protocol
    if isinstance(protocol, _HardenedRequestHandler):
        protocol.ends_with_client = ending


def connection_closed(request: web.Request) -> asyncio.Future[None] | None:
    """A future done once the connection of ``request`` is lost (its client left, or the
    server closed it), on a connection :func:`harden_connections` made; ``None`` elsewhere.
    Shared by the connection's requests: await it shielded.

    Example::

        lost = connection_closed(request)
        if lost is not None:
            await asyncio.shield(lost)
    """
    protocol = request.protocol
    return protocol.lost() if isinstance(protocol, _HardenedRequestHandler) else None


def harden_connections(runner: web.BaseRunner, fake: FakeCreateOS) -> None:
    """Give the set-up ``runner``'s connections the fake's answers to unparsable requests and
    its header and write deadlines (from ``fake.config``). Call it after ``setup()``; it also
    applies to a runner already serving, from its next connection on.

    Example::

        harden_connections(runner, fake)
    """
    server = runner.server
    if server is None:
        raise RuntimeError("set the runner up first")
    # The runner built its Server already; it only gains a different protocol class.
    server.__class__ = _HardenedServer
    hardened: _HardenedServer = server  # type: ignore[assignment]
    hardened.fake = fake
