"""Computer-use routes (contract §10) for sandboxes on a desktop rootfs: screenshots, the
screen's size, the cursor, the clipboard, opening and launching, the mouse and the keyboard.
Windows and screens are in :mod:`fake_server.routes.computer_windows`.

Every route answers 409 unless the sandbox runs on a desktop rootfs (``desktop:1``) and is
``running``; an optional ``?screen_id=screen-N`` picks the screen (404 for one that does not
exist). What changes the desktop is journaled as a ``computer`` entry with its arguments
(:meth:`fake_server.fake.FakeCreateOS.journal_computer`), so a test can assert what an agent
did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    BODY_ERRORS,
    COMPUTER,
    PNG,
    Schema,
    array,
    enum,
    flag,
    integer,
    nullable,
    obj,
    ok_response,
    operation,
    query,
    string,
)
from fake_server.catalog import DESKTOP_ROOTFS
from fake_server.desktop import (
    BUTTONS,
    SCREEN_IDS,
    SCROLL_DIRECTIONS,
    WINDOW_COORDINATE,
    Desktop,
    Screen,
)
from fake_server.errors import ApiError
from fake_server.lifecycle import Lifecycle
from fake_server.routes.common import (
    SANDBOX,
    Handler,
    Route,
    Routes,
    fake_of,
    ok,
    read_body,
    sandbox_of,
)
from fake_server.sandbox import Sandbox
from fake_server.screenshot import region_of, render
from fake_server.validation import BodySchema, query_int

__all__ = [
    "COMPUTER_OF",
    "ERRORS",
    "OK",
    "ROUTES",
    "SCREEN_PARAMETER",
    "Desk",
    "desk_of",
    "journal_action",
    "model_input",
]

#: The path every computer route hangs off.
COMPUTER_OF = SANDBOX + "/computer"
#: What every action answers.
OK = flag("ok")
SCREEN_PARAMETER = query(
    "screen_id", enum(SCREEN_IDS), "The screen (default `screen-0`; 404 if not created)."
)


class Desk:
    """A computer request's sandbox, its desktop and the screen the request names."""

    __slots__ = ("desktop", "sandbox", "screen")

    def __init__(self, sandbox: Sandbox, screen: Screen) -> None:
        self.sandbox = sandbox
        self.desktop: Desktop = sandbox.desktop
        self.screen = screen


def desk_of(request: web.Request, *, screen: bool = True) -> Desk:
    """The sandbox (409 unless a running desktop) and the screen ``?screen_id`` names (400 for
    an id no screen can have, 404 for one not created); ``screen=False`` for routes that name
    their screen in the path (the primary one is given then).

    Example::

        desk = desk_of(request)            # GET …/computer/cursor?screen_id=screen-1
        desk.screen.cursor                 # (512, 384)
    """
    sandbox = sandbox_of(request)
    if sandbox.rootfs not in DESKTOP_ROOTFS:
        desktops = ", ".join(sorted(DESKTOP_ROOTFS))
        raise ApiError(409, errors.NO_DESKTOP.format(rootfs=sandbox.rootfs, desktops=desktops))
    Lifecycle.check_running(sandbox, "using its desktop")
    screen_id = (request.query.get("screen_id") or None) if screen else None
    if screen_id is not None and screen_id not in SCREEN_IDS:
        raise ApiError.invalid("screen_id", f"must be one of {', '.join(SCREEN_IDS)}")
    return Desk(sandbox, sandbox.desktop.screen(screen_id))


def journal_action(request: web.Request, desk: Desk, action: str, **arguments: Any) -> None:
    """Journal what the request did to the desktop (``None`` arguments left out); it counts as
    activity in the sandbox, as an exec does.

    Example::

        journal_action(request, desk, "mouse/move", x=10, y=20)
        # detail: 'mouse/move {"screen_id":"screen-0","x":10,"y":20}'
    """
    fake = fake_of(request)
    given = {name: value for name, value in arguments.items() if value is not None}
    fake.journal_computer(desk.sandbox, action, {"screen_id": desk.screen.id, **given})
    fake.sandboxes.touch(desk.sandbox)


@contextmanager
def model_input() -> Iterator[None]:
    """The desktop model's ``ValueError("field: problem")`` as a 400 naming the field.

    Example::

        with model_input():
            desk.desktop.move_cursor(desk.screen, x, y)   # off the screen: 400 {"x": ...}
    """
    try:
        yield
    except ValueError as exc:
        name, _, problem = str(exc).partition(": ")
        raise ApiError.invalid(name, problem) from None


