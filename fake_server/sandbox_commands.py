"""The commands the fake adds to bash inside a sandbox, because they must follow the fake's
world rather than the host's or the interpreter's:

* ``sleep``, ``timeout`` and ``date`` run on the fake's clock (a manual clock stops them);
* ``setsid`` runs its program as util-linux's does (it and ``timeout`` run their command in a
  child interpreter: :mod:`fake_server.child_commands`);
* ``stty``, ``tput``, ``uname`` and ``id`` describe the sandbox's terminal and image;
* ``realpath`` follows the sandbox's symbolic links as GNU's does (the interpreter's does not);
* ``rm`` refuses ``rm -rf /`` and ``.``/``..`` as GNU's does (the interpreter's removed the root);
* ``curl`` and ``wget`` reach only responders a test registered (:mod:`fake_server.network`);
* ``__fake_*`` helpers give ``read``, ``cat`` and the other stdin readers a managed process's
  live stdin and feed an ``/exec``'s stdin (the shell's prelude calls them; scripts never need to);
* every command registered in the :class:`~fake_server.registered_commands.CommandRegistry`.

Example::

    commands = SandboxCommands(shell, run, depth=0)
    bash = bashkit.Bash(custom_builtins=commands.builtins())
    for name, callback in commands.live_commands().items():
        bash.add_command(name, callback)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import bashkit

from fake_server import live_input
from fake_server.curl_command import curl
from fake_server.date_command import run_date
from fake_server.live_introspection import Introspection
from fake_server.ordered_writes import OrderedWrites
from fake_server.realpath_command import run_realpath
from fake_server.rm_command import run_rm
from fake_server.shell import reads_commands
from fake_server.stdin_readers import reads_stdin
from fake_server.streams import StdinReader
from fake_server.wget_command import wget

if TYPE_CHECKING:
    from fake_server.registered_commands import CommandHandler
    from fake_server.shell import Run, Shell

__all__ = [
    "KERNEL_RELEASE",
    "LIVE_STDIN_FLAG",
    "SandboxCommands",
    "parse_interval",
    "pump_pipe",
    "usage_error",
]

KERNEL_RELEASE = "6.8.0-51-generic"
_KERNEL_VERSION = "#52-Ubuntu SMP PREEMPT_DYNAMIC Thu Nov 14 12:09:44 UTC 2024"
_UNAME_FIELDS = (
    ("s", "Linux"),
    ("n", None),  # the hostname
    ("r", KERNEL_RELEASE),
    ("v", _KERNEL_VERSION),
    ("m", "x86_64"),
    ("p", "x86_64"),
    ("i", "x86_64"),
    ("o", "GNU/Linux"),
)
_UNAME_LONG = {
    "--kernel-name": "s",
    "--nodename": "n",
    "--kernel-release": "r",
    "--kernel-version": "v",
    "--machine": "m",
    "--processor": "p",
    "--hardware-platform": "i",
    "--operating-system": "o",
    "--all": "a",
}
#: ``id``'s options, as the letter each stands for.
_ID_OPTIONS = {"--user": "u", "--group": "g", "--groups": "G", "--name": "n", "--real": "r"}
_SECONDS_PER = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: ``read`` options that take a value (``-p PROMPT``, ``-d DELIM``...).
_READ_VALUED = frozenset("adinNptu")
_NOT_A_TTY = "stty: 'standard input': Inappropriate ioctl for device\n"
#: ``read -t`` ran out of time: bash's status.
READ_TIMEOUT_STATUS = 142
#: Set by the live-input prelude when a command reads the managed process's own input.
LIVE_STDIN_FLAG = "__FAKE_LIVE_STDIN"

_Builtin = Callable[[bashkit.BuiltinContext], Any]
_Live = Callable[[bashkit.CommandContext], Coroutine[Any, Any, int]]


def parse_interval(text: str) -> float | None:
    """A GNU ``sleep``/``timeout`` interval in seconds (``1.5``, ``2m``, ``infinity``), or None.

    Example:
        >>> parse_interval("1.5m"), parse_interval("x")
        (90.0, None)
    """
    if text in ("inf", "infinity"):
        return math.inf
    multiplier = _SECONDS_PER.get(text[-1:], 1.0)
    number = text[:-1] if text[-1:] in _SECONDS_PER else text
    try:
        seconds = float(number) * multiplier
    except ValueError:
        return None
    return None if math.isnan(seconds) or seconds < 0 else seconds


def usage_error(command: str, message: str, status: int = 1) -> bashkit.BuiltinResult:
    """A GNU command's usage error: the message, then where to find help."""
    return bashkit.BuiltinResult(
        stderr=f"{command}: {message}\nTry '{command} --help' for more information.\n",
        exit_code=status,
    )


