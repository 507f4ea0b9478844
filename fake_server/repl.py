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

On a terminal the shell prompts (``PS1``, then ``> `` while a command is incomplete) and, as an
interactive bash does, ends only at ``exit``, under ``set -e`` and at the end of its input.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING

import bashkit

from fake_server.gathering import Gathering, Parse, parse_of

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
#: What ``$-`` and ``${-}`` in a command expand to, for the interpreter's ``$-`` ends in ``c``
#: (it runs each command as ``bash -c`` would): bash reading commands from its stdin ends it in
#: ``s`` (``hBs``, ``ehBs`` after ``set -e``)...
_INPUT_FLAGS = "${-/%c/s}"
#: ... and on a terminal, where it is interactive, has an ``i`` after ``a``, ``b``, ``e``, ``f``
#: and ``h`` (the letters keep their order: ``himBHs``)...
_TERMINAL_FLAGS = "${-//[!abefh]/}i${-//[!kmnptuvxBCEHPT]/}s"
#: ... and starts with job control and history expansion on, as they show in ``$-`` and
#: ``set -o`` (the interpreter has neither).
_TERMINAL_OPTIONS = ("m", "H")


class _Session:
    """What the shell must carry from one command to the next that the interpreter forgets
    between the scripts it runs, and the header that brings it back."""

    def __init__(self, options: tuple[str, ...] = ()) -> None:
        #: The input's lines run so far: the next command's first line is the one after.
        self.lines_before = 0
        self.status = 0
        #: The ``set`` options on (``e``, ``pipefail``...).
        self.options = list(options)
        #: ``trap -p EXIT``: the trap to run when the shell exits.
        self.trap = ""

    def script(self, command: str) -> str:
        """``command`` as the interpreter runs it: after the header, before the trailer."""
        return self._header() + command + _TRAILER

    def exit_trap(self) -> str:
        """A script that restores the state and so runs the EXIT trap as it ends."""
        return self._header()

    def _header(self) -> str:
        """What runs ahead of a command, on lines that put its first line at
        ``lines_before + 1`` (``$LINENO``): the state the interpreter forgot. For the first
        command, only the options the shell starts with, on its first line."""
        restore = [self.trap] if self.trap else []
        # -x last: nothing of the header is traced.
        for option in sorted(self.options, key=lambda option: option == "x"):
            restore.append(f"set -{option}" if len(option) == 1 else f"set -o {option}")
        if self.status:
            # && keeps the failure from ending the shell under set -e; its trace goes nowhere.
            restore.append(f"{{ (builtin exit {self.status}) && :; }} 2>/dev/null")
        if not self.lines_before:
            return "".join(f"{line}; " for line in restore)
        # Silent: a client's command may have made them readonly (bash would not mind).
        restore.insert(0, f"unset {_STATUS} {_TRAP} 2>/dev/null")
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


async def repl(shell: Shell, run: Run, interpreter: Interpreter, prelude: str) -> int:
    """Run the commands the process's input brings, one complete command at a time, after
    ``prelude`` (the live-input wrappers, and on a terminal the merge of its two streams); the
    shell's exit status."""
    invocation = run.invocation
    terminal = invocation.terminal is not None
    if terminal:
        # An interactive bash ends at exit (not in a subshell: the trailer runs then).
        prelude += 'exit() { __fake_repl_exit; builtin exit "$@"; }\n'
    await shell.execute(run, interpreter, prelude)
    bash = interpreter.bash
    session = _Session(_TERMINAL_OPTIONS if terminal else ())
    flags = _TERMINAL_FLAGS if terminal else _INPUT_FLAGS
    pending = ""
    gathering = Gathering(flags)
    for lines in itertools.count(1):
        if terminal:
            run.write_out(b"> " if pending else _prompt(bash, invocation.hostname))
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
        parse = await parse_of(gathering, bash, pending)
        if found and parse is Parse.INCOMPLETE:
            continue
        command, pending = pending, ""
        # The lines as the interpreter must read them (bash's reading where it has another);
        # the input's own lines are what $LINENO counts.
        script = session.script(gathering.edited(command))
        gathering = Gathering(flags)
        run.exit_requested = run.refused = False
        status = await shell.execute(run, interpreter, script)
        if parse is not Parse.COMPLETE:
            # The interpreter ran none of it and said why, as bash does.
            session.lines_before += command.count("\n")
            session.status = _SYNTAX_ERROR
            if terminal:
                continue
            return _SYNTAX_ERROR
        if session.ran(command, status, bash.shell_state()):
            continue
        # Not an exit: the interpreter refused to go on (a limit), or, on a terminal, an
        # error that ends an interactive shell's command (${v:?}) but not the shell.
        if not run.refused and (not terminal or run.exit_requested or "e" in session.options):
            return session.status
    if session.trap:
        # The end of the input: the shell exits, and runs its EXIT trap as it does.
        return await shell.execute(run, interpreter, session.exit_trap())
    return session.status


def _prompt(bash: bashkit.Bash, hostname: str) -> bytes:
    """``PS1`` as Ubuntu's root sees it: ``root@HOST:~/dir# ``."""
    cwd = bash.shell_state().cwd
    shown = "~" + cwd[len("/root") :] if cwd == "/root" or cwd.startswith("/root/") else cwd
    return f"root@{hostname}:{shown}# ".encode()
