"""An interactive shell: a managed process without a script (``{"cmd": "/bin/bash"}``), which
reads its commands from its input, one complete command at a time, and runs each in one
interpreter, so that state carries over from one to the next.

GNU bash given a script on its stdin (``bash -s``, not a terminal) reads and runs it the same
way, command by command, and the fake answers as it does: a command is gathered across lines
while it is incomplete (:mod:`fake_server.gathering`); ``$LINENO`` counts the lines of the whole
input; ``$?``, the ``set`` options and the ``EXIT`` trap carry over from one command to the next
(the interpreter resets the first two for each script it runs, and runs the trap at its end);
the shell ends at ``exit``, at a failure under ``set -e``, at ``${v:?}`` or an unset variable
under ``set -u``, at a syntax error, and at the end of its input, running its ``EXIT`` trap
then. A command that reads stdin reads the input's next lines (they are not run as commands).

A shell a command starts that reads its commands from stdin (``bash``, ``exec bash -l``) reads
the rest of the input, as in bash: a new shell, in a fresh interpreter; ``exec`` replaces the
shell, ``bash`` leaves it waiting until the new one ends (:class:`_Shells`). ``$-`` says that the
shell reads its input (``hBs``), where the interpreter's says it runs a ``-c`` script (``hBc``).

On a terminal the shell prompts (``PS1``, then ``> `` while a command is incomplete) and, as an
interactive bash does, ends only at ``exit``, ``exec``, under ``set -e`` and at the end of its
input; its ``$-`` is an interactive shell's (``himBHs``).
"""

from __future__ import annotations

import asyncio
import itertools
import posixpath
import shlex
from typing import TYPE_CHECKING

import bashkit

from fake_server.gathering import Gathering, Parse, parse_of
from fake_server.live_input import PIPED_READ, READ_FUNCTION, WRAPPER_PREFIX, aliases

if TYPE_CHECKING:
    from fake_server.shell import Interpreter, Run, Shell

__all__ = ["MAX_COMMAND_BYTES", "repl"]

#: Variables a command's trailer leaves for the next command's header; never seen by the
#: client's commands (the header unsets them first).
_STATUS = "__fake_repl_status"
_TRAP = "__fake_repl_trap"
#: Run after each complete command, on a line of its own: whether it ran tells that the
#: command did not end the shell; it keeps what the interpreter forgets between scripts (the
#: status, the EXIT trap, which it would otherwise run now). Its trace goes nowhere.
_TRAILER = f"{{ {_STATUS}=$? {_TRAP}=$(trap -p EXIT); trap - EXIT; }} 2>/dev/null\n"
#: Ahead of a command that pipes into ``read``: the interpreter's own ``read`` for it, as a
#: script with one gets (see :data:`~fake_server.live_input.PIPED_READ`); the live-input
#: one is defined again after the command's trailer.
_BUILTIN_READ = "unset -f read"
#: How the interpreter names the options in effect at the end of a script: ``set``'s by their
#: letter or long name, and ``shopt``'s (which it keeps from one script to the next).
_OPTION = "SHOPT_"
#: The ``set`` options without a letter that matter to a script.
_LONG_SET_OPTIONS = frozenset({"pipefail", "posix"})
#: bash's exit status after a syntax error.
_SYNTAX_ERROR = 2
#: The longest command the shell gathers; a longer one ends the shell as a syntax error does.
#: bash has no such limit, but the interpreter's parser takes ~350 bytes of memory for each
#: byte of a script of short words (an 8 MiB line of them: 2.8 GB), where a here-document's
#: body costs it ~17 (a 1 MiB command of words: ~350 MB).
MAX_COMMAND_BYTES = 1 << 20
#: Lines the shell gathers before it gives the event loop a turn (~1 ms of work).
_LINES_PER_TURN = 1000
_TOO_LONG = (
    "bash: a command longer than {cap} bytes: the fake's limit for one command of an"
    " interactive shell\n"
)
_TOO_DEEP = "bash: cannot start a shell: more than {cap} nested shells (a limit of the fake)\n"
#: bash's exit status for a command it cannot run.
_CANNOT_RUN = 126
#: The shells a command starts by name (or by path, in these directories): one that reads its
#: commands from its stdin reads the rest of the input (:func:`_shell_starters`).
_SHELLS = ("bash", "sh")
_SHELL_DIRECTORIES = ("/bin", "/usr/bin")
#: What ``$-`` and ``${-}`` in a command expand to, for the interpreter's ``$-`` ends in ``c``
#: (it runs each command as ``bash -c`` would): bash reading commands from its stdin ends it in
#: ``s`` (``hBs``, ``ehBs`` after ``set -e``)...
_INPUT_FLAGS = "${-/%c/s}"
#: ... and on a terminal, where it is interactive, adds ``i``, and the job control and history
#: expansion it has there (``m``, ``H``; the interpreter has neither), each in its place among
#: the others (``himBHs``, ``ehimBHs`` after ``set -e``).
_TERMINAL_FLAGS = "${-//[!abefh]/}i${-//[!k]/}m${-//[!nptuvxBCE]/}H${-//[!PT]/}s"


