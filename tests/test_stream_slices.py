"""Large streams are written in slices that let the loop serve other requests meanwhile, and
carry the same frames, byte for byte, as when they were written in one go."""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import os
from typing import Any

import pytest
from aiohttp import web

from fake_server import CommandContext, FakeCreateOS, ManualClock, ServerConfig
from fake_server.clock import RealClock
from fake_server.processes import CONNECT_BATCH, ManagedProcess, OutputFrame
from fake_server.routes.ndjson import WRITE_SLICE
from fake_server.runtime import ExecSpec
from fake_server.streams import LoopBudget
from tests.conftest import (
    Client,
    ClientFactory,
    create_sandbox,
    eventually,
    process_with_frames,
)

KEY = "skp_slices"
#: Larger than the default 1 MiB journal, and far more than one slice or one connect batch.
BLOB_BYTES = 3 << 19


async def test_a_loop_budget_lets_others_run_after_each_budget() -> None:
    spent = 0
    seen: list[int] = []

    async def writer() -> None:
        nonlocal spent
        budget = LoopBudget(1000)
        for _ in range(100):
            spent += 300
            await budget.spend(300)

    task = asyncio.ensure_future(writer())
    while not task.done():  # another task: it records how far the writer got at each turn
        seen.append(spent)
        await asyncio.sleep(0)
    steps = [later - earlier for earlier, later in itertools.pairwise(seen)]
    # Four writes of 300 use up a budget of 1000: never more between two turns of the loop.
    assert max(steps) == 1200
    assert sum(steps) == 100 * 300


async def fake_client(aiohttp_client: ClientFactory, **config: Any) -> tuple[FakeCreateOS, Client]:
    fake = FakeCreateOS(ServerConfig(transition_ms=0, **config))
    return fake, await aiohttp_client(fake.app(), headers={"X-Api-Key": KEY})


async def upload(client: Client, sandbox_id: str, path: str, data: bytes) -> None:
    response = await client.put(
        f"/v1/sandboxes/{sandbox_id}/files",
        params={"path": path},
        data=io.BytesIO(data),  # bytes this large make aiohttp warn
        headers={"Content-Type": "application/octet-stream"},
    )
    assert response.status == 200, await response.text()


def data_line(frame: OutputFrame) -> bytes:
    """A connect data frame as it has always been written (compact JSON, keys in this order),
    built here without the fake's encoder."""
    head = f'{{"type":"data","seq":{frame.seq},"stream":"{frame.stream}",'
    return f'{head}"data_base64":"{base64.b64encode(frame.data).decode()}"}}\n'.encode()


async def test_a_large_replay_is_the_journal_byte_for_byte(aiohttp_client: ClientFactory) -> None:
    fake, client = await fake_client(aiohttp_client, output_cap_bytes=4 << 20)
    sandbox_id = (await create_sandbox(client))["id"]
    blob = os.urandom(BLOB_BYTES)
    await upload(client, sandbox_id, "/tmp/blob", blob)
    base = f"/v1/sandboxes/{sandbox_id}/processes"
    started = await client.post(base, json={"cmd": "cat", "args": ["/tmp/blob"]})
    process_id = (await started.json())["data"]["process_id"]
    base = f"{base}/{process_id}"
    await (await client.get(f"{base}/wait")).read()

    body = await (await client.get(f"{base}/connect?after=0")).read()

    process = fake.tenant(KEY).get(sandbox_id).processes[process_id]
    frames = process.output.since(0)
    assert len(frames) > CONNECT_BATCH  # several batches, dozens of slices
    assert len(body) > 20 * WRITE_SLICE
    exit_line = b'{"type":"exit","exit_code":0,"signal":null}\n'
    assert body == b"".join(data_line(frame) for frame in frames) + exit_line
    assert b"".join(frame.data for frame in frames) == blob