def _one_of(values: tuple[str, ...]) -> Callable[[Any], None]:
    """A body field check: the value is one of ``values``."""

    def check(value: Any) -> None:
        if value not in values:
            raise ValueError(f"must be one of {', '.join(values)}")

    return check


def _point(value: Any) -> None:
    if (
        not isinstance(value, dict)
        or set(value) != {"x", "y"}
        or not all(type(value[axis]) is int and value[axis] >= 0 for axis in ("x", "y"))
    ):
        raise ValueError("must be a point {x, y} of integers at least 0")


def _keys(value: Any) -> None:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(key, str) and key and "\x00" not in key for key in value)
    ):
        raise ValueError("must be a non-empty list of key names")


_COORDINATE = integer(minimum=0, maximum=WINDOW_COORDINATE)
_POINT_SCHEMA = obj({"x": _COORDINATE, "y": _COORDINATE})
_BUTTON = nullable(enum(BUTTONS, description="Default `left`."))

# -- reads -------------------------------------------------------------------------------------


async def screenshot(request: web.Request) -> web.Response:
    desk = desk_of(request)
    query = request.query
    window_id = query.get("window_id") or None
    window = desk.desktop.window(desk.screen, window_id) if window_id else None
    with model_input():
        region = region_of(
            desk.screen,
            x=query_int(query, "x", 0),
            y=query_int(query, "y", 0),
            width=query_int(query, "width", 0),
            height=query_int(query, "height", 0),
            window=window,
        )
    return web.Response(body=render(desk.screen, region), content_type=PNG)


async def screen_size(request: web.Request) -> web.Response:
    screen = desk_of(request).screen
    return ok({"width": screen.width, "height": screen.height})


async def cursor(request: web.Request) -> web.Response:
    x, y = desk_of(request).screen.cursor
    return ok({"x": x, "y": y})


async def get_clipboard(request: web.Request) -> web.Response:
    return ok({"text": desk_of(request).screen.clipboard})


CLIPBOARD = BodySchema(obj({"text": string()}), required=True)


async def set_clipboard(request: web.Request) -> web.Response:
    text = (await read_body(request, CLIPBOARD)).string("text") or ""
    desk = desk_of(request)
    desk.screen.clipboard = text
    journal_action(request, desk, "clipboard", text=text)
    return ok({"ok": True})


# -- opening things ------------------------------------------------------------------------------


def _not_empty(value: Any) -> None:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValueError("must be a non-empty string")


OPEN = BodySchema(
    obj({"target": string(minLength=1, description="A URL or a path on the desktop.")}),
    required=True,
    checks={"target": _not_empty},
)


async def open_target(request: web.Request) -> web.Response:
    target = (await read_body(request, OPEN)).string("target") or ""
    desk = desk_of(request)
    # What opens a URL or a file on a desktop: the default browser or viewer, in a new window.
    window = desk.desktop.launch(desk.screen, "xdg-open", target)
    journal_action(request, desk, "open", target=target, window=window.id)
    return ok({"ok": True})


LAUNCH = BodySchema(
    obj({"application": string(minLength=1)}, {"uri": nullable(string())}),
    required=True,
    checks={"application": _not_empty},
)


async def launch(request: web.Request) -> web.Response:
    body = await read_body(request, LAUNCH)
    application, uri = body.string("application") or "", body.string("uri") or None
    desk = desk_of(request)
    window = desk.desktop.launch(desk.screen, application, uri or application)
    journal_action(request, desk, "launch", application=application, uri=uri, window=window.id)
    return ok({"ok": True})


# -- mouse ---------------------------------------------------------------------------------------

MOUSE_MOVE = BodySchema(_POINT_SCHEMA, required=True)


async def mouse_move(request: web.Request) -> web.Response:
    body = await read_body(request, MOUSE_MOVE)
    x, y = body.integer("x") or 0, body.integer("y") or 0
    desk = desk_of(request)
    with model_input():
        desk.desktop.move_cursor(desk.screen, x, y)
    journal_action(request, desk, "mouse/move", x=x, y=y)
    return ok({"ok": True})


CLICK = BodySchema(
    obj(
        {},
        {
            "button": _BUTTON,
            "x": nullable(_COORDINATE),
            "y": nullable(_COORDINATE),
            "count": nullable(integer(minimum=0, maximum=10, description="0: one click.")),
        },
    ),
    checks={"button": _one_of(BUTTONS)},
)


