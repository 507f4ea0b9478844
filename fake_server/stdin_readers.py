"""Which commands read their stdin, told from their arguments as the GNU tools tell it.

A managed process's live stdin reaches a command only through the fake (see
:mod:`fake_server.live_input`): bash functions hand it to the commands in
:data:`STDIN_READERS` when the caller reads the process's own stdin *and* the command would read
its stdin at all. That second half is decided here, from the arguments alone: ``wc -c`` reads
stdin, ``wc -c /etc/hostname`` does not (it must not wait for input that it will never read),
``grep -r pat`` searches the working directory, ``sed -i`` edits files, ``shuf -e`` shuffles its
operands.

One table (:data:`STDIN_READERS`) holds what each command's options mean; :func:`reads_stdin`
reads argv against it, for the bash functions that ask it. A command the
table does not know, or arguments it cannot place, get the answer "does not read stdin": the
command then runs as it always did, instead of waiting for input it may never read.

Example:
    >>> reads_stdin("head", ["-n", "3"]), reads_stdin("head", ["-n", "3", "notes.txt"])
    (True, False)
"""

from __future__ import annotations

import enum
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from fake_server.filesystem import PROGRAM_DIRS

__all__ = ["RUNNERS", "STDIN_READERS", "Effect", "Runner", "Syntax", "reads_stdin"]

#: An awk operand ``NAME=value`` assigns a variable; it is not a file.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: The obsolete ``tail +N`` form (a line number, then an optional unit and flag letters).
_LEGACY_PLUS = re.compile(r"\+\d+[bcl]?f?")
#: The names of stdin as a file operand (or an option's file): ``-``, and the device a GNU tool
#: opens as its stdin too.
_STDIN_NAMES = frozenset({"-", "/dev/stdin"})
#: Options that make every GNU tool print and exit without reading anything.
_INFORMATION = frozenset({"--help", "--version"})


class Effect(enum.Enum):
    """What an option means for stdin, beyond taking a value."""

    #: Its value is the script or pattern: the leading operand is then a file (``grep -e``).
    SCRIPT = "script"
    #: Its value names a file holding the script; ``-`` reads it from stdin (``sed -f``).
    SCRIPT_FILE = "script file"
    #: Its value names the input instead of stdin; ``-`` is stdin (``xargs -a``).
    INPUT_FILE = "input file"
    #: The command reads no stdin at all (``sed -i``, ``shuf -e``, ``jq -n``).
    NO_STDIN = "no stdin"
    #: Without file operands the command searches the working directory (``grep -r``).
    RECURSIVE = "recursive"
    #: The operands after it are string arguments, not files (``jq --args``).
    REST_ARE_ARGUMENTS = "rest are arguments"


@dataclass(frozen=True)
class Syntax:
    """How one command's argv says whether it reads stdin.

    Options are written as on the command line: ``"-n"``, ``"--lines"``. A short option not
    listed is a flag; a long option not listed takes no separate value (``--name=value`` keeps
    its value either way).

    Example:
        >>> Syntax(values="nc", long_values={"--lines", "--bytes"}).takes_value("-n")
        True
    """

    #: Short options that take a value, attached (``-n3``) or as the next argument.
    values: str = ""
    #: Short options whose value can only be attached (``sed -i.bak``, ``xargs -i{}``).
    optional_values: str = ""
    #: Long options that take a value, after ``=`` or as the next argument.
    long_values: AbstractSet[str] = frozenset()
    #: Long options that take two values (``jq --arg NAME VALUE``).
    pairs: AbstractSet[str] = frozenset()
    #: What some options mean for stdin (see :class:`Effect`).
    effects: Mapping[str, Effect] = field(default_factory=dict)
    #: Operands before the files that are not files (grep's pattern, sed's script), unless an
    #: option with :attr:`Effect.SCRIPT` or :attr:`Effect.SCRIPT_FILE` gave them.
    leading: int = 0
    #: Without its leading operands it runs a default script, not a usage error (``jq``: ``.``).
    default_script: bool = False
    #: How many operands are inputs (``uniq IN OUT``: one); None: all of them.
    inputs: int | None = None
    #: It reads stdin whatever its operands (``tr``; ``tee``'s operands are outputs).
    always: bool = False
    #: Options end at the first operand (``xargs CMD -a`` passes ``-a`` on to CMD).
    options_first: bool = False
    #: ``NAME=value`` operands assign variables (awk).
    assignments: bool = False
    #: The obsolete ``tail +N`` form is an option when it comes first.
    legacy_plus: bool = False
    #: Each ``-word`` is one option, never a cluster of letters (xxd: ``-ps``, ``-cols 8``).
    word_options: bool = False
    #: xxd's long spellings of its valued letters (``-cols``, ``-len``): they take the next
    #: argument, where ``-c8`` has its value attached.
    word_spellings: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        valued = {Effect.SCRIPT, Effect.SCRIPT_FILE, Effect.INPUT_FILE}
        for option, effect in self.effects.items():
            if effect in valued and not self.takes_value(option):
                raise ValueError(f"{option} has a value ({effect.value}) but is not valued")

    def takes_value(self, option: str) -> bool:
        """Whether ``option`` (``-x`` or ``--name``) takes a value."""
        if option.startswith("--"):
            return option in self.long_values
        return len(option) == 2 and option[1] in self.values + self.optional_values


