"""The official Python SDK's access-token and computer-use methods against the fake, unchanged,
through the plugin's own fixtures (sync tests)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import createos
import pytest
from createos import (
    APIError,
    ComputerClickRequest,
    ComputerCreateScreenRequest,
    ComputerDragRequest,
    ComputerListWindowsOptions,
    ComputerMouseButton,
    ComputerOpenRequest,
    ComputerPoint,
    ComputerScreenID,
    ComputerScreenOptions,
    ComputerScreenshotOptions,
    ComputerTypeRequest,
    ComputerWindowResizeRequest,
    CreateSandboxRequest,
    RunCommandRequest,
    SandboxInstance,
)

from fake_server.desktop import DEFAULT_HEIGHT, DEFAULT_WIDTH
from pytest_createos import CreateosServer
from tests.test_computer import Image

# The tenant is dropped after each test: what a test leaves running is not a leak here.
pytestmark = pytest.mark.createos(leak_check="off")

SCREEN = ComputerScreenOptions(screen_id=ComputerScreenID.SCREEN_0)


def create(sdk: createos.Client, rootfs: str = "devbox:1", **fields: object) -> SandboxInstance:
    return sdk.create_sandbox(CreateSandboxRequest(shape="s-1vcpu-1gb", rootfs=rootfs, **fields))


def api_error(call: Callable[[], object]) -> APIError:
    with pytest.raises(APIError) as caught:
        call()
    return caught.value


# -- access tokens ---------------------------------------------------------------------------------


def test_access_token_lifecycle_through_the_sdk(sdk: createos.Client) -> None:
    sandbox = create(sdk)
    assert sandbox.get_access_token().enabled is False
    created = sandbox.create_access_token()
    assert created.enabled is True
    assert created.token.startswith("skp_sb_")
    assert created.rotated_at is None
    metadata = sandbox.get_access_token()
    assert metadata.enabled is True
    assert metadata.token_hint == f"{created.token[:9]}...{created.token[-4:]}"
    assert metadata.created_at == created.created_at
    assert api_error(sandbox.create_access_token).status_code == 409

    rotated = sandbox.rotate_access_token()
    assert rotated.token != created.token
    assert rotated.created_at == created.created_at
    assert rotated.rotated_at is not None
    disabled = sandbox.disable_access_token()
    assert (disabled.enabled, disabled.token_hint, disabled.created_at) == (False, None, None)
    assert api_error(sandbox.rotate_access_token).status_code == 404


def test_a_delegated_handle_runs_commands_but_not_management(sdk: createos.Client) -> None:
    sandbox = create(sdk)
    other = create(sdk)
    token = sandbox.create_access_token().token
    worker = sandbox.with_access_token(token)
    result = worker.run_command(RunCommandRequest(command="echo", arguments=["delegated"]))
    assert result.result.standard_output == "delegated\n"
    worker.files.upload("/tmp/note.txt", b"from the worker")
    with sandbox.files.download("/tmp/note.txt") as download:
        assert download.read() == b"from the worker"

    assert api_error(worker.refresh).status_code == 403
    assert api_error(worker.pause).status_code == 403
    assert api_error(worker.get_access_token).status_code == 403
    foreign = other.with_access_token(token)
    assert (
        api_error(lambda: foreign.run_command(RunCommandRequest(command="true"))).status_code == 404
    )

    sandbox.rotate_access_token()
    stale = api_error(lambda: worker.run_command(RunCommandRequest(command="true")))
    assert stale.status_code == 401
    # The owner's handle was never touched.
    assert sandbox.refresh().status.value == "running"


# -- computer use: the SDK's desktop example, step by step ----------------------------------------


def _png_size(payload: bytes) -> tuple[int, int]:
    """What the SDK's desktop example reads: the IHDR's width and height."""
    assert payload[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", payload[16:24])
    return width, height


def test_the_sdks_desktop_example_flow(
    sdk: createos.Client, createos_server: CreateosServer
) -> None:
    sandbox = create(sdk, "desktop:1", ingress_enabled=True)
    computer = sandbox.computer
    # A desktop still starting answers 404 for a while: two polls see it here.
    createos_server.faults.error(
        404, route="GET /v1/sandboxes/{id}/computer/screen", times=2, message="desktop not ready"
    )

    # The example polls the screen until the desktop answers (any APIError means "not yet").
    not_ready: list[int] = []
    for _ in range(10):
        try:
            geometry = computer.screen(SCREEN)
            break
        except APIError as error:
            not_ready.append(error.status_code)
    assert not_ready == [404, 404]
    assert (geometry.width, geometry.height) == (DEFAULT_WIDTH, DEFAULT_HEIGHT)
    screens = computer.screens.list()
    primary = computer.screens.get(ComputerScreenID.SCREEN_0)
    assert [screen.screen_id for screen in screens] == [ComputerScreenID.SCREEN_0]
    assert primary.screen_id is ComputerScreenID.SCREEN_0
    assert (primary.display, primary.novnc_port) == (":0", 6080)

    full = ComputerScreenshotOptions(screen_id=ComputerScreenID.SCREEN_0, timeout=45)
    with computer.screenshot(full) as screenshot:
        assert _png_size(screenshot.read()) == (geometry.width, geometry.height)
    region = ComputerScreenshotOptions(
        screen_id=ComputerScreenID.SCREEN_0, timeout=45, x=0, y=0, width=240, height=160
    )
    with computer.screenshot(region) as screenshot:
        assert _png_size(screenshot.read()) == (240, 160)

    target = ComputerPoint(x=geometry.width // 3, y=geometry.height // 3)
    computer.mouse.move(target, SCREEN)
    assert computer.cursor(SCREEN) == target
    text = f"CreateOS desktop {sandbox.id}"
    computer.set_clipboard(text, SCREEN)
    assert computer.clipboard(SCREEN).text == text
    computer.open(ComputerOpenRequest(target="https://example.com"))
    connection = computer.screens.connect(ComputerScreenID.SCREEN_0)
    assert connection.screen_id is ComputerScreenID.SCREEN_0
    assert connection.url.startswith("https://")
    assert connection.expires_at is not None

    actions = createos_server.journal.computer_actions(sandbox.id)
    assert [action for action, _ in actions] == ["mouse/move", "clipboard", "open"]
    assert actions[0][1] == {"screen_id": "screen-0", "x": target.x, "y": target.y}
    assert actions[2][1]["target"] == "https://example.com"


def test_windows_keyboard_and_screens_through_the_sdk(sdk: createos.Client) -> None:
    sandbox = create(sdk, "desktop:1")
    computer = sandbox.computer
    computer.open(ComputerOpenRequest(target="/home/user/notes.txt"))
    (window,) = computer.windows.list()
    assert window.title == "/home/user/notes.txt"
    assert computer.windows.current().id == window.id
    computer.keyboard.type(ComputerTypeRequest(text="hello"))
    computer.keyboard.press(["ctrl", "c"])
    assert computer.clipboard().text == "hello"
    computer.windows.resize(window.id, ComputerWindowResizeRequest(width=320, height=240))
    geometry = computer.windows.geometry(window.id)
    assert (geometry.width, geometry.height, geometry.screen) == (320, 240, 0)
    with computer.screenshot(ComputerScreenshotOptions(window_id=window.id)) as screenshot:
        image = Image(screenshot.read())
    assert (image.width, image.height) == (320, 240)
    computer.mouse.click(ComputerClickRequest(button=ComputerMouseButton.LEFT, x=5, y=5))
    computer.mouse.drag(
        ComputerDragRequest(from_=ComputerPoint(x=60, y=30), to=ComputerPoint(x=160, y=130))
    )
    moved = computer.windows.geometry(window.id)
    assert (moved.x, moved.y) == (geometry.x + 100, geometry.y + 100)
    assert computer.windows.list(ComputerListWindowsOptions(application="nothing")) == []
    computer.windows.close(window.id)
    assert api_error(computer.windows.current).status_code == 404

    second = computer.screens.create(ComputerCreateScreenRequest(width=800, height=600))
    assert second.screen_id is ComputerScreenID.SCREEN_1
    resized = computer.screens.resize(
        ComputerScreenID.SCREEN_1, ComputerCreateScreenRequest(height=480)
    )
    assert (resized.width, resized.height) == (800, 480)
    computer.screens.delete(ComputerScreenID.SCREEN_1)
    assert len(computer.screens.list()) == 1


def test_a_sandbox_without_a_desktop_answers_409_to_the_sdk(sdk: createos.Client) -> None:
    computer = create(sdk).computer
    error = api_error(lambda: computer.screen(SCREEN))
    assert error.status_code == 409
    assert "desktop" in str(error)
