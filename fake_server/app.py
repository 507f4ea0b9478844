"""The aiohttp application: the route tables of :mod:`fake_server.routes`, each handler wrapped
where it is registered in one layer that authenticates, applies fault rules, renders errors in
the API's envelope and journals the request.

A wrapper rather than an aiohttp middleware: a middleware costs two more awaits on every request
(aiohttp adds one of its own beside it), and ``GET /v1/sandboxes/{id}`` is what every poller
hammers. Requests no route serves reach a catch-all route behind the same wrapper, so a 404 or a
405 is journaled and enveloped like every other answer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.web_urldispatcher import (
    AbstractResource,
    AbstractRoute,
    MatchInfoError,
    UrlMappingMatchInfo,
)
from yarl import URL

from fake_server import errors
from fake_server.access_tokens import AccessToken, delegable
from fake_server.clock import isoformat
from fake_server.control_access import check_control_access
from fake_server.credentials import presented_key
from fake_server.errors import ApiError
from fake_server.fault_rules import DEFAULT_MARKER_PATH, RequestInfo, Rule
from fake_server.gates import HeldRequest
from fake_server.header_names import X_REQUEST_ID
from fake_server.lifecycle import Status
from fake_server.route_table import CONTROL_PREFIX
from fake_server.routes import HOT
from fake_server.routes import served as served_routes
from fake_server.routes.common import (
    CLIENT_CLOSED,
    FAKE,
    SCOPE,
    Handler,
    RequestScope,
    envelope_response,
    unless_client_leaves,
    until_client_leaves,
)
from fake_server.routes.dashboard import DASHBOARD_PATH
from fake_server.sandbox import Sandbox

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import _InfoDict

    from fake_server.fake import FakeCreateOS
    from fake_server.tenants import Tenant

__all__ = ["CLIENT_LEFT", "UNROUTED", "build_app", "register_routes"]

log = logging.getLogger("fake_server")

#: Paths under /v1 that need no API key (everything outside /v1 needs none either).
PUBLIC_PATHS = frozenset({"/v1/shapes", "/v1/rootfs"})

#: The name of the catch-all route that answers 404 or 405 for everything no route serves.
UNROUTED = "unrouted"

#: The journal's ``detail`` of a request answered after its client had gone (the status is
#: what the fake answered; the client never got it).
CLIENT_LEFT = "the client left before the answer"


def register_routes(
    router: web.UrlDispatcher,
    routes: Iterable[tuple[str, str, Handler]],
    serve: Callable[[Handler, str, str | None], Handler] = lambda handler, method, path: handler,
    *,
    catch_all: bool = True,
) -> None:
    """Add ``routes`` (as :func:`fake_server.routes.served` lists them) and, unless
    ``catch_all`` is false, the catch-all to ``router``, each handler as
    ``serve(handler, method, template)`` makes it.

    Example::

        register_routes(app.router, served())
    """
    for method, template, handler in routes:
        router.add_route(method, template, serve(handler, method, template))
    if not catch_all:
        return
    # Last, so that it only ever sees what no other route matched.
    # [\s\S], not ".": a path may hold an encoded newline (%0a), and "." stops at it.
    router.add_route("*", r"/{path:[\s\S]*}", serve(_unrouted, "*", None), name=UNROUTED)


def build_app(fake: FakeCreateOS) -> web.Application:
    """An application serving ``fake`` (the API, the control API, the dashboard)."""
    app = web.Application(
        client_max_size=fake.config.max_file_bytes + (64 << 10),
        handler_args={"max_field_size": 16 << 10},
    )
    app[FAKE] = fake
    # The routes are the same for every fake (each request finds its fake in its app): built
    # once, they are shared, so a fresh app per test (createos_aiohttp_server,
    # aiohttp_client(fake.app())) costs ~16 µs, not ~3.4 ms of aiohttp route building; and
    # all but the hot ones are one resource, as registering each took ~1 µs (~93 µs an app).
    for resource in _shared_resources():
        app.router.register_resource(resource)
    app.router.__class__ = _Router  # the same router, resolving what aiohttp finds no path in
    app.on_cleanup.append(lambda _: fake.stop_commands())
    return app


@functools.cache
def _shared_resources() -> tuple[AbstractResource, ...]:
    """Every route behind the request layer, as the aiohttp resources each app registers
    (built once per process): the :data:`~fake_server.routes.HOT` routes' own, then one that
    holds all the others and the catch-all."""
    routes = list(served_routes())
    hot, cold = web.UrlDispatcher(), web.UrlDispatcher()
    register_routes(hot, [r for r in routes if r[1] in HOT], _served, catch_all=False)
    register_routes(cold, [r for r in routes if r[1] not in HOT], _served)
    cold.freeze()
    resources: list[AbstractResource] = list(hot.resources())
    for resource in resources:
        # aiohttp's add_subapp prefixes each resource of the app it mounts, in place: these are
        # every fake's, so one mount would move all their routes. Refused before any moves.
        setattr(resource, "add_prefix", _refuse_prefix)  # noqa: B010  (an instance override)
    return (*resources, _RouteGroup(cold))


class _Router(web.UrlDispatcher):
    """An app's router, whose catch-all also takes a request target that is no path at all:
    CONNECT's ``host:port`` and ``OPTIONS *``. The catch-all's pattern cannot match them
    (aiohttp's patterns start with ``/``; CONNECT's path is empty and no resource is even
    asked), and aiohttp would answer them itself, in plain text, journaled nowhere."""

    __slots__ = ()

    async def resolve(self, request: web.Request) -> UrlMappingMatchInfo:
        match = await super().resolve(request)
        if isinstance(match, MatchInfoError):
            return UrlMappingMatchInfo({"path": request.path}, _unrouted_route())
        return match


@functools.cache
def _unrouted_route() -> AbstractRoute:
    """The catch-all's route (among the shared resources, in their group)."""
    group = _shared_resources()[-1]
    assert isinstance(group, _RouteGroup)
    return next(iter(group.router[UNROUTED]))


