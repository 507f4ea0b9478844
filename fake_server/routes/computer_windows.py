"""Computer-use routes for windows and screens (contract §10): list, inspect, focus, move,
resize, maximize, minimize, restore and close windows; create, inspect, connect to, resize and
delete screens. The checks and the journal are :mod:`fake_server.routes.computer`'s.

Lists answer bare arrays (the Go SDK decodes them into slices; the Python SDK takes either)."""

from __future__ import annotations

from datetime import timedelta

from aiohttp import web

from fake_server.api_schema import (
    COMPUTER,
    EMPTY_BODY,
    ID_PATTERN,
    Schema,
    array,
    const,
    integer,
    nullable,
    obj,
    ok_response,
    operation,
    query,
    ref,
    string,
    timestamp,
)
from fake_server.clock import isoformat
from fake_server.desktop import (
    DEFAULT_HEIGHT,
    DEFAULT_WIDTH,
    MAX_HEIGHT,
    MAX_WIDTH,
    MIN_HEIGHT,
    MIN_WIDTH,
    WINDOW_COORDINATE,
    Screen,
    Window,
)
from fake_server.routes.common import Handler, Route, Routes, fake_of, ok, read_body
from fake_server.routes.computer import (
    BODY_ROUTE_ERRORS,
    COMPUTER_OF,
    ERRORS,
    OK,
    SCREEN_PARAMETER,
    Desk,
    computer_route,
    desk_of,
    journal_action,
    model_input,
)
from fake_server.validation import BodySchema

WINDOWS = COMPUTER_OF + "/windows"
WINDOW = WINDOWS + "/{wid}"
SCREENS = COMPUTER_OF + "/screens"
SCREEN = SCREENS + "/{sid}"
#: How long a noVNC connection's token is good for.
CONNECTION_TTL = timedelta(minutes=5)


def _window(request: web.Request) -> tuple[Desk, Window]:
    desk = desk_of(request)
    return desk, desk.desktop.window(desk.screen, request.match_info["wid"])


def _screen(request: web.Request) -> tuple[Desk, Screen]:
    desk = desk_of(request, screen=False)
    return desk, desk.desktop.screen(request.match_info["sid"])


# -- windows -------------------------------------------------------------------------------------


async def list_windows(request: web.Request) -> web.Response:
    desk = desk_of(request)
    application = request.query.get("application") or None
    return ok([window.view() for window in desk.desktop.windows(desk.screen, application)])


async def current_window(request: web.Request) -> web.Response:
    desk = desk_of(request)
    return ok(desk.desktop.current(desk.screen).view())


async def get_window(request: web.Request) -> web.Response:
    return ok(_window(request)[1].view())


async def window_geometry(request: web.Request) -> web.Response:
    return ok(_window(request)[1].geometry())


def _window_action(name: str) -> Handler:
    """focus, maximize, minimize or restore: no body, ``{"ok": true}``."""

    async def handler(request: web.Request) -> web.Response:
        await read_body(request, EMPTY_BODY)
        desk, window = _window(request)
        desktop, screen = desk.desktop, desk.screen
        if name == "focus":
            desktop.focus(screen, window)
        elif name == "maximize":
            desktop.maximize(screen, window)
        elif name == "minimize":
            desktop.minimize(window)
        else:
            desktop.restore(screen, window)
        journal_action(request, desk, f"windows/{name}", window=window.id)
        return ok({"ok": True})

    handler.__name__ = f"{name}_window"
    return handler


_WINDOW_POSITION = integer(minimum=-WINDOW_COORDINATE, maximum=WINDOW_COORDINATE)
WINDOW_MOVE = BodySchema(obj({"x": _WINDOW_POSITION, "y": _WINDOW_POSITION}), required=True)


async def move_window(request: web.Request) -> web.Response:
    body = await read_body(request, WINDOW_MOVE)
    x, y = body.integer("x") or 0, body.integer("y") or 0
    desk, window = _window(request)
    desk.desktop.move_window(window, x, y)
    journal_action(request, desk, "windows/move", window=window.id, x=x, y=y)
    return ok({"ok": True})


_WINDOW_SIZE = integer(minimum=1, maximum=WINDOW_COORDINATE)
WINDOW_RESIZE = BodySchema(obj({"width": _WINDOW_SIZE, "height": _WINDOW_SIZE}), required=True)


