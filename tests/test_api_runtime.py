"""Exec, files and managed processes over HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from fake_server import CommandContext, FakeCreateOS, ManualClock, ServerConfig
from tests.conftest import Client, ClientFactory, create_sandbox, eventually, process_with_frames
from tests.test_api_sandboxes import expect_error


@pytest.fixture
async def sandbox_id(client: Client) -> str:
    return str((await create_sandbox(client, envs={"GREETING": "hello"}))["id"])


async def run(client: Client, sandbox_id: str, cmd: str, *args: str, **extra: Any) -> Any:
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": cmd, "args": list(args), **extra}
    )
    body = await response.json()
    assert response.status == 200, body
    return body["data"]


async def ndjson(response: Any) -> list[dict[str, Any]]:
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    text = await response.text()
    return [json.loads(line) for line in text.splitlines() if line]


async def test_exec_runs_bash_scripts(client: Client, sandbox_id: str) -> None:
    data = await run(
        client,
        sandbox_id,
        "/bin/bash",
        "-lc",
        "mkdir -p -- '/work dir' && cd '/work dir' && echo \"$GREETING\" > g.txt; cat g.txt",
    )
    assert data["result"] == {"stdout": "hello\n", "stderr": "", "exit_code": 0}
    assert isinstance(data["exec_ms"], float)


async def test_exec_reports_exit_codes_and_unknown_commands(
    client: Client, sandbox_id: str
) -> None:
    failing = await run(client, sandbox_id, "/bin/bash", "-lc", "false || exit 7")
    assert failing["result"]["exit_code"] == 7
    missing = await run(client, sandbox_id, "python3", "-c", "print(1)")
    assert missing["result"]["exit_code"] == 127
    assert "command not found" in missing["result"]["stderr"]


async def test_exec_stdin_and_declared_env_overrides(client: Client, sandbox_id: str) -> None:
    echoed = await run(client, sandbox_id, "/bin/cat", stdin="from stdin")
    assert echoed["result"]["stdout"] == "from stdin"
    overridden = await run(
        client, sandbox_id, "/bin/bash", "-lc", 'printf %s "$GREETING"', env={"GREETING": "hi"}
    )
    assert overridden["result"]["stdout"] == "hi"
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "env", "env": {"UNDECLARED": "x"}}
    )
    await expect_error(response, 400, "declared")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "cmd: is required"),  # the field named once (it said "cmd: cmd is required")
        ({"cmd": ""}, "cmd: is required"),
        ({"cmd": 1}, "cmd"),
        ({"cmd": "ls", "args": "x"}, "args"),
        ({"cmd": "ls", "env": {"A": 1}}, "env"),
        ({"cmd": "ls", "bogus": True}, "unknown field"),
    ],
)
async def test_bad_exec_bodies(client: Client, sandbox_id: str, body: Any, fragment: str) -> None:
    response = await client.post(f"/v1/sandboxes/{sandbox_id}/exec", json=body)
    await expect_error(response, 400, fragment)


async def test_exec_stream_frames_have_one_key_each(client: Client, sandbox_id: str) -> None:
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true",
        json={
            "cmd": "/bin/bash",
            "args": ["-lc", "echo out; echo err >&2; exit 3"],
            "stream": True,
        },
    )
    frames = await ndjson(response)
    assert frames == [{"stdout": "out\n"}, {"stderr": "err\n"}, {"exit_code": 3}]


async def test_exec_stream_heartbeats_while_silent(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, transition_ms=0, heartbeat_s=5))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    request = asyncio.ensure_future(
        client.post(
            f"/v1/sandboxes/{sandbox_id}/exec?stream=true",
            json={"cmd": "/bin/bash", "args": ["-lc", "sleep 12; echo done"]},
        )
    )
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    # The command's `sleep 12` and the stream's heartbeat timer are both waiting on the clock.
    await eventually(lambda: clock.pending == 2)
    for _ in range(2):
        clock.advance(5)  # a heartbeat goes out and the stream arms its next heartbeat timer
        await eventually(lambda: clock.pending == 2)
    clock.advance(2)
    frames = await ndjson(await request)
    assert frames == [{"hb": True}, {"hb": True}, {"stdout": "done\n"}, {"exit_code": 0}]


async def test_files_round_trip_with_parents_created(client: Client, sandbox_id: str) -> None:
    path = "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease"
    put = await client.put(
        f"/v1/sandboxes/{sandbox_id}/files?path={path}",
        data=b"m\x00rk",
        headers={"Content-Type": "application/octet-stream"},
    )
    assert (await put.json())["data"] == {"path": path, "bytes": 4}
    got = await client.get(f"/v1/sandboxes/{sandbox_id}/files", params={"path": path})
    assert got.headers["Content-Type"] == "application/octet-stream"
    assert await got.read() == b"m\x00rk"
    cat = await run(client, sandbox_id, "/bin/cat", path)
    assert cat["result"]["stdout"] == "m\x00rk"
    empty = await client.put(f"/v1/sandboxes/{sandbox_id}/files?path=/tmp/gate", data=b"")
    assert empty.status == 200


@pytest.mark.parametrize(
    ("query", "status", "fragment"),
    [
        ("", 400, "path"),
        ("?path=relative.txt", 400, "absolute"),
        ("?path=/nope", 404, "not found"),
        ("?path=/tmp", 400, "directory"),
        ("?path=/tmp/", 400, "ends in /"),
        ("?path=/", 400, "ends in /"),
        ("?path=/a%00b", 400, "NUL"),
    ],
)
async def test_bad_downloads(
    client: Client, sandbox_id: str, query: str, status: int, fragment: str
) -> None:
    await expect_error(
        await client.get(f"/v1/sandboxes/{sandbox_id}/files{query}"), status, fragment
    )


async def test_traversal_cannot_escape_the_root(client: Client, sandbox_id: str) -> None:
    await client.put(f"/v1/sandboxes/{sandbox_id}/files?path=/../../etc/passwd", data=b"fake")
    got = await client.get(f"/v1/sandboxes/{sandbox_id}/files?path=/etc/passwd")
    assert await got.read() == b"fake"


async def test_an_upload_to_a_path_ending_in_a_slash_writes_nothing(
    client: Client, sandbox_id: str
) -> None:
    # It wrote a file named /newdir: the slash was normalised away.
    files = f"/v1/sandboxes/{sandbox_id}/files"
    await expect_error(await client.put(f"{files}?path=/newdir/", data=b"x"), 400, "ends in /")
    await expect_error(await client.get(f"{files}?path=/newdir"), 404)
    # `..` resolves inside the sandbox, as its kernel would.
    put = await client.put(f"{files}?path=/tmp/../x", data=b"x")
    assert (await put.json())["data"] == {"path": "/x", "bytes": 1}


async def test_upload_size_cap_is_413(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(transition_ms=0, max_file_bytes=1024))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    response = await client.put(f"/v1/sandboxes/{sandbox_id}/files?path=/big", data=b"x" * 2048)
    await expect_error(response, 413)


async def test_runtime_on_a_paused_sandbox_is_409(client: Client, sandbox_id: str) -> None:
    await client.post(f"/v1/sandboxes/{sandbox_id}/pause")
    message = "sandbox is paused; resume it before accessing files"
    await expect_error(
        await client.put(f"/v1/sandboxes/{sandbox_id}/files?path=/x", data=b"1"), 409, message
    )
    await expect_error(await client.get(f"/v1/sandboxes/{sandbox_id}/files?path=/x"), 409, message)
    await expect_error(
        await client.post(f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "true"}),
        409,
        message,
    )
    await expect_error(await client.get(f"/v1/sandboxes/{sandbox_id}/processes"), 409, message)


async def start(client: Client, sandbox_id: str, script: str, **extra: Any) -> dict[str, Any]:
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/processes",
        json={"cmd": "/bin/bash", "args": ["-lc", script], **extra},
    )
    body = await response.json()
    assert response.status == 200, body
    data: dict[str, Any] = body["data"]
    return data


def output(frames: list[dict[str, Any]]) -> list[tuple[int, str, bytes]]:
    return [
        (f["seq"], f["stream"], base64.b64decode(f["data_base64"]))
        for f in frames
        if f["type"] == "data"
    ]


async def test_process_connect_replays_after_a_cursor(client: Client, sandbox_id: str) -> None:
    process = await start(client, sandbox_id, "echo one; echo two >&2; echo three", cwd="/tmp")
    assert process["process_id"].startswith("proc_")
    assert process["cwd"] == "/tmp"
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    waited = (await (await client.get(f"{base}/wait?scope=tree&timeout_ms=1000")).json())["data"]
    assert waited["state"] == "exited"
    assert waited["exit_code"] == 0
    assert waited["tree_exited"] is True
    frames = await ndjson(await client.get(f"{base}/connect?after=0"))
    data = output(frames)
    # How writes split into frames is the pipe's business; their order per stream is not.
    assert [seq for seq, _, _ in data] == list(range(1, waited["output"]["newest_seq"] + 1))
    assert b"".join(d for _, stream, d in data if stream == "stdout") == b"one\nthree\n"
    assert b"".join(d for _, stream, d in data if stream == "stderr") == b"two\n"
    assert frames[-1] == {"type": "exit", "exit_code": 0, "signal": None}
    replay = await ndjson(await client.get(f"{base}/connect?after=1"))
    assert output(replay) == data[1:]
    listing = (await (await client.get(f"/v1/sandboxes/{sandbox_id}/processes")).json())["data"]
    assert [p["process_id"] for p in listing["processes"]] == [process["process_id"]]


async def test_process_input_stdin_close_and_live_follow(client: Client, sandbox_id: str) -> None:
    process = await start(client, sandbox_id, "cat")
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    follower = asyncio.ensure_future(client.get(f"{base}/connect"))
    encoded = base64.b64encode(b"piped").decode()
    sent = await client.post(f"{base}/input", json={"data_base64": encoded})
    assert (await sent.json())["data"] == {"input_seq": 1}
    await expect_error(await client.post(f"{base}/input", json={"data_base64": "***"}), 400)
    closed = await client.post(f"{base}/stdin/close")
    assert (await closed.json())["data"] == {"ok": True}
    await expect_error(await client.post(f"{base}/stdin/close"), 409)
    frames = await ndjson(await follower)
    assert output(frames) == [(1, "stdout", b"piped")]
    assert frames[-1]["exit_code"] == 0


async def test_input_takes_256_kib_decoded_per_call(client: Client, sandbox_id: str) -> None:
    # PC-N splits input into writes of up to 256 KiB decoded; base64 makes a full write a
    # 342 KiB body, which a 256 KiB cap on the body refused with 413.
    process = await start(client, sandbox_id, "cat | wc -c")
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    full = base64.b64encode(b"x" * (256 << 10)).decode()
    sent = await client.post(f"{base}/input", json={"data_base64": full})
    assert (await sent.json())["data"] == {"input_seq": 1}
    over = base64.b64encode(b"x" * ((256 << 10) + 1)).decode()
    too_large = await client.post(f"{base}/input", json={"data_base64": over})
    await expect_error(too_large, 413, "262144")
    assert (await client.post(f"{base}/stdin/close")).status == 200
    frames = await ndjson(await client.get(f"{base}/connect"))
    assert output(frames) == [(1, "stdout", b"262144\n")]


async def test_connect_opens_before_the_first_frame(aiohttp_client: ClientFactory) -> None:
    # A client may wait for its stream to open before it feeds the process (PC-N uploads a
    # start-gate file once connected). The stream used to open with its first frame: here, with
    # no output and no heartbeat on a manual clock, never.
    fake = FakeCreateOS(ServerConfig(transition_ms=0, manual_clock=True))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    process = await start(client, sandbox_id, "cat")
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    stream = await asyncio.wait_for(client.get(f"{base}/connect"), timeout=5)
    assert stream.status == 200
    assert stream.headers["Content-Type"].startswith("application/x-ndjson")
    encoded = base64.b64encode(b"go\n").decode()
    assert (await client.post(f"{base}/input", json={"data_base64": encoded})).status == 200
    assert (await client.post(f"{base}/stdin/close")).status == 200
    frames = [json.loads(line) for line in (await stream.text()).splitlines()]
    assert output(frames) == [(1, "stdout", b"go\n")]
    assert frames[-1] == {"type": "exit", "exit_code": 0, "signal": None}


# The Go SDK sends ``scope=`` (empty) when its caller sets no scope: a leader wait (contract §12).
@pytest.mark.parametrize("scope", ["", "scope=&"], ids=["omitted", "empty"])
async def test_wait_times_out_with_408(client: Client, sandbox_id: str, scope: str) -> None:
    process = await start(client, sandbox_id, "cat")  # waits for stdin forever
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    await expect_error(await client.get(f"{base}/wait?{scope}timeout_ms=10"), 408)
    assert (await client.post(f"{base}/stdin/close")).status == 200
    waited = await client.get(f"{base}/wait?{scope}timeout_ms=1000")
    assert waited.status == 200
    assert (await waited.json())["data"]["leader_exited"] is True


async def test_signal_and_delete_end_the_tree(client: Client, sandbox_id: str) -> None:
    first = await start(client, sandbox_id, "cat")
    base = f"/v1/sandboxes/{sandbox_id}/processes/{first['process_id']}"
    await expect_error(await client.post(f"{base}/signal", json={"signal": "SIGFOO"}), 400, "SIG")
    ignored = await client.post(f"{base}/signal", json={"signal": "SIGWINCH"})
    assert ignored.status == 200
    assert (await (await client.get(base)).json())["data"]["state"] == "running"
    await client.post(f"{base}/signal", json={"signal": "SIGINT"})
    view = (await (await client.get(base)).json())["data"]
    assert (view["state"], view["signal"], view["exit_code"]) == ("exited", "SIGINT", None)
    # SIGUSR1's default action ends a process too (it was ignored, the process kept running).
    usr1 = await start(client, sandbox_id, "cat")
    usr1_base = f"/v1/sandboxes/{sandbox_id}/processes/{usr1['process_id']}"
    await client.post(f"{usr1_base}/signal", json={"signal": "SIGUSR1"})
    view = (await (await client.get(usr1_base)).json())["data"]
    assert (view["state"], view["signal"]) == ("exited", "SIGUSR1")
    second = await start(client, sandbox_id, "cat")
    deleted = await client.delete(
        f"/v1/sandboxes/{sandbox_id}/processes/{second['process_id']}?grace_ms=1000"
    )
    data = (await deleted.json())["data"]
    assert data["tree_exited"] is True
    assert data["signal"] == "SIGTERM"


async def test_unknown_process_is_404(client: Client, sandbox_id: str) -> None:
    await expect_error(await client.get(f"/v1/sandboxes/{sandbox_id}/processes/proc_nope"), 404)


async def test_env_on_processes_must_be_declared(client: Client, sandbox_id: str) -> None:
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "env", "env": {"NEW_KEY": "1"}}
    )
    await expect_error(response, 400, "declared")


async def test_evicted_cursor_answers_410(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(transition_ms=0, output_cap_bytes=8))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    process_id = await process_with_frames(client, sandbox_id, [b"aaaa\n", b"bbbb\n", b"cccc\n"])
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}"
    body = await expect_error(
        await client.get(f"{base}/connect?after=0"), 410, "output_offset_expired"
    )
    assert body["data"]["oldest_available_seq"] == 3
    frames = await ndjson(await client.get(f"{base}/connect?after=2"))
    assert output(frames) == [(3, "stdout", b"cccc\n")]


async def test_evicted_cursor_can_answer_in_stream(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(transition_ms=0, output_cap_bytes=8, eviction="frame"))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    process_id = await process_with_frames(client, sandbox_id, [b"aaaa\n", b"bbbb\n"])
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}"
    frames = await ndjson(await client.get(f"{base}/connect?after=0"))
    assert frames == [
        {"type": "error", "error": "output_offset_expired", "oldest_available_seq": 2}
    ]


async def test_registered_command_streams_over_time(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, transition_ms=0))

    async def python3(ctx: CommandContext, args: list[str]) -> int:
        ctx.stdout.write(b"step 1\n")
        await ctx.sleep(1)
        ctx.stdout.write(b"step 2\n")
        return 0

    fake.register_command("python3", python3)
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    process = (
        await (
            await client.post(f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "python3"})
        ).json()
    )["data"]
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    await eventually(lambda: clock.pending == 1)  # the command sleeps
    # Step 1 reaches the output journal through the interpreter's pipe: a condition wait.
    process_output = fake.find_sandbox(sandbox_id).processes[process["process_id"]].output
    await eventually(lambda: process_output.newest_seq == 1)
    view = (await (await client.get(base)).json())["data"]
    assert (view["state"], view["output"]["newest_seq"]) == ("running", 1)
    clock.advance(1)
    waited = (await (await client.get(f"{base}/wait?timeout_ms=5000")).json())["data"]
    assert (waited["state"], waited["output"]["newest_seq"]) == ("exited", 2)


async def test_deleting_the_sandbox_kills_its_processes(
    client: Client, sandbox_id: str, fake: FakeCreateOS
) -> None:
    process = await start(client, sandbox_id, "cat")
    sandbox = fake.find_sandbox(sandbox_id)
    running = sandbox.processes[process["process_id"]]
    fs = sandbox.fs
    await client.delete(f"/v1/sandboxes/{sandbox_id}")
    await eventually(lambda: sandbox.status.value == "destroyed")
    assert (running.state.value, running.signal) == ("exited", "SIGKILL")
    # A destroyed sandbox holds neither its files nor its processes any more.
    assert (sandbox._fs, sandbox._processes) == (None, None)
    assert fs is not sandbox.fs


async def test_process_guards(client: Client, sandbox_id: str) -> None:
    missing_cwd = await client.post(
        f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "true", "cwd": "/nowhere"}
    )
    await expect_error(missing_cwd, 400, "no such directory")
    # A relative one says so (it said "no such directory", though /root/tmp may exist).
    relative = await client.post(
        f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "true", "cwd": "tmp"}
    )
    await expect_error(relative, 400, "must be an absolute path")
    process = await start(client, sandbox_id, "cat")
    base = f"/v1/sandboxes/{sandbox_id}/processes/{process['process_id']}"
    await expect_error(await client.get(f"{base}/wait?scope=forest"), 400, "scope")
    resize = await client.post(f"{base}/resize", json={"rows": 30, "cols": 120})
    await expect_error(resize, 409, "not a pty")
    pty = (
        await (
            await client.post(
                f"/v1/sandboxes/{sandbox_id}/processes", json={"pty": {"rows": 30, "cols": 120}}
            )
        ).json()
    )["data"]
    assert pty["kind"] == "pty"
    pty_base = f"/v1/sandboxes/{sandbox_id}/processes/{pty['process_id']}"
    assert (await client.post(f"{pty_base}/resize", json={"rows": 40, "cols": 100})).status == 200
    await expect_error(await client.post(f"{pty_base}/stdin/close"), 409, "pty")


async def test_a_buffered_exec_ends_when_its_sandbox_is_deleted(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, transition_ms=0))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    body = {"cmd": "/bin/bash", "args": ["-lc", "echo started; sleep 1000"]}
    answer = asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox_id}/exec", json=body))
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    await eventually(lambda: clock.pending == 1)  # the command sleeps
    await (await client.delete(f"/v1/sandboxes/{sandbox_id}")).read()
    response = await answer
    result = (await response.json())["data"]["result"]
    assert response.status == 200
    assert result["exit_code"] == 137
    # What the command wrote just before it was killed may still be on its way: bashkit hands
    # output to the loop in tasks of its own and cancels those it has not delivered when it
    # stops (1 run in ~10 under xdist load lost it). Delivered or not, it is never garbled.
    assert result["stdout"] in ("started\n", "")
    assert result["error"] == "the sandbox stopped while the command ran"


async def test_a_streamed_exec_ends_when_its_sandbox_is_deleted(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, transition_ms=0, heartbeat_s=600))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    body = {"cmd": "/bin/bash", "args": ["-lc", "echo started; sleep 1000"]}
    response = await client.post(f"/v1/sandboxes/{sandbox_id}/exec?stream=true", json=body)
    assert json.loads(await response.content.readline()) == {"stdout": "started\n"}
    await (await client.delete(f"/v1/sandboxes/{sandbox_id}")).read()
    rest = await asyncio.wait_for(response.content.read(), 10)
    assert [json.loads(line) for line in rest.splitlines()] == [{"exit_code": 137}]


async def test_closing_the_app_ends_the_commands_still_running(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(transition_ms=0))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    started = await client.post(f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "cat"})
    process_id = (await started.json())["data"]["process_id"]
    await client.close()
    process = fake.find_sandbox(sandbox_id).processes[process_id]
    assert (process.state.value, process.signal) == ("exited", "SIGKILL")
    assert fake.runtime.shell.idle  # each interpreter has stopped, not only been told to
