"""Computer use over HTTP (contract §10): the desktop of a ``desktop:1`` sandbox — screens,
windows, cursor, clipboard, mouse and keyboard — its screenshots (PNGs that show the cursor,
the windows and what was typed), the journal of what an agent did, and the 409s for sandboxes
without a running desktop."""

from __future__ import annotations

import asyncio
import struct
import zlib
from typing import Any

import pytest

from fake_server import FakeCreateOS, errors
from fake_server.desktop import DEFAULT_HEIGHT, DEFAULT_WIDTH, TITLE_BAR
from fake_server.png import PNG_SIGNATURE, encode_png
from fake_server.screenshot import PALETTE
from tests.conftest import Client, ClientFactory, create_sandbox


class Image:
    """A decoded 8-bit indexed PNG (what the fake draws), to read pixels back."""

    def __init__(self, png: bytes) -> None:
        assert png[:8] == PNG_SIGNATURE
        chunks: dict[bytes, bytes] = {}
        offset = 8
        while offset < len(png):
            (length,) = struct.unpack(">I", png[offset : offset + 4])
            kind = png[offset + 4 : offset + 8]
            payload = png[offset + 8 : offset + 8 + length]
            (crc,) = struct.unpack(">I", png[offset + 8 + length : offset + 12 + length])
            assert zlib.crc32(payload, zlib.crc32(kind)) == crc, kind
            chunks[kind] = chunks.get(kind, b"") + payload
            offset += 12 + length
        self.width, self.height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
        assert (depth, colour) == (8, 3)
        plte = chunks[b"PLTE"]
        self.palette = [tuple(plte[i : i + 3]) for i in range(0, len(plte), 3)]
        raw = zlib.decompress(chunks[b"IDAT"])
        stride = self.width + 1
        assert all(raw[row * stride] == 0 for row in range(self.height))  # filter: none
        self.rows = [raw[row * stride + 1 : (row + 1) * stride] for row in range(self.height)]

    def at(self, x: int, y: int) -> tuple[int, ...]:
        return self.palette[self.rows[y][x]]

    def count(self, colour: tuple[int, int, int], x: int, y: int, width: int, height: int) -> int:
        index = self.palette.index(colour)
        return sum(row[x : x + width].count(index) for row in self.rows[y : y + height])


DESKTOP, BODY, BORDER, FOCUSED, UNFOCUSED, INK, PAPER = PALETTE


@pytest.fixture
async def desktop(client: Client) -> str:
    """A running ``desktop:1`` sandbox's id."""
    return str((await create_sandbox(client, rootfs="desktop:1"))["id"])


async def call(client: Client, method: str, path: str, **kwargs: Any) -> Any:
    """A computer route's ``data``, asserting a 200."""
    response = await client.request(method, path, **kwargs)
    body = await response.json()
    assert response.status == 200, body
    return body["data"]


async def fail(client: Client, method: str, path: str, status: int, **kwargs: Any) -> Any:
    response = await client.request(method, path, **kwargs)
    body = await response.json()
    assert response.status == status, body
    return body


async def shot(client: Client, sandbox_id: str, **query: Any) -> Image:
    response = await client.get(f"/v1/sandboxes/{sandbox_id}/computer/screenshot", params=query)
    assert response.status == 200, await response.text()
    assert response.content_type == "image/png"
    return Image(await response.read())


def computer(sandbox_id: str, suffix: str) -> str:
    return f"/v1/sandboxes/{sandbox_id}/computer{suffix}"


async def launch(client: Client, sandbox_id: str, application: str, **extra: Any) -> str:
    """Launch ``application`` and return its window's id (the focused window)."""
    await call(
        client, "POST", computer(sandbox_id, "/launch"), json={"application": application, **extra}
    )
    return str((await call(client, "GET", computer(sandbox_id, "/windows/current")))["id"])


def actions(fake: FakeCreateOS, sandbox_id: str) -> list[str]:
    return [
        entry.detail or "" for entry in fake.journal.entries(kind="computer", sandbox=sandbox_id)
    ]