def _refuse_prefix(prefix: str) -> None:
    raise RuntimeError(
        f"a fake's app cannot be mounted under a prefix ({prefix!r}): its routes are shared by "
        "every fake in the process; serve it on its own (fake_server.BackgroundServer, "
        "createos_aiohttp_server, or aiohttp_client(fake.app()))"
    )


class _RouteGroup(AbstractResource):
    """A router's routes as one resource: an app registers it once, where registering each of
    its ~80 resources took aiohttp ~1 µs apiece, for every app (one per test with
    ``createos_aiohttp_server``). It resolves after the hot routes, with one more call."""

    def __init__(self, router: web.UrlDispatcher) -> None:
        super().__init__()
        self.router = router

    @property
    def canonical(self) -> str:
        return "/"

    def url_for(self, **kwargs: str) -> URL:
        raise RuntimeError("a group of routes has no URL of its own")

    async def resolve(self, request: web.Request) -> tuple[UrlMappingMatchInfo | None, set[str]]:
        # The group's catch-all matches every request its routes do not.
        return await self.router.resolve(request), set()

    def add_prefix(self, prefix: str) -> None:
        _refuse_prefix(prefix)

    def get_info(self) -> _InfoDict:
        return {}

    def raw_match(self, path: str) -> bool:
        return False

    def __len__(self) -> int:
        return len(self.router.routes())

    def __iter__(self) -> Iterator[AbstractRoute]:
        return iter(self.router.routes())


def _routed() -> Iterator[AbstractResource]:
    """Every resource of the fake's routes, the grouped ones one by one."""
    for resource in _shared_resources():
        if isinstance(resource, _RouteGroup):
            yield from resource.router.resources()
        else:
            yield resource


async def _unrouted(request: web.Request) -> web.StreamResponse:
    """404, or 405 with ``Allow`` when some route serves the path with another method."""
    allowed: set[str] = set()
    for resource in _routed():
        if resource.name != UNROUTED:
            allowed |= (await resource.resolve(request))[1]
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()