async def mouse_click(request: web.Request) -> web.Response:
    body = await read_body(request, CLICK)
    button = body.string("button") or "left"
    x, y, count = body.integer("x"), body.integer("y"), body.integer("count") or 1
    desk = desk_of(request)
    with model_input():
        window = desk.desktop.click(desk.screen, x, y)
    cx, cy = desk.screen.cursor
    journal_action(
        request,
        desk,
        "mouse/click",
        button=button,
        x=cx,
        y=cy,
        count=count,
        window=window.id if window is not None else None,
    )
    return ok({"ok": True})


SCROLL = BodySchema(
    obj(
        {"direction": enum(SCROLL_DIRECTIONS)},
        {"amount": nullable(integer(minimum=0, maximum=100, description="0: one step."))},
    ),
    required=True,
    checks={"direction": _one_of(SCROLL_DIRECTIONS)},
)


async def mouse_scroll(request: web.Request) -> web.Response:
    body = await read_body(request, SCROLL)
    direction, amount = body.string("direction"), body.integer("amount") or 1
    desk = desk_of(request)
    x, y = desk.screen.cursor
    journal_action(request, desk, "mouse/scroll", direction=direction, amount=amount, x=x, y=y)
    return ok({"ok": True})


DRAG = BodySchema(
    obj({"from": _POINT_SCHEMA, "to": _POINT_SCHEMA}),
    required=True,
    checks={"from": _point, "to": _point},
)


async def mouse_drag(request: web.Request) -> web.Response:
    body = await read_body(request, DRAG)
    start = (body.data["from"]["x"], body.data["from"]["y"])
    end = (body.data["to"]["x"], body.data["to"]["y"])
    desk = desk_of(request)
    with model_input():
        desk.desktop.drag(desk.screen, start, end)
    journal_action(request, desk, "mouse/drag", **{"from": list(start), "to": list(end)})
    return ok({"ok": True})


BUTTON = BodySchema(obj({}, {"button": _BUTTON}), checks={"button": _one_of(BUTTONS)})


def _button_handler(action: str, down: bool) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        button = (await read_body(request, BUTTON)).string("button") or "left"
        desk = desk_of(request)
        if down:
            desk.screen.buttons_down.add(button)
        else:
            desk.screen.buttons_down.discard(button)
        journal_action(request, desk, action, button=button)
        return ok({"ok": True})

    handler.__name__ = action.replace("/", "_")
    return handler


# -- keyboard ------------------------------------------------------------------------------------

TYPE = BodySchema(
    obj(
        {"text": string()},
        {
            "delay_in_ms": nullable(
                integer(minimum=0, maximum=60_000, description="Accepted; the fake types at once.")
            )
        },
    ),
    required=True,
)


async def keyboard_type(request: web.Request) -> web.Response:
    body = await read_body(request, TYPE)
    text = body.string("text") or ""
    desk = desk_of(request)
    window = desk.desktop.type_text(desk.screen, text)
    journal_action(
        request,
        desk,
        "keyboard/type",
        text=text,
        delay_in_ms=body.integer("delay_in_ms") or None,
        window=window.id if window is not None else None,
    )
    return ok({"ok": True})


KEYS = BodySchema(
    obj({"keys": array(string(minLength=1), minItems=1, description='e.g. `["ctrl", "v"]`.')}),
    required=True,
    checks={"keys": _keys},
)


