"""Managed-process routes: start, list, read, follow (``connect``), write, signal, resize,
wait and terminate."""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    BASE64,
    BODY_ERRORS,
    ENV_OVERRIDE,
    NDJSON,
    PROCESSES,
    Schema,
    array,
    const,
    enum,
    env_map,
    flag,
    integer,
    nullable,
    obj,
    ok_response,
    operation,
    query,
    ref,
    string,
)
from fake_server.errors import ApiError
from fake_server.lifecycle import Lifecycle
from fake_server.processes import ALLOWED_SIGNALS, OutputEvicted, OutputFrame
from fake_server.routes.common import (
    SANDBOX,
    Route,
    Routes,
    fake_of,
    ok,
    read_body,
    read_bytes,
    sandbox_of,
    scope,
    unless_client_leaves,
)
from fake_server.routes.ndjson import stream_ndjson
from fake_server.runtime import ProcessSpec, Runtime
from fake_server.validation import BodySchema, query_int


def _cmd_or_pty(schema: Schema) -> Schema:
    """The process-create body: a non-empty ``cmd``, or a ``pty`` (which starts a shell)."""
    return schema | {
        "anyOf": [
            {"required": ["cmd"], "properties": {"cmd": string(minLength=1)}},
            {"required": ["pty"], "properties": {"pty": {"type": "object"}}},
        ]
    }


CREATE = BodySchema(
    _cmd_or_pty(
        obj(
            {},
            {
                "cmd": nullable(string(description="Required unless `pty` is set.")),
                "args": nullable(array(string())),
                "cwd": nullable(string(description="An existing directory's absolute path.")),
                "env": nullable(env_map(ENV_OVERRIDE)),
                "pty": nullable(obj({}, {"rows": integer(), "cols": integer()}, closed=False)),
            },
            ignored=("timeout_ms",),
        )
    ),
    required=True,
)


