"""Screenshots of a simulated desktop screen: the desktop, its windows (title bar, border, what
was typed into each), and the cursor on top, drawn in a fixed palette and encoded as a PNG.

Text is drawn as one block per character (a space leaves a gap, a newline starts a new line), so
a screenshot changes whenever what was typed changes, without a font. The same screen always
gives the same bytes.

Example::

    png = render(screen)                              # the whole screen
    png = render(screen, Region(0, 0, 240, 160))      # a 240x160 crop of its top-left corner
"""

from __future__ import annotations

from typing import NamedTuple

from fake_server.desktop import TITLE_BAR, Screen, Window
from fake_server.png import encode_png

__all__ = ["PALETTE", "Region", "region_of", "render"]

#: The colours a screenshot uses, by palette index.
PALETTE = (
    (0x2B, 0x5B, 0x84),  # 0 desktop
    (0xFF, 0xFF, 0xFF),  # 1 window body
    (0x40, 0x40, 0x40),  # 2 window border
    (0x35, 0x84, 0xE4),  # 3 title bar of the focused window
    (0x9A, 0x9A, 0x9A),  # 4 title bar of other windows
    (0x10, 0x10, 0x10),  # 5 text, cursor outline
    (0xF0, 0xF0, 0xF0),  # 6 title text, cursor fill
)
_DESKTOP, _BODY, _BORDER, _FOCUSED, _UNFOCUSED, _INK, _PAPER = range(len(PALETTE))
#: A character cell: its size, and the block drawn in it.
_CELL_W, _CELL_H = 7, 12
_GLYPH_W, _GLYPH_H = 5, 8
_PADDING = 6
#: The cursor: an arrow this many pixels tall.
_CURSOR_H = 12


class Region(NamedTuple):
    """A rectangle of a screen, in screen pixels."""

    x: int
    y: int
    width: int
    height: int


def region_of(
    screen: Screen,
    *,
    x: int | None = None,
    y: int | None = None,
    width: int = 0,
    height: int = 0,
    window: Window | None = None,
) -> Region:
    """The part of ``screen`` a screenshot request names: a window's rectangle, or ``x``/``y``
    (default 0) with ``width``/``height`` (0: to the screen's edge). ``ValueError`` when it is
    not on the screen.

    Example::

        region_of(screen, x=0, y=0, width=240, height=160)   # Region(0, 0, 240, 160)
    """
    if window is not None:
        left, top = max(window.x, 0), max(window.y, 0)
        right = min(window.x + window.width, screen.width)
        bottom = min(window.y + window.height, screen.height)
        if window.state == "minimized" or right <= left or bottom <= top:
            raise ValueError("window_id: the window is not visible on the screen")
        return Region(left, top, right - left, bottom - top)
    left, top = x or 0, y or 0
    if not (0 <= left < screen.width and 0 <= top < screen.height):
        raise ValueError(f"x: ({left}, {top}) is off the screen ({screen.width}x{screen.height})")
    width = width or screen.width - left
    height = height or screen.height - top
    if left + width > screen.width or top + height > screen.height:
        raise ValueError(
            f"width: the region passes the screen's edge ({screen.width}x{screen.height})"
        )
    return Region(left, top, width, height)


class _Canvas:
    """A screen's pixels as palette indices; drawing clips to the screen."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes((_DESKTOP,)) * (width * height))

    def fill(self, x: int, y: int, width: int, height: int, colour: int) -> None:
        self.blit(x, y, bytes((colour,)) * max(width, 0), height)

    def blit(self, x: int, y: int, run: bytes, height: int) -> None:
        """``run`` (one row of pixels) drawn at (x, y) and on the ``height - 1`` rows below,
        clipped to the screen."""
        left, right = max(x, 0), min(x + len(run), self.width)
        top, bottom = max(y, 0), min(y + height, self.height)
        if right <= left or bottom <= top:
            return
        clipped = run[left - x : right - x]
        for row in range(top, bottom):
            start = row * self.width + left
            self.pixels[start : start + len(clipped)] = clipped

    def text(
        self, x: int, y: int, width: int, height: int, text: str, colour: int, ground: int
    ) -> None:
        """``text`` as blocks on ``ground`` in the box (x, y, width, height), wrapped at its
        right edge and cut at its bottom: each line of cells is one run of pixels, drawn once
        per row of its blocks."""
        columns = max(width // _CELL_W, 1)
        ink = bytes((colour,)) * _GLYPH_W + bytes((ground,)) * (_CELL_W - _GLYPH_W)
        blank = bytes((ground,)) * _CELL_W
        for number, line in enumerate(_wrap(text, columns)):
            if (number + 1) * _CELL_H > height:
                return
            run = b"".join(blank if char.isspace() else ink for char in line)
            self.blit(x, y + number * _CELL_H, run, _GLYPH_H)

    def cursor(self, x: int, y: int) -> None:
        """An arrow with its tip at (x, y): an outlined triangle widening downwards."""
        for row in range(_CURSOR_H):
            span = min(row, _CURSOR_H // 2) + 1
            self.fill(x, y + row, span, 1, _INK)
            if span > 2:
                self.fill(x + 1, y + row, span - 2, 1, _PAPER)


def _wrap(text: str, columns: int) -> list[str]:
    """``text`` in lines of at most ``columns`` characters (a newline also ends a line)."""
    return [
        line[start : start + columns]
        for line in text.split("\n")
        for start in range(0, max(len(line), 1), columns)
    ]


def _draw_window(canvas: _Canvas, window: Window, focused: bool) -> None:
    x, y, width, height = window.x, window.y, window.width, window.height
    bar = _FOCUSED if focused else _UNFOCUSED
    canvas.fill(x, y, width, height, _BORDER)
    canvas.fill(x + 1, y + 1, width - 2, TITLE_BAR - 1, bar)
    canvas.fill(x + 1, y + TITLE_BAR, width - 2, height - TITLE_BAR - 1, _BODY)
    title_top = y + (TITLE_BAR - _GLYPH_H) // 2
    canvas.text(x + _PADDING, title_top, width - 2 * _PADDING, _CELL_H, window.title, _PAPER, bar)
    canvas.text(
        x + _PADDING,
        y + TITLE_BAR + _PADDING,
        width - 2 * _PADDING,
        height - TITLE_BAR - 2 * _PADDING,
        window.text,
        _INK,
        _BODY,
    )


def render(screen: Screen, region: Region | None = None) -> bytes:
    """A PNG of ``screen`` (or of ``region`` of it): windows bottom to top, the focused one's
    title bar highlighted, the cursor last.

    Example::

        render(screen)[:8] == b"\\x89PNG\\r\\n\\x1a\\n"   # True
    """
    canvas = _Canvas(screen.width, screen.height)
    focused = screen.focused()
    for window in screen.windows:
        if window.state != "minimized":
            _draw_window(canvas, window, window is focused)
    canvas.cursor(*screen.cursor)
    area = region or Region(0, 0, screen.width, screen.height)
    if area == (0, 0, screen.width, screen.height):
        pixels = canvas.pixels
    else:
        pixels = bytearray()
        for row in range(area.y, area.y + area.height):
            start = row * screen.width + area.x
            pixels += canvas.pixels[start : start + area.width]
    return encode_png(area.width, area.height, pixels, PALETTE)