class _Session:
    """What the shell must carry from one command to the next that the interpreter forgets
    between the scripts it runs, and the header that brings it back."""

    def __init__(self) -> None:
        #: The input's lines run so far: the next command's first line is the one after.
        self.lines_before = 0
        self.status = 0
        #: The ``set`` options on (``e``, ``pipefail``...).
        self.options: list[str] = []
        #: ``trap -p EXIT``: the trap to run when the shell exits.
        self.trap = ""

    def script(self, command: str) -> str:
        """``command`` as the interpreter runs it: after the header, before the trailer."""
        if not PIPED_READ.search(command):
            return self._header() + command + _TRAILER
        return self._header(_BUILTIN_READ) + command + _TRAILER + READ_FUNCTION + "\n"

    def exit_trap(self) -> str:
        """A script that restores the state and so runs the EXIT trap as it ends."""
        return self._header()

    def _header(self, first: str = "") -> str:
        """What runs ahead of a command, on lines that put its first line at
        ``lines_before + 1`` (``$LINENO``): ``first``, then the state the interpreter forgot.
        Only ``first``, on the command's line, for the first command, which starts in a fresh
        state (no status, no ``set -x`` to trace it)."""
        if not self.lines_before:
            return f"{first}; " if first else ""
        # Silent: a client's command may have made them readonly (bash would not mind).
        restore = [f"unset {_STATUS} {_TRAP} 2>/dev/null"]
        if first:
            restore.append(first)
        if self.trap:
            restore.append(self.trap)
        # -x last: nothing of the header is traced.
        for option in sorted(self.options, key=lambda option: option == "x"):
            restore.append(f"set -{option}" if len(option) == 1 else f"set -o {option}")
        if self.status:
            # && keeps the failure from ending the shell under set -e; its trace goes nowhere.
            restore.append(f"{{ (builtin exit {self.status}) && :; }} 2>/dev/null")
        padding = "\n" * (self.lines_before - 1)
        return f": '{padding}'; " + "; ".join(restore) + "\n"

    def ran(self, command: str, status: int, state: bashkit.ShellState) -> bool:
        """Take in the state after ``command`` ended with ``status``: whether it ran to its
        end (the trailer ran), rather than ending the shell."""
        self.lines_before += command.count("\n")
        self.options = [
            option
            for name, value in state.variables.items()
            if name.startswith(_OPTION) and value == "1"
            for option in [name[len(_OPTION) :]]
            if len(option) == 1 or option in _LONG_SET_OPTIONS
        ]
        if _STATUS not in state.variables:
            self.status = status
            return False
        # A client's command may have taken the names (readonly, declare -i): the trailer
        # could not set them, and the shell goes on as bash's would, the status unknown (the
        # trailer's) and the trap lost rather than run from what the client left there.
        kept, trap = state.variables[_STATUS], state.variables.get(_TRAP, "")
        self.status = int(kept) if kept.isdecimal() else status
        self.trap = trap if trap.startswith("trap -- ") else ""
        return True