_CHECKSUM = Syntax()
_GREP = Syntax(
    values="efmABCdD",
    long_values={
        "--regexp",
        "--file",
        "--max-count",
        "--after-context",
        "--before-context",
        "--context",
        "--directories",
        "--devices",
        "--label",
        "--include",
        "--exclude",
        "--exclude-from",
        "--exclude-dir",
        "--binary-files",
        "--group-separator",
    },
    effects={
        "-e": Effect.SCRIPT,
        "--regexp": Effect.SCRIPT,
        "-f": Effect.SCRIPT_FILE,
        "--file": Effect.SCRIPT_FILE,
        "-r": Effect.RECURSIVE,
        "-R": Effect.RECURSIVE,
        "--recursive": Effect.RECURSIVE,
        "--dereference-recursive": Effect.RECURSIVE,
    },
    leading=1,
)
_BASE_ENCODING = Syntax(values="w", long_values={"--wrap"})

#: The commands whose stdin the fake feeds from a managed process's live input, by name.
STDIN_READERS: Mapping[str, Syntax] = {
    "cat": Syntax(),
    "wc": Syntax(long_values={"--files0-from"}, effects={"--files0-from": Effect.INPUT_FILE}),
    "sort": Syntax(
        values="kotST",
        long_values={
            "--key",
            "--output",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
            "--parallel",
            "--batch-size",
            "--compress-program",
            "--random-source",
            "--sort",
            "--files0-from",
        },
        effects={"--files0-from": Effect.INPUT_FILE},
    ),
    "uniq": Syntax(
        values="fsw", long_values={"--skip-fields", "--skip-chars", "--check-chars"}, inputs=1
    ),
    "head": Syntax(values="nc", long_values={"--lines", "--bytes"}),
    "tail": Syntax(
        values="ncs",
        long_values={
            "--lines",
            "--bytes",
            "--sleep-interval",
            "--pid",
            "--max-unchanged-stats",
        },
        legacy_plus=True,
    ),
    "cut": Syntax(
        values="bcdf",
        long_values={"--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter"},
    ),
    "tr": Syntax(leading=1, always=True),
    "tee": Syntax(always=True),
    "grep": _GREP,
    "egrep": _GREP,
    "fgrep": _GREP,
    "sed": Syntax(
        values="efl",
        optional_values="i",
        long_values={"--expression", "--file", "--line-length"},
        effects={
            "-e": Effect.SCRIPT,
            "--expression": Effect.SCRIPT,
            "-f": Effect.SCRIPT_FILE,
            "--file": Effect.SCRIPT_FILE,
            "-i": Effect.NO_STDIN,
            "--in-place": Effect.NO_STDIN,
        },
        leading=1,
    ),
    "awk": Syntax(
        values="Fvf",
        long_values={"--field-separator", "--assign", "--file"},
        effects={"-f": Effect.SCRIPT_FILE, "--file": Effect.SCRIPT_FILE},
        leading=1,
        options_first=True,
        assignments=True,
    ),
    "jq": Syntax(
        values="fL",
        long_values={"--from-file", "--indent"},
        pairs={"--arg", "--argjson", "--slurpfile", "--rawfile"},
        effects={
            "-f": Effect.SCRIPT_FILE,
            "--from-file": Effect.SCRIPT_FILE,
            "-n": Effect.NO_STDIN,
            "--null-input": Effect.NO_STDIN,
            "--args": Effect.REST_ARE_ARGUMENTS,
            "--jsonargs": Effect.REST_ARE_ARGUMENTS,
        },
        leading=1,
        default_script=True,
    ),
    "xargs": Syntax(
        values="adEILnPs",
        optional_values="eil",
        long_values={
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        },
        effects={"-a": Effect.INPUT_FILE, "--arg-file": Effect.INPUT_FILE},
        always=True,
        options_first=True,
    ),
    "base64": _BASE_ENCODING,
    "base32": _BASE_ENCODING,
    "sha256sum": _CHECKSUM,
    "sha1sum": _CHECKSUM,
    "md5sum": _CHECKSUM,
    "cksum": Syntax(values="al", long_values={"--algorithm", "--length"}),
    "tac": Syntax(values="s", long_values={"--separator"}),
    "rev": Syntax(),
    "nl": Syntax(
        values="bdfhilnsvw",
        long_values={
            "--body-numbering",
            "--section-delimiter",
            "--footer-numbering",
            "--header-numbering",
            "--line-increment",
            "--join-blank-lines",
            "--number-format",
            "--number-separator",
            "--starting-line-number",
            "--number-width",
        },
    ),
    "fold": Syntax(values="w", long_values={"--width"}),
    "od": Syntax(
        values="AjNSt",
        optional_values="w",
        long_values={"--address-radix", "--skip-bytes", "--read-bytes", "--format", "--endian"},
    ),
    "xxd": Syntax(
        values="cglsonR",
        inputs=1,
        options_first=True,
        word_options=True,
        word_spellings={
            "c": "-cols",
            "g": "-groupsize",
            "l": "-len",
            "s": "-seek",
            "o": "-offset",
            "n": "-name",
        },
    ),
    "paste": Syntax(values="d", long_values={"--delimiters"}),
    "shuf": Syntax(
        values="ino",
        long_values={"--input-range", "--head-count", "--output", "--random-source"},
        effects={
            "-e": Effect.NO_STDIN,
            "--echo": Effect.NO_STDIN,
            "-i": Effect.NO_STDIN,
            "--input-range": Effect.NO_STDIN,
        },
    ),
}


