"""The simulated desktop of a sandbox on a desktop root filesystem (contract §10): screens,
windows, the cursor, the clipboard, held buttons and keys, and what was typed where.

Nothing here talks HTTP: the computer routes (:mod:`fake_server.routes.computer`) call these
methods and draw a screen with :mod:`fake_server.screenshot`. Bad input raises
``ValueError("field: problem")`` (the routes answer 400 naming the field), unknown windows and
screens :class:`~fake_server.errors.ApiError` 404, a full set of screens 409.

Example::

    desktop = Desktop()
    screen = desktop.screen("screen-0")
    window = desktop.launch(screen, "xterm", "")
    desktop.type_text(screen, "ls")
    window.text                      # 'ls'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fake_server import errors
from fake_server.errors import ApiError

__all__ = [
    "BUTTONS",
    "DEFAULT_HEIGHT",
    "DEFAULT_WIDTH",
    "MAX_HEIGHT",
    "MAX_SCREENS",
    "MAX_WIDTH",
    "MIN_HEIGHT",
    "MIN_WIDTH",
    "PRIMARY_SCREEN",
    "SCREEN_IDS",
    "SCROLL_DIRECTIONS",
    "TITLE_BAR",
    "WINDOW_COORDINATE",
    "Desktop",
    "Screen",
    "Window",
    "check_screen_size",
]

#: Screens a desktop can hold (``screen-0`` … ``screen-7``), the first always present.
MAX_SCREENS = 8
SCREEN_IDS = tuple(f"screen-{index}" for index in range(MAX_SCREENS))
PRIMARY_SCREEN = SCREEN_IDS[0]
#: The size of a screen nobody sized (small: screenshots are drawn pixel by pixel).
DEFAULT_WIDTH = 1024
DEFAULT_HEIGHT = 768
MIN_WIDTH, MAX_WIDTH = 320, 3840
MIN_HEIGHT, MAX_HEIGHT = 200, 2160
#: Window positions and sizes are X11's 16-bit coordinates.
WINDOW_COORDINATE = 32767
#: The height of a window's title bar (where a drag moves the window).
TITLE_BAR = 20
BUTTONS = ("left", "middle", "right")
SCROLL_DIRECTIONS = ("up", "down")
#: The first window id, as an X server numbers client windows.
_FIRST_WINDOW = 0x0400001
#: The size and cascade step of a newly opened window.
_WINDOW_WIDTH, _WINDOW_HEIGHT, _CASCADE = 640, 400, 24

WindowState = Literal["normal", "minimized", "maximized"]


@dataclass(slots=True, eq=False)
class Window:
    """One top-level window: where it is, what it shows, what was typed into it."""

    id: str
    title: str
    application: str
    screen: int
    x: int
    y: int
    width: int
    height: int
    state: WindowState = "normal"
    #: What was typed or pasted into it.
    text: str = ""
    #: Geometry to go back to when a maximized window is restored.
    restore_to: tuple[int, int, int, int] | None = None

    def view(self) -> dict[str, str]:
        """The window as the API lists it."""
        return {"id": self.id, "title": self.title}

    def geometry(self) -> dict[str, int | str]:
        return {
            "id": self.id,
            "x": self.x,
            "y": self.y,
            "width": self.width,
            "height": self.height,
            "screen": self.screen,
        }

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height

    def in_title_bar(self, x: int, y: int) -> bool:
        return self.contains(x, y) and y < self.y + TITLE_BAR


@dataclass(slots=True, eq=False)
class Screen:
    """One X display: its size, cursor, clipboard and held input, and its windows (bottom to
    top)."""

    index: int
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    cursor: tuple[int, int] = (DEFAULT_WIDTH // 2, DEFAULT_HEIGHT // 2)
    clipboard: str = ""
    buttons_down: set[str] = field(default_factory=set)
    keys_down: set[str] = field(default_factory=set)
    windows: list[Window] = field(default_factory=list)

    @property
    def id(self) -> str:
        return SCREEN_IDS[self.index]

    def view(self) -> dict[str, int | str]:
        """The screen as ``GET …/computer/screens/{sid}`` shows it."""
        return {
            "screen_id": self.id,
            "display": f":{self.index}",
            "width": self.width,
            "height": self.height,
            "vnc_port": self.vnc_port,
            "novnc_port": self.novnc_port,
        }

    @property
    def vnc_port(self) -> int:
        return 5900 + self.index

    @property
    def novnc_port(self) -> int:
        return 6080 + self.index

    def focused(self) -> Window | None:
        """The window keyboard input goes to: the topmost one not minimized."""
        for window in reversed(self.windows):
            if window.state != "minimized":
                return window
        return None

    def window_at(self, x: int, y: int) -> Window | None:
        for window in reversed(self.windows):
            if window.state != "minimized" and window.contains(x, y):
                return window
        return None

    def check_point(self, x: int, y: int, name: str) -> None:
        """``ValueError("<name>: ...")`` unless (x, y) is on this screen."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise ValueError(f"{name}: ({x}, {y}) is off the screen ({self.width}x{self.height})")


