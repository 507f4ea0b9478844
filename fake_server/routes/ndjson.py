"""NDJSON answers (exec streams, process ``connect``): written in slices that never hold the
loop long, and bent as a stream fault rule asks.

A stream is an async iterator of frames (wire dicts, or frames that encode themselves, see
:class:`EncodedFrame`) and of lists of frames: those at hand together, each still its own line,
written in one go (a write per frame cost a system call and a wake-up of the client per frame).

Example::

    return await stream_ndjson(request, frames)   # frames: an async iterator of dicts
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import NDJSON
from fake_server.header_names import X_REQUEST_ID
from fake_server.routes.common import CLIENT_CLOSED, scope, unless_client_leaves
from fake_server.streams import LoopBudget

__all__ = ["MALFORMED_LINE", "WRITE_SLICE", "EncodedFrame", "Frame", "StreamItem", "stream_ndjson"]


class EncodedFrame(Protocol):
    """A frame that writes its own NDJSON line (a process's data frame), faster than the JSON
    encoder would; its wire dict is still at hand for a stream fault to look at.

    Example::

        frame.ndjson() == json.dumps(frame.as_json(), separators=(",", ":")).encode() + b"\\n"
    """

    def as_json(self) -> dict[str, Any]: ...

    def ndjson(self) -> bytes: ...


#: One frame of a stream: a wire dict, or an :class:`EncodedFrame`.
Frame: TypeAlias = dict[str, Any] | EncodedFrame
#: What a stream yields: a frame, or frames at hand together (a list: written in one go).
StreamItem: TypeAlias = Frame | Sequence[Frame]


#: What a ``malformed_frame`` stream fault writes instead of a frame.
MALFORMED_LINE = b'{"type":"data","seq":\n'


async def stream_ndjson(
    request: web.Request, frames: AsyncIterator[StreamItem], *, exec_frames: bool = False
) -> web.StreamResponse:
    """Write ``frames`` as NDJSON lines, applying a stream fault if a rule asked for one; a
    client that goes away just ends the stream. ``exec_frames``: the frames are an exec
    stream's (one key each), so a fault's own frames must be too.

    Example::

        return await stream_ndjson(request, process.connect_batches(after=0, heartbeat_s=5))
    """
    fault = scope().directives.get("stream")
    response = web.StreamResponse(
        headers={
            "Content-Type": NDJSON,
            "Cache-Control": "no-store",
            X_REQUEST_ID: scope().request_id,
        }
    )
    await response.prepare(request)
    lines = _faulted(_one_by_one(frames), fault, exec_frames) if fault else _lines(frames)
    # A stream waiting for output (heartbeats run on the fake's clock, and a manual clock may
    # never move) still ends when its client leaves.
    try:
        await unless_client_leaves(request, _write(request, response, lines))
    except ConnectionError:
        scope().detail = CLIENT_CLOSED  # its 200 went out: the journal says how it ended
    return response


#: Bytes a stream writes before other requests get a turn of the loop: about a millisecond of
#: encoding and writing, so a large stream never holds the loop long (see LoopBudget).
WRITE_SLICE = 64 << 10


async def _write(
    request: web.Request, response: web.StreamResponse, lines: AsyncIterator[bytes | None]
) -> None:
    budget = LoopBudget(WRITE_SLICE)
    async for line in lines:
        if line is None:  # a disconnect fault: the connection dies mid-stream
            if request.transport is not None:
                request.transport.abort()
            return
        await response.write(line)
        await budget.spend(len(line))
    await response.write_eof()


def _encode(frame: Frame) -> bytes:
    if isinstance(frame, dict):
        return json.dumps(frame, separators=(",", ":")).encode() + b"\n"
    return frame.ndjson()


async def _lines(items: AsyncIterator[StreamItem]) -> AsyncIterator[bytes | None]:
    """The lines of the stream: a list's lines joined, up to about a slice per write."""
    async for item in items:
        if not isinstance(item, Sequence):
            yield _encode(item)
            continue
        lines: list[bytes] = []
        size = 0
        for frame in item:
            line = _encode(frame)
            lines.append(line)
            size += len(line)
            if size >= WRITE_SLICE:
                yield b"".join(lines)
                lines, size = [], 0
        if lines:
            yield b"".join(lines)


async def _one_by_one(items: AsyncIterator[StreamItem]) -> AsyncIterator[dict[str, Any]]:
    """The stream's frames one by one, as wire dicts (what a stream fault counts and reads)."""
    async for item in items:
        for frame in item if isinstance(item, Sequence) else (item,):
            yield frame if isinstance(frame, dict) else frame.as_json()


def _is_exit(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "exit" or (len(frame) == 1 and "exit_code" in frame)


def _is_data(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "data" or "stdout" in frame or "stderr" in frame


#: What an ``evict`` stream fault answers: on a process's ``connect``, and on an exec stream.
_EVICTED = {"type": "error", "error": errors.OUTPUT_EVICTED, "oldest_available_seq": 1}
_EXEC_EVICTED = {"error": errors.OUTPUT_EVICTED}


async def _faulted(
    frames: AsyncIterator[dict[str, Any]], fault: Mapping[str, Any], exec_frames: bool
) -> AsyncIterator[bytes | None]:
    """The stream as a fault rule bends it (see ``STREAM_KINDS`` in :mod:`fake_server.fault_rules`);
    ``None`` means "cut the connection here"."""
    kind = fault["kind"]
    after = int(fault.get("after_frames", 1))
    if kind == "evict":
        yield _encode(_EXEC_EVICTED if exec_frames else _EVICTED)
        return
    # A cut comes right after the `after`-th frame, not when a later frame happens to arrive:
    # a quiet process (one that wrote and now waits) must still see its line drop.
    cut = kind in ("disconnect", "malformed_frame")
    cut_line = MALFORMED_LINE if kind == "malformed_frame" else None  # None: the line drops
    if cut and after <= 0:
        yield cut_line
        return
    sent = 0
    skipped = False
    #: ``duplicate``: the lines sent so far, to send again once ``after`` of them went out.
    repeat: list[bytes] | None = [] if kind == "duplicate" else None
    async for frame in frames:
        if kind == "no_exit" and _is_exit(frame):
            return
        if kind == "missing_exit_status" and _is_exit(frame):
            yield _encode({"type": "exit"} if "type" in frame else {"exit_code": None})
            return
        if kind == "gap" and not skipped and sent >= after and _is_data(frame):
            skipped = True
            continue
        line = _encode(frame)
        yield line
        sent += 1
        if cut and sent >= after and not _is_exit(frame):
            yield cut_line
            return
        if repeat is not None and not _is_exit(frame):
            repeat.append(line)
            if sent >= after:
                # What a server answering from an older cursor sends: frames the client has.
                yield b"".join(repeat)
                repeat = None