@dataclass(frozen=True)
class Runner:
    """A command that runs the command its operands name (``env A=1 cat``, ``command cat``),
    which gets its stdin: it reads stdin when that command does.

    Example:
        >>> Runner(values="u").command(["-u", "HOME", "cat", "-n"])
        ['cat', '-n']
    """

    #: Short options that take a value, attached or as the next argument (``env -u NAME``).
    values: str = ""
    #: Long options that take a value, after ``=`` or as the next argument.
    long_values: AbstractSet[str] = frozenset()
    #: Options after which it runs nothing (``command -v``), or that make the command's argv
    #: something the table cannot read (``env -S STRING`` splits STRING into it).
    no_command: AbstractSet[str] = frozenset()
    #: ``NAME=value`` operands (and a lone ``-``) come before the command (env).
    assignments: bool = False

    def command(self, args: Sequence[str]) -> list[str] | None:
        """The argv of the command it runs, or None when it runs none that can be told."""
        rest = list(args)
        while rest and rest[0].startswith("-") and rest[0] != "-":
            option = rest.pop(0)
            if option == "--":
                break
            name, equals, _ = option.partition("=")
            if option.startswith("--"):
                if name in self.no_command or name in ("--help", "--version"):
                    return None
                if name in self.long_values and not equals and rest:
                    rest.pop(0)
                continue
            for position, letter in enumerate(option[1:], start=2):
                if f"-{letter}" in self.no_command:
                    return None
                if letter in self.values:
                    if position == len(option) and rest:
                        rest.pop(0)
                    break
        while self.assignments and rest and (rest[0] == "-" or _ASSIGNMENT.match(rest[0])):
            rest.pop(0)
        return rest or None


#: Commands that run another one on the same stdin, by name.
RUNNERS: Mapping[str, Runner] = {
    "command": Runner(no_command={"-v", "-V"}),
    "env": Runner(
        values="uCS",
        long_values={"--unset", "--chdir", "--split-string"},
        no_command={"-S", "--split-string", "--list-signal-handling"},
        assignments=True,
    ),
}


def reads_stdin(name: str, args: Sequence[str]) -> bool:
    """Whether command ``name`` run with ``args`` reads its stdin: when it has no file operand,
    or one of them is ``-`` or ``/dev/stdin``; for one of :data:`RUNNERS`, when the command it
    runs does. False for commands outside :data:`STDIN_READERS`, and when the command stops
    before reading (``--help``, a missing pattern).

    Example:
        >>> reads_stdin("grep", ["-n", "foo"]), reads_stdin("grep", ["foo", "/etc/hostname"])
        (True, False)
        >>> reads_stdin("grep", ["-e", "foo"]), reads_stdin("grep", ["-r", "foo"])
        (True, False)
        >>> reads_stdin("jq", ["--arg", "x", "1", ".a"]), reads_stdin("sed", ["-i", "s/a/b/"])
        (True, False)
        >>> reads_stdin("tee", ["/tmp/copy"]), reads_stdin("ls", [])
        (True, False)
        >>> reads_stdin("env", ["A=1", "wc", "-l"]), reads_stdin("command", ["-v", "wc"])
        (True, False)
    """
    runner = RUNNERS.get(name)
    if runner is not None:
        command = runner.command(args)
        if command is None:
            return False
        # A runner finds a program by its path too (env /usr/bin/cat).
        directory, program = posixpath.split(command[0])
        return reads_stdin(program if directory in PROGRAM_DIRS else command[0], command[1:])
    syntax = STDIN_READERS.get(name)
    if syntax is None:
        return False
    return _Reading(syntax).read(list(args))


