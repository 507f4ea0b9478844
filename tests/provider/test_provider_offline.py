"""Refusals that must happen before any request, plus the pure helpers (quoting, frames)."""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import uuid
from typing import Any

import pytest

from pytest_createos._client import RequestPacer
from pytest_createos.errors import (
    GUARANTEED_EXPIRY_MESSAGE,
    CleanupPendingError,
    CommandStreamError,
    LeaseConfigError,
    LeaseError,
    LeaseOwnershipError,
    ProviderShutDownError,
)
from pytest_createos.provider import WORKSPACE_DIR, Lease, LeaseProvider
from pytest_createos.provider.execution import _build_script, _Output, _shell_quote

from .conftest import UNREACHABLE, ConfigFactory, RecordedSession

IDS = {"company_id": "co", "environment_id": "env"}


def lease_for(config: dict[str, object], **changes: Any) -> Lease:
    metadata: dict[str, Any] = {
        "companyId": "co",
        "environmentId": "env",
        "apiUrl": UNREACHABLE,
        "sandboxId": "sb_1",
        "shape": config["shape"],
        "rootfs": config["rootfs"],
        "region": config["region"],
        "reuseLease": True,
        "marker": str(uuid.uuid4()),
    }
    metadata.update(changes)
    return Lease("sb_1", metadata)


# -- refusals before any request ------------------------------------------------------------


async def test_guaranteed_expiry_is_refused_before_provisioning(
    recorded: RecordedSession, offline_config: ConfigFactory
) -> None:
    async with LeaseProvider(session=recorded.session) as provider:
        with pytest.raises(LeaseError, match=GUARANTEED_EXPIRY_MESSAGE):
            await provider.acquire(
                **IDS, config=offline_config(), requested_expires_at="2030-01-01T00:00:00Z"
            )
    assert recorded.requests == []


async def test_invalid_config_is_refused_before_any_request(
    recorded: RecordedSession, offline_config: ConfigFactory
) -> None:
    async with LeaseProvider(session=recorded.session) as provider:
        with pytest.raises(LeaseConfigError) as info:
            await provider.acquire(**IDS, config=offline_config(shape=""))
    assert info.value.errors == ["shape is required"]
    assert recorded.requests == []


@pytest.mark.parametrize(
    "foreign", [{"companyId": "other"}, {"environmentId": "other"}, {"companyId": None}]
)
async def test_another_companys_lease_is_refused_with_no_request(
    recorded: RecordedSession, offline_config: ConfigFactory, foreign: dict[str, Any]
) -> None:
    config = offline_config()
    lease = lease_for(config, **foreign)
    args = {**IDS, "config": config}
    async with LeaseProvider(session=recorded.session) as provider:
        with pytest.raises(LeaseOwnershipError):
            await provider.resume(**args, provider_lease_id="sb_1", lease_metadata=lease.metadata)
        with pytest.raises(LeaseOwnershipError):
            await provider.release(**args, provider_lease_id="sb_1", lease_metadata=lease.metadata)
        with pytest.raises(LeaseOwnershipError):
            await provider.destroy(**args, provider_lease_id="sb_1", lease_metadata=lease.metadata)
        with pytest.raises(LeaseOwnershipError):
            await provider.execute(**args, lease=lease, command="true")
        with pytest.raises(LeaseOwnershipError):
            await provider.realize_workspace(**args, lease=lease)
    assert recorded.requests == []


async def test_lease_for_another_sandbox_id_or_api_is_refused(
    recorded: RecordedSession, offline_config: ConfigFactory
) -> None:
    config = offline_config()
    args = {**IDS, "config": config}
    async with LeaseProvider(session=recorded.session) as provider:
        lease = lease_for(config, sandboxId="sb_other")
        with pytest.raises(LeaseOwnershipError):
            await provider.destroy(**args, provider_lease_id="sb_1", lease_metadata=lease.metadata)
        lease = lease_for(config, apiUrl="https://elsewhere.example")
        with pytest.raises(LeaseOwnershipError):
            await provider.execute(**args, lease=lease, command="true")
    assert recorded.requests == []