def _keys_handler(action: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        keys = (await read_body(request, KEYS)).string_list("keys") or []
        desk = desk_of(request)
        held = desk.screen.keys_down
        if action == "keyboard/press":
            desk.desktop.press(desk.screen, keys)
        elif action == "keyboard/down":
            held.update(keys)
        else:
            held.difference_update(keys)
        journal_action(request, desk, action, keys=keys)
        return ok({"ok": True})

    handler.__name__ = action.replace("/", "_")
    return handler


# -- the declarations ----------------------------------------------------------------------------

#: What a computer route may answer besides success: no such sandbox or screen, not a running
#: desktop.
ERRORS = (400, 404, 409)
#: What a desktop route with a body may answer besides success.
BODY_ROUTE_ERRORS = (*BODY_ERRORS, 404, 409)


def computer_route(
    method: str,
    template: str,
    handler: Handler,
    operation_id: str,
    summary: str,
    data: Schema,
    *,
    body: BodySchema | None = None,
    answer: str = "The answer.",
    parameters: tuple[Schema, ...] = (SCREEN_PARAMETER,),
    errors: tuple[int, ...] = ERRORS,
) -> Route:
    """A route of the desktop (``…/computer``, its windows and its screens): one declaration
    shape for all of them; a route with a ``body`` may also answer its body's errors.

    Example::

        computer_route("GET", COMPUTER_OF + "/cursor", cursor, "computerCursor", "Cursor", POINT)
    """
    return Route(
        method,
        template,
        handler,
        operation(
            operation_id,
            summary,
            tag=COMPUTER,
            parameters=list(parameters),
            ok=ok_response(answer, data),
            errors=BODY_ROUTE_ERRORS if body is not None else errors,
            body=body,
        ),
    )


def _action(
    suffix: str, handler: Handler, operation_id: str, summary: str, body: BodySchema
) -> Route:
    """A ``POST`` action under ``…/computer`` answering ``{"ok": true}``."""
    return computer_route(
        "POST", COMPUTER_OF + suffix, handler, operation_id, summary, OK, body=body, answer="Done."
    )


def _read(suffix: str, handler: Handler, operation_id: str, summary: str, data: Schema) -> Route:
    """A ``GET`` under ``…/computer`` of the named screen."""
    return computer_route("GET", COMPUTER_OF + suffix, handler, operation_id, summary, data)


_POSITION = integer(minimum=0)

ROUTES: Routes = (
    Route(
        "GET",
        COMPUTER_OF + "/screenshot",
        screenshot,
        operation(
            "computerScreenshot",
            "A PNG of the screen, a region of it or a window",
            tag=COMPUTER,
            description="The simulated screen: windows (focused title bar highlighted, typed "
            "text as one block per character) and the cursor. Deterministic bytes.",
            parameters=[
                SCREEN_PARAMETER,
                query("window_id", string(), "Only this window's rectangle."),
                query("x", _POSITION, "Left edge of the region (default 0)."),
                query("y", _POSITION, "Top edge of the region (default 0)."),
                query("width", _POSITION, "Region width (0: to the screen's edge)."),
                query("height", _POSITION, "Region height (0: to the screen's edge)."),
            ],
            ok=ok_response("The PNG.", content={PNG: {"schema": string(format="binary")}}),
            errors=ERRORS,
        ),
    ),
    _read(
        "/screen",
        screen_size,
        "computerScreen",
        "The screen's size",
        obj({"width": integer(minimum=1), "height": integer(minimum=1)}),
    ),
    _read(
        "/cursor",
        cursor,
        "computerCursor",
        "Where the cursor is",
        obj({"x": _POSITION, "y": _POSITION}),
    ),
    _read(
        "/clipboard",
        get_clipboard,
        "computerClipboard",
        "The clipboard's text",
        obj({"text": string()}),
    ),
    Route(
        "PUT",
        COMPUTER_OF + "/clipboard",
        set_clipboard,
        operation(
            "computerSetClipboard",
            "Replace the clipboard's text",
            tag=COMPUTER,
            parameters=[SCREEN_PARAMETER],
            ok=ok_response("Done.", OK),
            errors=BODY_ROUTE_ERRORS,
            body=CLIPBOARD,
        ),
    ),
    _action("/open", open_target, "computerOpen", "Open a URL or file in a new window", OPEN),
    _action("/launch", launch, "computerLaunch", "Launch an application in a new window", LAUNCH),
    _action("/mouse/move", mouse_move, "computerMouseMove", "Move the cursor", MOUSE_MOVE),
    _action(
        "/mouse/click",
        mouse_click,
        "computerMouseClick",
        "Click (at x, y if given); the window under the cursor comes to the top",
        CLICK,
    ),
    _action("/mouse/scroll", mouse_scroll, "computerMouseScroll", "Scroll", SCROLL),
    _action(
        "/mouse/drag",
        mouse_drag,
        "computerMouseDrag",
        "Drag; a window grabbed by its title bar moves",
        DRAG,
    ),
    _action(
        "/mouse/down",
        _button_handler("mouse/down", down=True),
        "computerMouseDown",
        "Press a button",
        BUTTON,
    ),
    _action(
        "/mouse/up",
        _button_handler("mouse/up", down=False),
        "computerMouseUp",
        "Release a button",
        BUTTON,
    ),
    _action(
        "/keyboard/type",
        keyboard_type,
        "computerKeyboardType",
        "Type text into the focused window",
        TYPE,
    ),
    _action(
        "/keyboard/press",
        _keys_handler("keyboard/press"),
        "computerKeyboardPress",
        "Press and release keys (Enter, Tab, BackSpace, Ctrl+C and Ctrl+V edit the focused window)",
        KEYS,
    ),
    _action(
        "/keyboard/down",
        _keys_handler("keyboard/down"),
        "computerKeyboardDown",
        "Hold keys",
        KEYS,
    ),
    _action(
        "/keyboard/up", _keys_handler("keyboard/up"), "computerKeyboardUp", "Release keys", KEYS
    ),
)