class _Reading:
    """One pass over one command's argv (see :func:`reads_stdin`)."""

    def __init__(self, syntax: Syntax) -> None:
        self.syntax = syntax
        #: The operands that may name inputs (not those after ``jq --args``).
        self.operands: list[str] = []
        self.script_given = False
        self.stdin_named = False
        self.input_given = False
        self.no_stdin = False
        self.recursive = False
        self.rest_are_arguments = False

    def read(self, args: list[str]) -> bool:
        syntax = self.syntax
        rest = iter(args)
        options_done = False
        for index, arg in enumerate(rest):
            if options_done or arg == "-" or not arg.startswith("-"):
                if index == 0 and self._legacy_count(arg, args):
                    continue
                self._operand(arg)
                options_done = options_done or syntax.options_first
            elif arg == "--":
                options_done = True
            elif arg in _INFORMATION:
                return False
            elif syntax.word_options:
                # xxd takes "--cols" for "-cols".
                self._word(arg[1:] if arg.startswith("--") else arg, rest)
            elif arg.startswith("--"):
                self._long(arg, rest)
            else:
                self._cluster(arg, rest)
        return self._verdict()

    def _legacy_count(self, arg: str, args: list[str]) -> bool:
        """Whether ``arg``, the first argument, is the obsolete ``tail +N`` (GNU: with at most
        one file after it)."""
        return self.syntax.legacy_plus and len(args) <= 2 and bool(_LEGACY_PLUS.fullmatch(arg))

    def _operand(self, arg: str) -> None:
        program_pending = not self.script_given and len(self.operands) < self.syntax.leading
        if self.rest_are_arguments and not program_pending:
            return  # a string for the script, not a file
        self.operands.append(arg)

    def _long(self, arg: str, rest: Iterator[str]) -> None:
        option, equals, value = arg.partition("=")
        if option in self.syntax.pairs:
            # NAME after "=" or as the next argument, then VALUE as the next one.
            if not equals:
                next(rest, None)
            next(rest, None)
            return
        if option in self.syntax.long_values and not equals:
            value = next(rest, "")
        self._apply(option, value)

    def _cluster(self, arg: str, rest: Iterator[str]) -> None:
        syntax = self.syntax
        for position, letter in enumerate(arg[1:], start=2):
            attached = arg[position:]
            if letter in syntax.values:
                self._apply(f"-{letter}", attached or next(rest, ""))
                return
            if letter in syntax.optional_values:
                self._apply(f"-{letter}", attached)
                return
            self._apply(f"-{letter}", "")

    def _word(self, arg: str, rest: Iterator[str]) -> None:
        letter = arg[1]
        if letter not in self.syntax.values:
            self._apply(arg, "")
            return
        spelling = self.syntax.word_spellings.get(letter, "")
        attached = "" if spelling.startswith(arg) else arg[2:]
        self._apply(f"-{letter}", attached or next(rest, ""))

    def _apply(self, option: str, value: str) -> None:
        effect = self.syntax.effects.get(option)
        if effect is Effect.SCRIPT:
            self.script_given = True
        elif effect is Effect.SCRIPT_FILE:
            self.script_given = True
            self.stdin_named |= value in _STDIN_NAMES
        elif effect is Effect.INPUT_FILE:
            self.stdin_named |= value in _STDIN_NAMES
            self.input_given |= value not in _STDIN_NAMES
        elif effect is Effect.NO_STDIN:
            self.no_stdin = True
        elif effect is Effect.RECURSIVE:
            self.recursive = True
        elif effect is Effect.REST_ARE_ARGUMENTS:
            self.rest_are_arguments = True

    def _verdict(self) -> bool:
        syntax = self.syntax
        files = self.operands
        if not self.script_given:
            if len(files) < syntax.leading and not syntax.default_script:
                return False  # a usage error: the command stops before reading
            files = files[syntax.leading :]
        if self.no_stdin or (self.input_given and not self.stdin_named):
            return False
        if self.stdin_named or syntax.always:
            return True
        if syntax.assignments:
            files = [name for name in files if not _ASSIGNMENT.match(name)]
        if syntax.inputs is not None:
            files = files[: syntax.inputs]
        if not files:
            return not self.recursive
        return not _STDIN_NAMES.isdisjoint(files)
