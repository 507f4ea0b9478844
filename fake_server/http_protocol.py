"""Answers aiohttp gives before any route runs, in the API's envelope.

A request aiohttp cannot parse (a header with a stray ``\\r``, a method that is not one, a
request line too long) never reaches the app: aiohttp answers it itself, in plain text that
quotes the offending bytes (an API key in a header, say), and logs it with a traceback. A
client of the fake gets the API's JSON envelope instead, with a message that quotes nothing
it sent, and the log gets one line without the request's bytes.

Example::

    runner = web.AppRunner(app)
    await runner.setup()
    answer_parse_errors_in_the_envelope(runner)
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from fake_server import errors
from fake_server.errors import ApiError
from fake_server.routes.common import encode

__all__ = ["answer_parse_errors_in_the_envelope"]

log = logging.getLogger("fake_server")


class _EnvelopeRequestHandler(RequestHandler):
    """aiohttp's per-connection protocol, with its own error answers in the envelope."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # Neither ``message`` nor ``exc`` is shown or logged: both may quote the request.
        log.info("fake-createos: answered %d to a request it could not parse", status)
        if request.writer.output_size > 0:  # an answer is already on its way: nothing to add
            raise ConnectionError("the response was already being sent")
        text = errors.REQUEST_UNPARSABLE if status < 500 else HTTPStatus(status).phrase.lower()
        body = encode(ApiError(status, text).envelope())
        response = web.Response(status=status, body=body, content_type="application/json")
        response.force_close()  # what follows a request that could not be parsed is noise
        return response


class _EnvelopeServer(web.Server):
    """The protocol factory of a runner, making :class:`_EnvelopeRequestHandler` protocols."""

    def __call__(self) -> RequestHandler:
        return _EnvelopeRequestHandler(self, loop=self._loop, **self._kwargs)


def answer_parse_errors_in_the_envelope(runner: web.BaseRunner) -> None:
    """Make the set-up ``runner``'s connections answer parse errors in the envelope (call it
    after ``setup()`` and before any site starts)."""
    server = runner.server
    if server is None:
        raise RuntimeError("set the runner up first")
    # The runner built its Server already; it only gains a different protocol class.
    server.__class__ = _EnvelopeServer