# -- which sandboxes have a desktop ---------------------------------------------------------------


async def test_a_sandbox_without_a_desktop_rootfs_is_a_conflict(client: Client) -> None:
    sandbox = await create_sandbox(client)  # devbox:1
    for method, suffix, body in (
        ("GET", "/screen", None),
        ("GET", "/screenshot", None),
        ("POST", "/mouse/move", {"x": 1, "y": 1}),
        ("GET", "/windows", None),
        ("GET", "/screens", None),
    ):
        answer = await fail(client, method, computer(sandbox["id"], suffix), 409, json=body)
        assert answer["message"] == errors.NO_DESKTOP.format(
            rootfs="devbox:1", desktops="desktop:1"
        )


async def test_a_desktop_that_is_not_running_is_a_conflict_and_keeps_its_state(
    client: Client, fake: FakeCreateOS, desktop: str
) -> None:
    await call(client, "POST", computer(desktop, "/mouse/move"), json={"x": 7, "y": 9})
    await call(client, "POST", f"/v1/sandboxes/{desktop}/pause")
    answer = await fail(client, "GET", computer(desktop, "/cursor"), 409)
    assert answer["message"] == "sandbox is paused; resume it before using its desktop"
    await call(client, "POST", f"/v1/sandboxes/{desktop}/resume")
    # Pausing keeps memory: the desktop is where it was.
    assert await call(client, "GET", computer(desktop, "/cursor")) == {"x": 7, "y": 9}


async def test_another_tenants_desktop_is_not_found(
    client: Client, fake: FakeCreateOS, desktop: str, aiohttp_client: ClientFactory
) -> None:
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    answer = await fail(other, "GET", computer(desktop, "/screen"), 404)
    assert answer["message"] == errors.SANDBOX_NOT_FOUND


async def test_a_delegated_token_may_use_the_desktop(client: Client, desktop: str) -> None:
    token = (await call(client, "POST", f"/v1/sandboxes/{desktop}/access-token"))["token"]
    headers = {"X-Api-Key": token}
    await call(
        client, "POST", computer(desktop, "/mouse/move"), json={"x": 3, "y": 4}, headers=headers
    )
    assert await call(client, "GET", computer(desktop, "/cursor"), headers=headers) == {
        "x": 3,
        "y": 4,
    }


# -- screen, cursor, clipboard -------------------------------------------------------------------


async def test_the_primary_screen_and_the_cursor(client: Client, desktop: str) -> None:
    size = {"width": DEFAULT_WIDTH, "height": DEFAULT_HEIGHT}
    assert await call(client, "GET", computer(desktop, "/screen")) == size
    assert await call(client, "GET", computer(desktop, "/cursor")) == {
        "x": DEFAULT_WIDTH // 2,
        "y": DEFAULT_HEIGHT // 2,
    }
    await call(client, "POST", computer(desktop, "/mouse/move"), json={"x": 0, "y": 767})
    assert await call(client, "GET", computer(desktop, "/cursor")) == {"x": 0, "y": 767}


async def test_moving_off_the_screen_is_refused(client: Client, desktop: str) -> None:
    answer = await fail(
        client, "POST", computer(desktop, "/mouse/move"), 400, json={"x": DEFAULT_WIDTH, "y": 0}
    )
    assert "off the screen" in answer["data"]["x"]
    assert await call(client, "GET", computer(desktop, "/cursor")) != {"x": DEFAULT_WIDTH, "y": 0}


async def test_the_clipboard_round_trips(client: Client, desktop: str) -> None:
    assert await call(client, "GET", computer(desktop, "/clipboard")) == {"text": ""}
    await call(client, "PUT", computer(desktop, "/clipboard"), json={"text": "copied ✓"})
    assert await call(client, "GET", computer(desktop, "/clipboard")) == {"text": "copied ✓"}


# -- windows -------------------------------------------------------------------------------------


