"""The arguments of a ``bash`` (or ``sh``) invocation, read as bash reads them: options up to
the first operand (or ``--``, or a lone ``-``), then the operands — the ``-c`` script and its
``$0``, ``$1``…, or a script file and its arguments.

The fake reads them where a client's argv starts a shell (``/exec``, ``/processes``) and where
a script starts one in turn (``bash -c``, ``sh -s`` inside a managed process): one reading, so
both agree on what ``bash -euo pipefail -c 'script' name`` means.

Example:
    >>> args = BashArguments.parse(["-euo", "pipefail", "-c", "false | true", "job"])
    >>> args.command, args.operands
    (True, ('false | true', 'job'))
    >>> args.settings()
    ['set -e', 'set -u', 'set -o pipefail']
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["BashArguments", "BashOption"]

#: Long options that take the next word as their value.
_VALUED_LONG = frozenset({"--rcfile", "--init-file"})
#: Short options whose value is the next word (``-o pipefail``, ``-O extglob``).
_VALUED_SHORT = frozenset("oO")
#: The single-letter options a running shell takes with ``set`` (the others — ``-l``, ``-i``,
#: ``-r``, ``-s``, ``-c`` — describe how the shell starts, which the fake decides itself).
_SETTABLE = frozenset("euxvf")


class BashOption(NamedTuple):
    """One option word of the invocation (``-ec``, ``+o``, ``--login``, ``--``), with the word
    it takes as its value (``-o NAME``, ``-O NAME``, ``--rcfile FILE``), if any."""

    word: str
    value: str | None = None

    @property
    def letters(self) -> str:
        """The option letters of a short option word (``-ec`` → ``ec``); empty for the rest."""
        if self.word in ("-", "--") or self.word.startswith("--"):
            return ""
        return self.word[1:]

    def words(self) -> list[str]:
        """The option as it appears in argv."""
        return [self.word] if self.value is None else [self.word, self.value]


@dataclass(frozen=True)
class BashArguments:
    """A shell's arguments (argv after its name): its ``options`` and its ``operands``."""

    options: tuple[BashOption, ...]
    operands: tuple[str, ...]

    @classmethod
    def parse(cls, args: list[str]) -> BashArguments:
        """Read ``args`` as bash does.

        Example:
            >>> BashArguments.parse(["--rcfile", "/dev/null", "-c", "echo hi"]).operands
            ('echo hi',)
        """
        options: list[BashOption] = []
        index = 0
        while index < len(args):
            word = args[index]
            if not word.startswith(("-", "+")) or word == "+":
                break
            index += 1
            if word in ("-", "--"):  # the end of the options (a lone "-" is "--")
                options.append(BashOption(word))
                break
            takes_value = (
                word in _VALUED_LONG
                if word.startswith("--")
                else any(letter in _VALUED_SHORT for letter in word[1:])
            )
            if takes_value:
                # A missing value reads as empty: bash would refuse the invocation, and the
                # interpreter the fake hands it to says so.
                value = args[index] if index < len(args) else ""
                index += 1
                options.append(BashOption(word, value))
            else:
                options.append(BashOption(word))
        return cls(tuple(options), tuple(args[index:]))

    @property
    def command(self) -> bool:
        """Whether ``-c`` was given: the first operand is the script."""
        return any(o.word.startswith("-") and "c" in o.letters for o in self.options)

    @property
    def stdin(self) -> bool:
        """Whether ``-s`` was given: the script comes from stdin, the operands are its
        arguments."""
        return any(o.word.startswith("-") and "s" in o.letters for o in self.options)

    @property
    def script_index(self) -> int | None:
        """Where the script is in argv: the ``-c`` script, or the script file; ``None`` when
        the shell reads its script from stdin (no operand, or ``-s`` without ``-c``).

        Example:
            >>> BashArguments.parse(["-e", "job.sh", "arg"]).script_index
            1
        """
        if not self.operands or (self.stdin and not self.command):
            return None
        return sum(len(option.words()) for option in self.options)

    def settings(self) -> list[str]:
        """The ``set`` commands that give a running shell the options a new one would start
        with (``-e``, ``-u``, ``-x``, ``-v``, ``-f``, ``-o NAME`` and their ``+`` forms; for
        ``-O NAME`` see :meth:`shopt_settings`).

        Example:
            >>> BashArguments.parse(["-e", "+o", "histexpand"]).settings()
            ['set -e', 'set +o histexpand']
        """
        lines: list[str] = []
        for option in self.options:
            sign = option.word[0]
            lines.extend(f"set {sign}{letter}" for letter in option.letters if letter in _SETTABLE)
            if "o" in option.letters and option.value is not None:
                lines.append(f"set {sign}o {shlex.quote(option.value)}")
        return lines

    def shopt_settings(self) -> list[str]:
        """The ``shopt`` commands for the shell's ``-O NAME`` and ``+O NAME`` options. Such an
        option (``extglob``) changes how the script is parsed, and bash parses a line before
        it runs it: a shell gets them in a run of their own, ahead of its script's first line.

        Example:
            >>> BashArguments.parse(["-O", "extglob", "+O", "nullglob", "-c", "s"]).shopt_settings()
            ['shopt -s extglob', 'shopt -u nullglob']
        """
        return [
            f"shopt {'-s' if option.word[0] == '-' else '-u'} {shlex.quote(option.value)}"
            for option in self.options
            if "O" in option.letters and option.value is not None
        ]