class _Level:
    """One of the shells that read the input: its interpreter and what it carries over."""

    def __init__(self, interpreter: Interpreter, session: _Session) -> None:
        self.interpreter = interpreter
        self.bash = interpreter.bash
        self.session = session


class _Shells:
    """The shells that read the input: the one reading it now last, each under it waiting for
    the one it started (``bash``) to end. ``exec bash`` starts one in place of the last."""

    def __init__(self, shell: Shell, run: Run, prelude: str, *, terminal: bool) -> None:
        self.shell = shell
        self.run = run
        self.prelude = prelude + _shell_starters(terminal=terminal)
        self.exec_alias = _exec_alias(terminal)
        self.stack: list[_Level] = []

    @property
    def current(self) -> _Level:
        return self.stack[-1]

    async def start(self, interpreter: Interpreter) -> None:
        """Make a shell of a fresh interpreter (after the prelude) the one that reads."""
        await self.shell.execute(self.run, interpreter, self.prelude)
        # The shell's own alias is the fake's: alias lists it no more than the wrappers'.
        interpreter.introspection.add_alias("exec", self.exec_alias)
        self.stack.append(_Level(interpreter, _Session()))

    async def start_new(self, trap: str, *, replacing: bool) -> None:
        """Start the shell the last command started, with what a new shell has of the one
        that started it (its exported variables, its directory): in place of that one
        (``exec``), or above it, which gets back ``trap``, its ``EXIT`` trap."""
        started = self.current
        state = started.bash.shell_state()
        shlvl = state.variables.get("SHLVL", "1")
        depth = len(self.stack) - replacing
        if replacing:
            self.stack.pop()
        else:
            started.session.trap = started.session.trap or trap
            if depth > self.shell.limits.max_nesting:
                self.run.write_err(_TOO_DEEP.format(cap=self.shell.limits.max_nesting).encode())
                started.session.status = _CANNOT_RUN
                return
            shlvl = str(int(shlvl) + 1) if shlvl.isdecimal() else "1"
        env = {**state.env, "SHLVL": shlvl}
        await self.start(self.shell.interpreter(self.run, cwd=state.cwd, env=env, depth=depth))

    def ended(self, status: int) -> bool:
        """The last shell ended with ``status``: whether one waited for it (and goes on, its
        ``bash`` ended with that status)."""
        self.stack.pop()
        if self.stack:
            self.current.session.status = status
        return bool(self.stack)

    async def end_of_input(self) -> int:
        """Each shell exits, the last first, and runs its ``EXIT`` trap as it does (each gets
        the status of the one it started); the first one's status."""
        status = self.current.session.status
        while self.stack:
            level = self.stack.pop()
            level.session.status = status
            if level.session.trap:
                status = await self.shell.execute(
                    self.run, level.interpreter, level.session.exit_trap()
                )
        return status


