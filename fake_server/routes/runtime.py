"""Runtime routes: exec (buffered and streamed) and files."""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    ABSOLUTE_PATH,
    BODY_ERRORS,
    ENV_OVERRIDE,
    JSON,
    NDJSON,
    OCTET_STREAM,
    RUNTIME,
    array,
    boolean,
    env_map,
    integer,
    links,
    nullable,
    number,
    obj,
    ok_response,
    operation,
    query,
    ref,
    string,
    success,
)
from fake_server.errors import ApiError
from fake_server.http_protocol import end_with_client
from fake_server.routes.common import (
    SANDBOX,
    Route,
    Routes,
    fake_of,
    ok,
    read_body,
    read_bytes,
    sandbox_of,
)
from fake_server.routes.ndjson import stream_ndjson
from fake_server.runtime import ExecSpec
from fake_server.validation import BodySchema

EXEC = BodySchema(
    obj(
        {"cmd": string(minLength=1)},
        {
            "args": nullable(array(string())),
            "stdin": nullable(string()),
            "env": nullable(env_map(ENV_OVERRIDE)),
            "stream": nullable(boolean()),
        },
        ignored=("timeout_ms", "timeout", "cwd"),
    ),
    required=True,
)


def _streaming_requested(request: web.Request, body_stream: bool | None) -> bool:
    return request.query.get("stream", "").lower() in ("true", "1") or bool(body_stream)


async def exec_command(request: web.Request) -> web.StreamResponse:
    body = await read_body(request, EXEC)
    spec = ExecSpec(
        cmd=body.string("cmd") or "",
        args=body.string_list("args") or [],
        stdin=body.string("stdin") or "",
        env=body.string_map("env") or {},
    )
    if not spec.cmd:
        raise ApiError.invalid("cmd", errors.CMD_REQUIRED)
    runtime = fake_of(request).runtime
    sandbox = sandbox_of(request)
    if _streaming_requested(request, body.boolean("stream")):
        frames = await runtime.exec_stream(sandbox, spec)
        return await stream_ndjson(request, frames, exec_frames=True)
    # A client that gives up on its answer takes its command with it (the real agent's streams
    # do the same), rather than leave it running for nobody.
    end_with_client(request, True)
    try:
        return ok(await runtime.exec(sandbox, spec))
    finally:
        end_with_client(request, False)


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


#: What a route that needs a running sandbox may answer besides success.
_RUNTIME_ERRORS = (404, 409)
_FILE_PATH = query("path", ABSOLUTE_PATH, "Absolute path in the sandbox.", required=True)
_BYTES = {OCTET_STREAM: {"schema": string(format="binary")}}

ROUTES: Routes = (
    Route(
        "POST",
        SANDBOX + "/exec",
        exec_command,
        operation(
            "execCommand",
            "Run a command (buffered, or streamed as NDJSON)",
            tag=RUNTIME,
            description="Streaming when `?stream=true` or the body says `stream: true`.",
            parameters=[query("stream", boolean(), "Stream NDJSON frames instead of one answer.")],
            ok=ok_response(
                "The result, or NDJSON frames (`ExecFrame`, one per line).",
                content={
                    JSON: {
                        "schema": success(
                            obj(
                                {
                                    "result": obj(
                                        {
                                            "stdout": string(),
                                            "stderr": string(),
                                            "exit_code": integer(),
                                        },
                                        {"error": string()},
                                    ),
                                    "exec_ms": number(minimum=0),
                                }
                            )
                        )
                    },
                    NDJSON: {"schema": ref("ExecFrame")},
                },
            ),
            errors=(*BODY_ERRORS, *_RUNTIME_ERRORS),
            body=EXEC,
        ),
    ),
    Route(
        "PUT",
        SANDBOX + "/files",
        put_file,
        operation(
            "uploadFile",
            "Upload a file (parents are created)",
            tag=RUNTIME,
            parameters=[_FILE_PATH],
            ok=ok_response(
                "Written.",
                obj({"path": string(), "bytes": integer(minimum=0)}),
                links=links(
                    {"downloadFile": {"id": "$request.path.id", "path": "$request.query.path"}}
                ),
            ),
            errors=(*BODY_ERRORS, 403, *_RUNTIME_ERRORS),
            body={"required": False, "content": _BYTES},
        ),
    ),
    Route(
        "GET",
        SANDBOX + "/files",
        get_file,
        operation(
            "downloadFile",
            "Download a file (raw bytes, not enveloped)",
            tag=RUNTIME,
            parameters=[_FILE_PATH],
            ok=ok_response("The bytes.", content=_BYTES),
            errors=(400, *_RUNTIME_ERRORS),
        ),
    ),
)
