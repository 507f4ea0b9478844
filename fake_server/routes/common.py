"""What every route module shares: app keys, envelopes, body reading, sandbox lookup."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from fake_server import errors
from fake_server.api_schema import Operation, integer, query
from fake_server.errors import ApiError
from fake_server.http_protocol import BodyDeadline, BodyStalled, connection_closed
from fake_server.json_body import encode
from fake_server.lifecycle import Status
from fake_server.sandboxes import LIST_DEFAULT, LIST_MAX
from fake_server.tenants import Tenant
from fake_server.validation import Body, BodySchema, query_int

_T = TypeVar("_T")

if TYPE_CHECKING:
    from fake_server.fake import FakeCreateOS
    from fake_server.sandbox import Sandbox

__all__ = [
    "CLIENT_CLOSED",
    "FAKE",
    "PAGE_PARAMETERS",
    "SANDBOX",
    "SCOPE",
    "Handler",
    "RequestScope",
    "Route",
    "Routes",
    "envelope_response",
    "fake_of",
    "ok",
    "page_bounds",
    "paginated",
    "paginated_body",
    "read_body",
    "read_bytes",
    "read_raw_body",
    "sandbox_of",
    "scope",
    "tenant_of",
    "unless_client_leaves",
    "until_client_leaves",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Route(NamedTuple):
    """One route as its module declares it: method, path template, handler and the route's
    OpenAPI operation (:func:`fake_server.api_schema.operation`), written beside the handler."""

    method: str
    template: str
    handler: Handler
    operation: Operation


#: What each route module declares, served in this order.
Routes = tuple[Route, ...]

#: The path template of one sandbox, which most routes hang off.
SANDBOX = "/v1/sandboxes/{id}"

FAKE: web.AppKey[FakeCreateOS] = web.AppKey("fake", "FakeCreateOS")  # type: ignore[arg-type]


#: The journal's detail for a request whose client went away before it was done.
CLIENT_CLOSED = "client closed the connection"

#: The directives of a request no fault rule gave any: shared, so never changed in place.
NO_DIRECTIVES: Mapping[str, Mapping[str, Any]] = MappingProxyType({})


class RequestScope:
    """Per-request facts the request layer (fake_server.app) settles before a handler runs.

    Kept in a context variable rather than in the request's mapping so the fake works alike
    across aiohttp versions (older ones have no typed request keys). One is built on every
    request, so it has no constructor: its defaults are the class's, and the layer sets what
    differs (a constructor would cost a Python call per request).

    Example::

        request_scope = RequestScope()
        request_scope.request_id = "req_00000001"
    """

    #: Sent as ``X-Request-ID``; streams need it before their headers go out.
    request_id: str = ""
    tenant: Tenant | None = None
    #: The sandbox ``{id}`` names in the caller's tenant, as found on arrival (None when the
    #: route names none, or the tenant has no such sandbox): the route need not look it up again.
    sandbox: Sandbox | None = None
    #: Fault actions a handler carries out itself (stream faults, surviving processes).
    #: Replaced, never changed in place (the default is shared).
    directives: Mapping[str, Mapping[str, Any]] = NO_DIRECTIVES
    #: The ids of the fault rules that fired on this request, for the journal.
    rules: tuple[str, ...] = ()
    #: How the request ended, for the journal, when only its handler can tell: a stream
    #: whose client left after its headers went out still answers 200.
    detail: str | None = None


SCOPE: ContextVar[RequestScope] = ContextVar("createos_request_scope")


def scope() -> RequestScope:
    """The current request's scope (an empty one outside a request)."""
    current = SCOPE.get(None)
    # Not ``SCOPE.get(RequestScope())``: that builds a throwaway scope on every call, and
    # handlers call this on every request.
    return current if current is not None else RequestScope()


def json_response(
    body: bytes, status: int = 200, *, headers: dict[str, str] | None = None
) -> web.Response:
    """An already encoded JSON body with ``application/json`` (clients only parse errors with
    that type)."""
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)