async def test_frames_at_hand_are_written_in_one_go_each_its_own_line(
    aiohttp_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, client = await fake_client(aiohttp_client)
    sandbox_id = (await create_sandbox(client))["id"]
    chunks = [b"one\n", b"two\n", b"three\n"]
    process_id = await process_with_frames(client, sandbox_id, chunks)
    writes: list[bytes] = []
    write = web.StreamResponse.write

    async def recorded(response: web.StreamResponse, data: bytes) -> None:
        writes.append(bytes(data))
        await write(response, data)

    monkeypatch.setattr(web.StreamResponse, "write", recorded)
    body = await (
        await client.get(f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/connect")
    ).read()

    frames = fake.tenant(KEY).get(sandbox_id).processes[process_id].output.since(0)
    lines = [data_line(frame) for frame in frames]
    assert [frame.seq for frame in frames] == [1, 2, 3]
    assert writes == [b"".join(lines), b'{"type":"exit","exit_code":0,"signal":null}\n']
    assert body.splitlines(keepends=True) == [*lines, writes[1]]


async def test_a_large_exec_stream_keeps_its_frames(aiohttp_client: ClientFactory) -> None:
    _, client = await fake_client(aiohttp_client, exec_output_cap_bytes=4 << 20)
    sandbox_id = (await create_sandbox(client))["id"]
    text = base64.encodebytes(os.urandom(BLOB_BYTES))  # lines of text, newline-terminated
    await upload(client, sandbox_id, "/tmp/text", text)

    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true",
        json={"cmd": "cat", "args": ["/tmp/text"], "stream": True},
    )
    body = await response.read()

    lines = body.splitlines(keepends=True)
    frames = [json.loads(line) for line in lines]
    # One key per frame, compact JSON: re-encoding a frame gives back its exact line.
    assert all(len(frame) == 1 for frame in frames)
    assert [json.dumps(f, separators=(",", ":")).encode() + b"\n" for f in frames] == lines
    assert frames[-1] == {"exit_code": 0}
    assert "".join(frame["stdout"] for frame in frames[:-1]).encode() == text
    assert len(body) > 20 * WRITE_SLICE


async def test_a_follower_overtaken_by_eviction_gets_the_error_frame() -> None:
    process = ManagedProcess(
        process_id="proc_1",
        pid=100,
        cmd="cat",
        args=[],
        cwd="/",
        clock=RealClock(),
        created_at=RealClock().wall(),
        output_cap=8,
    )
    for data in (b"aaaa", b"bbbb"):
        process.output.append("stdout", data)
    frames = process.connect(after=0, heartbeat_s=60)
    first = await anext(frames)
    assert isinstance(first, OutputFrame)
    assert first.data == b"aaaa"
    for data in (b"cccc", b"dddd", b"eeee"):  # the follower reads nothing meanwhile
        process.output.append("stdout", data)
        process.notify()
    second = await anext(frames)  # already taken from the journal with the first
    assert isinstance(second, OutputFrame)
    assert second.data == b"bbbb"
    assert await anext(frames) == {
        "type": "error",
        "error": "output_offset_expired",
        "oldest_available_seq": 4,
    }
    assert [frame async for frame in frames] == []


@pytest.mark.parametrize("read_first", [True, False], ids=["mid-stream", "before-the-first-read"])
async def test_an_exec_stream_overtaken_by_eviction_says_so_and_ends_with_an_exit(
    aiohttp_client: ClientFactory, read_first: bool
) -> None:
    # A streamed exec keeps exec_output_cap_bytes its client has not read. A client further
    # behind saw its stream just end, output cut short with neither an error nor an exit
    # frame; and a command that wrote past the cap before the stream's first read made the
    # stream raise instead.
    fake, client = await fake_client(aiohttp_client, manual_clock=True, exec_output_cap_bytes=8)

    async def flood(ctx: CommandContext, args: list[str]) -> int:
        for chunk in (b"aaaa", b"bbbb", b"cccc", b"dddd"):
            ctx.stdout.write(chunk)
            await ctx.sleep(1)  # a write apart from the next: not merged with it in the pipe
        return 0

    fake.register_command("flood", flood)
    sandbox = fake.find_sandbox((await create_sandbox(client))["id"])
    frames = await fake.runtime.exec_stream(sandbox, ExecSpec(cmd="flood"))
    (process,) = fake.runtime._streams[sandbox.id]  # the stream's unlisted process
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    read = []
    for count in (1, 2, 3, 4):
        # The chunk is in the output journal (not just written: the pipe may still hold it).
        await eventually(
            lambda count=count: process.output.newest_seq == count and clock.pending == 1
        )
        if count == 1 and read_first:
            read.append(await anext(frames))
        if count < 4:  # then the client reads nothing until the command wrote them all
            clock.advance(1)
    read += [frame async for frame in frames]
    # Output frames at hand together come as a list (written in one go).
    read = [frame for item in read for frame in (item if isinstance(item, list) else [item])]
    overrun = "output_offset_expired: the client fell more than 8 bytes behind the command's output"
    assert read == [
        *([{"stdout": "aaaa"}] if read_first else []),
        {"error": overrun},
        {"exit_code": 137},  # the command, still running, was stopped
    ]
    await eventually(lambda: clock.pending == 0)  # its sleep ended with it
