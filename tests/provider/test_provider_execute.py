"""execute(): managed processes, quoting, stdin staging, replay, fail-closed streams, cleanup."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from pytest_createos.errors import (
    CleanupPendingError,
    CleanupUnconfirmedError,
    CommandCancelledError,
    CommandStreamError,
    CreateosApiError,
    LeaseError,
    ProviderShutDownError,
)
from pytest_createos.provider import STDIN_PATH_PREFIX, Lease, LeaseProvider

from .conftest import FakeEnv

HOSTILE = ["two words", "it's", "$(touch /tmp/pwned)", "`id`", 'a"b', "\\", "*", "", "€"]


def connect_cursors(env: FakeEnv) -> list[str]:
    return [
        parse_qs(urlsplit(s.url).query).get("after", ["?"])[0]
        for s in env.recorded.sent
        if urlsplit(s.url).path.endswith("/connect")
    ]


def process_deletes(env: FakeEnv) -> list[str]:
    return [
        urlsplit(s.url).query
        for s in env.recorded.sent
        if s.method == "DELETE" and "/processes/" in s.url
    ]


class Hold:
    """A registered command that writes ``chunks`` and then blocks until killed or released.

    Consecutive writes may reach the output journal merged (as a pipe's reads merge them).
    Given ``env``, each chunk waits until the journal shows the one before: one frame each.
    """

    def __init__(self, *chunks: bytes, env: FakeEnv | None = None) -> None:
        self.chunks = chunks
        self.env = env
        self.started = asyncio.Event()
        self.released = asyncio.Event()

    async def __call__(self, ctx: Any, args: list[str]) -> int:
        for written, chunk in enumerate(self.chunks):
            if self.env is not None:
                await journal_shows(ctx, self.env, written)
            ctx.stdout.write(chunk)
        self.started.set()
        await self.released.wait()
        return 0


async def journal_shows(ctx: Any, env: FakeEnv, frames: int) -> None:
    """Wait (in a registered command) until its output journal holds ``frames`` frames, so the
    next write is a frame of its own."""
    sandboxes = env.fake.tenant(env.api_key).sandboxes.values()
    while max(p.output.newest_seq for s in sandboxes for p in s.processes.values()) < frames:
        await ctx.sleep(0.001)


async def test_command_runs_as_a_quoted_bash_script(env: FakeEnv) -> None:
    seen: list[list[str]] = []

    async def argv(ctx: Any, args: list[str]) -> int:
        seen.append(list(args))
        ctx.stdout.write(json.dumps(args).encode())
        return 0

    env.fake.register_command("argv", argv)
    lease = await env.acquire()
    await env.execute(lease, "mkdir", args=["-p", "/work dir"])
    result = await env.execute(
        lease, "argv", args=HOSTILE, cwd="/work dir", env={"GREETING": "hi; rm -rf / 'x'"}
    )
    assert result.exit_code == 0
    assert seen == [HOSTILE]
    assert json.loads(result.stdout) == HOSTILE
    body = [s.json() for s in env.recorded.sent if s.url.endswith("/processes")][-1]
    assert set(body) == {"cmd", "args", "cwd"}  # env is inlined, never sent as a field
    assert body["cmd"] == "/bin/bash"
    assert body["args"][0] == "-lc"
    assert body["args"][1].startswith("export GREETING='hi; rm -rf / '\\''x'\\'''; exec 'argv'")
    assert body["cwd"] == "/work dir"
    assert not env.sandbox(lease).fs.is_file("/tmp/pwned")


async def test_env_is_exported_to_the_command(env: FakeEnv) -> None:
    lease = await env.acquire()
    result = await env.execute(lease, "env", env={"GREETING": "hello world", "_N1": "$HOME"})
    assert "GREETING=hello world" in result.stdout.splitlines()
    assert "_N1=$HOME" in result.stdout.splitlines()


async def test_stdin_is_staged_as_a_file_and_removed(env: FakeEnv) -> None:
    lease = await env.acquire()
    mark = env.last_seq()
    result = await env.execute(lease, "cat", stdin="hello\nwörld")
    assert result.stdout == "hello\nwörld"
    assert env.routes(mark) == [
        "PUT /v1/sandboxes/{id}/files",
        "POST /v1/sandboxes/{id}/processes",
        "POST /v1/sandboxes/{id}/processes/{pid}/stdin/close",
        "GET /v1/sandboxes/{id}/processes/{pid}/connect",
        "POST /v1/sandboxes/{id}/exec",
    ]
    upload = [s for s in env.recorded.sent if s.method == "PUT"][-1]
    stdin_path = parse_qs(urlsplit(upload.url).query)["path"][0]
    assert stdin_path.startswith(STDIN_PATH_PREFIX)
    assert bytes(upload.body) == "hello\nwörld".encode()
    rm = env.recorded.sent[-1].json()
    assert rm == {"cmd": "/bin/rm", "args": ["-f", "--", stdin_path]}
    assert not env.sandbox(lease).fs.is_file(stdin_path)
    process = [s.json() for s in env.recorded.sent if s.url.endswith("/processes")][-1]
    assert "hello" not in process["args"][1]  # stdin is never inlined


async def test_binary_stdin(env: FakeEnv) -> None:
    lease = await env.acquire()
    assert (await env.execute(lease, "cat", stdin=b"\x00\x01abc")).stdout == "\x00\x01abc"


async def test_exit_code_and_stderr(env: FakeEnv) -> None:
    async def fails(ctx: Any, args: list[str]) -> int:
        ctx.stdout.write(b"out")
        ctx.stderr.write(b"warning")
        return 7

    env.fake.register_command("fails", fails)
    lease = await env.acquire()
    result = await env.execute(lease, "fails")
    assert (result.exit_code, result.signal, result.stdout, result.stderr) == (
        7,
        None,
        "out",
        "warning",
    )
    assert result.metadata["processId"]
    assert result.metadata["reconnects"] == 0


async def test_large_output_frames(env: FakeEnv) -> None:
    async def big(ctx: Any, args: list[str]) -> int:
        ctx.stdout.write(b"x" * 300_000)
        return 0

    env.fake.register_command("big", big)
    lease = await env.acquire()
    assert len((await env.execute(lease, "big")).stdout) == 300_000


async def test_replay_after_disconnect_keeps_split_utf8(env: FakeEnv) -> None:
    euro = "€".encode()

    async def split(ctx: Any, args: list[str]) -> int:
        ctx.stdout.write(euro[:1])
        await journal_shows(ctx, env, 1)  # the euro sign split across two frames
        ctx.stdout.write(euro[1:])
        ctx.stderr.write(b"warning")
        return 7

    env.fake.register_command("split", split)
    lease = await env.acquire()
    env.fake.faults.stream(
        "disconnect",
        after_frames=1,
        times=1,
        route="GET /v1/sandboxes/{id}/processes/{pid}/connect",
    )
    result = await env.execute(lease, "split")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "€", "warning")
    assert connect_cursors(env) == ["0", "1"]
    assert result.metadata["reconnects"] == 1
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/processes", times=1)


async def test_stream_without_exit_is_reconnected(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.stream(
        "no_exit", times=1, route="GET /v1/sandboxes/{id}/processes/{pid}/connect"
    )
    result = await env.execute(lease, "echo", args=["once"])
    assert result.stdout == "once\n"
    assert connect_cursors(env) == ["0", "1"]


@pytest.mark.parametrize(
    ("kind", "after_frames", "reason"),
    [
        ("gap", 0, "output sequence gap"),
        ("evict", 1, "output was evicted"),
        ("malformed_frame", 1, "malformed output frame"),
    ],
)
async def test_stream_faults_fail_closed_and_terminate_the_tree(
    env: FakeEnv, kind: str, after_frames: int, reason: str
) -> None:
    env.fake.register_command("hold", Hold(b"one\n", b"two\n", b"three\n", env=env))
    lease = await env.acquire()
    env.fake.faults.stream(
        kind, after_frames=after_frames, route="GET /v1/sandboxes/{id}/processes/{pid}/connect"
    )
    with pytest.raises(CommandStreamError) as info:
        await env.execute(lease, "hold")
    assert info.value.reason == reason
    assert process_deletes(env) == ["grace_ms=1000"]
    assert not env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")


async def test_stream_never_ending_with_exit_fails_closed(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.stream("no_exit", route="GET /v1/sandboxes/{id}/processes/{pid}/connect")
    with pytest.raises(CommandStreamError) as info:
        await env.execute(lease, "echo", args=["x"])
    assert info.value.reason == "output stream ended without an exit status"
    assert connect_cursors(env) == ["0", "1", "1", "1"]  # first try + 3 reconnects
    assert process_deletes(env) == ["grace_ms=1000"]


async def test_http_410_eviction_fails_closed(env: FakeEnv) -> None:
    env.fake.register_command("hold", Hold(b"x"))
    lease = await env.acquire()
    env.fake.faults.error(410, route="GET /v1/sandboxes/{id}/processes/{pid}/connect")
    with pytest.raises(CommandStreamError, match="output was evicted"):
        await env.execute(lease, "hold")
    assert process_deletes(env) == ["grace_ms=1000"]


async def test_lost_output_connection_is_bounded(env: FakeEnv) -> None:
    env.fake.register_command("hold", Hold(b"x"))
    lease = await env.acquire()
    env.fake.faults.error(503, route="GET /v1/sandboxes/{id}/processes/{pid}/connect")
    with pytest.raises(CommandStreamError, match="without an exit status"):
        await env.execute(lease, "hold")
    assert connect_cursors(env) == ["0", "0", "0", "0"]  # first try + 3 reconnects
    assert process_deletes(env) == ["grace_ms=1000"]


async def test_timeout_keeps_partial_output(env: FakeEnv) -> None:
    hold = Hold(b"partial")
    env.fake.register_command("hold", hold)
    lease = await env.acquire()
    # The deadline is the provider's wall-clock one and "partial" must reach it first (create,
    # connect, one frame: ~30 ms): a second leaves a loaded machine room.
    result = await env.execute(lease, "hold", timeout_ms=1_000)
    assert (result.exit_code, result.signal, result.timed_out) == (None, None, True)
    assert result.stdout == "partial"
    assert env.recorded.sent[-1].method == "DELETE"
    assert process_deletes(env) == ["grace_ms=1000"]
    assert not env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")


async def test_unconfirmed_termination_blocks_reuse_until_destroy(env: FakeEnv) -> None:
    env.fake.register_command("hold", Hold(b"partial"))
    lease = await env.acquire()
    sandbox_id = lease.provider_lease_id or ""
    env.fake.faults.process_survives(route="DELETE /v1/sandboxes/{id}/processes/{pid}")
    with pytest.raises(CleanupUnconfirmedError, match="termination is unconfirmed"):
        await env.execute(lease, "hold", timeout_ms=200)
    assert env.provider.is_cleanup_unconfirmed(sandbox_id)

    mark = env.sent_count()
    with pytest.raises(CleanupPendingError) as pending:
        await env.resume(lease)
    assert pending.value.reason == "unconfirmed"
    with pytest.raises(CleanupUnconfirmedError):
        await env.execute(lease, "true")
    with pytest.raises(CleanupUnconfirmedError):
        await env.release(lease)  # reuse would keep a runaway process warm: refused
    assert env.sent_since(mark) == []  # none of the refusals sent anything

    await env.destroy(lease)
    assert env.sent_since(mark) == [f"DELETE /v1/sandboxes/{sandbox_id}"]
    assert not env.provider.is_cleanup_unconfirmed(sandbox_id)
    assert (await env.resume(lease)).expired


async def test_failed_termination_request_is_unconfirmed(env: FakeEnv) -> None:
    env.fake.register_command("hold", Hold(b"x"))
    lease = await env.acquire()
    env.fake.faults.error(503, route="DELETE /v1/sandboxes/{id}/processes/{pid}")
    env.fake.faults.stream("evict", route="GET /v1/sandboxes/{id}/processes/{pid}/connect")
    with pytest.raises(CleanupUnconfirmedError, match="termination is unconfirmed") as info:
        await env.execute(lease, "hold")
    assert isinstance(info.value.__cause__, CommandStreamError)


async def test_termination_has_its_own_deadline(env: FakeEnv) -> None:
    env.fake.register_command("hold", Hold(b"x"))
    provider = LeaseProvider(session=env.recorded.session, terminate_timeout_ms=100)
    env.provider = provider
    lease = await env.acquire()
    env.fake.faults.hang(route="DELETE /v1/sandboxes/{id}/processes/{pid}")
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(CleanupUnconfirmedError):
        await env.execute(lease, "hold", timeout_ms=100)
    assert loop.time() - start < 2
    env.fake.faults.clear()
    await provider.shutdown()


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_ambiguous_process_creation_blocks_reuse(env: FakeEnv, status: int) -> None:
    lease = await env.acquire()
    env.fake.faults.error(status, route="POST /v1/sandboxes/{id}/processes")
    with pytest.raises(CleanupUnconfirmedError) as info:
        await env.execute(lease, "echo", args=["x"])
    assert str(info.value) == (
        f"CreateOS process creation could not be confirmed (HTTP {status}); "
        "the lease must be destroyed."
    )
    mark = env.sent_count()
    with pytest.raises(CleanupUnconfirmedError):
        await env.release(lease)
    env.fake.journal.assert_not_requested("POST /v1/sandboxes/{id}/pause")
    await env.destroy(lease)
    assert env.sent_since(mark) == [f"DELETE /v1/sandboxes/{lease.provider_lease_id}"]


async def test_lost_process_creation_response_blocks_reuse(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.drop_response(route="POST /v1/sandboxes/{id}/processes")
    with pytest.raises(CleanupUnconfirmedError, match="connection error"):
        await env.execute(lease, "echo", args=["x"])
    assert env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")


async def test_rejected_process_creation_is_not_ambiguous(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(400, route="POST /v1/sandboxes/{id}/processes", times=1)
    with pytest.raises(CreateosApiError, match="create process failed: HTTP 400"):
        await env.execute(lease, "echo", args=["x"])
    assert not env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")
    await env.release(lease)
    assert env.status(lease) == "paused"


async def test_cancelling_execute_terminates_the_tree(env: FakeEnv) -> None:
    hold = Hold(b"x")
    env.fake.register_command("hold", hold)
    lease = await env.acquire()
    task = asyncio.create_task(env.execute(lease, "hold", stdin="in"))
    await env.wait_sent("/connect")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert process_deletes(env) == ["grace_ms=1000"]
    assert env.recorded.sent[-1].json()["cmd"] == "/bin/rm"  # stdin removed afterwards
    assert not env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")


async def test_release_cancels_work_and_waits_for_tree_cleanup_before_pausing(
    env: FakeEnv,
) -> None:
    hold = Hold(b"x")
    env.fake.register_command("hold", hold)
    lease = await env.acquire()
    task = asyncio.create_task(env.execute(lease, "hold"))
    await env.wait_sent("/connect")
    await env.release(lease)
    with pytest.raises(CommandCancelledError, match="cancelled"):
        await task
    routes = env.routes()
    delete = routes.index("DELETE /v1/sandboxes/{id}/processes/{pid}")
    pause = routes.index("POST /v1/sandboxes/{id}/pause")
    assert delete < pause
    assert env.status(lease) == "paused"


async def test_shutdown_cancels_work(env: FakeEnv) -> None:
    hold = Hold(b"x")
    env.fake.register_command("hold", hold)
    lease = await env.acquire()
    task = asyncio.create_task(env.execute(lease, "hold"))
    await env.wait_sent("/connect")
    await env.provider.shutdown()
    with pytest.raises(ProviderShutDownError):
        await task
    assert process_deletes(env) == ["grace_ms=1000"]
    with pytest.raises(ProviderShutDownError):
        await env.acquire()


async def test_cancel_during_process_creation_terminates_the_new_process(env: FakeEnv) -> None:
    hold = Hold(b"x")
    env.fake.register_command("hold", hold)
    lease = await env.acquire()
    gate = env.fake.faults.gate("create", when="after", route="POST /v1/sandboxes/{id}/processes")
    task = asyncio.create_task(env.execute(lease, "hold"))
    await gate.wait_held(1)  # the process exists; its id has not reached the client yet
    task.cancel()
    await asyncio.sleep(0.01)
    gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert process_deletes(env) == ["grace_ms=1000"]
    assert not env.provider.is_cleanup_unconfirmed(lease.provider_lease_id or "")


async def test_execute_refused_on_expired_lease(env: FakeEnv) -> None:
    with pytest.raises(LeaseError, match="expired"):
        await env.execute(Lease(None, {"expired": True}), "true")


async def test_exit_frame_without_a_status_fails_closed(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.stream(
        "missing_exit_status", route="GET /v1/sandboxes/{id}/processes/{pid}/connect"
    )
    with pytest.raises(CommandStreamError) as info:
        await env.execute(lease, "echo", args=["x"])
    assert info.value.reason == "exit status is missing"
    assert process_deletes(env) == ["grace_ms=1000"]


async def test_replayed_duplicates_are_dropped(env: FakeEnv) -> None:
    hold = Hold(b"one\n", b"two\n", env=env)
    env.fake.register_command("hold", hold)
    lease = await env.acquire()
    route = "GET /v1/sandboxes/{id}/processes/{pid}/connect"
    # First connection: frame 1, then the line drops; the reconnect (after=1) is answered from
    # the start, so frame 1 arrives twice and must be ignored. The command ends only once
    # the reconnect was sent: a timeout here raced the reconnect on a loaded machine.
    env.fake.faults.stream("disconnect", after_frames=1, times=1, route=route)
    env.fake.faults.stream("duplicate", times=1, after=1, route=route)
    task = asyncio.create_task(env.execute(lease, "hold"))
    await env.wait_sent("/connect", count=2)
    hold.released.set()
    result = await task
    assert (result.exit_code, result.timed_out) == (0, False)
    assert result.stdout == "one\ntwo\n"
    assert connect_cursors(env) == ["0", "1"]