def envelope_response(
    body: dict[str, Any], status: int = 200, *, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response for ``body``."""
    return json_response(encode(body), status, headers=headers)


def ok(data: Any) -> web.Response:
    """A 200 JSend success."""
    return json_response(encode({"status": "success", "data": data}))


def paginated(items: list[Any], *, total: int, limit: int, offset: int) -> dict[str, Any]:
    """The list payload every paginated endpoint answers."""
    return {
        "data": items,
        "pagination": _pagination(total=total, limit=limit, offset=offset, count=len(items)),
    }


#: The query parameters of every list page, as the operations show them (see page_bounds).
PAGE_PARAMETERS = (
    query(
        "limit",
        integer(minimum=0),
        f"Page size (default {LIST_DEFAULT}, at most {LIST_MAX}; 0 = default).",
    ),
    query("offset", integer(minimum=0), "Rows to skip."),
)


def page_bounds(request: web.Request) -> tuple[int, int]:
    """``limit`` (default 50, at most 500; 0 means the default) and ``offset`` of a list
    request.

    Example::

        limit, offset = page_bounds(request)   # ?limit=900&offset=10 -> (500, 10)
    """
    query = request.query
    limit = query_int(query, "limit", LIST_DEFAULT, low=0, high=LIST_MAX) or LIST_DEFAULT
    return limit, query_int(query, "offset", 0)


def _pagination(*, total: int, limit: int, offset: int, count: int) -> dict[str, int]:
    return {"total": total, "limit": limit, "offset": offset, "count": count}


_PAGE_HEAD = b'{"status":"success","data":{"data":['


def paginated_body(encoded_items: list[bytes], *, total: int, limit: int, offset: int) -> bytes:
    """The body :func:`ok` gives for :func:`paginated` of these items, from the items already
    encoded (a sandbox keeps its encoded view): byte for byte the same, because a compact
    encoding of a value does not depend on what holds it.

    Example::

        paginated_body([b'{"id":"a"}'], total=1, limit=50, offset=0)
        # b'{"status":"success","data":{"data":[{"id":"a"}],"pagination":{"total":1,...}}}'
    """
    pagination = _pagination(total=total, limit=limit, offset=offset, count=len(encoded_items))
    return b"".join(
        (_PAGE_HEAD, b",".join(encoded_items), b'],"pagination":', encode(pagination), b"}}")
    )


def fake_of(request: web.Request) -> FakeCreateOS:
    return request.app[FAKE]


def tenant_of(request: web.Request) -> Tenant:
    # scope()'s work, inline: every authenticated handler asks this.
    current = SCOPE.get(None)
    tenant = current.tenant if current is not None else None
    if tenant is None:  # only authenticated routes call this
        raise ApiError(401, errors.INVALID_API_KEY)
    return tenant


#: Read by every sandbox route. A module constant: on Python 3.11 a member read off its enum
#: class goes through EnumType.__getattr__, about a thousand instructions each time.
_DESTROYED = Status.DESTROYED


def sandbox_of(request: web.Request) -> Sandbox:
    """The sandbox named by ``{id}`` in the caller's tenant (404 otherwise); a deleted one
    answers 404 too when the fake is configured so."""
    current = SCOPE.get(None)
    sandbox = current.sandbox if current is not None else None
    # The status first: it settles the question for every sandbox but a destroyed one, which
    # is looked up again (a destroyed sandbox may have been forgotten since it arrived).
    if sandbox is None or sandbox.status is _DESTROYED:
        sandbox = tenant_of(request).get(request.match_info["id"])
        if sandbox.status is _DESTROYED and fake_of(request).config.deleted == "404":
            raise ApiError(404, errors.SANDBOX_NOT_FOUND)
    return sandbox


async def read_body(request: web.Request, schema: BodySchema) -> Body:
    """The JSON object body, size-capped and checked against the route's declared ``schema``.

    Example::

        body = await read_body(request, RESIZE)   # RESIZE: the BodySchema the operation shows
    """
    return schema.parse(await read_raw_body(request))


async def read_bytes(request: web.Request, limit: int) -> bytes:
    """The whole body, read as it arrives and refused (413) as soon as it passes ``limit``
    bytes, whether or not it declared its length (a chunked body once was read whole, up to
    aiohttp's own cap, before any check); a 400 when it cannot be read as sent, e.g.
    ``Content-Encoding: gzip`` on bytes that are not gzip. Either refusal closes the
    connection: the rest of the body is never read."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise ApiError(413, errors.BODY_TOO_LARGE, close=True)
    body = bytearray()
    content = request.content
    timeout = fake_of(request).config.body_timeout_s
    # A body that came whole with its head (most do) has nothing left to wait for.
    deadline = None if timeout is None or content.is_eof() else BodyDeadline(content, timeout)
    try:
        # What ``async for chunk in content.iter_any()`` reads, without its iterator object.
        while chunk := await content.readany():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, errors.BODY_TOO_LARGE, close=True)
            if deadline is not None:
                deadline.progress()
    except RequestPayloadError:
        # The stream is broken past repair: nothing more is read from it (aiohttp would try,
        # and log the same error again).
        request.content.feed_eof()
        raise ApiError(400, errors.BODY_UNREADABLE, close=True) from None
    except BodyStalled:
        message = errors.BODY_STALLED.format(seconds=timeout)
        raise ApiError(408, message, close=True) from None
    finally:
        if deadline is not None:
            deadline.cancel()
    return bytes(body)


def read_raw_body(request: web.Request) -> Awaitable[bytes]:
    """The body's bytes, capped at ``config.max_json_bytes`` (413 beyond it), to await.

    Not a coroutine itself: it hands back :func:`read_bytes`'s, one coroutine less per body.
    """
    return read_bytes(request, fake_of(request).config.max_json_bytes)


#: How often a request that waits looks whether its client is still there, on a connection the
#: fake did not harden (real time: a client giving up is a real-world event, not one on the
#: fake's clock).
CLIENT_POLL_S = 0.05


async def until_client_leaves(request: web.Request) -> None:
    """Return once the request's client has closed its connection (or the server stopped).

    aiohttp (3.9 and later, by default) does not cancel a handler when its client disconnects,
    so a request waiting on something that never comes (a hang fault, a gate, a latency on a
    manual clock) would keep its task until the server stops, and never reach the journal.
    """
    lost = connection_closed(request)
    if lost is not None:  # the fake's own connections say when they close
        await asyncio.shield(lost)
        return
    # Polled elsewhere (aiohttp_client(fake.app()), say): aiohttp itself offers no event or
    # callback for "this request's connection closed".
    while request.transport is not None and not request.transport.is_closing():  # noqa: ASYNC110
        await asyncio.sleep(CLIENT_POLL_S)


async def unless_client_leaves(request: web.Request, work: Awaitable[_T]) -> _T:
    """``await work``, unless the client leaves first: then ``work`` is cancelled (and has
    ended) and ``ConnectionResetError`` is raised.

    Example::

        await unless_client_leaves(request, gate.hold(held))
    """
    working = asyncio.ensure_future(work)
    leaving = asyncio.ensure_future(until_client_leaves(request))
    try:
        await asyncio.wait((working, leaving), return_when=asyncio.FIRST_COMPLETED)
    finally:
        working.cancel()
        leaving.cancel()
        # Both end their own way (a gate's held count, say) before the request goes on.
        await asyncio.wait((working, leaving))
    if working.cancelled():
        raise ConnectionResetError("the client left while its request waited")
    return working.result()