@pytest.mark.parametrize(
    "change",
    [
        {"shape": "s-8vcpu-16gb"},
        {"rootfs": "desktop:1"},
        {"region": "elsewhere"},
        {"rootfs": None},
        {"marker": "not-a-uuid"},
        {"marker": None},
        {"sandboxId": "sb_2"},
        {"apiUrl": "https://moved.example"},
    ],
)
async def test_changed_binding_expires_without_any_request(
    recorded: RecordedSession, offline_config: ConfigFactory, change: dict[str, Any]
) -> None:
    config = offline_config()
    lease = lease_for(config, **change)
    async with LeaseProvider(session=recorded.session) as provider:
        result = await provider.resume(
            **IDS, config=config, provider_lease_id="sb_1", lease_metadata=lease.metadata
        )
    assert result == Lease(None, {"expired": True})
    assert result.expired
    assert recorded.requests == []


async def test_missing_or_invalid_lease_id_expires(
    recorded: RecordedSession, offline_config: ConfigFactory
) -> None:
    config = offline_config()
    lease = lease_for(config)
    async with LeaseProvider(session=recorded.session) as provider:
        for lease_id in (None, "../sb_1"):
            result = await provider.resume(
                **IDS, config=config, provider_lease_id=lease_id, lease_metadata=lease.metadata
            )
            assert result.expired
        # Cleaning up an expired lease has nothing to do.
        await provider.release(
            **IDS, config=config, provider_lease_id=None, lease_metadata={"expired": True}
        )
        await provider.destroy(
            **IDS, config=config, provider_lease_id=None, lease_metadata={"expired": True}
        )
        with pytest.raises(LeaseError, match="expired"):
            await provider.execute(
                **IDS, config=config, lease=Lease(None, {"expired": True}), command="true"
            )
    assert recorded.requests == []


@pytest.mark.parametrize(
    "env", [{"1BAD": "x"}, {"BAD-NAME": "x"}, {"": "x"}, {"A B": "x"}, {"OK": "a\0b"}]
)
async def test_invalid_env_is_rejected_before_sending_a_command(
    recorded: RecordedSession, offline_config: ConfigFactory, env: dict[str, str]
) -> None:
    config = offline_config()
    async with LeaseProvider(session=recorded.session) as provider:
        with pytest.raises(LeaseError, match="env"):
            await provider.execute(
                **IDS, config=config, lease=lease_for(config), command="true", env=env
            )
    assert recorded.requests == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"command": ""},
        {"command": "echo", "args": "abc"},
        {"command": "echo", "args": [1]},
        {"command": "echo", "cwd": ""},
        {"command": "echo", "timeout_ms": 0},
        {"command": "echo", "timeout_ms": True},
        {"command": "ec\0ho"},
    ],
)
async def test_invalid_commands_are_rejected_before_sending(
    recorded: RecordedSession, offline_config: ConfigFactory, kwargs: dict[str, Any]
) -> None:
    config = offline_config()
    async with LeaseProvider(session=recorded.session) as provider:
        with pytest.raises(LeaseError):
            await provider.execute(**IDS, config=config, lease=lease_for(config), **kwargs)
    assert recorded.requests == []


async def test_realize_workspace_needs_no_request(
    recorded: RecordedSession, offline_config: ConfigFactory
) -> None:
    config = offline_config()
    async with LeaseProvider(session=recorded.session) as provider:
        workspace = await provider.realize_workspace(**IDS, config=config, lease=lease_for(config))
    assert workspace.cwd == WORKSPACE_DIR == "/paperclip-workspace"
    assert recorded.requests == []


async def test_shutdown_refuses_later_calls(
    recorded: RecordedSession, offline_config: ConfigFactory
) -> None:
    config = offline_config()
    provider = LeaseProvider(session=recorded.session)
    await provider.shutdown()
    await provider.shutdown()  # idempotent
    with pytest.raises(ProviderShutDownError):
        await provider.acquire(**IDS, config=config)
    with pytest.raises(ProviderShutDownError):
        await provider.resume(
            **IDS,
            config=config,
            provider_lease_id="sb_1",
            lease_metadata=lease_for(config).metadata,
        )
    with pytest.raises(ProviderShutDownError):
        await provider.execute(**IDS, config=config, lease=lease_for(config), command="true")
    assert recorded.requests == []
    assert not recorded.session.closed  # a session we passed in is ours to close


def test_cleanup_pending_is_checked_after_ownership() -> None:
    # Guard against someone probing another tenant's cleanup state: ownership comes first.
    assert issubclass(CleanupPendingError, LeaseError)