def _served(handler: Handler, method: str, template: str | None) -> Handler:
    """``handler`` behind the fake's request layer; what the layer does for this route (whether
    it authenticates, whether it journals) is settled here, once, not on every request. The
    fake is the request's app's (the same routes serve every fake of the process)."""
    path = template or ""
    # The control API is never subject to fault rules: it is how a test recovers.
    is_control = path.startswith(CONTROL_PREFIX)
    authenticated = path.startswith("/v1/") and path not in PUBLIC_PATHS
    # Reads of the control API (a dashboard polls them every second) would only crowd the
    # API's own requests out of the bounded journal.
    journaled = not (is_control and method == "GET")
    # The dashboard's page is static: a browser cannot send a header when it navigates.
    needs_token = path != DASHBOARD_PATH
    # A sandbox's delegated access token may call this route (its runtime) on its sandbox.
    token_may_call = delegable(template)
    # The router hands a route only requests of its method (spelt as aiohttp spells it), so
    # it is known here; the catch-all journals what each request says.
    known_method = None if method == "*" else method.upper()

    async def serve(request: web.Request) -> web.StreamResponse:
        # The request's app is its match's (what request.app reads, one call less).
        match_info = request.match_info
        fake = match_info.current_app[FAKE]
        journal, clock = fake.journal, fake.clock
        opened = journal.ticket()
        started = clock.now()
        # zfill, not an f-string's format spec: half the cost, on every request.
        request_id = "req_" + str(next(fake.request_ids)).zfill(8)
        request_scope = RequestScope()
        request_scope.request_id = request_id
        SCOPE.set(request_scope)
        sandbox_id = match_info.get("id")
        tenant_id: str | None = None
        sandbox: Sandbox | None = None
        arrived_as: str | None = None  # the sandbox's status on arrival, for the journal
        response: web.StreamResponse | None = None
        detail: str | None = None
        try:
            if is_control:
                check_control_access(request.host, request.headers, fake.config, token=needs_token)
            if authenticated:
                key = presented_key(request.headers)
                grant: AccessToken | None = None
                tenant: Tenant | None = None
                if key is not None:  # the maps' own lookups: fewer calls on every request
                    grant = fake.access_tokens.live.get(key)
                    tenant = fake.tenants.known.get(key) if grant is None else grant.owner
                if tenant is None:  # no key (401), or one seen first now (or 401 if strict)
                    tenant = fake.tenants.resolve(key)
                tenant.last_seen = started
                request_scope.tenant = tenant
                tenant_id = tenant.id
                if sandbox_id is not None:
                    sandbox = request_scope.sandbox = tenant.sandboxes.get(sandbox_id)
                    # Its plain value, not the member (which the garbage collector tracks): a
                    # journaled request then holds nothing the collector must keep visiting.
                    arrived_as = sandbox.status._value_ if sandbox is not None else None
                if grant is not None:
                    _check_delegated(grant, token_may_call, sandbox_id)
            # Rules never apply to the control API: nor to a path under it that no route
            # serves, or a method none takes (the catch-all's 404 and 405 there).
            if is_control or not fake.faults.installed or _under_control(template, request):
                response = await handler(request)
            else:
                info = RequestInfo(
                    method=request.method,
                    route=template,
                    sandbox=sandbox_id,
                    tenant=tenant_id,
                    client=request.remote or "",
                )
                response = await _faulted(fake, request, handler, info, request_scope, sandbox)
        except _Dropped:
            detail = "connection closed without a response"
        except ConnectionError:
            # The client went away (e.g. while its request was held at a gate): nobody to
            # answer, and nothing went wrong in the fake.
            detail = CLIENT_CLOSED
        except asyncio.CancelledError:
            # aiohttp cancels a handler whose client left when told to (handler_cancellation,
            # which test servers may set) and every handler when the server stops.
            detail = "cancelled: the client left or the server stopped"
            raise
        except ApiError as exc:
            response = envelope_response(exc.envelope(), exc.status, headers=exc.headers)
            if exc.close:
                response.force_close()
        except web.HTTPException as exc:
            response = _http_exception(exc)
        except Exception:  # never a traceback to the client: a 500 in the envelope
            log.exception("fake-createos: unhandled error in %s %s", request.method, request.path)
            response = envelope_response(
                ApiError(500, "internal error in the fake").envelope(), 500
            )
        finally:
            # Read once: nothing below sends the answer (a stream has sent its headers).
            prepared = response is not None and response.prepared
            # Whether its client has closed the connection, read inline: asked as every
            # request finishes.
            if response is not None and not prepared:
                transport = request.transport
                if transport is None or transport.is_closing():
                    # The fake answered, but nobody is there to read it: say so, rather than
                    # show a status the client never got.
                    detail = CLIENT_LEFT
            if journaled:
                journal.request(
                    opened,
                    started,
                    known_method or request.method,
                    template,
                    # As it came: the journal decodes it when read (~2k instructions less).
                    request.raw_path,
                    tenant_id,
                    sandbox_id,
                    arrived_as,
                    response.status if response is not None else None,
                    clock.now(),
                    request_scope.rules,
                    detail or request_scope.detail,
                )
        if response is None:  # dropped: the connection is gone, aiohttp sends nothing
            return web.Response(status=499)
        if not prepared:
            response.headers[X_REQUEST_ID] = request_id
        return response

    serve.__name__ = serve.__qualname__ = getattr(handler, "__name__", "serve")
    serve.__doc__ = handler.__doc__
    serve.__wrapped__ = handler  # type: ignore[attr-defined]
    return serve


