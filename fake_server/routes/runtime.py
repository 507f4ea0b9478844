"""Runtime routes: exec (buffered and streamed), files, managed processes."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web

from fake_server import errors
from fake_server.errors import ApiError
from fake_server.lifecycle import Lifecycle
from fake_server.processes import OutputEvicted, OutputFrame
from fake_server.routes.common import (
    SANDBOX,
    Routes,
    fake_of,
    ok,
    read_body,
    read_bytes,
    sandbox_of,
    scope,
    unless_client_leaves,
)
from fake_server.runtime import ExecSpec, ProcessSpec, Runtime
from fake_server.streams import LoopBudget
from fake_server.validation import query_int

NDJSON = "application/x-ndjson"


def _streaming_requested(request: web.Request, body_stream: bool | None) -> bool:
    return request.query.get("stream", "").lower() in ("true", "1") or bool(body_stream)


#: What a ``malformed_frame`` stream fault writes instead of a frame.
MALFORMED_LINE = b'{"type":"data","seq":\n'


async def stream_ndjson(
    request: web.Request, frames: AsyncIterator[dict[str, Any]]
) -> web.StreamResponse:
    """Write ``frames`` as NDJSON lines, applying a stream fault if a rule asked for one; a
    client that goes away just ends the stream."""
    fault = scope().directives.get("stream")
    response = web.StreamResponse(
        headers={
            "Content-Type": NDJSON,
            "Cache-Control": "no-store",
            "X-Request-ID": scope().request_id,
        }
    )
    await response.prepare(request)
    lines = _faulted(frames, fault) if fault else _lines(frames)
    # A stream waiting for output (heartbeats run on the fake's clock, and a manual clock may
    # never move) still ends when its client leaves.
    with contextlib.suppress(ConnectionError):
        await unless_client_leaves(request, _write(request, response, lines))
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


def _encode(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"


async def _lines(frames: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes | None]:
    async for frame in frames:
        yield _encode(frame)


def _is_exit(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "exit" or (len(frame) == 1 and "exit_code" in frame)


def _is_data(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "data" or "stdout" in frame or "stderr" in frame


async def _faulted(
    frames: AsyncIterator[dict[str, Any]], fault: Mapping[str, Any]
) -> AsyncIterator[bytes | None]:
    """The stream as a fault rule bends it (see ``STREAM_KINDS`` in :mod:`fake_server.faults`);
    ``None`` means "cut the connection here"."""
    kind = fault["kind"]
    after = int(fault.get("after_frames", 1))
    if kind == "evict":
        yield _encode({"type": "error", "error": errors.OUTPUT_EVICTED, "oldest_available_seq": 1})
        return
    sent = 0
    skipped = False
    async for frame in frames:
        if kind == "no_exit" and _is_exit(frame):
            return
        if kind == "missing_exit_status" and _is_exit(frame):
            yield _encode({"type": "exit"} if "type" in frame else {"exit_code": None})
            return
        if kind in ("disconnect", "malformed_frame") and sent >= after:
            yield MALFORMED_LINE if kind == "malformed_frame" else None
            return
        if kind == "gap" and not skipped and sent >= after and _is_data(frame):
            skipped = True
            continue
        yield _encode(frame)
        sent += 1


async def exec_command(request: web.Request) -> web.StreamResponse:
    body = await read_body(
        request,
        allowed={"cmd", "args", "stdin", "env", "stream"},
        tolerated={"timeout_ms", "timeout", "cwd"},
    )
    spec = ExecSpec(
        cmd=body.string("cmd", required=True) or "",
        args=body.string_list("args") or [],
        stdin=body.string("stdin") or "",
        env=body.env_map("env") or {},
    )
    if not spec.cmd:
        raise ApiError.invalid("cmd", errors.CMD_REQUIRED)
    runtime = fake_of(request).runtime
    sandbox = sandbox_of(request)
    if _streaming_requested(request, body.boolean("stream")):
        return await stream_ndjson(request, await runtime.exec_stream(sandbox, spec))
    return ok(await runtime.exec(sandbox, spec))


async def put_file(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    runtime = fake_of(request).runtime
    # Check state and path before reading a possibly large body.
    runtime.check_upload(sandbox, request.query.get("path"), request.content_length)
    data = await read_bytes(request, fake_of(request).config.max_file_bytes)
    return ok(runtime.upload(sandbox, request.query.get("path"), data))


async def get_file(request: web.Request) -> web.Response:
    data = fake_of(request).runtime.download(sandbox_of(request), request.query.get("path"))
    return web.Response(body=data, content_type="application/octet-stream")


# -- processes ---------------------------------------------------------------------------------


async def create_process(request: web.Request) -> web.Response:
    body = await read_body(
        request, allowed={"cmd", "args", "cwd", "env", "pty"}, tolerated={"timeout_ms"}
    )
    pty = body.data.get("pty")
    if pty is not None and not isinstance(pty, dict):
        raise ApiError.invalid("pty", "must be an object with rows and cols")
    size = _terminal_size(pty) if pty is not None else None
    spec = ProcessSpec(
        cmd=body.string("cmd") or None,
        args=body.string_list("args") or [],
        cwd=body.string("cwd") or None,
        env=body.env_map("env") or {},
        pty=size,
    )
    if spec.cmd is None and not spec.pty:
        raise ApiError.invalid("cmd", errors.CMD_REQUIRED)
    process = fake_of(request).runtime.start_process(sandbox_of(request), spec)
    return ok(process.view())


async def list_processes(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    Lifecycle.check_running(sandbox)
    views = [p.view() for p in sandbox.processes.values()] if sandbox.has_processes else []
    return ok({"processes": views})


def _process(request: web.Request) -> Any:
    sandbox = sandbox_of(request)
    Lifecycle.check_running(sandbox)
    return Runtime.process(sandbox, request.match_info["pid"])


async def get_process(request: web.Request) -> web.Response:
    return ok(_process(request).view())


async def connect(request: web.Request) -> web.StreamResponse:
    process = _process(request)
    after = query_int(request.query, "after", 0)
    fault = scope().directives.get("stream")
    if fault is not None and fault["kind"] == "duplicate":
        after = 0  # replay everything, ignoring the cursor: the client sees duplicates
    fake = fake_of(request)
    frames = process.connect(after=after, heartbeat_s=fake.config.heartbeat_s)
    first: OutputFrame | dict[str, Any] | None
    try:
        # Nothing is sent before the first frame (the answer may yet be a 410), and on a manual
        # clock no heartbeat comes: a client that leaves meanwhile ends the request.
        first = await unless_client_leaves(request, anext(frames))
    except OutputEvicted as evicted:
        if fake.config.eviction == "http":
            raise ApiError(
                410,
                errors.OUTPUT_EVICTED,
                data={"oldest_available_seq": evicted.oldest_available_seq},
            ) from None
        first = {
            "type": "error",
            "error": errors.OUTPUT_EVICTED,
            "oldest_available_seq": evicted.oldest_available_seq,
        }
        await frames.aclose()
    except StopAsyncIteration:
        first = None
    return await stream_ndjson(request, _wire(first, frames))


async def _wire(
    first: OutputFrame | dict[str, Any] | None, rest: AsyncIterator[OutputFrame | dict[str, Any]]
) -> AsyncIterator[dict[str, Any]]:
    """Wire dicts for ``first`` (already drawn) and then the rest."""
    if first is not None:
        yield first.as_json() if isinstance(first, OutputFrame) else first
    async for frame in rest:
        yield frame.as_json() if isinstance(frame, OutputFrame) else frame


async def send_input(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"data_base64"})
    encoded = body.string("data_base64", required=True) or ""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError.invalid("data_base64", errors.INPUT_INVALID) from None
    return ok({"input_seq": _process(request).send_input(data)})


async def close_stdin(request: web.Request) -> web.Response:
    _process(request).close_stdin()
    return ok({"ok": True})


async def signal(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"signal"})
    _process(request).deliver_signal(body.string("signal", required=True) or "")
    return ok({"ok": True})


async def resize_pty(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"rows", "cols"})
    rows = body.integer("rows", low=1, high=1000)
    cols = body.integer("cols", low=1, high=1000)
    process = _process(request)
    if process.terminal is None:
        raise ApiError(409, errors.PROCESS_NOT_PTY)
    process.terminal.rows = rows if rows is not None else process.terminal.rows
    process.terminal.cols = cols if cols is not None else process.terminal.cols
    return ok({"ok": True})


def _terminal_size(pty: dict[str, Any]) -> tuple[int, int]:
    """A PTY's ``{rows, cols}`` (each 1..1000; 24x80 when left out)."""
    size = []
    for name, default in (("rows", 24), ("cols", 80)):
        value = pty.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
            raise ApiError.invalid(f"pty.{name}", "must be an integer from 1 to 1000")
        size.append(value)
    return size[0], size[1]