async def test_launch_and_open_make_focused_windows(client: Client, desktop: str) -> None:
    assert await call(client, "GET", computer(desktop, "/windows")) == []
    await fail(client, "GET", computer(desktop, "/windows/current"), 404)
    terminal = await launch(client, desktop, "xterm")
    await call(client, "POST", computer(desktop, "/open"), json={"target": "https://example.com"})
    browser = (await call(client, "GET", computer(desktop, "/windows/current")))["id"]
    assert await call(client, "GET", computer(desktop, "/windows")) == [
        {"id": terminal, "title": "xterm"},
        {"id": browser, "title": "https://example.com"},
    ]
    only = await call(client, "GET", computer(desktop, "/windows"), params={"application": "xterm"})
    assert only == [{"id": terminal, "title": "xterm"}]
    assert await call(client, "GET", computer(desktop, f"/windows/{terminal}")) == {
        "id": terminal,
        "title": "xterm",
    }
    await fail(client, "GET", computer(desktop, "/windows/0x7777777"), 404)


async def test_window_geometry_follows_move_resize_maximize_and_restore(
    client: Client, desktop: str
) -> None:
    window = await launch(client, desktop, "gedit", uri="/home/notes.txt")
    path = computer(desktop, f"/windows/{window}")
    first = await call(client, "GET", path + "/geometry")
    assert (first["id"], first["screen"]) == (window, 0)
    await call(client, "POST", path + "/move", json={"x": 100, "y": 50})
    await call(client, "POST", path + "/resize", json={"width": 300, "height": 200})
    moved = {"id": window, "x": 100, "y": 50, "width": 300, "height": 200, "screen": 0}
    assert await call(client, "GET", path + "/geometry") == moved
    await call(client, "POST", path + "/maximize")
    maximized = await call(client, "GET", path + "/geometry")
    assert (maximized["x"], maximized["y"], maximized["width"], maximized["height"]) == (
        0,
        0,
        DEFAULT_WIDTH,
        DEFAULT_HEIGHT,
    )
    await call(client, "POST", path + "/restore")
    assert await call(client, "GET", path + "/geometry") == moved


async def test_focus_minimize_and_close_change_the_current_window(
    client: Client, desktop: str
) -> None:
    first = await launch(client, desktop, "xterm")
    second = await launch(client, desktop, "firefox")
    current = computer(desktop, "/windows/current")
    await call(client, "POST", computer(desktop, f"/windows/{first}/focus"))
    assert (await call(client, "GET", current))["id"] == first
    await call(client, "POST", computer(desktop, f"/windows/{first}/minimize"))
    assert (await call(client, "GET", current))["id"] == second
    await call(client, "DELETE", computer(desktop, f"/windows/{second}"))
    await fail(client, "GET", computer(desktop, f"/windows/{second}"), 404)
    # Only a minimized window is left: nothing has the focus.
    await fail(client, "GET", current, 404)


async def test_a_window_action_takes_a_null_body_as_the_rust_sdk_sends_it(
    client: Client, desktop: str
) -> None:
    # Its `&()` body, serialised as JSON with its content type: `null`.
    first = await launch(client, desktop, "xterm")
    await launch(client, desktop, "firefox")
    headers = {"Content-Type": "application/json"}
    await call(
        client, "POST", computer(desktop, f"/windows/{first}/focus"), data=b"null", headers=headers
    )
    assert (await call(client, "GET", computer(desktop, "/windows/current")))["id"] == first


async def test_a_click_raises_the_window_under_it(client: Client, desktop: str) -> None:
    below = await launch(client, desktop, "xterm")  # at (24, 24)
    above = await launch(client, desktop, "firefox")  # at (48, 48), over it
    geometry = await call(client, "GET", computer(desktop, f"/windows/{below}/geometry"))
    # A point of the lower window that the upper one does not cover.
    await call(
        client,
        "POST",
        computer(desktop, "/mouse/click"),
        json={"x": geometry["x"] + 5, "y": geometry["y"] + 5},
    )
    assert (await call(client, "GET", computer(desktop, "/windows/current")))["id"] == below
    assert above != below