# -- quoting ----------------------------------------------------------------------------------

HOSTILE = ["plain", "two words", "it's", "$(rm -rf /)", "`id`", 'a"b', "\\", "*", "", "€ ünï"]


@pytest.mark.parametrize("word", HOSTILE)
def test_shell_quote_round_trips(word: str) -> None:
    assert shlex.split(_shell_quote(word)) == [word]
    assert _shell_quote(word).startswith("'")


def test_script_quotes_every_word_and_inlines_env_and_stdin() -> None:
    script = _build_script(
        "/bin/echo", HOSTILE, {"GREETING": "hi there; rm -rf /", "_X1": "$HOME"}, "/tmp/in put"
    )
    assert script.startswith("export GREETING='hi there; rm -rf /'; export _X1='$HOME'; exec ")
    words = shlex.split(script)
    assert words[:4] == ["export", "GREETING=hi there; rm -rf /;", "export", "_X1=$HOME;"]
    assert words[4:6] == ["exec", "/bin/echo"]
    assert words[6 : 6 + len(HOSTILE)] == HOSTILE
    assert words[-2:] == ["<", "/tmp/in put"]


def test_script_without_env_or_stdin() -> None:
    assert _build_script("ls", ["-la"], None, None) == "exec 'ls' '-la'"


# -- output frames ----------------------------------------------------------------------------


def data(seq: int, payload: bytes, stream: str = "stdout") -> bytes:
    frame = {
        "type": "data",
        "seq": seq,
        "stream": stream,
        "data_base64": base64.b64encode(payload).decode(),
    }
    return json.dumps(frame).encode()


def test_output_keeps_utf8_split_across_frames_and_skips_duplicates() -> None:
    euro = "€".encode()
    output = _Output()
    assert output.handle(data(1, euro[:1])) is None
    assert output.handle(data(1, euro[:1])) is None  # replayed duplicate
    assert output.handle(b'{"type":"heartbeat"}') is None
    assert output.handle(b"") is None
    assert output.handle(data(2, euro[1:])) is None
    assert output.handle(data(3, b"warning", "stderr")) is None
    assert output.handle(b'{"type":"exit","exit_code":7}') == (7, None)
    assert output.text("stdout") == "€"
    assert output.text("stderr") == "warning"
    assert output.cursor == 3


def test_signal_exit_is_accepted() -> None:
    assert _Output().handle(b'{"type":"exit","exit_code":null,"signal":"SIGKILL"}') == (
        None,
        "SIGKILL",
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (data(2, b"x"), "output sequence gap"),
        (b"{broken", "malformed output frame"),
        (b"[1,2]", "malformed output frame"),
        (b'{"type":"mystery"}', "malformed output frame"),
        (b'{"type":"data","seq":"1","stream":"stdout","data_base64":""}', "malformed output frame"),
        (b'{"type":"data","seq":1,"stream":"tty","data_base64":""}', "malformed output frame"),
        (b'{"type":"data","seq":1,"stream":"stdout","data_base64":"!!"}', "malformed output frame"),
        (b'{"type":"exit"}', "exit status is missing"),
        (b'{"type":"exit","exit_code":"0"}', "exit status is missing"),
        (b'{"type":"exit","signal":"kill"}', "exit status is missing"),
        (
            b'{"type":"error","error":"output_offset_expired","oldest_available_seq":5}',
            "output was evicted",
        ),
        (b'{"type":"error","error":"boom"}', "output stream reported an error"),
    ],
)
def test_untrustworthy_frames_fail_closed(line: bytes, reason: str) -> None:
    with pytest.raises(CommandStreamError) as info:
        _Output().handle(line)
    assert info.value.reason == reason


# -- pacing -----------------------------------------------------------------------------------


async def test_pacer_spaces_requests_per_api_url() -> None:
    pacer = RequestPacer()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.gather(*(pacer.wait("https://a", 0.02) for _ in range(3)))
    assert loop.time() - start >= 0.035
    # Another API URL has its own schedule.
    start = loop.time()
    await pacer.wait("https://b", 0.02)
    assert loop.time() - start < 0.015


async def test_pacer_zero_disables_spacing() -> None:
    pacer = RequestPacer()
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(50):
        await pacer.wait("https://a", 0)
    assert loop.time() - start < 0.05