async def repl(shell: Shell, run: Run, interpreter: Interpreter, prelude: str) -> int:
    """Run the commands the process's input brings, one complete command at a time, after
    ``prelude`` (the live-input wrappers, and on a terminal the merge of its two streams); the
    shell's exit status."""
    invocation = run.invocation
    terminal = invocation.terminal is not None
    if terminal:
        # An interactive bash ends at exit (not in a subshell: the trailer runs then).
        prelude += 'exit() { __fake_repl_exit; builtin exit "$@"; }\n'
    shells = _Shells(shell, run, prelude, terminal=terminal)
    await shells.start(interpreter)
    flags = _TERMINAL_FLAGS if terminal else _INPUT_FLAGS
    pending = ""
    gathering = Gathering(flags)
    for lines in itertools.count(1):
        level = shells.current
        if terminal:
            run.write_out(b"> " if pending else _prompt(level.bash, invocation.hostname))
        if not lines % _LINES_PER_TURN:
            # Reading buffered lines never waits: a 256 KiB input of empty lines inside an open
            # quote held the event loop for 0.3 s.
            await asyncio.sleep(0)
        line, found = await invocation.stdin.read_until(b"\n")
        if not found and not line and not pending:
            break
        if found or line:
            pending += line.decode("utf-8", "replace") + "\n"
        if len(pending) > MAX_COMMAND_BYTES:
            run.write_err(_TOO_LONG.format(cap=MAX_COMMAND_BYTES).encode())
            return _SYNTAX_ERROR
        parse = await parse_of(gathering, level.bash, pending)
        if found and parse is Parse.INCOMPLETE:
            continue
        command, pending = pending, ""
        session = level.session
        # The lines as the interpreter must read them (bash's reading where it has another);
        # the input's own lines are what $LINENO counts.
        script = session.script(gathering.edited(command))
        gathering = Gathering(flags)
        run.exit_requested = run.refused = False
        run.new_shell = None
        status = await shell.execute(run, level.interpreter, script)
        if parse is not Parse.COMPLETE:
            # The interpreter ran none of it and said why, as bash does.
            session.lines_before += command.count("\n")
            session.status = _SYNTAX_ERROR
            if terminal:
                continue
        else:
            ran = session.ran(command, status, level.bash.shell_state())
            if run.new_shell is not None:
                # The command ended there if it was an exec.
                await shells.start_new(run.new_shell, replacing=not ran)
                continue
            # Not an exit: the interpreter refused to go on (a limit), or, on a terminal, an
            # error that ends an interactive shell's command (${v:?}) but not the shell.
            ends = not ran and not run.refused
            if not ends or (terminal and not run.exit_requested and "e" not in session.options):
                continue
        if not shells.ended(session.status):
            return session.status
    return await shells.end_of_input()


def _shell_starters(*, terminal: bool) -> str:
    """The prelude's lines by which a command starts a shell that reads the rest of the input,
    as ``bash``, ``exec bash -l`` or ``exec "$SHELL"`` do in bash: the interpreter's own shell
    reads none of it, and ends the interactive shell when it is ``exec``'d.

    So each shell's name (through an alias, as the live-input wrappers', which ``command -v``
    does not show) and path is a function: when the shell reads commands from the input
    (``__fake_repl_shell``), the interactive shell starts it once the command ends, and the
    function clears the ``EXIT`` trap, which bash does not run at an ``exec`` (and the
    interactive shell gives back when the command went on); any other shell (``bash -c``,
    ``bash < file``) is the interpreter's. ``exec NAME`` runs a function NAME in the
    interpreter; an alias of ``exec`` that ends in a space makes the word after it an alias
    too, and on a terminal has ``exec`` end the shell, as an ``exit``."""
    lines = []
    for name in _SHELLS:
        body = (
            f'{{ if __fake_repl_shell "$(trap -p EXIT)" {name} "$@"; then trap - EXIT;'
            f' else builtin {name} "$@"; fi; }}'
        )
        paths = [posixpath.join(directory, name) for directory in _SHELL_DIRECTORIES]
        lines += [f"{function}() {body}" for function in [WRAPPER_PREFIX + name, *paths]]
    lines += aliases(_SHELLS)
    lines.append("builtin alias exec=" + shlex.quote(_exec_alias(terminal)))
    return "\n".join(lines) + "\n"


def _exec_alias(terminal: bool) -> str:
    """The value of the interactive shell's ``exec`` alias (see :func:`_shell_starters`)."""
    return "__fake_repl_exit && exec " if terminal else "exec "


def _prompt(bash: bashkit.Bash, hostname: str) -> bytes:
    """``PS1`` as Ubuntu's root sees it: ``root@HOST:~/dir# ``."""
    cwd = bash.shell_state().cwd
    shown = "~" + cwd[len("/root") :] if cwd == "/root" or cwd.startswith("/root/") else cwd
    return f"root@{hostname}:{shown}# ".encode()
