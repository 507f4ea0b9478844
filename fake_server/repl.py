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

import asyncio
import enum
import itertools
import re
from typing import TYPE_CHECKING, Protocol

import bashkit

if TYPE_CHECKING:
    from fake_server.shell import Interpreter, Run, Shell

__all__ = ["MAX_COMMAND_BYTES", "needs_more", "repl"]

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
#: The operators after which a command goes on on the next line.
_CONTINUING = ("&&", "||", "|")
#: Characters that end an unquoted word.
_METACHARACTERS = frozenset(" \t\n;&|<>()")


def needs_more(bash: bashkit.Bash, text: str) -> bool:
    """Whether ``text`` (whole lines) is not yet a complete command: a here-document's body
    or a continued line is still open (:class:`_Scanner`), or the parser says it ends too
    early (an ``if`` without ``fi``, an open quote)."""
    return _Gathering().parse(bash, text) is _Parse.INCOMPLETE


class _Parse(enum.Enum):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    #: A syntax error that more lines cannot mend.
    WRONG = "wrong"


class _Parser(Protocol):
    """What reads a whole text: an interpreter (:meth:`bashkit.Bash.analyze`)."""

    def analyze(self, script: str) -> object: ...


class _Gathering:
    """One command's lines as they come: each line is scanned once (:class:`_Scanner`), and
    the parser reads the whole text again only when the new lines may have ended what kept it
    incomplete. Parsing the whole text at every line made a 1,000-line ``if`` sent to a shell
    hold the event loop for 8 s (the parser takes ~10 ms for it), a here-document of 4,000
    lines for 1 s."""

    def __init__(self) -> None:
        self.scanner = _Scanner()
        #: What the parser said last, if it was asked.
        self.parsed: _Parse | None = None

    def parse(self, bash: _Parser, text: str) -> _Parse:
        """Where ``text``, the lines gathered so far (the last call's and more), stands."""
        scanned = self.scan(text)
        return self.parsed_as(_analyzed(bash, text)) if scanned is None else scanned

    def scan(self, text: str) -> _Parse | None:
        """Where ``text`` stands as far as the scan tells, or None when the parser must read
        it (then :meth:`parsed_as` takes what it said)."""
        if self.scanner.open_at_end(text):
            return _Parse.INCOMPLETE
        if self.parsed is not _Parse.INCOMPLETE or self.scanner.may_close:
            return None
        return self.parsed

    def parsed_as(self, parse: _Parse) -> _Parse:
        """Take what the parser said of the whole text."""
        self.parsed = parse
        self.scanner.may_close = False
        return parse


#: How much text the shell scans or parses on the event loop; more goes to a worker thread
#: (the parser lets go of the GIL; the scan, in Python, shares it every few ms). On the loop,
#: an 8 MiB line held it for 3 s (the scan) and a line of 8 MiB of words for 8 s (the parse).
_ON_LOOP = 64 << 10


async def _parse_of(gathering: _Gathering, bash: _Parser, text: str) -> _Parse:
    """:meth:`_Gathering.parse`, a long text's scan or parse on a worker thread."""
    if len(text) - gathering.scanner.i > _ON_LOOP:
        return await asyncio.to_thread(gathering.parse, bash, text)
    scanned = gathering.scan(text)
    if scanned is not None:
        return scanned
    if len(text) > _ON_LOOP:
        return gathering.parsed_as(await asyncio.to_thread(_analyzed, bash, text))
    return gathering.parsed_as(_analyzed(bash, text))


def _analyzed(bash: _Parser, text: str) -> _Parse:
    try:
        bash.analyze(text)
    except bashkit.BashError as exc:
        return _Parse.INCOMPLETE if _CUT_SHORT.search(str(exc)) else _Parse.WRONG
    return _Parse.COMPLETE


#: Words that end a compound command (at a word's start and end).
_CLOSING_WORDS = ("fi", "done", "esac", "]]", "}")


