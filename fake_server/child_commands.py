"""The fake's commands that run another command, as a child process would: ``timeout`` (on the
fake's clock) and ``setsid`` (util-linux's, in a new session).

The command runs in a child interpreter of the run, over the same files, with the caller's
directory and exported variables (not its functions: a program never sees them), and reads
what its parent was given: a pipe or a file, or a managed process's live input. Each child
counts against the run's nesting limit.

Example::

    status = await timeout(commands, ctx)   # ``timeout 5 make`` as SandboxCommands runs it
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import bashkit

from fake_server.clock import RealClock
from fake_server.gnu_options import Failure, Options
from fake_server.sandbox_commands import LIVE_STDIN_FLAG, parse_interval, pump_pipe, usage_error
from fake_server.streams import StdinReader

if TYPE_CHECKING:
    from fake_server.sandbox_commands import SandboxCommands

__all__ = ["SETSID_USAGE", "TIMEOUT_STATUS", "setsid", "timeout"]

TIMEOUT_STATUS = 124
#: How long past its duration a ``timeout`` child on a real clock may still run: its deadline.
DEADLINE_GRACE_S = 0.5
#: GNU timeout's options (not its ``--help`` and ``--version``): ``-k``'s value is taken and
#: unused, the fake's command ends at the first signal.
_TIMEOUT_OPTIONS = Options(
    long=(("kill-after", "req", "k"), ("signal", "req", "s"), ("verbose", "no", "v"),
          ("foreground", "no", "foreground"), ("preserve-status", "no", "preserve-status")),
    short={"k": "req", "s": "req", "v": "no"},
    permute=False,
)  # fmt: skip
_SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "TERM": 15}
#: The util-linux of Ubuntu 24.04, the image's.
_SETSID_VERSION = "setsid from util-linux 2.39.3\n"
SETSID_USAGE = """
Usage:
 setsid [options] <program> [arguments ...]

Run a program in a new session.

Options:
 -c, --ctty     set the controlling terminal to the current one
 -f, --fork     always fork
 -w, --wait     wait program to exit, and use the same return
 -h, --help     display this help
 -V, --version  display version

