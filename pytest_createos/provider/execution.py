"""Execution and streams: one command run as a managed process in a lease's sandbox.

The command is validated before anything is sent and built into a ``/bin/bash -lc`` script
with every word single-quoted and ``env`` exported inside it; ``stdin`` is staged as a file
under :data:`STDIN_PATH_PREFIX` and removed afterwards. The process's NDJSON output stream is
followed from a cursor, decoded incrementally and reconnected at most :data:`MAX_RECONNECTS`
times. A timeout, an untrustworthy stream or a cancellation terminates the process tree (with
:data:`TERMINATE_GRACE_MS` of grace); when that termination, or the creation of the process
itself, cannot be confirmed, the lease is marked unconfirmed in the cleanup guard.

Everything but the constants is internal: ``LeaseProvider.execute`` is the way in.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import contextlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import aiohttp

from .._client import CreateosClient, valid_id
from ..errors import (
    PROCESS_CREATION_UNCONFIRMED_MESSAGE,
    TERMINATION_UNCONFIRMED_MESSAGE,
    CleanupUnconfirmedError,
    CommandStreamError,
    CreateosApiError,
    CreateosTransportError,
    LeaseError,
)
from .config import _Settings
from .guard import LeaseKey, _CleanupGuard
from .results import ExecuteResult

__all__ = ["MAX_RECONNECTS", "STDIN_PATH_PREFIX", "TERMINATE_GRACE_MS"]

#: Per-command stdin is uploaded here (plus a UUID) and removed after the command.
STDIN_PATH_PREFIX: Final = "/tmp/paperclip-stdin-"
# Paperclip reconnects to a process output stream at most three times.
MAX_RECONNECTS: Final = 3
TERMINATE_GRACE_MS: Final = 1000

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SIGNAL_RE = re.compile(r"^SIG[A-Z0-9]+$")
# One stream line larger than this is treated as malformed rather than buffered forever.
_MAX_FRAME_BYTES = 8 * 1024 * 1024


# --------------------------------------------------------------------------------------------
# Shell quoting


def _shell_quote(value: str) -> str:
    # Always single-quote, even "safe" words: the script is data, not something to prettify.
    return "'" + value.replace("'", "'\\''") + "'"


def _validate_command(
    command: str, args: Sequence[str], cwd: str | None, env: Mapping[str, str] | None
) -> None:
    if not isinstance(command, str) or not command:
        raise LeaseError("CreateOS command must be a non-empty string")
    if isinstance(args, str):
        # A bare string would be split into characters; that is never what the caller meant.
        raise LeaseError("CreateOS command args must be a sequence of strings")
    if any(not isinstance(arg, str) for arg in args):
        raise LeaseError("CreateOS command args must be a sequence of strings")
    if any("\0" in text for text in (command, *args)):
        raise LeaseError("CreateOS command and args must not contain NUL characters")
    if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
        raise LeaseError("CreateOS command cwd must be a non-empty string without NUL")
    for name, value in (env or {}).items():
        if not isinstance(name, str) or _ENV_NAME_RE.fullmatch(name) is None:
            raise LeaseError("CreateOS command env names must match ^[A-Za-z_][A-Za-z0-9_]*$")
        if not isinstance(value, str) or "\0" in value:
            raise LeaseError("CreateOS command env values must be strings without NUL")


def _build_script(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    stdin_path: str | None,
) -> str:
    # Env goes into the script, never the request: the API refuses env keys that were not
    # declared at sandbox creation. ``exec`` makes the command the process leader, so signals
    # and exit status are its own.
    parts = [f"export {name}={_shell_quote(value)};" for name, value in (env or {}).items()]
    line = "exec " + " ".join(_shell_quote(word) for word in (command, *args))
    if stdin_path is not None:
        line += " < " + _shell_quote(stdin_path)
    parts.append(line)
    return " ".join(parts)


# --------------------------------------------------------------------------------------------
# Process output


class _Output:
    """Output gathered from a managed process, decoded incrementally per stream."""

    def __init__(self) -> None:
        self.cursor = 0
        self.reconnects = 0
        self._text: dict[str, list[str]] = {"stdout": [], "stderr": []}
        # Incremental decoders keep a UTF-8 character that is split across frames intact.
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")(errors="replace")
            for name in ("stdout", "stderr")
        }

    def add(self, stream: str, data: bytes) -> None:
        name = "stderr" if stream == "stderr" else "stdout"
        self._text[name].append(self._decoders[name].decode(data))

    def text(self, name: Literal["stdout", "stderr"]) -> str:
        tail = self._decoders[name].decode(b"", final=True)
        if tail:
            self._text[name].append(tail)
        return "".join(self._text[name])

    def handle(self, line: bytes) -> tuple[int | None, str | None] | None:
        """Apply one NDJSON line; return ``(exit_code, signal)`` on the exit frame."""
        line = line.strip()
        if not line:
            return None
        try:
            frame = json.loads(line)
        except ValueError:
            raise CommandStreamError("malformed output frame") from None
        if not isinstance(frame, dict):
            raise CommandStreamError("malformed output frame")
        kind = frame.get("type")
        if kind == "heartbeat":
            return None
        if kind == "data":
            self._data(frame)
            return None
        if kind == "exit":
            code = frame.get("exit_code")
            sig = frame.get("signal")
            code_ok = isinstance(code, int) and not isinstance(code, bool)
            sig_ok = isinstance(sig, str) and _SIGNAL_RE.fullmatch(sig) is not None
            if not code_ok and not sig_ok:
                raise CommandStreamError("exit status is missing")
            return (code if code_ok else None, sig if sig_ok else None)
        if kind == "error":
            if frame.get("error") == "output_offset_expired":
                raise CommandStreamError("output was evicted")
            raise CommandStreamError("output stream reported an error")
        raise CommandStreamError("malformed output frame")

    def _data(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise CommandStreamError("malformed output frame")
        if seq <= self.cursor:
            return  # a replayed frame we already have
        if seq != self.cursor + 1:
            raise CommandStreamError("output sequence gap")
        stream = frame.get("stream")
        payload = frame.get("data_base64")
        if stream not in ("stdout", "stderr", "pty") or not isinstance(payload, str):
            raise CommandStreamError("malformed output frame")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise CommandStreamError("malformed output frame") from None
        self.add(stream, data)
        self.cursor = seq


class _StreamRetry(Exception):
    """The stream ended or failed transiently; reconnect from the cursor."""


# --------------------------------------------------------------------------------------------
# Running a process


class _Execution(_CleanupGuard):
    """Runs commands as managed processes; ``LeaseProvider.__init__`` sets the timings."""

    _terminate_timeout_s: float
    _reconnect_delay_s: float

    async def _execute(
        self,
        cfg: _Settings,
        key: LeaseKey,
        command: str,
        args: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str] | None,
        stdin: bytes | None,
        timeout_s: float,
    ) -> ExecuteResult:
        client = self._client(cfg)
        sandbox_id = key[1]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        stdin_path: str | None = None
        output = _Output()
        try:
            if stdin is not None:
                stdin_path = f"{STDIN_PATH_PREFIX}{uuid.uuid4()}"
                await client.json(
                    "PUT",
                    client.path("sandboxes", sandbox_id, "files"),
                    "upload stdin",
                    params={"path": stdin_path},
                    raw=stdin,
                    timeout_s=max(deadline - loop.time(), 0.001),
                )
            script = _build_script(command, args, env, stdin_path)
            pid = await self._create_process(client, key, script, cwd)
            try:
                exit_code, signal = await asyncio.wait_for(
                    self._follow(client, sandbox_id, pid, output),
                    timeout=max(deadline - loop.time(), 0.001),
                )
            except asyncio.TimeoutError:
                await self._terminate(client, key, pid, None)
                return ExecuteResult(
                    exit_code=None,
                    signal=None,
                    timed_out=True,
                    stdout=output.text("stdout"),
                    stderr=output.text("stderr"),
                    metadata=_exec_metadata(sandbox_id, pid, output),
                )
            except BaseException as exc:
                await self._terminate(client, key, pid, exc)
                raise
            return ExecuteResult(
                exit_code=exit_code,
                signal=signal,
                timed_out=False,
                stdout=output.text("stdout"),
                stderr=output.text("stderr"),
                metadata=_exec_metadata(sandbox_id, pid, output),
            )
        finally:
            if stdin_path is not None:
                await self._remove_stdin(client, sandbox_id, stdin_path)

    async def _create_process(
        self, client: CreateosClient, key: LeaseKey, script: str, cwd: str | None
    ) -> str:
        body: dict[str, Any] = {"cmd": "/bin/bash", "args": ["-lc", script]}
        if cwd is not None:
            body["cwd"] = cwd
        request = asyncio.ensure_future(
            client.json(
                "POST", client.path("sandboxes", key[1], "processes"), "create process", body=body
            )
        )
        detail: str
        cause: LeaseError
        try:
            reply = await asyncio.shield(request)
        except asyncio.CancelledError:
            await self._settle_cancelled_creation(client, key, request)
            raise
        except CreateosApiError as exc:
            if exc.status < 500:
                raise  # a 4xx answer means the process definitely was not created
            detail, cause = f"HTTP {exc.status}", exc
        except CreateosTransportError as exc:
            detail, cause = exc.kind, exc
        else:
            pid = reply.data.get("process_id") if reply.data is not None else None
            if isinstance(pid, str) and valid_id(pid):
                return pid
            detail = "invalid response"
            cause = CreateosTransportError("create process", detail)
        self._unconfirmed.add(key)
        raise CleanupUnconfirmedError(
            PROCESS_CREATION_UNCONFIRMED_MESSAGE.format(detail=detail), sandbox_id=key[1]
        ) from cause

    async def _settle_cancelled_creation(
        self, client: CreateosClient, key: LeaseKey, request: asyncio.Future[Any]
    ) -> None:
        # Cancelled while the create request was in flight. Let it finish (briefly) so that we
        # learn the process id and can terminate it; only if that fails is the state unknown.
        try:
            done, _ = await asyncio.wait({request}, timeout=self._terminate_timeout_s)
        except asyncio.CancelledError:
            request.cancel()
            self._unconfirmed.add(key)
            raise
        if not done:
            request.cancel()
            self._unconfirmed.add(key)
            return
        error = None if request.cancelled() else request.exception()
        if isinstance(error, CreateosApiError) and error.status < 500:
            return  # definitely not created
        pid = None
        if error is None and not request.cancelled():
            data = request.result().data
            pid = data.get("process_id") if data is not None else None
        if not (isinstance(pid, str) and valid_id(pid)):
            self._unconfirmed.add(key)
            return
        await self._terminate(client, key, pid, asyncio.CancelledError())

    async def _follow(
        self, client: CreateosClient, sandbox_id: str, pid: str, output: _Output
    ) -> tuple[int | None, str | None]:
        process_path = ("sandboxes", sandbox_id, "processes", pid)
        await client.json(
            "POST",
            client.path(*process_path, "stdin", "close"),
            "close stdin",
            body={},
            tolerate=frozenset({409}),
        )
        connect_path = client.path(*process_path, "connect")
        while True:
            try:
                async with client.stream(
                    connect_path, "connect process", params={"after": str(output.cursor)}
                ) as response:
                    if response.status == 410:
                        raise CommandStreamError("output was evicted")
                    if response.status == 429 or response.status >= 500:
                        raise _StreamRetry()
                    if response.status != 200:
                        raise CreateosApiError(response.status, "connect process")
                    exit_status = await _read_stream(response, output)
                    if exit_status is not None:
                        return exit_status
            except (_StreamRetry, CreateosTransportError):
                pass
            # Disconnects do not stop the process: reconnect from the cursor, a few times.
            output.reconnects += 1
            if output.reconnects > MAX_RECONNECTS:
                raise CommandStreamError("output stream ended without an exit status")
            await asyncio.sleep(self._reconnect_delay_s)

    async def _terminate(
        self,
        client: CreateosClient,
        key: LeaseKey,
        pid: str,
        cause: BaseException | None,
    ) -> None:
        """Terminate the process tree; mark the lease unconfirmed unless ``tree_exited``."""
        confirmed = False
        try:
            # A fresh deadline: the command's own deadline has usually passed by now.
            reply = await asyncio.wait_for(
                client.json(
                    "DELETE",
                    client.path("sandboxes", key[1], "processes", pid),
                    "terminate process",
                    params={"grace_ms": str(TERMINATE_GRACE_MS)},
                    tolerate=frozenset({404}),
                ),
                timeout=self._terminate_timeout_s,
            )
            confirmed = reply.status == 404 or (
                reply.data is not None and reply.data.get("tree_exited") is True
            )
        except (LeaseError, asyncio.TimeoutError):
            confirmed = False
        except asyncio.CancelledError:
            self._unconfirmed.add(key)
            raise
        if confirmed:
            return
        self._unconfirmed.add(key)
        if isinstance(cause, asyncio.CancelledError):
            return  # keep the cancellation; the unconfirmed state is recorded
        raise CleanupUnconfirmedError(TERMINATION_UNCONFIRMED_MESSAGE, sandbox_id=key[1]) from cause

    async def _remove_stdin(self, client: CreateosClient, sandbox_id: str, path: str) -> None:
        # Best effort: a leftover file under /tmp is harmless and must not mask the result.
        with contextlib.suppress(LeaseError, asyncio.TimeoutError):
            await asyncio.wait_for(
                client.json(
                    "POST",
                    client.path("sandboxes", sandbox_id, "exec"),
                    "remove stdin",
                    body={"cmd": "/bin/rm", "args": ["-f", "--", path]},
                    tolerate=frozenset({404, 409}),
                ),
                timeout=self._terminate_timeout_s,
            )


# --------------------------------------------------------------------------------------------
# Helpers


async def _read_stream(
    response: aiohttp.ClientResponse, output: _Output
) -> tuple[int | None, str | None] | None:
    # Split lines ourselves: aiohttp's readline caps line length below a large data frame.
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            exit_status = output.handle(line)
            if exit_status is not None:
                return exit_status
        if len(buffer) > _MAX_FRAME_BYTES:
            raise CommandStreamError("malformed output frame")
    if buffer.strip():
        return output.handle(buffer)
    return None


def _exec_metadata(sandbox_id: str, pid: str, output: _Output) -> dict[str, Any]:
    return {
        "sandboxId": sandbox_id,
        "processId": pid,
        "lastSeq": output.cursor,
        "reconnects": output.reconnects,
    }
