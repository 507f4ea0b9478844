"""The sandbox shell: real bash, run by the sandboxed interpreter bashkit, over the sandbox's
in-memory filesystem. Nothing here runs on the host or reaches the network.

Each command a client starts (an ``/exec`` or a managed process) gets its own interpreter with
the sandbox's :class:`~fake_server.filesystem.FileSystem` mounted at ``/``, so concurrent
processes share files the way processes on one machine do, and no shell state leaks from one
command into the next. bashkit brings the language (quoting, expansions, ``$(...)``, ``case``,
loops, functions, here-documents, ``&``/``wait``...) and ~160 commands; the fake adds the ones
that must follow *its* world (see :mod:`fake_server.sandbox_commands`): ``sleep``, ``timeout``
and ``date`` on the fake's clock, ``stty``/``tput`` for PTYs, ``uname``, ``curl``/``wget``
against responders a test registers, a managed process's live stdin for ``read``, ``cat`` and
the other commands that read stdin (:mod:`fake_server.live_input`), and commands users
register (:class:`~fake_server.registered_commands.CommandRegistry`).

Example:
    >>> import asyncio
    >>> from fake_server.clock import RealClock
    >>> fs, out = FileSystem(), BufferSink()
    >>> shell = Shell(CommandRegistry(), clock=RealClock())
    >>> run = Invocation("bash", ["-c", "cd /tmp && echo hi > x; cat x"], fs=fs, stdout=out)
    >>> asyncio.run(shell.run(run))
    0
    >>> out.getvalue()
    b'hi\\n'
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import posixpath
import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import bashkit

from fake_server import interpreter_threads, live_input
from fake_server.bash_arguments import BashArguments
from fake_server.callbacks import lazy
from fake_server.clock import Clock
from fake_server.filesystem import PROGRAM_DIRS, FileSystem, Mount, programs
from fake_server.live_introspection import Introspection
from fake_server.network import Network
from fake_server.registered_commands import CommandRegistry
from fake_server.repl import repl
from fake_server.result_cache import CachedResult, CacheKey, Recorder, ResultCache
from fake_server.streams import BufferSink, OutputSink, StdinReader

__all__ = [
    "RUN_OUTPUT_LIMIT",
    "BufferSink",
    "Interpreter",
    "Invocation",
    "OutputSink",
    "Shell",
    "ShellLimits",
    "StdinReader",
    "Terminal",
]

#: How long (real seconds) a cancelled interpreter gets to stop before we stop waiting for it.
STOP_GRACE_S = 5.0
#: What the interpreter passes on of one run's stdout, and of its stderr: it drops the rest
#: without a word (the script goes on, its status unchanged), so the fake says so.
RUN_OUTPUT_LIMIT = 10 << 20
#: Loop turns that let a stopped interpreter's last scheduled callbacks run and end.
_DRAIN_TURNS = 3
#: Plans kept by argv, the least recently used forgotten first (see Shell._plan_of).
_PLANS_KEPT = 1024
#: Programs that are a shell: ``bash -c SCRIPT`` runs SCRIPT itself, ``bash`` alone a REPL.
SHELLS = frozenset({"bash", "sh", "dash"})
#: What the interpreter adds to bash's "command not found": a guess at the name meant
#: (". Did you mean: cat?") or a word on what its sandbox lacks (". Package managers are not
#: available in the sandbox.", for pip, cargo, vim, docker, ssh...).
_NOT_FOUND_HINT = b": command not found. "
_NOT_FOUND_HINTS = re.compile(rb"(: command not found)\. [^\n]*")
#: A terminal merges stdout and stderr into one stream, in the order they are written.
_MERGE_STREAMS = "exec 2>&1; "
#: An ``/exec``'s stdin, made the whole script's own: a redirection of the shell itself, not a
#: pipe into a group, which would run the script in a pipeline's subshell (no ``EXIT`` trap,
#: a ``shopt -s extglob`` too late for its parse, an error ending the group).
_FEED_STDIN = "exec < <(__fake_stdin); "
#: No stdin at all: an empty one, as ``/dev/null`` is a real command's (bashkit 0.20.1's ``wc``
#: with no stdin prints nothing, where ``wc -l < /dev/null`` prints ``0``).
_NO_STDIN = "exec < /dev/null; "
#: The environment every command starts with (the sandbox's envs and the request's on top).
BASE_ENV = {
    "HOME": "/root",
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
}


@dataclass(frozen=True)
class ShellLimits:
    """Bounds on one command (an exec or a process), each ending it with a clear error.

    Example::

        ShellLimits(max_commands=10_000, max_seconds=30)
    """

    #: Commands (and loop iterations) one run may execute: the step budget.
    max_commands: int = 1_000_000
    #: Wall-clock seconds one run may take (``None``: no limit).
    max_seconds: float | None = 600.0
    #: Interpreters one run may nest through ``timeout`` and ``setsid`` (each a child process) and
    #: shells an interactive shell starts (``bash``).
    max_nesting: int = 8


@dataclass
class Terminal:
    """A PTY's state: its size (``stty size``), and whether it echoes input."""

    rows: int = 24
    cols: int = 80
    echo: bool = True