async def create_process(request: web.Request) -> web.Response:
    body = await read_body(request, CREATE)
    pty = body.data.get("pty")
    size = _terminal_size(pty) if pty is not None else None
    spec = ProcessSpec(
        cmd=body.string("cmd") or None,
        args=body.string_list("args") or [],
        cwd=body.string("cwd") or None,
        env=body.string_map("env") or {},
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
    fake = fake_of(request)
    frames: AsyncIterator[list[OutputFrame] | dict[str, Any]]
    try:
        # The cursor is checked before anything is sent (the answer may be a 410); then the
        # headers go out at once: a client that waits for its stream to open before it feeds
        # the process (a start-gate file, stdin) must not wait for the first frame.
        frames = process.connect_batches(after=after, heartbeat_s=fake.config.heartbeat_s)
    except OutputEvicted as evicted:
        if fake.config.eviction == "http":
            raise ApiError(
                410,
                errors.OUTPUT_EVICTED,
                data={"oldest_available_seq": evicted.oldest_available_seq},
            ) from None
        frames = _evicted(evicted.oldest_available_seq)
    return await stream_ndjson(request, frames)


async def _evicted(oldest_available_seq: int) -> AsyncIterator[dict[str, Any]]:
    """The in-stream form of an evicted cursor: one error frame."""
    yield {
        "type": "error",
        "error": errors.OUTPUT_EVICTED,
        "oldest_available_seq": oldest_available_seq,
    }


INPUT = BodySchema(obj({"data_base64": BASE64}), required=True)
#: Room around the encoded input in an ``/input`` body: ``{"data_base64": "…"}`` and spacing.
_INPUT_FRAMING = 1 << 10


async def send_input(request: web.Request) -> web.Response:
    # The body cap counts decoded input: PC-N writes up to 256 KiB per call, which base64
    # makes a 342 KiB body (a 256 KiB cap on the body refused its every full-size write).
    cap = fake_of(request).config.max_json_bytes
    raw = await read_bytes(request, 4 * -(-cap // 3) + _INPUT_FRAMING)
    encoded = INPUT.parse(raw).string("data_base64") or ""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError.invalid("data_base64", errors.INPUT_INVALID) from None
    if len(data) > cap:
        raise ApiError(413, errors.INPUT_TOO_LARGE.format(cap=cap))
    return ok({"input_seq": _process(request).send_input(data)})


async def close_stdin(request: web.Request) -> web.Response:
    _process(request).close_stdin()
    return ok({"ok": True})


SIGNAL = BodySchema(obj({"signal": enum(ALLOWED_SIGNALS)}), required=True)


async def signal(request: web.Request) -> web.Response:
    body = await read_body(request, SIGNAL)
    _process(request).deliver_signal(body.string("signal") or "")
    return ok({"ok": True})


_SIDE = nullable(integer(minimum=1, maximum=1000))
RESIZE = BodySchema(obj({}, {"rows": _SIDE, "cols": _SIDE}), required=True)


async def resize_pty(request: web.Request) -> web.Response:
    body = await read_body(request, RESIZE)
    rows = body.integer("rows")
    cols = body.integer("cols")
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
    # A long-poll whose client gave up ends too: it would hold its task and timer for up to
    # max_wait_ms (on a manual clock, until the process exits), out of the journal meanwhile.
    await unless_client_leaves(request, process.wait(timeout_ms / 1000 if timeout_ms else None))
    return ok(process.view())


async def delete_process(request: web.Request) -> web.Response:
    process = _process(request)
    query_int(request.query, "grace_ms", 0)
    # A process_survives fault: the tree ignores the signal, so tree_exited stays false.
    if "process_survives" not in scope().directives:
        process.terminate("SIGTERM")
    return ok(process.view())


PROCESSES_OF = SANDBOX + "/processes"
PROCESS = PROCESSES_OF + "/{pid}"
_PROCESS = ref("ManagedProcess")
#: What a route on a process may answer besides success (the sandbox must be running).
_ERRORS = (404, 409)

ROUTES: Routes = (
    Route(
        "POST",
        PROCESSES_OF,
        create_process,
        operation(
            "createProcess",
            "Start a managed process",
            tag=PROCESSES,
            ok=ok_response("The process.", _PROCESS, links="process"),
            errors=(*BODY_ERRORS, *_ERRORS),
            body=CREATE,
        ),
    ),
    Route(
        "GET",
        PROCESSES_OF,
        list_processes,
        operation(
            "listProcesses",
            "Managed processes (exited ones included)",
            tag=PROCESSES,
            ok=ok_response("The processes.", obj({"processes": array(_PROCESS)})),
            errors=_ERRORS,
        ),
    ),
    Route(
        "GET",
        PROCESS,
        get_process,
        operation(
            "getProcess",
            "A managed process",
            tag=PROCESSES,
            ok=ok_response("The process.", _PROCESS),
            errors=_ERRORS,
        ),
    ),
    Route(
        "DELETE",
        PROCESS,
        delete_process,
        operation(
            "deleteProcess",
            "Terminate the process tree",
            tag=PROCESSES,
            parameters=[query("grace_ms", integer(minimum=0), "Grace before the kill.")],
            ok=ok_response("The process, `tree_exited: true`.", _PROCESS),
            errors=(400, *_ERRORS),
        ),
    ),
    Route(
        "GET",
        PROCESS + "/connect",
        connect,
        operation(
            "connectProcess",
            "Replay then follow output (NDJSON)",
            tag=PROCESSES,
            description="Frames with `seq > after`, then live output with heartbeats, then "
            "the exit frame. A cursor older than the retained output answers 410 (or an "
            "in-stream `output_offset_expired` frame, as configured).",
            parameters=[query("after", integer(minimum=0), "Last `seq` already seen.")],
            ok=ok_response(
                "NDJSON frames (`ProcessFrame`, one per line).",
                content={NDJSON: {"schema": ref("ProcessFrame")}},
            ),
            errors=(400, *_ERRORS, 410),
        ),
    ),
    Route(
        "POST",
        PROCESS + "/input",
        send_input,
        operation(
            "sendInput",
            "Write to the process's stdin",
            tag=PROCESSES,
            ok=ok_response("The input's sequence number.", obj({"input_seq": integer()})),
            errors=(*BODY_ERRORS, *_ERRORS),
            body=INPUT,
        ),
    ),
    Route(
        "POST",
        PROCESS + "/stdin/close",
        close_stdin,
        operation(
            "closeStdin",
            "Close stdin (pipe processes only)",
            tag=PROCESSES,
            ok=ok_response("Closed.", flag("ok")),
            errors=_ERRORS,
        ),
    ),
    Route(
        "POST",
        PROCESS + "/signal",
        signal,
        operation(
            "signalProcess",
            "Send a signal to the process group",
            tag=PROCESSES,
            ok=ok_response("Delivered.", flag("ok")),
            errors=(*BODY_ERRORS, *_ERRORS),
            body=SIGNAL,
        ),
    ),
    Route(
        "POST",
        PROCESS + "/resize",
        resize_pty,
        operation(
            "resizePty",
            "Resize the terminal (pty processes only)",
            tag=PROCESSES,
            ok=ok_response("Resized.", flag("ok")),
            errors=(*BODY_ERRORS, *_ERRORS),
            body=RESIZE,
        ),
    ),
    Route(
        "GET",
        PROCESS + "/wait",
        wait,
        operation(
            "waitProcess",
            "Long-poll until the process exits",
            tag=PROCESSES,
            parameters=[
                query(
                    "scope",
                    {"anyOf": [enum(["leader", "tree"]), const("")]},
                    "What must have exited (empty: leader).",
                ),
                query(
                    "timeout_ms",
                    integer(minimum=0),
                    "How long to wait (capped by the fake's maximum, which is also the "
                    "default and what 0 means).",
                ),
            ],
            ok=ok_response("The exited process.", _PROCESS),
            errors=(400, *_ERRORS, 408),
        ),
    ),
)