For more details see setsid(1).
"""
_SETSID_OPTIONS = Options(
    long=(("ctty", "no", "c"), ("fork", "no", "f"), ("wait", "no", "w"), ("help", "no", "h"),
          ("version", "no", "V")),
    short=dict.fromkeys("cfwhV", "no"),
    permute=False,
)  # fmt: skip
#: Exit statuses of a program that could not be executed, as util-linux's ``errexec`` gives.
_CANNOT_EXECUTE = {"No such file or directory": 127, "Permission denied": 126}


async def timeout(commands: SandboxCommands, ctx: bashkit.CommandContext) -> int:
    """GNU ``timeout DURATION COMMAND...`` on the fake's clock: 124 when the time runs out
    (``128+9`` for ``-s KILL``, ``128+N`` with ``--preserve-status``), 125 for a usage error."""
    args: list[str] = []
    signal = "TERM"
    preserve = False
    try:
        for key, value in _TIMEOUT_OPTIONS.parse(ctx.argv, args):
            if key == "s":
                signal = str(value).upper().removeprefix("SIG")
            preserve = preserve or key == "preserve-status"
    except Failure as failure:
        return await _usage(ctx, "timeout", failure.message, 125)
    if len(args) < 2:
        return await _usage(ctx, "timeout", "missing operand", 125)
    duration = parse_interval(args[0])
    if duration is None:
        return await _usage(ctx, "timeout", f"invalid time interval '{args[0]}'", 125)
    deadline = None
    if duration > 0 and isinstance(commands.shell.clock, RealClock):
        # A stop reaches the child only between its commands, and a builtin that computes
        # without end (jq's `last(range(1e12))`) checks only its deadline: one a little later
        # than the timer, which ends the child first whenever the stop does reach it.
        deadline = duration + DEADLINE_GRACE_S
    script = shlex.join(args[1:])
    async with _child(commands, ctx, "timeout", args[1], script, deadline) as command:
        if command is None:
            return 126
        timer = asyncio.ensure_future(commands.shell.clock.sleep(duration))
        try:
            done, _ = await commands.owned(
                asyncio.wait((command, timer), return_when=asyncio.FIRST_COMPLETED)
            )
        finally:
            timer.cancel()
        if command in done:
            return int(command.result())
    number = _SIGNALS.get(signal, int(signal) if signal.isdigit() else 15)
    if preserve:
        return 128 + number
    return 128 + number if number == _SIGNALS["KILL"] else TIMEOUT_STATUS


async def setsid(commands: SandboxCommands, ctx: bashkit.CommandContext) -> int:
    """util-linux ``setsid [-cfw] PROGRAM ARGS...``: runs PROGRAM and gives its status.

    A script's command is no process group leader, so ``setsid`` forks only when told to
    (``-f``), and then answers 0 (``-w`` waits for PROGRAM and gives its status). The fake never
    forks: ``-f`` too answers once PROGRAM has ended (the interpreter gives a command no way to
    leave a job behind that still writes where its output went), so a script starts a daemon
    with ``&``, as ``nohup setsid server >log 2>&1 &``. ``-c`` needs a terminal (a PTY
    process).
    """
    args: list[str] = []
    try:
        flags = {key for key, _ in _SETSID_OPTIONS.parse(ctx.argv, args)}
    except Failure as failure:
        return await _usage(ctx, "setsid", failure.message, 1)
    if "h" in flags:
        await ctx.stdout.write(SETSID_USAGE.encode())
        return 0
    if "V" in flags:
        await ctx.stdout.write(_SETSID_VERSION.encode())
        return 0
    if not args:
        return await _usage(ctx, "setsid", "no command specified", 1)
    if "c" in flags and commands.run.invocation.terminal is None:
        message = "setsid: failed to set the controlling terminal: Inappropriate ioctl for device\n"
        await ctx.stderr.write(message.encode())
        return 1
    async with _child(commands, ctx, "setsid", args[0], _execute(args)) as command:
        if command is None:
            return 126
        status = int(await commands.owned(command))
    # A fork's parent answers 0 whatever its child does, unless it waits for it.
    return 0 if "f" in flags and "w" not in flags else status


def _execute(argv: list[str]) -> str:
    """The child's script: ``argv``, or util-linux's ``failed to execute`` when its program
    is not there (a path: a directory or a file without ``x`` cannot be executed)."""

    def fail(reason: str) -> str:
        message = f"setsid: failed to execute {argv[0]}: {reason}"
        return f"{{ printf '%s\\n' {shlex.quote(message)} >&2; exit {_CANNOT_EXECUTE[reason]}; }}"

    name = shlex.quote(argv[0])
    if "/" in argv[0]:
        # `command -v` answers for no path at all in the interpreter (bashkit 0.20.1).
        check = (
            f"if [ ! -e {name} ]; then {fail('No such file or directory')}; "
            f"elif [ -d {name} ] || [ ! -x {name} ]; then {fail('Permission denied')}; fi"
        )
    else:
        check = f"command -v -- {name} >/dev/null || {fail('No such file or directory')}"
    return f"{check}; {shlex.join(argv)}"


@contextlib.asynccontextmanager
async def _child(
    commands: SandboxCommands,
    ctx: bashkit.CommandContext,
    name: str,
    program: str,
    script: str,
    max_seconds: float | None = None,
) -> AsyncIterator[asyncio.Future[int] | None]:
    """Run ``script`` (which runs ``program``) in a child interpreter for the command ``name``,
    within ``max_seconds`` when given; yields the future of its status (None, having said why,
    past the nesting limit). Leaving the block stops the child if it still runs."""
    limit = commands.shell.limits.max_nesting
    if commands.depth + 1 > limit:
        message = f"{name}: cannot run '{program}': more than {limit} nested commands"
        await ctx.stderr.write(f"{message} (a limit of the fake)\n".encode())
        yield None
        return
    env = dict(ctx.env)
    # Its command reads what the parent was given: the process's live input when the prelude
    # says the parent reads it (as it does a registered command's), else the pipe or file.
    live = env.pop(LIVE_STDIN_FLAG, None) == "1"
    stdin = StdinReader(closed=False)
    feeder = None if live else asyncio.ensure_future(pump_pipe(ctx.stdin, stdin))
    run = commands.run
    child = commands.shell.interpreter(
        run, cwd=ctx.cwd, env=env, depth=commands.depth + 1, stdin=stdin, max_seconds=max_seconds
    )
    command = asyncio.ensure_future(
        commands.shell.run_script(
            run, child, script, live=live, stdout=_writer(ctx.stdout), stderr=_writer(ctx.stderr)
        )
    )
    try:
        yield command
    finally:
        if feeder is not None:
            feeder.cancel()
        if not command.done():
            command.cancel()  # which cancels the child interpreter
        await asyncio.wait((command,))


async def _usage(ctx: bashkit.CommandContext, command: str, message: str, status: int) -> int:
    await ctx.stderr.write(usage_error(command, message).stderr.encode())
    return status


def _writer(output: bashkit.CommandOutput) -> Callable[[bytes], Awaitable[None]]:
    # The interpreter takes only plain coroutine functions as sinks.
    async def write(data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError):
            await output.write(data)

    return write