async def wait(request: web.Request) -> web.Response:
    process = _process(request)
    scope = request.query.get("scope") or "leader"
    if scope not in ("leader", "tree"):
        raise ApiError.invalid("scope", "must be leader or tree")
    config = fake_of(request).config
    # 0 means "unset", as zero values do elsewhere in the API (limit=0, auto-pause 0): the
    # server's maximum applies rather than an unbounded wait.
    timeout_ms = (
        query_int(request.query, "timeout_ms", config.max_wait_ms, high=config.max_wait_ms)
        or config.max_wait_ms
    )
    await process.wait(timeout_ms / 1000 if timeout_ms else None)
    return ok(process.view())


async def delete_process(request: web.Request) -> web.Response:
    process = _process(request)
    query_int(request.query, "grace_ms", 0)
    # A process_survives fault: the tree ignores the signal, so tree_exited stays false.
    if "process_survives" not in scope().directives:
        process.terminate("SIGTERM")
    return ok(process.view())


PROCESS = SANDBOX + "/processes/{pid}"

ROUTES: Routes = (
    ("POST", SANDBOX + "/exec", exec_command),
    ("PUT", SANDBOX + "/files", put_file),
    ("GET", SANDBOX + "/files", get_file),
    ("POST", SANDBOX + "/processes", create_process),
    ("GET", SANDBOX + "/processes", list_processes),
    ("GET", PROCESS, get_process),
    ("DELETE", PROCESS, delete_process),
    ("GET", PROCESS + "/connect", connect),
    ("POST", PROCESS + "/input", send_input),
    ("POST", PROCESS + "/stdin/close", close_stdin),
    ("POST", PROCESS + "/signal", signal),
    ("POST", PROCESS + "/resize", resize_pty),
    ("GET", PROCESS + "/wait", wait),
)