async def resize_window(request: web.Request) -> web.Response:
    body = await read_body(request, WINDOW_RESIZE)
    width, height = body.integer("width") or 1, body.integer("height") or 1
    desk, window = _window(request)
    desk.desktop.resize_window(window, width, height)
    journal_action(request, desk, "windows/resize", window=window.id, width=width, height=height)
    return ok({"ok": True})


async def close_window(request: web.Request) -> web.Response:
    desk, window = _window(request)
    desk.desktop.close(desk.screen, window)
    journal_action(request, desk, "windows/close", window=window.id)
    return ok({"ok": True})


# -- screens -------------------------------------------------------------------------------------


async def list_screens(request: web.Request) -> web.Response:
    desk = desk_of(request, screen=False)
    return ok([screen.view() for screen in desk.desktop.list_screens()])


def _size(name: str, low: int, high: int) -> Schema:
    return nullable(
        {
            "type": "integer",
            "description": f"{low}-{high}; 0 or absent: "
            + ("the default" if name == "create" else "unchanged")
            + ".",
            "anyOf": [const(0), integer(minimum=low, maximum=high)],
        }
    )


def _size_body(name: str) -> BodySchema:
    return BodySchema(
        obj(
            {},
            {
                "width": _size(name, MIN_WIDTH, MAX_WIDTH),
                "height": _size(name, MIN_HEIGHT, MAX_HEIGHT),
            },
        )
    )


CREATE_SCREEN = _size_body("create")
RESIZE_SCREEN = _size_body("resize")


async def create_screen(request: web.Request) -> web.Response:
    body = await read_body(request, CREATE_SCREEN)
    desk = desk_of(request, screen=False)
    width = body.integer("width") or DEFAULT_WIDTH
    height = body.integer("height") or DEFAULT_HEIGHT
    with model_input():
        screen = desk.desktop.add_screen(width, height)
    desk.screen = screen
    journal_action(request, desk, "screens/create", width=width, height=height)
    return ok(screen.view())


async def get_screen(request: web.Request) -> web.Response:
    return ok(_screen(request)[1].view())


async def connect_screen(request: web.Request) -> web.Response:
    desk, screen = _screen(request)
    fake = fake_of(request)
    # A short-lived noVNC token, as the real connect hands out (never a real credential).
    token = f"{fake.ids.random.getrandbits(128):032x}"
    port = screen.novnc_port
    origin = desk.sandbox.ingress_url_template().replace("<port>", str(port))
    return ok(
        {
            "screen_id": screen.id,
            "port": port,
            "path": "/websockify",
            "token": token,
            "expires_at": isoformat(fake.clock.wall() + CONNECTION_TTL),
            "url": f"{origin}/vnc.html?path=websockify&token={token}",
        }
    )


async def resize_screen(request: web.Request) -> web.Response:
    body = await read_body(request, RESIZE_SCREEN)
    desk, screen = _screen(request)
    width = body.integer("width") or screen.width
    height = body.integer("height") or screen.height
    with model_input():
        desk.desktop.resize_screen(screen, width, height)
    desk.screen = screen
    journal_action(request, desk, "screens/resize", width=width, height=height)
    return ok(screen.view())


async def delete_screen(request: web.Request) -> web.Response:
    desk, screen = _screen(request)
    desk.desktop.remove_screen(screen)
    desk.screen = screen
    journal_action(request, desk, "screens/delete")
    return ok({"ok": True})


# -- the declarations ----------------------------------------------------------------------------

_WINDOW_VIEW = ref("ComputerWindow")
_SCREEN_VIEW = ref("ComputerScreen")


def _on_window(
    method: str,
    suffix: str,
    handler: Handler,
    operation_id: str,
    summary: str,
    data: Schema,
    body: BodySchema | None = None,
) -> Route:
    answer = "Done." if data is OK else "The window."
    return computer_route(
        method, WINDOW + suffix, handler, operation_id, summary, data, body=body, answer=answer
    )


def _on_screen(
    method: str,
    suffix: str,
    handler: Handler,
    operation_id: str,
    summary: str,
    data: Schema,
    body: BodySchema | None = None,
) -> Route:
    # A screen route names its screen in the path: no ``screen_id`` query, no 400 for one.
    return computer_route(
        method,
        SCREEN + suffix,
        handler,
        operation_id,
        summary,
        data,
        body=body,
        parameters=(),
        errors=(404, 409),
    )