def _options(
    command: str, argv: Sequence[str], letters: str, long: Mapping[str, str]
) -> tuple[set[str], list[str]] | bashkit.BuiltinResult:
    """``command``'s GNU-style options in ``argv`` as the letters they stand for (``-sn`` and
    ``--kernel-name`` alike), and its operands; or its usage error for an option it lacks."""
    given: set[str] = set()
    operands: list[str] = []
    for arg in argv:
        if arg.startswith("--"):
            if arg not in long:
                return usage_error(command, f"unrecognized option '{arg}'")
            given.add(long[arg])
        elif arg.startswith("-") and len(arg) > 1:
            for letter in arg[1:]:
                if letter not in letters:
                    return usage_error(command, f"invalid option -- '{letter}'")
                given.add(letter)
        else:
            operands.append(arg)
    return given, operands


class SandboxCommands:
    """The fake's commands for one interpreter of one run (``depth`` counts nesting: each
    ``timeout`` or ``setsid`` runs its command in a child interpreter, like a child process)."""

    def __init__(
        self, shell: Shell, run: Run, depth: int, stdin: StdinReader | None = None
    ) -> None:
        self.shell = shell
        self.run = run
        self.depth = depth
        #: What ``__fake_stdin`` feeds the script: the invocation's stdin, or for the child of
        #: a ``timeout`` or ``setsid`` the stdin that command was given.
        self.stdin = stdin
        #: The callbacks in flight (see owned); the shell's Interpreter stops them.
        self.callbacks: set[asyncio.Task[Any]] = set()
        registered = shell.registry.names()
        #: What alias, type and shopt show of the live-input wrappers in a managed process.
        self.introspection = Introspection(
            live_input.alias_values(registered),
            live_input.function_names(registered),
            expand=False,
        )

    def builtins(self) -> dict[str, _Builtin]:
        """Commands that see whether they have pipeline stdin (``ctx.stdin is None``)."""
        return {
            "sleep": self._sleep,
            "date": self._date,
            "realpath": self._realpath,
            "rm": self._rm,
            "uname": self._uname,
            "id": _id,
            "stty": self._stty,
            "tput": self._tput,
            "__fake_stdin_is_process": self._stdin_is_process,
            "__fake_feeds": self._feeds,
            "__fake_read": self._read,
            "__fake_shell_argv": self._shell_argv,
            "__fake_repl_exit": self._repl_exit,
            "__fake_repl_shell": self._repl_shell,
            **self.introspection.builtins(),
        }

    def live_commands(self) -> dict[str, _Live]:
        """Commands with live byte streams (output as it is produced)."""
        from fake_server import child_commands

        commands: dict[str, _Live] = {
            "timeout": functools.partial(child_commands.timeout, self),
            "setsid": functools.partial(child_commands.setsid, self),
            "curl": self._network(curl),
            "wget": self._network(wget),
            "__fake_stdin": self._feed_stdin,
            "__fake_cat": self._cat,
        }
        for name, handler in self.shell.registry.items():
            commands[name] = self._registered(handler)
        return commands

    # -- the clock -----------------------------------------------------------------------------

    async def owned(self, work: Awaitable[Any]) -> Any:
        """Await ``work`` as a task the run can cancel: the interpreter does not always cancel
        a callback it abandons, and a sleep on a manual clock would wait forever."""
        task = asyncio.current_task()
        if task is not None:
            self.callbacks.add(task)
        try:
            return await work
        finally:
            if task is not None:
                self.callbacks.discard(task)

    async def _sleep(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        operands = [arg for arg in ctx.argv if arg != "--"]
        if not operands:
            return usage_error("sleep", "missing operand")
        total = 0.0
        for operand in operands:
            seconds = parse_interval(operand)
            if seconds is None:
                return usage_error("sleep", f"invalid time interval '{operand}'")
            total += seconds
        await self.owned(self.shell.clock.sleep(total))
        return bashkit.BuiltinResult()

    def _date(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        status, out, err = run_date(list(ctx.argv), self.shell.clock.wall(), tz=ctx.env.get("TZ"))
        return bashkit.BuiltinResult(stdout=out, stderr=err, exit_code=status)

    # -- the machine ---------------------------------------------------------------------------

    def _uname(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        parsed = _options("uname", ctx.argv, "asnrvmpio", _UNAME_LONG)
        if isinstance(parsed, bashkit.BuiltinResult):
            return parsed
        wanted, operands = parsed
        if operands:
            return usage_error("uname", f"extra operand '{operands[0]}'")
        every = "a" in wanted
        fields = [
            value if value is not None else self.run.invocation.hostname
            for flag, value in _UNAME_FIELDS
            # GNU -a leaves out -p and -i when they are "unknown"; ours are known.
            if flag in wanted or every or (not wanted and flag == "s")
        ]
        return bashkit.BuiltinResult(stdout=" ".join(fields) + "\n")

    async def _realpath(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        # A coroutine, though it never waits: a plain builtin that reads the filesystem (any
        # tree) breaks bashkit 0.20.1's callbacks now and then ("cannot enter context").
        status, out, err = run_realpath(list(ctx.argv), ctx.cwd, ctx.fs)
        return bashkit.BuiltinResult(stdout=out, stderr=err, exit_code=status)

    async def _rm(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        # A coroutine for the same reason as realpath's.
        status, out, err = run_rm(list(ctx.argv), ctx.cwd, ctx.stdin, ctx.fs)
        return bashkit.BuiltinResult(stdout=out, stderr=err, exit_code=status)

    def _stty(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        terminal = self.run.invocation.terminal
        if terminal is None or ctx.stdin is not None:
            return bashkit.BuiltinResult(stderr=_NOT_A_TTY, exit_code=1)
        args = list(ctx.argv)
        if args == ["size"]:
            return bashkit.BuiltinResult(stdout=f"{terminal.rows} {terminal.cols}\n")
        if args in (["-a"], ["-g"]) or not args:
            echo = "echo" if terminal.echo else "-echo"
            line = f"speed 38400 baud; rows {terminal.rows}; columns {terminal.cols}; {echo}\n"
            return bashkit.BuiltinResult(stdout=line)
        values = iter(args)
        for arg in values:
            if arg in ("echo", "-echo"):
                terminal.echo = arg == "echo"
            elif arg == "sane":
                terminal.echo = True
            elif arg in ("rows", "cols", "columns"):
                value = next(values, "")
                if not value.isdigit():
                    return bashkit.BuiltinResult(
                        stderr=f"stty: invalid integer argument: '{value}'\n", exit_code=1
                    )
                if arg == "rows":
                    terminal.rows = int(value)
                else:
                    terminal.cols = int(value)
            # Every other setting (raw, -icanon, ...) is accepted: the fake has no line
            # discipline to change.
        return bashkit.BuiltinResult()

    def _tput(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        if "TERM" not in ctx.env:
            return bashkit.BuiltinResult(
                stderr="tput: No value for $TERM and no -T specified\n", exit_code=2
            )
        terminal = self.run.invocation.terminal
        rows, cols = (terminal.rows, terminal.cols) if terminal else (24, 80)
        capability = ctx.argv[0] if ctx.argv else ""
        values = {"cols": str(cols), "lines": str(rows), "colors": "256"}
        if capability in values:
            return bashkit.BuiltinResult(stdout=values[capability] + "\n")
        sequences = {"clear": "\x1b[H\x1b[2J", "sgr0": "\x1b(B\x1b[m", "bold": "\x1b[1m"}
        if capability in sequences:
            return bashkit.BuiltinResult(stdout=sequences[capability])
        return bashkit.BuiltinResult(
            stderr=f"tput: unknown terminfo capability '{capability}'\n", exit_code=4
        )

    # -- a managed process's stdin -------------------------------------------------------------

    def _stdin_is_process(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """Status 0 when the caller reads the process's own stdin (no pipe, no redirection,
        no ``read -u FD``)."""
        own = ctx.stdin is None and self.run.invocation.live_stdin and _fd_read(ctx.argv) == "0"
        return bashkit.BuiltinResult(exit_code=0 if own else 1)

    def _feeds(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """``__fake_feeds NAME ARGS...``: status 0 when the caller reads the process's own stdin
        and command NAME run with ARGS would read its stdin (see
        :func:`~fake_server.stdin_readers.reads_stdin`)."""
        name, *args = list(ctx.argv) or [""]
        own = ctx.stdin is None and self.run.invocation.live_stdin and reads_stdin(name, args)
        return bashkit.BuiltinResult(exit_code=0 if own else 1)

    def _shell_argv(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """``__fake_shell_argv SHELL ARGS...``: the command that runs the shell with the
        process's live input (see :func:`~fake_server.live_input.nested_shell`)."""
        name, *args = list(ctx.argv) or ["bash"]
        registered = self.shell.registry.names()
        return bashkit.BuiltinResult(stdout=live_input.nested_shell(name, args, registered))

    async def _read(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """The bytes the caller's ``read`` consumes from live stdin (without the delimiter);
        bash's statuses: 1 at EOF, 142 when ``-t`` runs out."""
        options = _read_options(list(ctx.argv))
        stdin = self.run.invocation.stdin
        terminal = self.run.invocation.terminal
        echo = terminal.echo if terminal else False
        if terminal is not None and "s" in options:
            terminal.echo = False
        try:
            work = _read_input(stdin, options)
            if "t" in options:
                seconds = parse_interval(options["t"]) or 0.0
                try:
                    data, status = await self.owned(
                        _with_deadline(work, self.shell.clock.sleep(seconds))
                    )
                except TimeoutError:
                    return bashkit.BuiltinResult(exit_code=READ_TIMEOUT_STATUS)
            else:
                data, status = await self.owned(work)
        finally:
            if terminal is not None and "s" in options:
                terminal.echo = echo
        return bashkit.BuiltinResult(stdout=data.decode("utf-8", "replace"), exit_code=status)

    async def _cat(self, ctx: bashkit.CommandContext) -> int:
        stdin = self.run.invocation.stdin
        while chunk := await self.owned(stdin.read_chunk()):
            try:
                await ctx.stdout.write(chunk)
            except BrokenPipeError:
                return 0
        return 0

    async def _feed_stdin(self, ctx: bashkit.CommandContext) -> int:
        data = await (self.stdin or self.run.invocation.stdin).read()
        # The command may not read it all, as `true < file` does not.
        with contextlib.suppress(BrokenPipeError):
            await ctx.stdout.write(data)
        return 0

    def _repl_exit(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        self.run.exit_requested = True
        return bashkit.BuiltinResult()

    def _repl_shell(self, ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
        """``__fake_repl_shell TRAP NAME ARGS...``: status 0 when the shell ``NAME ARGS``
        reads its commands from its stdin and that is the interactive shell's input (no pipe,
        no redirection): the interactive shell then starts it once the command ends, and
        gives the ``EXIT`` trap ``TRAP`` back to itself if the command went on (see
        :mod:`fake_server.repl`)."""
        argv = list(ctx.argv)
        if len(argv) < 2 or ctx.stdin is not None or not reads_commands(argv[1], argv[2:]):
            return bashkit.BuiltinResult(exit_code=1)
        self.run.new_shell = argv[0]
        return bashkit.BuiltinResult()

    # -- commands given by Python code -----------------------------------------------------------

    def _network(self, command: Callable[..., Awaitable[int]]) -> _Live:
        async def run(ctx: bashkit.CommandContext) -> int:
            return await self._call(
                ctx,
                lambda context, args: command(
                    context, args, egress=self.run.invocation.egress, network=self.shell.network
                ),
            )

        return run

    def _registered(self, handler: CommandHandler) -> _Live:
        async def run(ctx: bashkit.CommandContext) -> int:
            return await self._call(ctx, handler)

        return run

    async def _call(self, ctx: bashkit.CommandContext, handler: CommandHandler) -> int:
        """Run a Python command with the fake's :class:`CommandContext`: sync writes that
        stream in order, stdin from the pipe (or the process's, when the prelude says so)."""
        from fake_server.registered_commands import CommandContext, call_handler

        env = dict(ctx.env)
        live = env.pop(LIVE_STDIN_FLAG, None) == "1"
        writes = OrderedWrites()
        stdout, stderr = writes.sink(ctx.stdout), writes.sink(ctx.stderr)
        stdin = self.run.invocation.stdin if live else StdinReader(closed=False)
        feeder = None if live else asyncio.ensure_future(pump_pipe(ctx.stdin, stdin))
        context = CommandContext(
            fs=self.run.invocation.fs,
            cwd=ctx.cwd,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            sleep=self.shell.clock.sleep,
        )
        try:
            try:
                status = int(await self.owned(call_handler(handler, context, list(ctx.argv))))
            except Exception as exc:  # a user's handler failed: report it as bash would
                stderr.write(f"fake-createos: command handler failed: {exc!r}\n".encode())
                status = 1
            await writes.drain()
            return status
        finally:
            if feeder is not None:
                feeder.cancel()
            writes.close()


# -- helpers ------------------------------------------------------------------------------------


def _id(ctx: bashkit.BuiltinContext) -> bashkit.BuiltinResult:
    """GNU ``id`` of the sandbox's only user, root (the interpreter's own says uid 1000)."""
    parsed = _options("id", ctx.argv, "ugGnrz", _ID_OPTIONS)
    if isinstance(parsed, bashkit.BuiltinResult):
        return parsed
    letters, users = parsed
    if len(users) > 1:
        return usage_error("id", f"extra operand '{users[1]}'")
    if users and users[0] not in ("root", "0"):
        return bashkit.BuiltinResult(stderr=f"id: '{users[0]}': no such user\n", exit_code=1)
    choices = letters & set("ugG")
    if len(choices) > 1:
        return usage_error("id", 'cannot print "only" of more than one choice')
    if not choices:
        if letters & set("nr"):
            return usage_error("id", "cannot print only names or real IDs in default format")
        return bashkit.BuiltinResult(stdout="uid=0(root) gid=0(root) groups=0(root)\n")
    return bashkit.BuiltinResult(stdout=("root" if "n" in letters else "0") + "\n")


def _read_options(args: list[str]) -> dict[str, str]:
    """``read``'s options as ``{flag: value}`` (``""`` for plain flags)."""
    options: dict[str, str] = {}
    values = iter(args)
    for arg in values:
        if not arg.startswith("-") or arg == "-" or arg == "--":
            break
        flags = arg[1:]
        for index, flag in enumerate(flags):
            if flag in _READ_VALUED:
                options[flag] = flags[index + 1 :] or next(values, "")
                break
            options[flag] = ""
    return options


def _fd_read(args: list[str]) -> str:
    """The file descriptor ``read``/``mapfile`` ARGS read: the value of ``-u`` (``-u 3``,
    ``-ru3``), else ``0``. Any argument like an option that holds a ``u`` counts, even the
    value of another option: a wrong guess leaves the process's input alone."""
    values = iter(args)
    for arg in values:
        if arg.startswith("-") and "u" in arg:
            fd = arg.partition("u")[2] or next(values, "")
            if fd != "0":
                return fd
    return "0"


async def _read_input(stdin: StdinReader, options: dict[str, str]) -> tuple[bytes, int]:
    delimiter = options.get("d", "\n").encode()[:1] or b"\0"
    if "N" in options or "n" in options:
        count = int((options.get("N") or options.get("n") or "0").strip() or 0)
        data = await stdin.read_count(count)
        if "n" in options and delimiter in data:
            data, _, rest = data.partition(delimiter)
            stdin.unread(rest)
            return data, 0
        return data, 0 if len(data) == count else 1
    data, found = await stdin.read_until(delimiter)
    return data, 0 if found else 1


async def _with_deadline(work: Awaitable[Any], deadline: Awaitable[None]) -> Any:
    work_task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(deadline)
    try:
        await asyncio.wait((work_task, timer), return_when=asyncio.FIRST_COMPLETED)
        if work_task.done():
            return work_task.result()
        raise TimeoutError
    finally:
        timer.cancel()
        work_task.cancel()


async def pump_pipe(source: bashkit.CommandInput, target: StdinReader) -> None:
    """Feed what ``source`` (a pipe or a file) holds to ``target``, then close it."""
    while (chunk := await source.read_chunk()) is not None and chunk:
        target.feed(chunk)
    target.close()