def _under_control(template: str | None, request: web.Request) -> bool:
    """Whether an unrouted request (the catch-all's: no template) is addressed to the control
    API."""
    return template is None and request.path.startswith(CONTROL_PREFIX)


def _check_delegated(grant: AccessToken, token_may_call: bool, sandbox_id: str | None) -> None:
    """A delegated token calls its own sandbox's runtime routes only: 403 for any other
    route, 404 for another sandbox (whose existence it may not learn)."""
    if not token_may_call:
        raise ApiError(403, errors.DELEGATED_FORBIDDEN)
    if sandbox_id != grant.sandbox:
        raise ApiError(404, errors.SANDBOX_NOT_FOUND)


async def _faulted(
    fake: FakeCreateOS,
    request: web.Request,
    handler: Handler,
    info: RequestInfo,
    request_scope: RequestScope,
    sandbox: Sandbox | None,
) -> web.StreamResponse:
    """``handler`` with the fault rules that match this request applied around it."""
    fired = fake.faults.evaluate(info, fake.clock.now())
    request_scope.rules = tuple(rule.id for rule in fired)
    for rule in fired:
        await _before(fake, request, rule, sandbox, request_scope)
    response = await handler(request)
    for rule in fired:
        response = await _after(fake, request, rule, sandbox, response)
    # Held only when the request started a transition (a refused one started nothing).
    stick = "stick_transition" in request_scope.directives
    if stick and sandbox is not None and response.status < 400:
        fake.state_faults.stick(sandbox)
    if "drop_response" in request_scope.directives:  # released from a gate as "lost"
        _drop(request)
    return response


class _Dropped(Exception):
    """The connection was closed on purpose: there is no response to journal."""