async def test_dragging_a_title_bar_moves_the_window(client: Client, desktop: str) -> None:
    window = await launch(client, desktop, "xterm")
    before = await call(client, "GET", computer(desktop, f"/windows/{window}/geometry"))
    grab = {"x": before["x"] + 50, "y": before["y"] + TITLE_BAR // 2}
    drop = {"x": grab["x"] + 200, "y": grab["y"] + 100}
    await call(client, "POST", computer(desktop, "/mouse/drag"), json={"from": grab, "to": drop})
    after = await call(client, "GET", computer(desktop, f"/windows/{window}/geometry"))
    assert (after["x"], after["y"]) == (before["x"] + 200, before["y"] + 100)
    assert await call(client, "GET", computer(desktop, "/cursor")) == drop


# -- keyboard ------------------------------------------------------------------------------------


async def test_keys_edit_the_focused_window_and_the_clipboard(
    client: Client, fake: FakeCreateOS, desktop: str
) -> None:
    window_id = await launch(client, desktop, "xterm")
    press = computer(desktop, "/keyboard/press")
    await call(client, "POST", computer(desktop, "/keyboard/type"), json={"text": "echo hix"})
    await call(client, "POST", press, json={"keys": ["BackSpace"]})
    await call(client, "POST", press, json={"keys": ["Return"]})
    await call(client, "POST", press, json={"keys": ["ctrl", "c"]})
    assert await call(client, "GET", computer(desktop, "/clipboard")) == {"text": "echo hi\n"}
    await call(client, "POST", press, json={"keys": ["ctrl", "v"]})
    window = fake.find_sandbox(desktop).desktop.window(
        fake.find_sandbox(desktop).desktop.screen(None), window_id
    )
    assert window.text == "echo hi\necho hi\n"


async def test_held_keys_and_buttons_are_tracked(
    client: Client, fake: FakeCreateOS, desktop: str
) -> None:
    screen = fake.find_sandbox(desktop).desktop.screen(None)
    await call(client, "POST", computer(desktop, "/keyboard/down"), json={"keys": ["shift"]})
    await call(client, "POST", computer(desktop, "/mouse/down"), json={"button": "right"})
    assert (screen.keys_down, screen.buttons_down) == ({"shift"}, {"right"})
    await call(client, "POST", computer(desktop, "/keyboard/up"), json={"keys": ["shift"]})
    await call(client, "POST", computer(desktop, "/mouse/up"), json={"button": "right"})
    assert (screen.keys_down, screen.buttons_down) == (set(), set())


@pytest.mark.parametrize(
    ("suffix", "body", "field"),
    [
        ("/mouse/click", {"button": "thumb"}, "button"),
        ("/mouse/click", {"x": 5}, "x"),
        ("/mouse/scroll", {"direction": "sideways"}, "direction"),
        ("/mouse/drag", {"from": {"x": 1}, "to": {"x": 1, "y": 1}}, "from"),
        ("/mouse/drag", {"from": {"x": 1, "y": 1}, "to": {"x": 1, "y": 9999}}, "to"),
        ("/keyboard/press", {"keys": []}, "keys"),
        ("/open", {"target": " "}, "target"),
        ("/launch", {"application": ""}, "application"),
    ],
)
async def test_bad_input_names_its_field(
    client: Client, fake: FakeCreateOS, desktop: str, suffix: str, body: Any, field: str
) -> None:
    answer = await fail(client, "POST", computer(desktop, suffix), 400, json=body)
    assert field in answer["data"]
    assert actions(fake, desktop) == []  # a refused action is not one the agent took


# -- screens -------------------------------------------------------------------------------------


async def test_screens_are_created_inspected_resized_connected_and_deleted(
    client: Client, desktop: str
) -> None:
    screens = computer(desktop, "/screens")
    (primary,) = await call(client, "GET", screens)
    assert primary == {
        "screen_id": "screen-0",
        "display": ":0",
        "width": DEFAULT_WIDTH,
        "height": DEFAULT_HEIGHT,
        "vnc_port": 5900,
        "novnc_port": 6080,
    }
    created = await call(client, "POST", screens, json={"width": 800, "height": 600})
    assert (created["screen_id"], created["display"], created["width"]) == ("screen-1", ":1", 800)
    assert await call(client, "GET", screens + "/screen-1") == created
    size = await call(client, "GET", computer(desktop, "/screen"), params={"screen_id": "screen-1"})
    assert size == {"width": 800, "height": 600}
    resized = await call(client, "POST", screens + "/screen-1/resize", json={"width": 640})
    assert (resized["width"], resized["height"]) == (640, 600)
    connection = await call(client, "GET", screens + "/screen-1/connect")
    assert connection["screen_id"] == "screen-1"
    assert connection["port"] == 6081
    assert connection["url"].startswith(f"https://6081-{desktop}.")
    assert connection["token"] in connection["url"]
    await call(client, "DELETE", screens + "/screen-1")
    await fail(client, "GET", screens + "/screen-1", 404)
    answer = await fail(client, "DELETE", screens + "/screen-0", 409)
    assert answer["message"] == errors.PRIMARY_SCREEN


async def test_at_most_eight_screens(client: Client, desktop: str) -> None:
    for index in range(1, 8):
        created = await call(client, "POST", computer(desktop, "/screens"))
        assert created["screen_id"] == f"screen-{index}"
    answer = await fail(client, "POST", computer(desktop, "/screens"), 409)
    assert answer["message"] == errors.SCREENS_FULL.format(count=8)


async def test_each_screen_has_its_own_cursor_and_windows(client: Client, desktop: str) -> None:
    await call(client, "POST", computer(desktop, "/screens"))
    second = {"screen_id": "screen-1"}
    await call(
        client, "POST", computer(desktop, "/mouse/move"), json={"x": 1, "y": 2}, params=second
    )
    await call(
        client, "POST", computer(desktop, "/launch"), json={"application": "x"}, params=second
    )
    assert await call(client, "GET", computer(desktop, "/cursor"), params=second) == {
        "x": 1,
        "y": 2,
    }
    assert await call(client, "GET", computer(desktop, "/cursor")) != {"x": 1, "y": 2}
    assert await call(client, "GET", computer(desktop, "/windows")) == []
    assert len(await call(client, "GET", computer(desktop, "/windows"), params=second)) == 1


async def test_a_screen_id_must_exist_and_be_well_formed(client: Client, desktop: str) -> None:
    answer = await fail(
        client, "GET", computer(desktop, "/screen"), 404, params={"screen_id": "screen-3"}
    )
    assert answer["message"] == errors.SCREEN_NOT_FOUND
    answer = await fail(
        client, "GET", computer(desktop, "/screen"), 400, params={"screen_id": "tv"}
    )
    assert "screen_id" in answer["data"]


@pytest.mark.parametrize("size", [{"width": 100}, {"height": 5000}])
async def test_a_screen_size_out_of_range_is_refused(
    client: Client, desktop: str, size: dict[str, int]
) -> None:
    answer = await fail(client, "POST", computer(desktop, "/screens"), 400, json=size)
    assert set(answer["data"]) == set(size)


# -- screenshots ---------------------------------------------------------------------------------


async def test_a_screenshot_is_a_png_of_the_screen_and_deterministic(
    client: Client, desktop: str
) -> None:
    response = await client.get(computer(desktop, "/screenshot"))
    first = await response.read()
    image = Image(first)
    assert (image.width, image.height) == (DEFAULT_WIDTH, DEFAULT_HEIGHT)
    assert image.at(5, 5) == DESKTOP
    again = await (await client.get(computer(desktop, "/screenshot"))).read()
    assert again == first
    assert len(first) < 20_000  # flat colours compress: a small image


async def test_a_screenshot_shows_the_cursor_where_it_is(client: Client, desktop: str) -> None:
    await call(client, "POST", computer(desktop, "/mouse/move"), json={"x": 100, "y": 100})
    image = await shot(client, desktop)
    assert image.at(100, 100) == INK  # the arrow's tip
    assert image.count(INK, 100, 100, 8, 12) > 0
    await call(client, "POST", computer(desktop, "/mouse/move"), json={"x": 300, "y": 300})
    image = await shot(client, desktop)
    assert image.count(INK, 100, 100, 8, 12) == 0
    assert image.at(300, 300) == INK


async def test_a_screenshot_shows_windows_and_what_was_typed(client: Client, desktop: str) -> None:
    await call(client, "POST", computer(desktop, "/mouse/move"), json={"x": 1000, "y": 700})
    window = await launch(client, desktop, "xterm")
    geometry = await call(client, "GET", computer(desktop, f"/windows/{window}/geometry"))
    x, y, width, height = geometry["x"], geometry["y"], geometry["width"], geometry["height"]
    image = await shot(client, desktop)
    assert image.at(x, y) == BORDER
    assert image.at(x + width // 2, y + 2) == FOCUSED
    body_y = y + TITLE_BAR + 1
    assert image.count(INK, x + 1, body_y, width - 2, height - TITLE_BAR - 2) == 0

    await call(client, "POST", computer(desktop, "/keyboard/type"), json={"text": "ls -la"})
    typed = await shot(client, desktop)
    inked = typed.count(INK, x + 1, body_y, width - 2, height - TITLE_BAR - 2)
    assert inked == 5 * 5 * 8  # one 5x8 block per character, none for the space

    await launch(client, desktop, "firefox")
    behind = await shot(client, desktop)
    assert behind.at(x + 2, y + 2) == UNFOCUSED  # no longer focused
    await call(client, "POST", computer(desktop, f"/windows/{window}/minimize"))
    assert (await shot(client, desktop)).at(x, y) == DESKTOP


async def test_a_screenshot_of_a_region_or_a_window(client: Client, desktop: str) -> None:
    region = await shot(client, desktop, x=0, y=0, width=240, height=160)
    assert (region.width, region.height) == (240, 160)
    corner = await shot(client, desktop, x=DEFAULT_WIDTH - 10, y=DEFAULT_HEIGHT - 5)
    assert (corner.width, corner.height) == (10, 5)
    window = await launch(client, desktop, "xterm")
    geometry = await call(client, "GET", computer(desktop, f"/windows/{window}/geometry"))
    framed = await shot(client, desktop, window_id=window)
    assert (framed.width, framed.height) == (geometry["width"], geometry["height"])
    assert framed.at(0, 0) == BORDER


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"x": DEFAULT_WIDTH}, "x"),
        ({"x": 10, "width": DEFAULT_WIDTH}, "width"),
        ({"y": -1}, "y"),
    ],
)
async def test_a_region_off_the_screen_is_refused(
    client: Client, desktop: str, query: dict[str, int], field: str
) -> None:
    response = await client.get(computer(desktop, "/screenshot"), params=query)
    body = await response.json()
    assert response.status == 400, body
    assert field in body["data"]