ROUTES: Routes = (
    Route(
        "GET",
        WINDOWS,
        list_windows,
        operation(
            "computerListWindows",
            "The screen's windows, bottom to top",
            tag=COMPUTER,
            parameters=[
                SCREEN_PARAMETER,
                query("application", string(), "Only this application's windows."),
            ],
            ok=ok_response("The windows (a bare array).", array(_WINDOW_VIEW)),
            errors=ERRORS,
        ),
    ),
    # Before {wid}, which would match "current" too.
    Route(
        "GET",
        WINDOWS + "/current",
        current_window,
        operation(
            "computerCurrentWindow",
            "The focused window (404 when there is none)",
            tag=COMPUTER,
            parameters=[SCREEN_PARAMETER],
            ok=ok_response("The window.", _WINDOW_VIEW, links="window"),
            errors=ERRORS,
        ),
    ),
    _on_window("GET", "", get_window, "computerGetWindow", "A window", _WINDOW_VIEW),
    _on_window(
        "GET",
        "/geometry",
        window_geometry,
        "computerWindowGeometry",
        "A window's position and size",
        obj(
            {
                "id": string(pattern=ID_PATTERN),
                "x": integer(),
                "y": integer(),
                "width": integer(minimum=1),
                "height": integer(minimum=1),
                "screen": integer(minimum=0, maximum=7),
            }
        ),
    ),
    _on_window(
        "POST",
        "/focus",
        _window_action("focus"),
        "computerFocusWindow",
        "Focus a window",
        OK,
        EMPTY_BODY,
    ),
    _on_window(
        "POST", "/move", move_window, "computerMoveWindow", "Move a window", OK, WINDOW_MOVE
    ),
    _on_window(
        "POST",
        "/resize",
        resize_window,
        "computerResizeWindow",
        "Resize a window",
        OK,
        WINDOW_RESIZE,
    ),
    _on_window(
        "POST",
        "/maximize",
        _window_action("maximize"),
        "computerMaximizeWindow",
        "Maximize a window",
        OK,
        EMPTY_BODY,
    ),
    _on_window(
        "POST",
        "/minimize",
        _window_action("minimize"),
        "computerMinimizeWindow",
        "Minimize a window",
        OK,
        EMPTY_BODY,
    ),
    _on_window(
        "POST",
        "/restore",
        _window_action("restore"),
        "computerRestoreWindow",
        "Restore a window",
        OK,
        EMPTY_BODY,
    ),
    _on_window("DELETE", "", close_window, "computerCloseWindow", "Close a window", OK),
    Route(
        "GET",
        SCREENS,
        list_screens,
        operation(
            "computerListScreens",
            "The desktop's screens",
            tag=COMPUTER,
            ok=ok_response("The screens (a bare array).", array(_SCREEN_VIEW)),
            errors=(404, 409),
        ),
    ),
    Route(
        "POST",
        SCREENS,
        create_screen,
        operation(
            "computerCreateScreen",
            "Add a screen (the lowest free of screen-1 … screen-7; 409 when all exist)",
            tag=COMPUTER,
            ok=ok_response("The screen.", _SCREEN_VIEW, links="screen"),
            errors=BODY_ROUTE_ERRORS,
            body=CREATE_SCREEN,
        ),
    ),
    _on_screen("GET", "", get_screen, "computerGetScreen", "A screen", _SCREEN_VIEW),
    _on_screen(
        "GET",
        "/connect",
        connect_screen,
        "computerConnectScreen",
        "A short-lived noVNC connection to a screen",
        obj(
            {
                "screen_id": string(pattern="^screen-[0-7]$"),
                "port": integer(minimum=1),
                "path": string(),
                "token": string(),
                "expires_at": timestamp(),
                "url": string(),
            }
        ),
    ),
    _on_screen(
        "POST",
        "/resize",
        resize_screen,
        "computerResizeScreen",
        "Resize a screen",
        _SCREEN_VIEW,
        RESIZE_SCREEN,
    ),
    _on_screen(
        "DELETE",
        "",
        delete_screen,
        "computerDeleteScreen",
        "Delete a screen and its windows (not screen-0: 409)",
        OK,
    ),
)
