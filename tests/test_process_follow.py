"""How a live follower of a managed process takes its frames: the frames at hand together as
one batch, and, while it is busy, the next ones gathered for a moment rather than one wake-up
per chunk the interpreter hands over (``GATHER_S``, ``GATHER_BYTES``)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fake_server import ManualClock
from fake_server.processes import GATHER_BYTES, ManagedProcess, OutputFrame

#: A window no test outlasts: a gathering then ends only by bytes or by the exit.
FOREVER_S = 3600.0
#: Loop turns after which a wait that nothing can end is still waiting.
TURNS = 20


def managed(clock: ManualClock | None = None, *, output_cap: int = 1 << 20) -> ManagedProcess:
    clock = clock or ManualClock()
    return ManagedProcess(
        process_id="proc_1",
        pid=100,
        cmd="cat",
        args=[],
        cwd="/",
        clock=clock,
        created_at=clock.wall(),
        output_cap=output_cap,
    )


def write(process: ManagedProcess, *chunks: bytes) -> None:
    """What the process's output sink does with each chunk the interpreter hands over."""
    for chunk in chunks:
        process.output.append("stdout", chunk)
        process.notify()


async def turns(count: int = TURNS) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def seqs(batch: list[OutputFrame] | dict[str, Any]) -> list[int]:
    assert isinstance(batch, list), batch
    return [frame.seq for frame in batch]


Batches = AsyncIterator[list[OutputFrame] | dict[str, Any]]


async def gathering(
    process: ManagedProcess, first: bytes, *, gather_s: float = FOREVER_S
) -> tuple[Batches, asyncio.Future[Any]]:
    """A follower that took ``first`` (the process's first frame) as its batch and now waits
    for its next one: the batches, and that next batch, pending."""
    write(process, first)
    batches = process.connect_batches(after=0, heartbeat_s=60, gather_s=gather_s)
    assert seqs(await anext(batches)) == [1]
    following = asyncio.ensure_future(anext(batches))
    await turns()
    return batches, following


@pytest.mark.parametrize("stream", ["stdout", "stderr", "pty"])
@pytest.mark.parametrize("seq", [1, 10**12])
def test_a_data_frame_line_is_its_wire_dict_in_compact_json(stream: str, seq: int) -> None:
    frame = OutputFrame(seq, stream, bytes(range(256)) * 3)
    assert frame.ndjson() == json.dumps(frame.as_json(), separators=(",", ":")).encode() + b"\n"
    assert base64.b64decode(json.loads(frame.ndjson())["data_base64"]) == frame.data


async def test_the_frames_at_hand_come_as_one_batch_then_one_by_one_through_connect() -> None:
    process = managed()
    write(process, b"a", b"b", b"c")
    batches = process.connect_batches(after=1, heartbeat_s=60)
    assert seqs(await anext(batches)) == [2, 3]
    frames = process.connect(after=1, heartbeat_s=60)  # the frame-by-frame view of the same
    assert [(await anext(frames)).seq for _ in range(2)] == [2, 3]  # type: ignore[union-attr]


async def test_a_busy_follower_gathers_until_enough_bytes_arrived() -> None:
    process = managed()
    _, following = await gathering(process, b"first")
    chunk = b"x" * 4096
    written = 0
    while written + len(chunk) < GATHER_BYTES:  # output arrives, short of the gathering's bytes
        write(process, chunk)
        written += len(chunk)
        await turns(3)
        assert not following.done()
    write(process, chunk)  # now enough: the follower takes everything in one batch
    batch = await asyncio.wait_for(following, 5)
    assert seqs(batch) == list(range(2, process.output.newest_seq + 1))
    assert len(seqs(batch)) == GATHER_BYTES // len(chunk) + (GATHER_BYTES % len(chunk) > 0)


async def test_a_gathering_ends_at_half_the_cap_so_nothing_is_evicted_meanwhile() -> None:
    process = managed(output_cap=8)
    _, following = await gathering(process, b"1")
    write(process, b"222")
    await turns()
    assert not following.done()
    write(process, b"3")  # 4 bytes since the follower's last batch: half of the cap
    assert seqs(await asyncio.wait_for(following, 5)) == [2, 3]


async def test_the_exit_ends_a_gathering_at_once() -> None:
    process = managed()
    batches, following = await gathering(process, b"first")
    write(process, b"last words")
    await turns()
    assert not following.done()
    process.terminate("SIGTERM")
    assert seqs(await asyncio.wait_for(following, 5)) == [2]
    assert await anext(batches) == {"type": "exit", "exit_code": None, "signal": "SIGTERM"}


async def test_a_gathering_ends_when_its_window_runs_out() -> None:
    # A command that wrote a little and then waits (for input, say) is not held back longer.
    process = managed()
    _, following = await gathering(process, b"first", gather_s=0.01)
    write(process, b"prompt> ")
    assert seqs(await asyncio.wait_for(following, 5)) == [2]


async def test_a_follower_that_does_not_gather_takes_each_frame_at_once() -> None:
    process = managed()
    batches = process.connect_batches(after=0, heartbeat_s=60, gather_s=0)
    for seq in (1, 2, 3):
        following = asyncio.ensure_future(anext(batches))
        await turns(3)
        write(process, b"x")
        await turns(3)
        assert following.done()
        assert seqs(following.result()) == [seq]


async def test_waits_that_end_without_output_leave_no_waiter_behind() -> None:
    # Every heartbeat ends a wait by its timer: an idle stream must not pile up waiters.
    clock = ManualClock()
    process = managed(clock)
    frames = process.connect(after=0, heartbeat_s=5)
    for _ in range(10):
        beat = asyncio.ensure_future(anext(frames))
        await turns(3)
        clock.advance(5)
        assert await asyncio.wait_for(beat, 5) == {"type": "heartbeat"}
    assert len(process._waiters) <= 1
    write(process, b"at last")
    data = await asyncio.wait_for(anext(frames), 5)
    assert isinstance(data, OutputFrame)
    assert data.data == b"at last"
    assert process._waiters == []


async def test_a_follower_cancelled_while_gathering_leaves_no_waiter() -> None:
    process = managed()
    _, following = await gathering(process, b"first")
    write(process, b"more")
    await turns()
    assert len(process._waiters) == 1
    following.cancel()
    with pytest.raises(asyncio.CancelledError):
        await following
    assert process._waiters == []