# -- the journal of what an agent did ------------------------------------------------------------


async def test_every_action_is_journaled_with_its_arguments(
    client: Client, fake: FakeCreateOS, desktop: str
) -> None:
    window = await launch(client, desktop, "firefox", uri="https://example.com")
    await call(client, "POST", computer(desktop, "/mouse/move"), json={"x": 10, "y": 20})
    await call(
        client, "POST", computer(desktop, "/mouse/click"), json={"button": "right", "count": 2}
    )
    await call(
        client, "POST", computer(desktop, "/mouse/scroll"), json={"direction": "down", "amount": 3}
    )
    await call(
        client, "POST", computer(desktop, "/keyboard/type"), json={"text": "hi", "delay_in_ms": 5}
    )
    await call(client, "POST", computer(desktop, "/keyboard/press"), json={"keys": ["ctrl", "a"]})
    await call(client, "PUT", computer(desktop, "/clipboard"), json={"text": "x"})
    await call(client, "POST", computer(desktop, f"/windows/{window}/move"), json={"x": 1, "y": 2})
    await call(client, "POST", computer(desktop, "/screens"), json={"width": 800, "height": 600})
    # Reads are requests, not actions.
    await call(client, "GET", computer(desktop, "/cursor"))

    screen = '"screen_id":"screen-0"'
    assert actions(fake, desktop) == [
        f'launch {{"application":"firefox",{screen},"uri":"https://example.com","window":"{window}"}}',
        f'mouse/move {{{screen},"x":10,"y":20}}',
        f'mouse/click {{"button":"right","count":2,{screen},"x":10,"y":20}}',
        f'mouse/scroll {{"amount":3,"direction":"down",{screen},"x":10,"y":20}}',
        f'keyboard/type {{"delay_in_ms":5,{screen},"text":"hi","window":"{window}"}}',
        f'keyboard/press {{"keys":["ctrl","a"],{screen}}}',
        f'clipboard {{{screen},"text":"x"}}',
        f'windows/move {{{screen},"window":"{window}","x":1,"y":2}}',
        'screens/create {"height":600,"screen_id":"screen-1","width":800}',
    ]
    entry = fake.journal.entries(kind="computer")[0]
    assert entry.tenant == fake.tenant("skp_test_owner").id
    assert entry.describe().endswith(actions(fake, desktop)[0])
    # The same, read back as data.
    parsed = fake.journal.computer_actions(desktop)
    assert parsed[2] == (
        "mouse/click",
        {"button": "right", "count": 2, "screen_id": "screen-0", "x": 10, "y": 20},
    )
    assert [action for action, _ in parsed] == [
        line.split(" ")[0] for line in actions(fake, desktop)
    ]
    assert fake.journal.computer_actions("sb_other") == []