def _drop(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()
    raise _Dropped


#: What can still change a request held after its effect whose answer has not gone out.
_AFTER_EFFECT = frozenset({"lost", "error"})


async def _hold(
    fake: FakeCreateOS,
    request: web.Request,
    rule: Rule,
    outcomes: frozenset[str] | None = None,
) -> str | None:
    """Hold the request at its rule's gate until released, or until its client leaves: a
    client that gave up is no longer held (the gate's count says so at once) and its task ends
    (ConnectionResetError, journaled as closed by the client). ``outcomes``: those a release
    may still give it (``None``: all)."""
    if rule.gate is not None:
        tenant = SCOPE.get().tenant
        held = HeldRequest(
            request.method,
            request.path,
            since=isoformat(fake.clock.wall()),
            tenant=tenant.id if tenant is not None else None,
            sandbox=request.match_info.get("id"),
            outcomes=outcomes,
        )
        return await unless_client_leaves(request, rule.gate.hold(held))
    return None


async def _before(
    fake: FakeCreateOS,
    request: web.Request,
    rule: Rule,
    sandbox: Sandbox | None,
    request_scope: RequestScope,
) -> None:
    action = rule.action
    kind = action.type
    if kind == "latency":
        # A client that gives up on a slow answer ends the request: on a manual clock, or
        # with a latency of days, nothing else would.
        await unless_client_leaves(request, fake.clock.sleep(fake.faults.latency_seconds(action)))
    elif kind == "gate" and action.get("when", "before") == "before":
        outcome = await _hold(fake, request, rule)
        if outcome == "error":
            raise ApiError(503, errors.INJECTED_ERROR)
        if outcome == "lost":  # the effect happens; the answer is dropped in _faulted
            request_scope.directives = {**request_scope.directives, "drop_response": {}}
        elif outcome == "survives":
            request_scope.directives = {**request_scope.directives, "process_survives": {}}
        elif outcome == "stuck":  # the transition the request starts, if it starts one
            request_scope.directives = {**request_scope.directives, "stick_transition": {}}
    elif kind == "error":
        retry_after = action.get("retry_after")
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        body = action.get("body")
        raise ApiError(
            int(action.params["status"]),
            action.get("message") or (body if isinstance(body, str) else errors.INJECTED_ERROR),
            data=body if isinstance(body, dict) else None,
            headers=headers,
        )
    elif kind == "rate_limit":
        wait = fake.faults.retry_after_seconds(rule, request.remote or "", fake.clock.now())
        raise ApiError(429, errors.RATE_LIMITED, headers={"Retry-After": str(wait)})
    elif kind == "reset":
        _drop(request)
    elif kind == "hang":
        await until_client_leaves(request)
        raise ConnectionResetError("the client gave up on a hung request")
    elif kind in ("stream", "process_survives", "stale_read"):
        request_scope.directives = {**request_scope.directives, kind: action.params}
    elif sandbox is not None:
        try:
            _state_fault(fake, rule, sandbox)
        except ValueError as exc:
            # A misdirected rule must not turn a good request into a 500: skip it, say why.
            log.warning("fake-createos: rule %s not applied to %s: %s", rule.id, sandbox.id, exc)


def _state_fault(fake: FakeCreateOS, rule: Rule, sandbox: Sandbox) -> None:
    action = rule.action
    if action.type == "stuck":
        fake.state_faults.stick(sandbox)
    elif action.type == "transition_error":
        fake.state_faults.fail_transition(sandbox, Status(action.get("status", "error")))
    elif action.type == "destroy":
        fake.state_faults.set_status(sandbox, Status.DESTROYED)
    elif action.type == "marker":
        fake.state_faults.marker(
            sandbox, action.params["mode"], action.get("path", DEFAULT_MARKER_PATH)
        )


async def _after(
    fake: FakeCreateOS,
    request: web.Request,
    rule: Rule,
    sandbox: Sandbox | None,
    response: web.StreamResponse,
) -> web.StreamResponse:
    action = rule.action
    if action.type == "gate" and action.get("when") == "after":
        # The effect has happened: what is left to change is the answer, if not sent yet.
        outcome = await _hold(
            fake, request, rule, frozenset() if _sent(response) else _AFTER_EFFECT
        )
        if outcome == "error":  # answered 503 although the effect stays (a proxy's timeout)
            raise ApiError(503, errors.INJECTED_ERROR)
        if outcome == "lost":
            _drop(request)
    elif action.type == "drop_response":
        _drop(request)
    elif action.type == "malformed" and not response.prepared:
        # Truncated JSON with the right content type: what a proxy cutting a body looks like.
        return web.Response(
            status=200, body=b'{"status":"success","data":{', content_type="application/json"
        )
    return response


def _sent(response: web.StreamResponse) -> bool:
    """Whether the response's headers have gone out (a stream's, or one that ended): aiohttp
    before 3.10 says a response whose end was written is no longer prepared."""
    return response.prepared or bool(getattr(response, "_eof_sent", False))


def _http_exception(exc: web.HTTPException) -> web.StreamResponse:
    if exc.status == 404:
        message = errors.ROUTE_NOT_FOUND
    elif exc.status == 405:
        message = errors.METHOD_NOT_ALLOWED
    elif exc.status == 413:
        message = errors.BODY_TOO_LARGE
    else:
        message = exc.reason
    headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
    return envelope_response(ApiError(exc.status, message).envelope(), exc.status, headers=headers)