class _Scanner:
    """Whether the text ends inside a here-document's body, after a ``\\``-newline, a ``&&``,
    ``||`` or ``|``, inside parentheses (``arr=(``) or inside a quote: the interpreter's parser
    accepts the first four as they are. Scans only what was appended since the last call, and
    notes whether that may end a construct the parser found open (:attr:`may_close`): a ``)``
    or a backquote that closes one opened on an earlier line, a closing word (``fi``, ``done``,
    ``esac``, ``]]``, ``}``), a quote that spanned lines, a here-document's end. A line's own
    ``$(…)`` or backquotes do not count: a script's lines are full of them."""

    def __init__(self) -> None:
        #: Where the scan goes on, and its state there.
        self.i = 0
        self.quote = ""  # "'", '"' or "$'"
        self.quote_spans_lines = False
        self.depth = 0
        #: The depth of parentheses where the current line started.
        self.line_depth = 0
        #: An unquoted backquote is open: "here" (on the current line) or "before".
        self.backquote = ""
        self.last = ""  # the last unquoted control operator, or "w" after anything else
        #: Here-documents whose bodies are being read, the one being read first.
        self.reading: list[tuple[str, bool]] = []
        self.may_close = False

    def open_at_end(self, text: str) -> bool:
        i, end = self.i, len(text)
        if self.reading:
            i, self.reading = _after_bodies(text, i, self.reading)
            if self.reading:
                self.i = i
                return True
            self.may_close = True
        quote, depth, last = self.quote, self.depth, self.last
        bodies: list[tuple[str, bool]] = []  # here-documents whose bodies follow this line
        while i < end:
            c = text[i]
            if quote:
                if c == "\\" and quote != "'":
                    i += 2
                    continue
                if c == "\n":
                    self.quote_spans_lines = True
                elif c == quote[-1]:
                    quote = ""
                    self.may_close |= self.quote_spans_lines
                    self.quote_spans_lines = False
                i += 1
                continue
            if c == "\\":
                if text.startswith("\n", i + 1) and i + 2 == end:
                    break
                i, last = i + 2, "w"
                continue
            at_word = i == 0 or text[i - 1] in _METACHARACTERS
            if c in "'\"":
                quote = "$'" if c == "'" and text[i - 1 : i] == "$" else c
            elif c == "#" and at_word:
                i = text.find("\n", i)
                if i < 0:
                    i = end
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
                self.may_close |= depth < self.line_depth
            elif c == "`":
                self.may_close |= self.backquote == "before"
                self.backquote = "" if self.backquote else "here"
            elif c == "\n":
                self._line_starts(depth)
                if bodies:
                    i, self.reading = _after_bodies(text, i + 1, bodies)
                    bodies = []
                    if self.reading:
                        self.quote, self.depth, self.last = quote, depth, last
                        self.i = i
                        return True
                    self.may_close = True
                    continue
            elif c in "&|":
                operator = text[i : i + 2] if text.startswith(("&&", "||", "|&"), i) else c
                last = "|" if operator == "|&" else operator
                i += len(operator)
                continue
            elif at_word and _closing_word_at(text, i):
                self.may_close = True
            if not c.isspace():
                last = "w"
            i += 1
        self.i, self.quote, self.depth, self.last = i, quote, depth, last
        return bool(quote) or i < end or bool(bodies) or depth > 0 or last in _CONTINUING

    def _line_starts(self, depth: int) -> None:
        self.line_depth = depth
        if self.backquote:
            self.backquote = "before"


def _closing_word_at(text: str, i: int) -> bool:
    for word in _CLOSING_WORDS:
        if text.startswith(word, i):
            after = i + len(word)
            return after == len(text) or text[after] in _METACHARACTERS
    return False


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


def _after_bodies(
    text: str, i: int, bodies: list[tuple[str, bool]]
) -> tuple[int, list[tuple[str, bool]]]:
    """Where the here-documents' bodies, from ``i``, end, and those whose body has not ended
    (the one being read first; none when all have)."""
    for index, (delimiter, strip) in enumerate(bodies):
        while True:
            line_end = text.find("\n", i)
            if line_end < 0:
                return i, bodies[index:]
            line = text[i:line_end]
            i = line_end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
    return i, []


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
        # Silent: a client's command may have made them readonly (bash would not mind).
        restore = [f"unset {_STATUS} {_TRAP} 2>/dev/null"]
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
    gathering = _Gathering()
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
        parse = await _parse_of(gathering, bash, pending)
        if found and parse is _Parse.INCOMPLETE:
            continue
        command, pending, gathering = pending, "", _Gathering()
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