@dataclass
class Invocation:
    """One command to run: its argv, where, with what, and where its output goes.

    ``stdin`` is either closed with its data (``/exec``) or live (a managed process, fed by
    ``POST …/input``); ``terminal`` makes it a PTY process (one merged output stream).
    """

    cmd: str
    args: list[str]
    fs: FileSystem
    cwd: str = "/root"
    env: dict[str, str] = field(default_factory=dict)
    stdin: StdinReader = field(default_factory=StdinReader)
    stdout: OutputSink = field(default_factory=BufferSink)
    stderr: OutputSink = field(default_factory=BufferSink)
    #: A managed process's stdin: ``read``/``cat`` wait for ``/input`` data.
    live_stdin: bool = False
    terminal: Terminal | None = None
    egress: list[str] | None = None
    hostname: str = "sandbox"
    #: Trees mounted below ``/`` (attached disks), fixed for the invocation's whole run.
    mounts: Sequence[Mount] = ()


class Run:
    """One invocation while it runs: its interpreters (so all of them can be stopped) and
    the state its commands share."""

    def __init__(self, shell: Shell, invocation: Invocation) -> None:
        self.shell = shell
        self.invocation = invocation
        #: The interpreters running a script now (a ``timeout`` adds a child for a while).
        self.interpreters: set[Interpreter] = set()
        #: A command of an interactive shell on a terminal asked it to end (``exit``, ``exec``).
        self.exit_requested = False
        #: A command of an interactive shell started a shell that reads the rest of its input
        #: (``bash``, ``exec bash``): the ``EXIT`` trap the shell had then (see
        #: :mod:`fake_server.repl`).
        self.new_shell: str | None = None
        #: The interpreter refused to go on (a limit, a cancellation): not bash's own answer.
        self.refused = False
        #: Bytes the next ``read`` must not echo (``read -s``).
        self.silent = False

    def write_out(self, data: bytes) -> None:
        self._write(self.invocation.stdout, data)

    def write_err(self, data: bytes) -> None:
        self._write(self.invocation.stderr, data)

    def _write(self, sink: OutputSink, data: bytes) -> None:
        if _NOT_FOUND_HINT in data:
            # bash says "command not found" and nothing more.
            data = _NOT_FOUND_HINTS.sub(rb"\1", data)
        if data:
            if self.invocation.terminal is not None:
                data = data.replace(b"\n", b"\r\n")  # the terminal's onlcr
            sink.write(data)

    async def stdout_sink(self, data: bytes) -> None:
        self.write_out(data)

    async def stderr_sink(self, data: bytes) -> None:
        self.write_err(data)

    def stop(self) -> None:
        """End everything still running for this invocation."""
        for interpreter in list(self.interpreters):
            interpreter.stop()

    @property
    def waiting(self) -> bool:
        """Whether the invocation waits on the event loop rather than computing on an
        interpreter's thread: for its stdin (a command reading it, a shell between lines), or,
        in each of its interpreters, for one of the fake's commands that runs on the loop (a
        ``sleep`` on the clock, a registered command). A background job (``&``) computing
        meanwhile is not seen."""
        if self.invocation.stdin.waiting:
            return True
        return bool(self.interpreters) and all(
            interpreter.callbacks for interpreter in self.interpreters
        )


