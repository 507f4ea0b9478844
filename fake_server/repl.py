"""An interactive shell: a managed process without a script (``{"cmd": "/bin/bash"}``), which
reads its commands from its input, one complete command at a time, and runs each in one
interpreter, so that state carries over from one to the next.

GNU bash given a script on its stdin (``bash -s``, not a terminal) reads and runs it the same
way, command by command, and the fake answers as it does: a command is gathered across lines
while it is incomplete (an open ``if``, quote or parenthesis, a ``\\``-newline, a trailing
``&&``, a here-document whose body has not ended); ``$LINENO`` counts the lines of the whole
input; ``$?``, the ``set`` options and the ``EXIT`` trap carry over from one command to the next
(the interpreter resets the first two for each script it runs, and runs the trap at its end);
the shell ends at ``exit``, at a failure under ``set -e``, at ``${v:?}`` or an unset variable
under ``set -u``, at a syntax error, and at the end of its input, running its ``EXIT`` trap
then. A command that reads stdin reads the input's next lines (they are not run as commands).

On a terminal the shell prompts (``PS1``, then ``> `` while a command is incomplete) and, as an
interactive bash does, ends only at ``exit``, under ``set -e`` and at the end of its input.

Example:
    >>> bash = bashkit.Bash()
    >>> needs_more(bash, "cat <<EOF\\nbody\\n"), needs_more(bash, "cat <<EOF\\nbody\\nEOF\\n")
    (True, False)
    >>> [needs_more(bash, text) for text in ("echo a \\\\\\n", "x=(\\n", "make &&\\n", "fi\\n")]
    [True, True, True, False]
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING

import bashkit

if TYPE_CHECKING:
    from fake_server.shell import Interpreter, Run, Shell

__all__ = ["needs_more", "repl"]

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
#: Parse errors that say the text only stops too early (more lines complete it).
_CUT_SHORT = re.compile(r"end of file|end of input|\beof\b|unterminated", re.IGNORECASE)
#: bash's exit status after a syntax error.
_SYNTAX_ERROR = 2
#: The operators after which a command goes on on the next line.
_CONTINUING = ("&&", "||", "|")
#: Characters that end an unquoted word.
_METACHARACTERS = frozenset(" \t\n;&|<>()")


def needs_more(bash: bashkit.Bash, text: str) -> bool:
    """Whether ``text`` (whole lines) is not yet a complete command: a here-document's body
    or a continued line is still open (:func:`_open_at_end`), or the parser says it ends too
    early (an ``if`` without ``fi``, an open quote)."""
    return _parsed(bash, text) is _Parse.INCOMPLETE


class _Parse(enum.Enum):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    #: A syntax error that more lines cannot mend.
    WRONG = "wrong"


def _parsed(bash: bashkit.Bash, text: str) -> _Parse:
    if _open_at_end(text):
        return _Parse.INCOMPLETE
    try:
        bash.analyze(text)
    except bashkit.BashError as exc:
        return _Parse.INCOMPLETE if _CUT_SHORT.search(str(exc)) else _Parse.WRONG
    return _Parse.COMPLETE


def _open_at_end(text: str) -> bool:
    """Whether ``text`` ends inside a here-document's body, after a ``\\``-newline, a ``&&``,
    ``||`` or ``|``, or inside parentheses (``arr=(``), which the interpreter's parser
    accepts as they are. Quotes are followed so that none of these count inside them; the
    parser itself finds open quotes."""
    i, end = 0, len(text)
    quote = ""  # "'", '"' or "$'"
    depth = 0
    bodies: list[tuple[str, bool]] = []  # here-documents whose bodies follow this line
    last = ""  # the last unquoted control operator, or "w" after anything else
    while i < end:
        c = text[i]
        if quote:
            if c == "\\" and quote != "'":
                i += 2
                continue
            if c == quote[-1]:
                quote = ""
            i += 1
            continue
        if c == "\\":
            if text.startswith("\n", i + 1) and i + 2 == end:
                return True
            i, last = i + 2, "w"
            continue
        if c in "'\"":
            quote = "$'" if c == "'" and text[i - 1 : i] == "$" else c
        elif c == "#" and (i == 0 or text[i - 1] in _METACHARACTERS):
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        elif text.startswith(("((", "$(("), i):
            i = _after_arithmetic(text, i + (2 if c == "(" else 3))
            last = "w"
            continue
        elif text.startswith("<<<", i):  # a here-string: its word is on this line
            i, last = i + 3, "w"
            continue
        elif text.startswith("<<", i):
            i, delimiter, strip = _here_document(text, i + 2)
            bodies.append((delimiter, strip))
            last = "w"
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "\n":
            if bodies:
                i = _after_bodies(text, i + 1, bodies)
                if i < 0:
                    return True
                bodies = []
                continue
        elif c in "&|":
            operator = text[i : i + 2] if text.startswith(("&&", "||", "|&"), i) else c
            last = "|" if operator == "|&" else operator
            i += len(operator)
            continue
        if not c.isspace():
            last = "w"
        i += 1
    return bool(bodies) or depth > 0 or last in _CONTINUING


def _after_arithmetic(text: str, i: int) -> int:
    """Where the ``((`` … ``))`` that opened just before ``i`` ends (its ``<<`` is a shift)."""
    depth = 2
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return i


def _here_document(text: str, i: int) -> tuple[int, str, bool]:
    """The here-document operator's word from ``i`` (just after ``<<``): where it ends, the
    delimiter (its quotes removed) and whether the body's leading tabs go (``<<-``)."""
    strip = text.startswith("-", i)
    i += strip
    while i < len(text) and text[i] in " \t":
        i += 1
    word: list[str] = []
    quote = ""
    while i < len(text) and (quote or text[i] not in _METACHARACTERS):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
            else:
                word.append(c)
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
            word.append(text[i : i + 1])
        else:
            word.append(c)
        i += 1
    return i, "".join(word), strip


def _after_bodies(text: str, i: int, bodies: list[tuple[str, bool]]) -> int:
    """Where the here-documents' bodies, from ``i``, end; -1 when one has not ended yet."""
    for delimiter, strip in bodies:
        while True:
            line_end = text.find("\n", i)
            if line_end < 0:
                return -1
            line = text[i:line_end]
            i = line_end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
    return i


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
        return self._header() + command + _TRAILER

    def exit_trap(self) -> str:
        """A script that restores the state and so runs the EXIT trap as it ends."""
        return self._header()

    def _header(self) -> str:
        """What runs ahead of a command, on lines that put its first line at
        ``lines_before + 1`` (``$LINENO``): the state the interpreter forgot. Empty for the
        first command, which starts in a fresh state."""
        if not self.lines_before:
            return ""
        restore = [f"unset {_STATUS} {_TRAP}"]
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
        self.status = int(state.variables[_STATUS])
        self.trap = state.variables.get(_TRAP, "")
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
    session = _Session()
    pending = ""
    while True:
        if terminal:
            run.write_out(b"> " if pending else _prompt(bash, invocation.hostname))
        line, found = await invocation.stdin.read_until(b"\n")
        if not found and not line and not pending:
            break
        if found or line:
            pending += line.decode("utf-8", "replace") + "\n"
        parse = _parsed(bash, pending)
        if found and parse is _Parse.INCOMPLETE:
            continue
        command, pending = pending, ""
        run.exit_requested = run.refused = False
        status = await shell.execute(run, interpreter, session.script(command))
        if parse is not _Parse.COMPLETE:
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
