"""TCP tunnels: ``POST …/tunnel/{port}`` with ``Upgrade: tcp-tunnel`` answers 101 and relays raw
bytes to the service listening on that port in the sandbox (see :mod:`fake_server.tunnels`);
the control API starts and stops the built-in services."""

from __future__ import annotations

import contextlib

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    BODY_ERRORS,
    RUNTIME,
    control_operation,
    enum,
    flag,
    obj,
    ok_response,
    operation,
)
from fake_server.errors import ApiError
from fake_server.lifecycle import Lifecycle
from fake_server.routes.common import (
    SANDBOX,
    Route,
    Routes,
    fake_of,
    ok,
    read_body,
    sandbox_of,
    unless_client_leaves,
)
from fake_server.tunnels import BUILT_IN, MAX_PORT, TunnelConnection
from fake_server.validation import BodySchema

UPGRADE = "tcp-tunnel"


def _port(request: web.Request) -> int:
    raw = request.match_info["port"]
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PORT:
        raise ApiError.invalid("port", f"must be an integer from 1 to {MAX_PORT}")
    return int(raw)


class _ClientBytes:
    """What the connection's parser becomes after the 101: every byte goes to the tunnel."""

    def __init__(self, connection: TunnelConnection) -> None:
        self._connection = connection

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._connection.received(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self._connection.client_closed()


async def tunnel(request: web.Request) -> web.StreamResponse:
    sandbox = sandbox_of(request)
    Lifecycle.check_running(sandbox)
    port = _port(request)
    if request.headers.get("Upgrade", "").lower() != UPGRADE:
        raise ApiError(426, errors.TUNNEL_UPGRADE_REQUIRED, headers={"Upgrade": UPGRADE})
    service = fake_of(request).tunnels.service(sandbox.id, port)
    if service is None:
        raise ApiError(502, errors.TUNNEL_NOTHING_LISTENS.format(port=port))
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("the client left before its tunnel opened")
    response = web.StreamResponse(status=101, headers={"Upgrade": UPGRADE, "Connection": "Upgrade"})
    response.force_close()  # the connection is the tunnel's now, never another request's
    await response.prepare(request)
    connection = TunnelConnection(
        response.write, pause=transport.pause_reading, resume=transport.resume_reading
    )
    request.protocol.set_parser(_ClientBytes(connection))  # type: ignore[arg-type]
    # The tunnel lasts as long as the service serves it (the client closing its side ends
    # an echo), or until the client hangs up: the normal end of a tunnel either way.
    with contextlib.suppress(ConnectionResetError):
        await unless_client_leaves(request, service(connection))
    return response


SERVICE = BodySchema(obj({"service": enum(BUILT_IN)}), required=True)


async def listen(request: web.Request) -> web.Response:
    body = await read_body(request, SERVICE)
    name = body.string("service") or ""
    if name not in BUILT_IN:
        raise ApiError.invalid("service", f"must be one of {', '.join(BUILT_IN)}")
    sandbox = fake_of(request).find_sandbox(request.match_info["id"])
    # A sandbox going away drops its services: one started now would never answer.
    Lifecycle.check_modifiable(sandbox)
    fake_of(request).tunnels.listen(sandbox.id, _port(request), BUILT_IN[name])
    return ok({"listening": True})


async def stop_listening(request: web.Request) -> web.Response:
    sandbox = fake_of(request).find_sandbox(request.match_info["id"])
    if not fake_of(request).tunnels.close(sandbox.id, _port(request)):
        raise ApiError(404, errors.TUNNEL_NOTHING_LISTENS.format(port=_port(request)))
    return ok({"closed": True})


_CONTROL = "/_fake/sandboxes/{id}/tunnels/{port}"

ROUTES: Routes = (
    Route(
        "POST",
        SANDBOX + "/tunnel/{port}",
        tunnel,
        operation(
            "openTunnel",
            "A raw TCP tunnel to a port in the sandbox (`Upgrade: tcp-tunnel`)",
            tag=RUNTIME,
            description="Answers 101 and relays bytes both ways to what listens on the port. "
            "Nothing listens in a fake sandbox unless a test starts a service there "
            "(`fake.tunnels.listen`, or the control API's built-in `echo`); the tunnel never "
            "reaches the host or the network. 426 without the upgrade header, 502 when "
            "nothing listens on the port.",
            ok=None,
            switching="Switching to the raw byte stream of the tunnel.",
            errors=(400, 404, 409, 426, 502),
        ),
    ),
    Route(
        "PUT",
        _CONTROL,
        listen,
        control_operation(
            "fakeListen",
            "Start a built-in service on a port of a sandbox (for tunnels)",
            ok_response("Listening.", flag("listening")),
            errors=(*BODY_ERRORS, 404, 409),
            body=SERVICE,
        ),
    ),
    Route(
        "DELETE",
        _CONTROL,
        stop_listening,
        control_operation(
            "fakeStopListening",
            "Stop the service on a port of a sandbox",
            ok_response("Closed.", flag("closed")),
            errors=(400, 404),
        ),
    ),
)