class _MeteredSink:
    """One stream of one interpreter run, counted on its way to ``sink``."""

    __slots__ = ("_sink", "at_line_start", "stream", "written")

    def __init__(self, stream: str, sink: Callable[[bytes], Awaitable[None]]) -> None:
        self.stream = stream
        self._sink = sink
        self.written = 0
        self.at_line_start = True

    async def write(self, data: bytes) -> None:
        if data:
            self.written += len(data)
            self.at_line_start = data.endswith(b"\n")
            await self._sink(data)


async def _report_dropped_output(stdout: _MeteredSink, stderr: _MeteredSink) -> None:
    """Say on stderr which streams the interpreter cut at its per-run limit."""
    for sink in (stdout, stderr):
        if sink.written >= RUN_OUTPUT_LIMIT:
            notice = (
                f"fake-createos: {sink.stream} stopped at {RUN_OUTPUT_LIMIT >> 20} MiB, the sandbox"
                " interpreter's limit for one run; anything past it was dropped\n"
            )
            await stderr.write(("" if stderr.at_line_start else "\n").encode() + notice.encode())


@dataclass(eq=False)
class Interpreter:
    """One bashkit interpreter of a run and the fake's command callbacks it has in flight."""

    bash: bashkit.Bash
    #: Filled by SandboxCommands.owned: the interpreter does not always cancel a callback it
    #: abandons, and a ``sleep`` on a manual clock would wait forever.
    callbacks: set[asyncio.Task[Any]]
    #: What ``alias``, ``type`` and ``shopt`` show the script of the fake's own aliases and
    #: functions (an interactive shell adds its own).
    introspection: Introspection

    def stop(self) -> None:
        """Stop the script and the callbacks it waits on (it then ends by itself, soon)."""
        self.bash.cancel()
        for task in list(self.callbacks):
            task.cancel()