def check_screen_size(width: int, height: int) -> None:
    """``ValueError("width: ...")`` (or height) for a size no screen can have.

    Example:
        >>> check_screen_size(1024, 768)
        >>> check_screen_size(10, 768)
        Traceback (most recent call last):
        ...
        ValueError: width: must be between 320 and 3840
    """
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise ValueError(f"width: must be between {MIN_WIDTH} and {MAX_WIDTH}")
    if not MIN_HEIGHT <= height <= MAX_HEIGHT:
        raise ValueError(f"height: must be between {MIN_HEIGHT} and {MAX_HEIGHT}")


class Desktop:
    """A sandbox's desktop: ``screen-0`` from the start, more on request."""

    def __init__(self) -> None:
        self.screens: dict[str, Screen] = {PRIMARY_SCREEN: Screen(0)}
        self._next_window = _FIRST_WINDOW

    # -- screens ---------------------------------------------------------------------------

    def screen(self, screen_id: str | None) -> Screen:
        """The screen a request names (``None``: the primary one); 404 if it does not exist."""
        screen = self.screens.get(screen_id or PRIMARY_SCREEN)
        if screen is None:
            raise ApiError(404, errors.SCREEN_NOT_FOUND)
        return screen

    def list_screens(self) -> list[Screen]:
        return sorted(self.screens.values(), key=lambda screen: screen.index)

    def add_screen(self, width: int, height: int) -> Screen:
        """A new screen with the lowest free id; 409 when all eight exist."""
        check_screen_size(width, height)
        for index, screen_id in enumerate(SCREEN_IDS):
            if screen_id not in self.screens:
                screen = Screen(index, width, height, cursor=(width // 2, height // 2))
                self.screens[screen_id] = screen
                return screen
        raise ApiError(409, errors.SCREENS_FULL.format(count=MAX_SCREENS))

    def resize_screen(self, screen: Screen, width: int, height: int) -> Screen:
        """Resize a screen; the cursor and maximized windows follow the new size."""
        check_screen_size(width, height)
        screen.width, screen.height = width, height
        x, y = screen.cursor
        screen.cursor = (min(x, width - 1), min(y, height - 1))
        for window in screen.windows:
            if window.state == "maximized":
                window.x, window.y, window.width, window.height = 0, 0, width, height
        return screen

    def remove_screen(self, screen: Screen) -> None:
        """Remove a screen and its windows; the primary screen stays (409)."""
        if screen.index == 0:
            raise ApiError(409, errors.PRIMARY_SCREEN)
        del self.screens[screen.id]

    # -- windows ---------------------------------------------------------------------------

    def windows(self, screen: Screen, application: str | None = None) -> list[Window]:
        """The screen's windows, bottom to top, optionally of one application."""
        return [
            window
            for window in screen.windows
            if not application or window.application == application
        ]

    def window(self, screen: Screen, window_id: str) -> Window:
        for window in screen.windows:
            if window.id == window_id:
                return window
        raise ApiError(404, errors.WINDOW_NOT_FOUND)

    def current(self, screen: Screen) -> Window:
        window = screen.focused()
        if window is None:
            raise ApiError(404, errors.NO_ACTIVE_WINDOW)
        return window

    def launch(self, screen: Screen, application: str, title: str) -> Window:
        """Open a window of ``application`` (titled ``title``, or the application's name),
        cascaded from the last one and focused."""
        step = _CASCADE * (len(screen.windows) % 8)
        width = min(_WINDOW_WIDTH, screen.width - 2 * _CASCADE)
        height = min(_WINDOW_HEIGHT, screen.height - 2 * _CASCADE)
        window = Window(
            id=f"0x{self._next_window:07x}",
            title=title or application,
            application=application,
            screen=screen.index,
            x=_CASCADE + step,
            y=_CASCADE + step,
            width=width,
            height=height,
        )
        self._next_window += 1
        screen.windows.append(window)
        return window

    def focus(self, screen: Screen, window: Window) -> None:
        """Raise ``window`` to the top (restoring it if minimized): it gets the keyboard."""
        if window.state == "minimized":
            window.state = "normal"
        screen.windows.remove(window)
        screen.windows.append(window)

    def move_window(self, window: Window, x: int, y: int) -> None:
        window.x, window.y = x, y
        window.state = "normal" if window.state == "maximized" else window.state

    def resize_window(self, window: Window, width: int, height: int) -> None:
        window.width, window.height = width, height
        window.state = "normal" if window.state == "maximized" else window.state

    def maximize(self, screen: Screen, window: Window) -> None:
        if window.state != "maximized":
            window.restore_to = (window.x, window.y, window.width, window.height)
        window.state = "maximized"
        window.x, window.y, window.width, window.height = 0, 0, screen.width, screen.height
        self.focus(screen, window)

    def minimize(self, window: Window) -> None:
        window.state = "minimized"

    def restore(self, screen: Screen, window: Window) -> None:
        if window.state == "maximized" and window.restore_to is not None:
            window.x, window.y, window.width, window.height = window.restore_to
        window.state = "normal"
        window.restore_to = None
        self.focus(screen, window)

    def close(self, screen: Screen, window: Window) -> None:
        screen.windows.remove(window)

    # -- mouse -----------------------------------------------------------------------------

    def move_cursor(self, screen: Screen, x: int, y: int) -> None:
        screen.check_point(x, y, name="x")
        screen.cursor = (x, y)

    def click(self, screen: Screen, x: int | None, y: int | None) -> Window | None:
        """Click at (x, y) or where the cursor is; the window under it comes to the top."""
        if (x is None) != (y is None):
            raise ValueError("x: x and y are given together or not at all")
        if x is not None and y is not None:
            self.move_cursor(screen, x, y)
        window = screen.window_at(*screen.cursor)
        if window is not None:
            self.focus(screen, window)
        return window

    def drag(self, screen: Screen, start: tuple[int, int], end: tuple[int, int]) -> None:
        """Drag from ``start`` to ``end``: a window grabbed by its title bar moves along."""
        screen.check_point(*start, name="from")
        screen.check_point(*end, name="to")
        window = screen.window_at(*start)
        if window is not None:
            self.focus(screen, window)
            if window.in_title_bar(*start):
                self.move_window(window, window.x + end[0] - start[0], window.y + end[1] - start[1])
        screen.cursor = end

    # -- keyboard --------------------------------------------------------------------------

    def type_text(self, screen: Screen, text: str) -> Window | None:
        """Type into the focused window (with none, the keystrokes go nowhere)."""
        window = screen.focused()
        if window is not None:
            window.text += text
        return window

    def press(self, screen: Screen, keys: list[str]) -> None:
        """Press and release a key combination: Enter, Tab and BackSpace edit the focused
        window's text, Ctrl+C copies it to the clipboard and Ctrl+V pastes the clipboard."""
        names = {key.lower() for key in keys}
        window = screen.focused()
        control = bool(names & {"ctrl", "control", "control_l", "control_r"})
        if control and "c" in names:
            if window is not None:
                screen.clipboard = window.text
        elif control and "v" in names:
            self.type_text(screen, screen.clipboard)
        elif names & {"return", "enter", "kp_enter"}:
            self.type_text(screen, "\n")
        elif "tab" in names:
            self.type_text(screen, "\t")
        elif "backspace" in names and window is not None:
            window.text = window.text[:-1]
