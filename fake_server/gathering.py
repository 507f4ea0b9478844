"""An interactive shell's input gathered into complete commands: a command goes on across
lines while it is incomplete (an open ``if``, quote or parenthesis, a ``\\``-newline, a trailing
``&&``, a here-document whose body has not ended), as GNU bash reads a script on its stdin.

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
from typing import NamedTuple, Protocol

import bashkit

from fake_server.worker_thread import off_loop

__all__ = ["ON_LOOP", "Gathering", "Parse", "Parser", "needs_more", "parse_of"]

#: Parse errors that say the text only stops too early (more lines complete it).
_CUT_SHORT = re.compile(r"end of file|end of input|\beof\b|unterminated", re.IGNORECASE)
#: The operators after which a command goes on on the next line.
_CONTINUING = ("&&", "||", "|")
#: Characters that end an unquoted word.
_METACHARACTERS = frozenset(" \t\n;&|<>()")


def needs_more(bash: bashkit.Bash, text: str) -> bool:
    """Whether ``text`` (whole lines) is not yet a complete command: a here-document's body
    or a continued line is still open (:class:`_Scanner`), or the parser says it ends too
    early (an ``if`` without ``fi``, an open quote)."""
    return Gathering().parse(bash, text) is Parse.INCOMPLETE


class Parse(enum.Enum):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    #: A syntax error that more lines cannot mend.
    WRONG = "wrong"


class Parser(Protocol):
    """What reads a whole text: an interpreter (:meth:`bashkit.Bash.analyze`)."""

    def analyze(self, script: str) -> object: ...


class Gathering:
    """One command's lines as they come: each line is scanned once (:class:`_Scanner`), and
    the parser reads the whole text again only when the new lines may have ended what kept it
    incomplete. Parsing the whole text at every line made a 1,000-line ``if`` sent to a shell
    hold the event loop for 8 s (the parser takes ~10 ms for it), a here-document of 4,000
    lines for 1 s."""

    def __init__(self, flags: str | None = None) -> None:
        self.scanner = _Scanner(flags)
        #: What the parser said last, if it was asked.
        self.parsed: Parse | None = None

    def parse(self, bash: Parser, text: str) -> Parse:
        """Where ``text``, the lines gathered so far (the last call's and more), stands."""
        scanned = self.scan(text)
        return self.parsed_as(_analyzed(bash, self.edited(text))) if scanned is None else scanned

    def scan(self, text: str) -> Parse | None:
        """Where ``text`` stands as far as the scan tells, or None when the parser must read
        it (then :meth:`parsed_as` takes what it said)."""
        if self.scanner.open_at_end(text):
            return Parse.INCOMPLETE
        if self.parsed is not Parse.INCOMPLETE or self.scanner.may_close:
            return None
        return self.parsed

    def parsed_as(self, parse: Parse) -> Parse:
        """Take what the parser said of the whole text."""
        self.parsed = parse
        self.scanner.may_close = False
        return parse

    def edited(self, text: str) -> str:
        """``text`` (scanned) as the interpreter must run it to read it as bash does (see
        :attr:`_Scanner.edits`)."""
        if not self.scanner.edits:
            return text
        parts: list[str] = []
        at = 0
        for start, end, replacement in self.scanner.edits:
            parts += (text[at:start], replacement)
            at = end
        parts.append(text[at:])
        return "".join(parts)


#: How much text the shell scans or parses on the event loop; more goes to a worker thread
#: (the parser lets go of the GIL; the scan, in Python, shares it every few ms). On the loop,
#: an 8 MiB line held it for 3 s (the scan) and a line of 8 MiB of words for 8 s (the parse).
ON_LOOP = 64 << 10


async def parse_of(gathering: Gathering, bash: Parser, text: str) -> Parse:
    """:meth:`Gathering.parse`, a long text's scan or parse on a worker thread."""
    if len(text) - gathering.scanner.i > ON_LOOP:
        return await off_loop(gathering.parse, bash, text)
    scanned = gathering.scan(text)
    if scanned is not None:
        return scanned
    text = gathering.edited(text)
    if len(text) > ON_LOOP:
        return gathering.parsed_as(await off_loop(_analyzed, bash, text))
    return gathering.parsed_as(_analyzed(bash, text))


def _analyzed(bash: Parser, text: str) -> Parse:
    try:
        bash.analyze(text)
    except bashkit.BashError as exc:
        return Parse.INCOMPLETE if _CUT_SHORT.search(str(exc)) else Parse.WRONG
    return Parse.COMPLETE


#: The parameters the scan reads whole: ``$-`` and ``${-}`` (see :attr:`_Scanner.flags`), and
#: ``$$``, whose second ``$`` starts no ``$-``.
_PARAMETERS = ("$$", "$-", "${-}")
_FLAGS = re.compile(r"\$\{?-")
#: Words that end a compound command (at a word's start and end).
_CLOSING_WORDS = ("fi", "done", "esac", "]]", "}")


class _Body(NamedTuple):
    """A here-document whose body follows."""

    delimiter: str  # its quotes removed
    strip: bool  # <<-: the lines' leading tabs go
    literal: bool  # the delimiter was quoted: the body neither expands nor joins lines


class _Scanner:
    """Whether the text ends inside a here-document's body, after a ``\\``-newline, a ``&&``,
    ``||`` or ``|``, inside parentheses (``arr=(``) or inside a quote: the interpreter's parser
    accepts the first four as they are. Scans only what was appended since the last call, and
    notes whether that may end a construct the parser found open (:attr:`may_close`): a ``)``
    or a backquote that closes one opened on an earlier line, a closing word (``fi``, ``done``,
    ``esac``, ``]]``, ``}``), a quote that spanned lines, a here-document's end. A line's own
    ``$(…)`` or backquotes do not count: a script's lines are full of them."""

    def __init__(self, flags: str | None = None) -> None:
        #: What ``$-`` and ``${-}`` must expand to instead (None: the interpreter's ``$-``).
        self.flags = flags
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
        self.reading: list[_Body] = []
        #: The start of a body's line continued by a ``\\``-newline, and how many newlines the
        #: bodies being read have lost that way (see :meth:`_after_bodies`).
        self.continued = ""
        self.joined = 0
        self.may_close = False
        #: Where the interpreter must be given other text than the client's to read it as bash
        #: does, in order: ``(start, end, replacement)``.
        self.edits: list[tuple[int, int, str]] = []

    def open_at_end(self, text: str) -> bool:
        i, end = self.i, len(text)
        if self.reading:
            i, self.reading = self._after_bodies(text, i, self.reading)
            if self.reading:
                self.i = i
                return True
            self.may_close = True
        quote, depth, last = self.quote, self.depth, self.last
        bodies: list[_Body] = []  # here-documents whose bodies follow this line
        while i < end:
            c = text[i]
            if quote:
                if c == "\\" and quote != "'":
                    i += 2
                    continue
                if c == "$" and quote == '"' and text.startswith(_PARAMETERS, i):
                    i = self._after_parameter(text, i)
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
            elif c == "$" and text.startswith(_PARAMETERS, i):
                i, last = self._after_parameter(text, i), "w"
                continue
            elif text.startswith("<<<", i):  # a here-string: its word is on this line
                i, last = i + 3, "w"
                continue
            elif text.startswith("<<", i):
                i, body = _here_document(text, i + 2)
                bodies.append(body)
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
                    i, self.reading = self._after_bodies(text, i + 1, bodies)
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

    def _after_bodies(self, text: str, i: int, bodies: list[_Body]) -> tuple[int, list[_Body]]:
        """Where the here-documents' bodies, from ``i``, end, and those whose body has not
        ended (the one being read first; none when all have).

        In a body that expands, bash joins a line that ends in a ``\\`` to the next before it
        compares it with the delimiter (``EO\\`` then ``F`` ends the body of ``<<EOF``;
        ``x\\`` then ``EOF`` does not). The interpreter compares the lines as they are, so
        those ``\\``-newlines go (the body has none of them in bash either), and the newlines
        come back after the last body, for ``$LINENO`` further on."""
        for index, body in enumerate(bodies):
            expands = not body.literal
            while True:
                line_end = text.find("\n", i)
                if line_end < 0:
                    return i, bodies[index:]
                line = text[i:line_end]
                if expands and self.flags is not None:
                    self._parameters_in(text, i, line_end)
                i = line_end + 1
                if expands and line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2:
                    self.edits.append((line_end - 1, i, ""))
                    self.joined += 1
                    self.continued += line[:-1]
                    continue
                line, self.continued = self.continued + line, ""
                if (line.lstrip("\t") if body.strip else line) == body.delimiter:
                    break
        if self.joined:
            self.edits.append((i, i, "\n" * self.joined))
            self.joined = 0
        return i, []

    def _after_parameter(self, text: str, i: int) -> int:
        """Where the parameter at ``i`` (one of :data:`_PARAMETERS`) ends, noting ``$-`` and
        ``${-}`` when they must expand to :attr:`flags` (``$$-`` is the pid and a ``-``)."""
        name = next(name for name in _PARAMETERS if text.startswith(name, i))
        if name != "$$" and self.flags is not None:
            self.edits.append((i, i + len(name), self.flags))
        return i + len(name)

    def _parameters_in(self, text: str, i: int, end: int) -> None:
        """Note the ``$-`` and ``${-}`` of a here-document's line that expands, from ``i`` to
        ``end`` (where a ``\\`` quotes a ``$``)."""
        if not _FLAGS.search(text, i, end):
            return  # most lines
        dollar = text.find("$", i, end)
        while dollar >= 0:
            start = dollar
            while start > i and text[start - 1] == "\\":
                start -= 1
            after = dollar + 1
            if not (dollar - start) % 2 and text.startswith(_PARAMETERS, dollar):
                after = self._after_parameter(text, dollar)
            dollar = text.find("$", after, end)


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


def _here_document(text: str, i: int) -> tuple[int, _Body]:
    """The here-document operator's word from ``i`` (just after ``<<``): where it ends, and
    the body it announces."""
    strip = text.startswith("-", i)
    i += strip
    while i < len(text) and text[i] in " \t":
        i += 1
    word: list[str] = []
    quote = ""
    literal = False
    while i < len(text) and (quote or text[i] not in _METACHARACTERS):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
            else:
                word.append(c)
        elif c in "'\"":
            quote = c
            literal = True
        elif c == "\\":
            i += 1
            word.append(text[i : i + 1])
            literal = True
        else:
            word.append(c)
        i += 1
    return i, _Body("".join(word), strip, literal)