async def test_fault_rules_apply_to_computer_routes(
    client: Client, fake: FakeCreateOS, desktop: str
) -> None:
    fake.faults.add(
        {
            "match": {"route": "GET /v1/sandboxes/{id}/computer/screen"},
            "action": {"type": "error", "status": 404},
            "times": 2,
        }
    )
    # What a desktop that is still starting looks like to a client that polls the screen.
    for _ in range(2):
        await fail(client, "GET", computer(desktop, "/screen"), 404)
    assert (await call(client, "GET", computer(desktop, "/screen")))["width"] == DEFAULT_WIDTH


async def test_a_gate_holds_a_desktop_action_until_released(
    client: Client, fake: FakeCreateOS, desktop: str
) -> None:
    gate = fake.faults.gate("agent", route="POST /v1/sandboxes/{id}/computer/mouse/move")
    moving = asyncio.ensure_future(
        client.post(computer(desktop, "/mouse/move"), json={"x": 1, "y": 1})
    )
    await gate.wait_held(1)
    # Held before its handler: the cursor has not moved, nothing is journaled yet.
    assert fake.find_sandbox(desktop).desktop.screen(None).cursor != (1, 1)
    assert actions(fake, desktop) == []
    gate.release()
    assert (await moving).status == 200
    assert await call(client, "GET", computer(desktop, "/cursor")) == {"x": 1, "y": 1}


# -- the PNG encoder -----------------------------------------------------------------------------


def test_the_png_encoder_round_trips_pixels() -> None:
    palette = [(0, 0, 0), (255, 0, 0), (0, 0, 255)]
    image = Image(encode_png(3, 2, bytes([0, 1, 2, 2, 1, 0]), palette))
    assert (image.width, image.height) == (3, 2)
    assert [image.at(x, 0) for x in range(3)] == palette
    assert [image.at(x, 1) for x in range(3)] == palette[::-1]


@pytest.mark.parametrize(
    ("width", "height", "pixels", "palette", "problem"),
    [
        (0, 1, b"", [(0, 0, 0)], "at least 1x1"),
        (2, 2, b"\x00", [(0, 0, 0)], "expected 4 pixels"),
        (1, 1, b"\x01", [(0, 0, 0)], "palette does not have"),
        (1, 1, b"\x00", [], "1 to 256 colours"),
    ],
)
def test_the_png_encoder_refuses_what_does_not_add_up(
    width: int, height: int, pixels: bytes, palette: list[tuple[int, int, int]], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        encode_png(width, height, pixels, palette)
