"""The sandbox runtime end to end over HTTP, as a client sees it: PTY and pipe processes, live
input, the fake's clock inside commands, curl against responders, the bounds on runaway
commands, fork and the files API against what commands read and write."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import Any

import pytest

from fake_server import CommandContext, FakeCreateOS, ManualClock, ServerConfig
from fake_server.errors import ApiError
from fake_server.network import SimulatedRequest, SimulatedResponse
from tests.conftest import Client, ClientFactory, create_sandbox, data_of, eventually
from tests.test_api_sandboxes import expect_error

KEY = {"X-Api-Key": "skp_runtime"}


@pytest.fixture
async def sandbox_id(client: Client) -> str:
    return str((await create_sandbox(client))["id"])


async def serve(aiohttp_client: ClientFactory, **config: Any) -> tuple[FakeCreateOS, Client, str]:
    """A fake with ``config`` (zero-length transitions), a client for it and one sandbox."""
    fake = FakeCreateOS(ServerConfig(seed=7, transition_ms=0, **config))
    client = await aiohttp_client(fake.app(), headers=KEY)
    return fake, client, str((await create_sandbox(client))["id"])


def manual_clock(fake: FakeCreateOS) -> ManualClock:
    assert isinstance(fake.clock, ManualClock)
    return fake.clock


async def sh(client: Client, sandbox_id: str, script: str, **extra: Any) -> dict[str, Any]:
    """``/exec`` of ``bash -lc SCRIPT``; its ``result``."""
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec",
        json={"cmd": "/bin/bash", "args": ["-lc", script], **extra},
    )
    result: dict[str, Any] = (await data_of(response))["result"]
    return result


async def start(client: Client, sandbox_id: str, **body: Any) -> str:
    """Start a managed process; the base path of its routes."""
    response = await client.post(f"/v1/sandboxes/{sandbox_id}/processes", json=body)
    process_id = (await data_of(response))["process_id"]
    return f"/v1/sandboxes/{sandbox_id}/processes/{process_id}"


async def start_script(client: Client, sandbox_id: str, script: str, **body: Any) -> str:
    return await start(client, sandbox_id, cmd="/bin/bash", args=["-lc", script], **body)


async def view(client: Client, base: str) -> dict[str, Any]:
    result: dict[str, Any] = await data_of(await client.get(base))
    return result


async def send(client: Client, base: str, data: bytes) -> None:
    sent = await client.post(f"{base}/input", json={"data_base64": base64.b64encode(data).decode()})
    assert sent.status == 200, await sent.text()


class Follower:
    """A live ``/connect`` stream, read frame by frame; output is compared per stream,
    concatenated (how writes split into frames is not deterministic)."""

    def __init__(self, response: Any) -> None:
        assert response.status == 200
        self.response = response
        self.frames: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, client: Client, base: str) -> Follower:
        return cls(await client.get(f"{base}/connect"))

    def output(self, stream: str = "pty") -> bytes:
        return b"".join(
            base64.b64decode(f["data_base64"])
            for f in self.frames
            if f["type"] == "data" and f["stream"] == stream
        )

    @property
    def ended(self) -> bool:
        return bool(self.frames) and self.frames[-1]["type"] == "exit"

    async def until(self, text: bytes, stream: str = "pty", timeout: float = 10.0) -> None:
        """Read frames until ``text`` shows in ``stream`` (a bounded wait)."""
        while text not in self.output(stream):
            assert not self.ended, (text, self.output(stream))
            line = await asyncio.wait_for(self.response.content.readline(), timeout)
            assert line, "the stream ended early"
            self.frames.append(json.loads(line))

    async def to_end(self, timeout: float = 10.0) -> dict[str, Any]:
        """Read the rest of the stream; its exit frame."""
        while not self.ended:
            line = await asyncio.wait_for(self.response.content.readline(), timeout)
            assert line, "the stream ended without an exit frame"
            self.frames.append(json.loads(line))
        return self.frames[-1]


async def wait_exit(client: Client, base: str) -> dict[str, Any]:
    """The process view once it exited (on a real clock)."""
    result: dict[str, Any] = await data_of(await client.get(f"{base}/wait?timeout_ms=10000"))
    return result


# -- PTY and pipe processes --------------------------------------------------------------------


async def test_pty_process_merges_output_into_pty_frames(client: Client, sandbox_id: str) -> None:
    base = await start_script(
        client, sandbox_id, "stty size; echo hi >&2", pty={"rows": 30, "cols": 120}
    )
    follower = await Follower.open(client, base)
    assert await follower.to_end() == {"type": "exit", "exit_code": 0, "signal": None}
    data = [f for f in follower.frames if f["type"] == "data"]
    assert data
    assert {f["stream"] for f in data} == {"pty"}
    assert follower.output() == b"30 120\r\nhi\r\n"


async def test_pipe_process_emits_only_stdout_and_stderr_frames(
    client: Client, sandbox_id: str
) -> None:
    base = await start_script(client, sandbox_id, "echo out; echo err >&2; echo more")
    follower = await Follower.open(client, base)
    await follower.to_end()
    assert {f["stream"] for f in follower.frames if f["type"] == "data"} == {"stdout", "stderr"}
    assert follower.output("stdout") == b"out\nmore\n"
    assert follower.output("stderr") == b"err\n"


async def test_resize_changes_what_an_interactive_shell_sees(
    client: Client, sandbox_id: str
) -> None:
    base = await start(client, sandbox_id, pty={"rows": 24, "cols": 80})
    follower = await Follower.open(client, base)
    await follower.until(b"# ")  # the prompt
    await send(client, base, b"stty size\n")
    await follower.until(b"24 80\r\n")
    assert b"stty size\r\n" in follower.output()  # a terminal echoes what is typed
    resized = await client.post(f"{base}/resize", json={"rows": 40, "cols": 100})
    assert (await data_of(resized)) == {"ok": True}
    await send(client, base, b"stty size\n")
    await follower.until(b"40 100\r\n")
    await send(client, base, b"exit\n")
    assert await follower.to_end() == {"type": "exit", "exit_code": 0, "signal": None}
    assert (await view(client, base))["exit_code"] == 0


async def test_registered_command_in_a_pty_streams_pty_frames(
    aiohttp_client: ClientFactory,
) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client)

    async def greet(ctx: CommandContext, args: list[str]) -> int:
        ctx.stdout.write(f"hello {' '.join(args)}\n".encode())
        ctx.stderr.write(b"warn\n")
        return 3

    fake.register_command("greet", greet)
    base = await start_script(client, sandbox_id, "greet a b", pty={"rows": 24, "cols": 80})
    follower = await Follower.open(client, base)
    assert (await follower.to_end())["exit_code"] == 3
    assert {f["stream"] for f in follower.frames if f["type"] == "data"} == {"pty"}
    assert follower.output() == b"hello a b\r\nwarn\r\n"


# -- live stdin ------------------------------------------------------------------------------


async def test_read_loop_gets_input_sent_later_until_stdin_closes(
    client: Client, sandbox_id: str
) -> None:
    script = 'while read -r line; do echo "got:$line"; done; echo bye'
    base = await start_script(client, sandbox_id, script)
    follower = await Follower.open(client, base)
    await send(client, base, b"a\n")
    await follower.until(b"got:a\n", "stdout")
    assert (await view(client, base))["state"] == "running"  # waiting for the next line
    await send(client, base, b"b\n")
    await follower.until(b"got:b\n", "stdout")
    closed = await client.post(f"{base}/stdin/close")
    assert closed.status == 200
    assert (await follower.to_end())["exit_code"] == 0
    assert follower.output("stdout") == b"got:a\ngot:b\nbye\n"


async def test_input_a_process_has_not_read_is_bounded(aiohttp_client: ClientFactory) -> None:
    # As a full pipe stops its writer: a client sending to a process that does not read filled
    # the fake's memory without end.
    fake, client, sandbox_id = await serve(aiohttp_client, manual_clock=True, stdin_cap_bytes=8)
    clock = manual_clock(fake)
    base = await start_script(client, sandbox_id, 'sleep 1; read -r a; echo "got $a"; sleep 1')
    await eventually(lambda: clock.pending == 1)  # not reading yet
    await send(client, base, b"12345\n")  # 6 of the 8 bytes
    full = await expect_error(
        await client.post(f"{base}/input", json={"data_base64": base64.b64encode(b"abc").decode()}),
        409,
        "the process has 6 bytes of input it has not read yet, and holds at most 8",
    )
    assert full["status"] == "fail"
    clock.advance(1)  # it reads its line, then sleeps again
    await eventually(lambda: clock.pending == 1)
    await send(client, base, b"abcdefgh")  # room again
    clock.advance(1)
    follower = await Follower.open(client, base)
    assert (await follower.to_end())["exit_code"] == 0
    assert follower.output("stdout") == b"got 12345\n"


@pytest.mark.parametrize("pty", [None, {"rows": 24, "cols": 80}], ids=["pipe", "pty"])
async def test_a_process_that_fails_inside_the_fake_still_ends_and_says_so(
    aiohttp_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    pty: dict[str, int] | None,
) -> None:
    # An exception out of the shell (a bug of the fake's) killed the process's task and left
    # it running: every wait and follower waited for ever.
    fake, client, sandbox_id = await serve(aiohttp_client)

    async def broken(invocation: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(fake.runtime.shell, "run", broken)
    base = await start_script(client, sandbox_id, "echo hi", **({"pty": pty} if pty else {}))
    waited = await wait_exit(client, base)
    assert (waited["state"], waited["exit_code"]) == ("exited", 1)
    follower = await Follower.open(client, base)
    await follower.to_end()
    stream = "stderr" if pty is None else "pty"
    assert follower.output(stream).startswith(b"fake-createos: internal error in the fake")
    assert "failed inside the fake" in caplog.text
    assert "RuntimeError: a bug" in caplog.text


async def test_a_process_that_never_reads_stdin_exits_on_its_own(
    client: Client, sandbox_id: str
) -> None:
    base = await start_script(client, sandbox_id, "echo done")
    waited = await wait_exit(client, base)
    assert (waited["state"], waited["exit_code"]) == ("exited", 0)


# -- the fake's clock inside commands -------------------------------------------------------------


async def test_until_loop_is_released_by_an_uploaded_file(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, manual_clock=True)
    clock = manual_clock(fake)
    script = "until [ -e /tmp/gate ]; do sleep 0.01; done; echo released"
    base = await start_script(client, sandbox_id, script)
    for _ in range(3):  # the loop keeps polling while the gate is absent
        await eventually(lambda: clock.pending == 1)
        assert clock.advance(0.01) == 1
    put = await client.put(f"/v1/sandboxes/{sandbox_id}/files?path=/tmp/gate", data=b"")
    assert put.status == 200
    sandbox = fake.find_sandbox(sandbox_id)
    process = sandbox.processes[base.rsplit("/", 1)[1]]
    for _ in range(100):
        await eventually(lambda: clock.pending == 1 or process.exited)
        if process.exited:
            break
        clock.advance(0.01)
    done = await view(client, base)
    assert (done["state"], done["exit_code"]) == ("exited", 0)
    follower = await Follower.open(client, base)
    await follower.to_end()
    assert follower.output("stdout") == b"released\n"


async def test_sleep_ends_only_when_the_clock_reaches_it(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, manual_clock=True)
    clock = manual_clock(fake)
    base = await start_script(client, sandbox_id, "sleep 30")
    await eventually(lambda: clock.pending == 1)
    assert clock.advance(29.9) == 0
    assert (await view(client, base))["state"] == "running"
    assert clock.advance(0.1) == 1
    process = fake.find_sandbox(sandbox_id).processes[base.rsplit("/", 1)[1]]
    await eventually(lambda: process.exited)
    done = await view(client, base)
    assert (done["state"], done["exit_code"]) == ("exited", 0)


async def test_date_moves_by_exactly_the_advanced_seconds(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, manual_clock=True)
    before = await sh(client, sandbox_id, "date +%s")
    manual_clock(fake).advance(1234)
    after = await sh(client, sandbox_id, "date +%s")
    assert int(after["stdout"]) - int(before["stdout"]) == 1234


async def test_timeout_answers_124_once_the_clock_passes_it(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, manual_clock=True)
    clock = manual_clock(fake)
    request = asyncio.ensure_future(sh(client, sandbox_id, "timeout 5 sleep 60"))
    await eventually(lambda: clock.pending == 2)  # timeout's timer and the sleep
    clock.advance(4.9)
    assert not request.done()
    clock.advance(0.1)
    result = await asyncio.wait_for(request, 10)
    assert result["exit_code"] == 124


# -- curl against responders ----------------------------------------------------------------------


@pytest.fixture
def seen() -> list[SimulatedRequest]:
    return []


async def curl_sandbox(
    aiohttp_client: ClientFactory, seen: list[SimulatedRequest]
) -> tuple[Client, str]:
    fake = FakeCreateOS(ServerConfig(seed=7, transition_ms=0))

    def api(request: SimulatedRequest) -> SimulatedResponse:
        seen.append(request)
        return SimulatedResponse(
            body=json.dumps({"path": request.path}), headers={"Content-Type": "application/json"}
        )

    fake.register_responder("api.example.com", api)
    fake.register_responder("blocked.example.com", api)
    client = await aiohttp_client(fake.app(), headers=KEY)
    egress = ["api.example.com", "silent.example.com"]
    return client, str((await create_sandbox(client, egress=egress))["id"])


async def test_curl_gets_the_responders_body(
    aiohttp_client: ClientFactory, seen: list[SimulatedRequest]
) -> None:
    client, sandbox_id = await curl_sandbox(aiohttp_client, seen)
    result = await sh(client, sandbox_id, "curl -s https://api.example.com/v1/x")
    assert result == {"stdout": '{"path": "/v1/x"}', "stderr": "", "exit_code": 0}
    assert [(r.method, r.host, r.port) for r in seen] == [("GET", "api.example.com", 443)]


async def test_curl_outside_egress_exits_7_and_asks_nobody(
    aiohttp_client: ClientFactory, seen: list[SimulatedRequest]
) -> None:
    client, sandbox_id = await curl_sandbox(aiohttp_client, seen)
    result = await sh(client, sandbox_id, "curl -sS https://blocked.example.com/")
    assert result["exit_code"] == 7
    assert "egress" in result["stderr"]
    assert seen == []


async def test_curl_to_an_allowed_host_without_responder_exits_6(
    aiohttp_client: ClientFactory, seen: list[SimulatedRequest]
) -> None:
    client, sandbox_id = await curl_sandbox(aiohttp_client, seen)
    result = await sh(client, sandbox_id, "curl -sS https://silent.example.com/")
    assert result["exit_code"] == 6
    assert "Could not resolve host: silent.example.com" in result["stderr"]


async def test_the_responder_sees_method_path_headers_and_body(
    aiohttp_client: ClientFactory, seen: list[SimulatedRequest]
) -> None:
    client, sandbox_id = await curl_sandbox(aiohttp_client, seen)
    script = "curl -s -X POST -H 'X-A: 1' -d hello https://api.example.com/p"
    assert (await sh(client, sandbox_id, script))["exit_code"] == 0
    [request] = seen
    assert (request.method, request.path, request.body) == ("POST", "/p", b"hello")
    assert request.header("X-A") == "1"
    assert request.header("content-type") == "application/x-www-form-urlencoded"


# -- bounds --------------------------------------------------------------------------------------


async def test_exec_output_cap_stops_the_command(aiohttp_client: ClientFactory) -> None:
    _, client, sandbox_id = await serve(aiohttp_client, exec_output_cap_bytes=1000)
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec",
        json={"cmd": "/bin/bash", "args": ["-lc", "yes | head -c 5000"]},
    )
    result = (await data_of(response))["result"]
    assert "output limit" in result["error"]
    assert 0 < len(result["stdout"].encode()) <= 1000
    assert set(result["stdout"]) <= {"y", "\n"}


async def test_a_replayed_probe_beyond_the_cap_is_cut_like_a_run(
    aiohttp_client: ClientFactory,
) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, exec_output_cap_bytes=4)
    exec_ = f"/v1/sandboxes/{sandbox_id}/exec"
    probe = {"cmd": "echo", "args": ["hello"]}
    # A stream has no cap: its run fills the result cache with all of the output...
    streamed = await client.post(exec_, params={"stream": "true"}, json=probe)
    assert b'"stdout":"hello\\n"' in await streamed.read()
    # ...which a buffered exec replays: cut at the cap, as a run would be.
    result = (await data_of(await client.post(exec_, json=probe)))["result"]
    assert fake.runtime.shell.results.hits == 1
    assert result["exit_code"] == 1
    assert result["stdout"] == "hell"
    assert "output limit" in result["error"]


async def test_a_replayed_probe_that_just_fits_the_cap_is_answered_whole(
    aiohttp_client: ClientFactory,
) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, exec_output_cap_bytes=6)
    exec_ = f"/v1/sandboxes/{sandbox_id}/exec"
    probe = {"cmd": "echo", "args": ["hello"]}  # six bytes: the cap exactly
    first = (await data_of(await client.post(exec_, json=probe)))["result"]
    replayed = (await data_of(await client.post(exec_, json=probe)))["result"]
    assert fake.runtime.shell.results.hits == 1
    assert replayed == first == {"stdout": "hello\n", "stderr": "", "exit_code": 0}


async def test_step_budget_ends_a_runaway_loop(aiohttp_client: ClientFactory) -> None:
    _, client, sandbox_id = await serve(aiohttp_client, max_commands=1000)
    result = await sh(client, sandbox_id, "while true; do :; done")
    assert result["exit_code"] != 0
    assert "limit exceeded" in result["stderr"]


async def test_delete_ends_a_busy_loop(aiohttp_client: ClientFactory) -> None:
    _, client, sandbox_id = await serve(aiohttp_client, max_commands=10**9)
    base = await start_script(client, sandbox_id, "while true; do i=$((i+1)); done")
    assert (await view(client, base))["state"] == "running"
    deleted = await data_of(await client.delete(f"{base}?grace_ms=1000"))
    assert (deleted["tree_exited"], deleted["signal"]) == (True, "SIGTERM")
    assert (await sh(client, sandbox_id, "echo still serving"))["stdout"] == "still serving\n"


async def test_delete_stops_the_interpreter_of_a_busy_loop(
    aiohttp_client: ClientFactory,
) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, max_commands=10**9)
    fs = fake.find_sandbox(sandbox_id).fs
    script = "while true; do i=$((i+1)); echo $i > /tmp/count; done"
    base = await start_script(client, sandbox_id, script)
    await eventually(lambda: fs.exists("/tmp/count"))
    await client.delete(base)
    # The DELETE answers at once; the interpreter stops at its next command boundary, on its
    # own thread. Once the shell is idle it has really ended: nothing writes any more. (A file
    # that kept its content across one exec was no proof: on a busy machine the interpreter's
    # thread can miss a whole round trip, then write once more.)
    await eventually(lambda: fake.runtime.shell.idle)
    count = fs.read("/tmp/count")
    await sh(client, sandbox_id, "true")
    assert fs.read("/tmp/count") == count


async def test_reset_stops_a_running_busy_loop(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client, max_commands=10**9)
    sandbox = fake.find_sandbox(sandbox_id)
    script = "while true; do i=$((i+1)); echo $i > /tmp/count; done"
    base = await start_script(client, sandbox_id, script)
    process = sandbox.processes[base.rsplit("/", 1)[1]]
    await eventually(lambda: sandbox.fs.exists("/tmp/count"))
    reset = await client.post("/_fake/reset")
    assert (await data_of(reset)) == {"reset": True}
    assert (process.state.value, process.signal) == ("exited", "SIGKILL")
    # The reset dropped the tenant, so the sandbox (and its files) are gone with it.
    with pytest.raises(ApiError):
        fake.find_sandbox(sandbox_id)
    await expect_error(await client.get(base), 404)


async def test_a_script_running_itself_by_path_is_contained(
    aiohttp_client: ClientFactory,
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client, max_commands=3000)
    result = await sh(client, sandbox_id, "echo /tmp/s > /tmp/s; chmod +x /tmp/s; /tmp/s")
    assert result["exit_code"] != 0
    assert (await client.get("/healthz")).status == 200
    assert (await sh(client, sandbox_id, "echo ok"))["stdout"] == "ok\n"


async def test_a_script_evaluating_itself_is_contained(aiohttp_client: ClientFactory) -> None:
    _, client, sandbox_id = await serve(aiohttp_client, max_command_seconds=1)
    result = await sh(client, sandbox_id, 'x=\'eval "$x"\'; eval "$x"')
    assert result["exit_code"] != 0
    assert (await client.get("/healthz")).status == 200
    assert (await sh(client, sandbox_id, "echo ok"))["stdout"] == "ok\n"


# -- fork and files ------------------------------------------------------------------------------


async def test_fork_copies_the_filesystem_and_then_diverges(
    client: Client, sandbox_id: str
) -> None:
    assert (await sh(client, sandbox_id, "echo source > /root/note"))["exit_code"] == 0
    await data_of(await client.post(f"/v1/sandboxes/{sandbox_id}/pause"))
    child = (await data_of(await client.post(f"/v1/sandboxes/{sandbox_id}/fork", json={})))["id"]
    assert (await sh(client, child, "cat /root/note"))["stdout"] == "source\n"
    assert (await sh(client, child, "echo fork > /root/note; echo new > /root/only"))[
        "exit_code"
    ] == 0
    await data_of(await client.post(f"/v1/sandboxes/{sandbox_id}/resume"))
    source = await sh(client, sandbox_id, "cat /root/note; [ -e /root/only ] || echo absent")
    assert source["stdout"] == "source\nabsent\n"
    assert (await sh(client, child, "cat /root/note"))["stdout"] == "fork\n"


async def test_uploaded_bytes_are_what_commands_read(client: Client, sandbox_id: str) -> None:
    blob = bytes(range(256))
    put = await client.put(f"/v1/sandboxes/{sandbox_id}/files?path=/tmp/blob", data=blob)
    assert (await data_of(put))["bytes"] == 256
    result = await sh(
        client, sandbox_id, "wc -c < /tmp/blob; sha256sum /tmp/blob; base64 -w0 /tmp/blob"
    )
    size, digest, encoded = result["stdout"].splitlines()
    assert int(size) == 256
    assert digest == f"{hashlib.sha256(blob).hexdigest()}  /tmp/blob"
    assert base64.b64decode(encoded) == blob


async def test_bytes_a_command_writes_are_what_get_files_returns(
    client: Client, sandbox_id: str
) -> None:
    blob = bytes(range(256))
    encoded = base64.b64encode(blob).decode()
    written = await sh(client, sandbox_id, f"printf %s {encoded} | base64 -d > /tmp/out")
    assert written["exit_code"] == 0
    got = await client.get(f"/v1/sandboxes/{sandbox_id}/files", params={"path": "/tmp/out"})
    assert await got.read() == blob
    await sh(client, sandbox_id, "printf 'a\\000b\\377' > /tmp/raw")
    raw = await client.get(f"/v1/sandboxes/{sandbox_id}/files", params={"path": "/tmp/raw"})
    assert await raw.read() == b"a\x00b\xff"


async def test_a_tar_of_a_directory_round_trips_through_the_files_api(client: Client) -> None:
    source = str((await create_sandbox(client))["id"])
    target = str((await create_sandbox(client))["id"])
    files = {"/srv/app/a.txt": b"alpha\n", "/srv/app/lib/b.bin": bytes(range(256))}
    for path, data in files.items():
        put = await client.put(f"/v1/sandboxes/{source}/files", params={"path": path}, data=data)
        await data_of(put)
    packed = await sh(client, source, "cd /srv && tar -cf /tmp/app.tar app && tar -tf /tmp/app.tar")
    assert packed["exit_code"] == 0, packed
    assert {"app/a.txt", "app/lib/b.bin"} <= set(packed["stdout"].split())
    archive = await client.get(f"/v1/sandboxes/{source}/files", params={"path": "/tmp/app.tar"})
    assert archive.status == 200
    tar = await archive.read()
    put = await client.put(
        f"/v1/sandboxes/{target}/files", params={"path": "/in/app.tar"}, data=tar
    )
    await data_of(put)
    unpacked = await sh(client, target, "mkdir -p /out && tar -xf /in/app.tar -C /out")
    assert unpacked["exit_code"] == 0, unpacked
    for path, data in files.items():
        where = "/out/app/" + path.removeprefix("/srv/app/")
        got = await client.get(f"/v1/sandboxes/{target}/files", params={"path": where})
        assert await got.read() == data, where