class Shell:
    """Runs invocations in bashkit interpreters with the fake's commands added."""

    def __init__(
        self,
        registry: CommandRegistry,
        *,
        clock: Clock,
        limits: ShellLimits | None = None,
        network: Network | None = None,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.limits = limits or ShellLimits()
        self.network = network or Network()
        #: What scripts that depend only on their text answered (probes skip the interpreter).
        self.results = ResultCache(registry.names())
        #: The tasks running an invocation now, with its run (see wait_idle, computing).
        self._running: dict[asyncio.Task[Any], Run] = {}
        #: Executions told to stop that have not ended yet (see execute).
        self._stopping: set[asyncio.Future[Any]] = set()
        #: Whether an interpreter was ever made here: only one can have handed the loop a
        #: callback that wait_idle must let run (a fake that never ran a script, as most
        #: tests' fakes, closes without those loop turns).
        self._interpreted = False

    # -- interpreters ----------------------------------------------------------------------

    def interpreter(
        self,
        run: Run,
        *,
        cwd: str,
        env: dict[str, str],
        depth: int,
        stdin: StdinReader | None = None,
        max_seconds: float | None = None,
    ) -> Interpreter:
        """A fresh interpreter over the run's filesystem, with the fake's commands; ``stdin``
        is what its script is fed when it is not the run's (a ``timeout`` child's), and
        ``max_seconds`` a deadline of each of its runs shorter than the limit's."""
        from fake_server import sandbox_commands

        self._interpreted = True
        commands = sandbox_commands.SandboxCommands(self, run, depth, stdin)
        limit = self.limits.max_seconds
        if max_seconds is not None and (limit is None or max_seconds < limit):
            limit = max_seconds
        bash = bashkit.Bash(
            username="root",
            hostname=run.invocation.hostname,
            cwd=cwd,
            env=env,
            max_commands=self.limits.max_commands,
            max_loop_iterations=self.limits.max_commands,
            timeout_seconds=limit,
            custom_builtins={
                name: lazy(builtin) if inspect.iscoroutinefunction(builtin) else builtin
                for name, builtin in commands.builtins().items()
            },
            # Interactive: no per-session caps (a REPL runs many scripts in one interpreter);
            # the per-run limits above still apply.
            profile=bashkit.ExecutionProfile.Interactive,
        )
        bash.mount("/", run.invocation.fs.native)
        for directory in PROGRAM_DIRS:
            bash.mount(directory, programs(), read_only=True)
        for path, tree in run.invocation.mounts:
            bash.mount(path, tree.native)
        for name, callback in commands.live_commands().items():
            bash.add_command(name, lazy(callback))
        return Interpreter(bash, commands.callbacks, commands.introspection)

    async def execute(
        self,
        run: Run,
        interpreter: Interpreter,
        script: str,
        *,
        stdout: Callable[[bytes], Awaitable[None]] | None = None,
        stderr: Callable[[bytes], Awaitable[None]] | None = None,
    ) -> int:
        """Run ``script`` in the interpreter, streaming its output (to the invocation's sinks
        unless told otherwise); stops it if we are cancelled."""
        run.interpreters.add(interpreter)
        out = _MeteredSink("stdout", stdout or run.stdout_sink)
        err = _MeteredSink("stderr", stderr or run.stderr_sink)
        execution = asyncio.ensure_future(
            _awaitable(
                interpreter.bash.execute(script, stdout=lazy(out.write), stderr=lazy(err.write))
            )
        )
        try:
            result = await asyncio.shield(execution)
        except asyncio.CancelledError:
            # The interpreter runs on its own threads and calls back into this loop until it
            # has really stopped: end it and wait for that, or a late callback would find the
            # loop gone (a coroutine never awaited, "Event loop is closed").
            interpreter.stop()
            # Held until it ends: if this wait is itself cancelled (a second stop) or runs out,
            # the execution must not be left to the garbage collector while still pending.
            self._stopping.add(execution)
            execution.add_done_callback(self._stopping.discard)
            await asyncio.wait([execution], timeout=STOP_GRACE_S)
            raise
        finally:
            run.interpreters.discard(interpreter)
            interpreter_threads.runtime_started()  # by the first run
        # With sinks, output streams as it is made; what the result still holds is what never
        # streamed: the interpreter's own refusal (a limit, a cancellation).
        await _report_dropped_output(out, err)
        if result.stderr:
            run.refused = True
            await err.write(f"bash: {result.stderr.rstrip()}\n".encode())
        return int(result.exit_code)

    # -- running ----------------------------------------------------------------------------

    async def run(self, invocation: Invocation) -> int:
        """Run one invocation to its end and return its exit status.

        Example::

            status = await shell.run(Invocation("/bin/cat", ["/etc/os-release"], fs=fs))
        """
        plan = self._plan_of(invocation.cmd, invocation.args)
        interactive = invocation.terminal is not None or invocation.live_stdin
        key = self._cache_key(plan, invocation.env, interactive=interactive)
        env = {**BASE_ENV, **invocation.env}
        if invocation.terminal is not None:
            env.setdefault("TERM", "xterm-256color")
        if key is not None:
            cached = self.results.get(key)
            if cached is not None:
                return cached.replay(invocation.stdout, invocation.stderr)
            limit = self.results.max_output
            stdout = Recorder(invocation.stdout, limit)
            stderr = Recorder(invocation.stderr, limit)
            invocation = dataclasses.replace(invocation, stdout=stdout, stderr=stderr)
        run = Run(self, invocation)
        task = asyncio.current_task()
        if task is not None:
            self._running[task] = run
        # Pinned while mounted: a tree that went cold under a running interpreter would lose
        # what the interpreter writes to it from then on.
        trees = [invocation.fs, *(tree for _, tree in invocation.mounts)]
        for tree in trees:
            tree.pin()
        try:
            status = await self._run(run, plan, env)
        finally:
            run.stop()
            for tree in trees:
                tree.unpin()
            if task is not None:
                self._running.pop(task, None)
        if key is not None and not run.refused:
            self.results.put(key, stdout, stderr, status)
        return status

    def known_result(self, cmd: str, args: list[str], env: dict[str, str]) -> CachedResult | None:
        """What a command run with its stdin closed and no terminal (a buffered exec) answered
        before, when its result is known (a probe such as ``echo ok``: see
        :mod:`fake_server.result_cache`); None when it has to run. No invocation, no task, no
        interpreter: the hot path of pollers.

        Example::

            known = shell.known_result("echo", ["ok"], env)
            status = known.replay(stdout, stderr) if known else await shell.run(invocation)
        """
        key = self._cache_key(self._plan_of(cmd, args), env)
        return None if key is None else self.results.get(key)

    def _cache_key(
        self, plan: _Plan, env: dict[str, str], *, interactive: bool = False
    ) -> CacheKey | None:
        """The result-cache key of running ``plan`` with ``env``, or None when its result may
        differ from one run to the next (see :mod:`fake_server.result_cache`): a REPL, or a
        command that reads live stdin or a terminal."""
        if plan.repl or interactive:
            return None
        # BASE_ENV is the same for every run: the invocation's own variables tell runs apart.
        return self.results.key(plan.script, env)

    def _plan_of(self, cmd: str, args: list[str]) -> _Plan:
        """``_plan(cmd, args)``, kept by argv: a poller sends the same argv again and again,
        and quoting it costs more than the rest of a replay. Only argv short enough for the
        result cache to key are kept (see :func:`_kept_plan`)."""
        argv = (cmd, *args)
        if sum(map(len, argv)) <= self.results.max_script:
            return _kept_plan(argv)
        return _plan(cmd, args)

    @property
    def running(self) -> int:
        """How many invocations are running now.

        Example::

            assert shell.running == 0   # nothing is executing any more
        """
        return sum(1 for task in self._running if not task.done())

    @property
    def computing(self) -> int:
        """How many running invocations may be computing on an interpreter's thread, where
        the event loop cannot see them: those not waiting on the loop (see
        :attr:`Run.waiting`). A ``sleep`` on a manual clock waits until the clock moves.

        Example::

            assert shell.computing == 0   # a `sleep 3` on a manual clock waits, it computes nothing
        """
        return sum(1 for task, run in self._running.items() if not task.done() and not run.waiting)

    @property
    def idle(self) -> bool:
        """Whether no invocation is running (and every stopped interpreter has ended)."""
        return not self._stopping and all(task.done() for task in self._running)

    async def wait_idle(self) -> None:
        """Wait (up to ``STOP_GRACE_S``) until no invocation runs; those that were stopped end
        at once, those still running are stopped first.

        Example::

            await shell.wait_idle()  # before the event loop closes
        """
        running = [task for task in self._running if not task.done()]
        for task in running:
            task.cancel()
        waiting = [*running, *self._stopping]
        if waiting:
            await asyncio.wait(waiting, timeout=STOP_GRACE_S)
        # A stopped interpreter may have handed the loop a callback just before it stopped
        # (bashkit schedules each of the fake's commands with call_soon_threadsafe, then
        # cancels it): let those run, and the tasks they cancel end, while the loop still runs.
        # A callback left queued when the loop closes is a coroutine never awaited.
        if self._interpreted:
            for _ in range(_DRAIN_TURNS):
                await asyncio.sleep(0)

    async def _run(self, run: Run, plan: _Plan, env: dict[str, str]) -> int:
        invocation = run.invocation
        interpreter = self.interpreter(run, cwd=invocation.cwd, env=env, depth=0)
        if plan.repl:
            prelude = live_input.prelude(self.registry.names())
            if invocation.terminal is not None:
                # An interactive bash expands aliases (the function keeps the script's view).
                prelude = _MERGE_STREAMS + prelude + "shopt -s expand_aliases\n"
            return await repl(self, run, interpreter, prelude)
        if plan.preamble:
            await self.execute(run, interpreter, plan.preamble)
        stdin = invocation.stdin
        return await self.run_script(
            run,
            interpreter,
            plan.script,
            live=invocation.live_stdin,
            has_input=not stdin.closed or stdin.has_data(),
        )

    async def run_script(
        self,
        run: Run,
        interpreter: Interpreter,
        script: str,
        *,
        live: bool,
        has_input: bool = True,
        stdout: Callable[[bytes], Awaitable[None]] | None = None,
        stderr: Callable[[bytes], Awaitable[None]] | None = None,
    ) -> int:
        """Run ``script`` in the interpreter with its stdin: a managed process's ``live``
        input (through the prelude's wrappers), else what ``__fake_stdin`` feeds it when it
        ``has_input``, else an empty stdin."""
        if live:
            # A run of its own in the same interpreter, ahead of the script: an alias applies
            # only from the next line read, and the script's line numbers stay its own.
            prelude = live_input.prelude(self.registry.names(), script)
            await self.execute(run, interpreter, prelude, stdout=stdout, stderr=stderr)
        elif has_input:
            script = _FEED_STDIN + script
        elif run.invocation.terminal is None:  # a terminal is its stdin
            script = _NO_STDIN + script
        if run.invocation.terminal is not None:
            script = _MERGE_STREAMS + script
        return await self.execute(run, interpreter, script, stdout=stdout, stderr=stderr)


@dataclass(frozen=True)
class _Plan:
    script: str
    #: Run ahead of the script, in a run of its own (what must be in force before the
    #: script's first line is parsed).
    preamble: str = ""
    repl: bool = False


@functools.lru_cache(maxsize=_PLANS_KEPT)
def _kept_plan(argv: tuple[str, ...]) -> _Plan:
    """:func:`_plan` of ``argv``, kept (a plan depends on its argv alone, so shells share
    them)."""
    return _plan(argv[0], list(argv[1:]))


def _plan(cmd: str, args: list[str]) -> _Plan:
    """What to run for argv: ``bash -c SCRIPT`` runs SCRIPT at the top (so the fake's stdin
    functions reach it), a bare shell reads commands from stdin, anything else runs as the
    program it names, its arguments quoted (``/exec`` never goes through a shell)."""
    if posixpath.basename(cmd) in SHELLS:
        shell = BashArguments.parse(args)
        if shell.command:
            # With more operands ($0, $1...) the shell runs as a program: only a shell of its
            # own sets them.
            if len(shell.operands) == 1:
                # On the script's first line: bash's line numbers stay the script's own.
                settings = "".join(f"{setting}; " for setting in shell.settings())
                return _Plan(settings + shell.operands[0], "\n".join(shell.shopt_settings()))
        elif not shell.operands:
            return _Plan("", repl=True)
    return _Plan(shlex.join([_program(cmd), *args]))


def reads_commands(cmd: str, args: list[str]) -> bool:
    """Whether argv is a shell that reads its commands from its stdin (``bash``, ``sh -l``),
    not from ``-c`` or a file."""
    return _plan(cmd, args).repl


def _program(cmd: str) -> str:
    """A command the live-input wrappers feed, named by its path in a program directory
    (``{"cmd": "/bin/cat"}``), runs by its bare name: the interpreter holds the output of a
    command run by its path until it ends, and the bare name streams."""
    directory, name = posixpath.split(cmd)
    return name if directory in PROGRAM_DIRS and name in live_input.FED else cmd


async def _awaitable(value: Any) -> Any:
    # bashkit returns an awaitable that forwards cancellation, not a coroutine.
    return await value
