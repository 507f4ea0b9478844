"""Runtime operations inside a running sandbox: exec, files and managed processes.

Every operation first checks that the sandbox is running (409 otherwise) — the rule a lease
provider must never break is exactly that one.

Example::

    runtime = Runtime(clock, ids, CommandRegistry(), config)
    outcome = await runtime.exec(sandbox, ExecSpec(cmd="/bin/echo", args=["hi"]))
    outcome["result"]["stdout"]   # 'hi\\n'
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_server import errors
from fake_server.clock import Clock
from fake_server.config import ServerConfig
from fake_server.errors import ApiError
from fake_server.filesystem import FileSystem, FsError, Mount
from fake_server.identifiers import Identifiers
from fake_server.lifecycle import Lifecycle
from fake_server.namespace import Namespace
from fake_server.network import Network
from fake_server.processes import ManagedProcess, OutputFrame
from fake_server.registered_commands import CommandRegistry
from fake_server.sandbox import Sandbox
from fake_server.shell import Invocation, Shell, ShellLimits, Terminal
from fake_server.streams import CappedSink, StdinReader
from fake_server.validation import path_problem

__all__ = ["ExecSpec", "ProcessSpec", "Runtime"]


@dataclass(slots=True)
class ExecSpec:
    """An exec request, already type-checked."""

    cmd: str
    args: list[str] = field(default_factory=list)
    stdin: str = ""
    env: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ProcessSpec:
    """A managed-process request, already type-checked."""

    cmd: str | None = None
    args: list[str] = field(default_factory=list)
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: ``(rows, cols)`` of a PTY process; None for a pipe process.
    pty: tuple[int, int] | None = None


class Runtime:
    """Exec, files and processes over the sandbox shell."""

    def __init__(
        self,
        clock: Clock,
        ids: Identifiers,
        commands: CommandRegistry,
        config: ServerConfig,
        *,
        on_process_event: Callable[[ManagedProcess, Sandbox, str], None] = lambda p, s, e: None,
        on_activity: Callable[[Sandbox], None] = lambda sandbox: None,
        mounts_of: Callable[[Sandbox], Sequence[Mount]] = lambda sandbox: (),
    ) -> None:
        self.clock = clock
        self.ids = ids
        self.commands = commands
        #: The simulated outside world ``curl``/``wget`` reach (responders by host).
        self.network = Network()
        limits = ShellLimits(
            max_commands=config.max_commands,
            max_seconds=config.max_command_seconds,
        )
        self.shell = Shell(commands, clock=clock, limits=limits, network=self.network)
        #: Buffered execs in flight, by sandbox id (stopped when their sandbox goes away).
        self._execs: dict[str, set[asyncio.Task[int]]] = {}
        self._stopped: set[asyncio.Task[int]] = set()
        #: ``/exec?stream=true`` commands in flight, by sandbox id (unlisted processes).
        self._streams: dict[str, set[ManagedProcess]] = {}
        self.config = config
        self._on_process_event = on_process_event
        self._on_activity = on_activity
        #: What is mounted in a sandbox (its attached disks): commands and files see it.
        self._mounts_of = mounts_of

    # -- exec -------------------------------------------------------------------------------

    def _environment(self, sandbox: Sandbox, overrides: dict[str, str]) -> dict[str, str]:
        # Only keys declared at create may be overridden (contract §5), an image's ENV no more
        # than any other: its variables are the image's, not the sandbox's declared ones.
        if not overrides.keys() <= sandbox.envs.keys():
            raise ApiError.invalid("env", errors.ENV_UNDECLARED)
        return sandbox.image.environment(sandbox.envs, overrides)

    async def exec(self, sandbox: Sandbox, spec: ExecSpec) -> dict[str, Any]:
        """Run a command to completion; the buffered ``/exec`` answer.

        Output beyond ``config.exec_output_cap_bytes`` stops the command: the answer keeps
        what fit and says so in ``result.error``.
        """
        Lifecycle.check_running(sandbox)
        env = self._environment(sandbox, spec.env)
        self._on_activity(sandbox)
        cap = self.config.exec_output_cap_bytes
        started = self.clock.now()
        result: dict[str, Any] = {}
        # A probe run before is answered from what it answered, before anything a run needs
        # is built; when that fits the cap (stdout and stderr share it), as it is.
        known = self.shell.known_result(spec.cmd, spec.args, env)
        if known is not None and len(known.stdout) + len(known.stderr) <= cap:
            return self._answer(known.stdout, known.stderr, known.status, result, started)
        command: asyncio.Future[int] | None = None

        def stop_command() -> None:  # the cap stops a command that runs (a replay just ends)
            if command is not None:
                command.cancel()

        stdout = CappedSink(cap, on_overflow=stop_command)
        stderr = stdout.sibling()
        if known is not None:  # past the cap: cut as a run's output would be
            known.replay(stdout, stderr)
            result["error"] = errors.EXEC_OUTPUT_TOO_LARGE.format(cap=cap)
            return self._answer(stdout.getvalue(), stderr.getvalue(), 1, result, started)
        invocation = Invocation(
            spec.cmd,
            spec.args,
            fs=sandbox.fs,
            cwd=sandbox.image.workdir,
            env=env,
            stdin=StdinReader(spec.stdin.encode()),
            stdout=stdout,
            stderr=stderr,
            egress=sandbox.egress,
            hostname=sandbox.name,
            mounts=self._mounts_of(sandbox),
        )
        command = asyncio.ensure_future(self.shell.run(invocation))
        running = self._execs.setdefault(sandbox.id, set())
        running.add(command)
        try:
            code = await asyncio.shield(command)
        except asyncio.CancelledError:
            if command in self._stopped:
                code = 137  # killed with the sandbox, as SIGKILL would
                result["error"] = errors.EXEC_SANDBOX_GONE
            elif stdout.overflowed:
                code = 1
                result["error"] = errors.EXEC_OUTPUT_TOO_LARGE.format(cap=cap)
            else:
                command.cancel()  # the client went away: so does the command
                raise
        finally:
            running.discard(command)
            self._stopped.discard(command)
            if not running:
                self._execs.pop(sandbox.id, None)
        return self._answer(stdout.getvalue(), stderr.getvalue(), code, result, started)

    def _answer(
        self, stdout: bytes, stderr: bytes, code: int, extra: dict[str, Any], started: float
    ) -> dict[str, Any]:
        result = {
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": stderr.decode("utf-8", "replace"),
            "exit_code": code,
            **extra,
        }
        return {"result": result, "exec_ms": round((self.clock.now() - started) * 1000, 3)}

    async def exec_stream(
        self, sandbox: Sandbox, spec: ExecSpec
    ) -> AsyncIterator[dict[str, Any] | list[dict[str, Any]]]:
        """Run a command and yield ``/exec?stream=true`` frames: one key per frame, heartbeats
        while silent, and a final ``{"exit_code": N}``; output frames at hand together come as
        a list, which the stream writes in one go.

        The command runs as an unlisted managed process, so streaming shares the process
        machinery (ordering, heartbeats on the clock) instead of copying it.
        """
        Lifecycle.check_running(sandbox)
        env = self._environment(sandbox, spec.env)
        self._on_activity(sandbox)
        process = self._new_process(
            spec.cmd, spec.args, sandbox.image.workdir, output_cap=self.config.exec_output_cap_bytes
        )
        process.stdin.feed(spec.stdin.encode())
        process.stdin.close()
        streams = self._streams.setdefault(sandbox.id, set())
        streams.add(process)

        def forget(_: ManagedProcess) -> None:
            streams.discard(process)
            if not streams and self._streams.get(sandbox.id) is streams:
                del self._streams[sandbox.id]

        process.on_exit = forget
        # Followed from before it starts: however much the command writes before the stream's
        # first read, the follower finds out (an evicted cursor raised out of the stream).
        followed = process.connect_batches(after=0, heartbeat_s=self.config.heartbeat_s)
        process.start(self.shell, self._invocation(sandbox, process, env, live_stdin=False))
        return self._exec_frames(process, followed)

    def _invocation(
        self, sandbox: Sandbox, process: ManagedProcess, env: dict[str, str], *, live_stdin: bool
    ) -> Invocation:
        return Invocation(
            process.cmd,
            process.args,
            fs=sandbox.fs,
            cwd=process.cwd,
            env=env,
            stdin=process.stdin,
            live_stdin=live_stdin,
            terminal=process.terminal,
            egress=sandbox.egress,
            hostname=sandbox.name,
            mounts=self._mounts_of(sandbox),
        )

    async def _exec_frames(
        self, process: ManagedProcess, followed: AsyncIterator[list[OutputFrame] | dict[str, Any]]
    ) -> AsyncIterator[dict[str, Any] | list[dict[str, Any]]]:
        decoders = {
            name: codecs.getincrementaldecoder("utf-8")("replace") for name in ("stdout", "stderr")
        }
        try:
            async for frame in followed:
                if isinstance(frame, list):
                    # Together, as the process's follower takes them: a write per frame held
                    # the stream to 0.85x a connect follow's pace (0.98x together).
                    batch = []
                    for data in frame:
                        text = decoders[data.stream].decode(data.data)
                        if text:
                            batch.append({data.stream: text})
                    if batch:
                        yield batch
                    continue
                kind = frame["type"]
                if kind == "heartbeat":
                    yield {"hb": True}
                elif kind == "error":
                    # The client fell more than the cap behind: output is lost, so the stream
                    # says so (a stream that just ended looked complete) and ends as every
                    # exec stream does, with the status of the command (stopped if it runs).
                    process.terminate("SIGKILL")
                    yield {"error": errors.EXEC_STREAM_OVERRUN.format(cap=process.output.cap)}
                    yield {"exit_code": _exec_status(process.exit_code)}
                elif kind == "exit":
                    for name, decoder in decoders.items():
                        tail = decoder.decode(b"", final=True)
                        if tail:
                            yield {name: tail}
                    yield {"exit_code": _exec_status(frame["exit_code"])}
        finally:
            # A client that disconnects mid-stream ends the command, as the real agent does.
            process.terminate("SIGKILL")

    # -- files ------------------------------------------------------------------------------------

    @staticmethod
    def _path(raw: str | None) -> str:
        if not raw:
            raise ApiError.invalid("path", errors.PATH_REQUIRED)
        problem = path_problem(raw)
        if problem is not None:
            raise ApiError.invalid("path", problem)
        if not raw.startswith("/"):
            raise ApiError.invalid("path", errors.PATH_NOT_ABSOLUTE)
        if raw.endswith("/"):
            # Normalised away, it named a file: an upload to /dir/ wrote a file /dir.
            raise ApiError.invalid("path", errors.PATH_NAMES_DIRECTORY)
        # `..` resolves as the sandbox's kernel would: never above its own root.
        return FileSystem.normalize(raw)

    def check_upload(self, sandbox: Sandbox, raw_path: str | None, size: int | None) -> str:
        """Refuse an upload before its body is read: wrong state, bad path, or too large."""
        Lifecycle.check_running(sandbox)
        path = self._path(raw_path)
        if size is not None and size > self.config.max_file_bytes:
            raise ApiError(413, errors.FILE_TOO_LARGE)
        return path

    def _files(self, sandbox: Sandbox) -> Namespace:
        """The sandbox's files as its commands see them: its disks below their mounts, the
        image's programs, links followed."""
        return Namespace(sandbox.fs, self._mounts_of(sandbox))

    def upload(self, sandbox: Sandbox, raw_path: str | None, data: bytes) -> dict[str, Any]:
        path = self.check_upload(sandbox, raw_path, len(data))
        try:
            self._files(sandbox).write(path, data, make_parents=True)
        except FsError as exc:
            raise _file_error(exc) from None
        return {"path": path, "bytes": len(data)}

    def download(self, sandbox: Sandbox, raw_path: str | None) -> bytes:
        Lifecycle.check_running(sandbox)
        path = self._path(raw_path)
        try:
            return self._files(sandbox).read(path)
        except FsError as exc:
            raise _file_error(exc) from None

    # -- managed processes --------------------------------------------------------------------

    def _new_process(
        self,
        cmd: str,
        args: list[str],
        cwd: str,
        *,
        output_cap: int,
        terminal: Terminal | None = None,
    ) -> ManagedProcess:
        return ManagedProcess(
            process_id=self.ids.process_id(),
            pid=self.ids.pid(),
            cmd=cmd,
            args=args,
            cwd=cwd,
            clock=self.clock,
            created_at=self.clock.wall(),
            output_cap=output_cap,
            stdin_cap=self.config.stdin_cap_bytes,
            terminal=terminal,
        )

    def start_process(self, sandbox: Sandbox, spec: ProcessSpec) -> ManagedProcess:
        Lifecycle.check_running(sandbox)
        env = self._environment(sandbox, spec.env)
        if spec.cwd and not spec.cwd.startswith("/"):  # else "no such directory", misleading
            raise ApiError.invalid("cwd", errors.CWD_NOT_ABSOLUTE)
        cwd = FileSystem.normalize(spec.cwd or sandbox.image.workdir)
        if not self._files(sandbox).is_dir(cwd):
            raise ApiError.invalid("cwd", "no such directory")
        cmd = spec.cmd or "/bin/bash"
        self._on_activity(sandbox)
        process = self._new_process(
            cmd,
            spec.args,
            cwd,
            output_cap=self.config.output_cap_bytes,
            terminal=Terminal(*spec.pty) if spec.pty else None,
        )
        process.on_exit = lambda finished: self._on_process_event(finished, sandbox, "exit")
        sandbox.processes[process.process_id] = process
        process.start(self.shell, self._invocation(sandbox, process, env, live_stdin=True))
        self._on_process_event(process, sandbox, "start")
        return process

    @staticmethod
    def process(sandbox: Sandbox, process_id: str) -> ManagedProcess:
        process = sandbox.processes.get(process_id) if sandbox.has_processes else None
        if process is None:
            raise ApiError(404, errors.PROCESS_NOT_FOUND)
        return process

    def stop_all(self, sandbox: Sandbox) -> None:
        """Kill every command of a sandbox that is going away: processes and execs."""
        if sandbox.has_processes:
            for process in sandbox.processes.values():
                process.terminate("SIGKILL")
        for stream in list(self._streams.get(sandbox.id, ())):
            stream.terminate("SIGKILL")
        for command in self._execs.get(sandbox.id, ()):
            self._stopped.add(command)
            command.cancel()

    async def wait_stopped(self) -> None:
        """Wait until every command stopped so far has really ended (an interpreter that is
        still stopping when its event loop closes would call back into a closed loop)."""
        await self.shell.wait_idle()


def _exec_status(exit_code: int | None) -> int:
    """An exec stream's exit status: a command ended by a signal has none, and reads as
    killed (137, as SIGKILL would give)."""
    return exit_code if exit_code is not None else 137


def _file_error(exc: FsError) -> ApiError:
    if exc.errno_name == "ENOENT":
        return ApiError(404, errors.FILE_NOT_FOUND)
    if exc.errno_name == "EISDIR":
        return ApiError(400, errors.FILE_IS_DIRECTORY)
    if exc.errno_name == "EFBIG":
        return ApiError(413, errors.FILE_TOO_LARGE)
    if exc.errno_name == "EROFS":
        return ApiError(403, errors.FILE_READ_ONLY)
    return ApiError.invalid("path", str(exc))
