"""GNU command-line conventions shared by the commands the fake writes itself (``date``,
``realpath``, ``rm``, ``setsid``): glibc ``getopt_long``, gnulib's ``quote`` and ``quotef``, and the
way a coreutils program reports a failure.

Example:
    >>> operands: list[str] = []
    >>> options = Options(long=(("zero", "no", "z"),), short={"z": "no"})
    >>> list(options.parse(["a", "-z", "--ze", "b"], operands)), operands
    ([('z', None), ('z', None)], ['a', 'b'])
    >>> quotef("a b"), quotef("plain")
    ("'a b'", 'plain')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Failure", "Options", "quote", "quotef", "version_text"]


def version_text(program: str, author: str) -> str:
    """What ``PROGRAM --version`` prints for a command of the image's coreutils (Ubuntu 24.04
    ships 9.4; scripts sniff the first line to tell GNU's tools from BSD's).

    Example:
        >>> version_text("date", "David MacKenzie").splitlines()[0]
        'date (GNU coreutils) 9.4'
    """
    return (
        f"{program} (GNU coreutils) 9.4\n"
        "Copyright (C) 2023 Free Software Foundation, Inc.\n"
        "License GPLv3+: GNU GPL version 3 or later <https://gnu.org/licenses/gpl.html>.\n"
        "This is free software: you are free to change and redistribute it.\n"
        "There is NO WARRANTY, to the extent permitted by law.\n"
        f"\nWritten by {author}.\n"
    )


#: What an option's argument is: none, required, or optional (attached only).
Argument = str  # "no" | "req" | "opt"


class Failure(Exception):
    """Ends a command with exit status 1 and ``message`` on stderr, as ``COMMAND: message``,
    followed by the "Try --help" line when it is a ``usage`` error."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage

    def text(self, command: str) -> str:
        """What the command writes on stderr."""
        tail = f"Try '{command} --help' for more information.\n" if self.usage else ""
        return f"{command}: {self.message}\n{tail}"


@dataclass(frozen=True)
class Options:
    """One command's options: ``long`` as (name, argument, key) in the program's table order
    (glibc's ambiguity messages follow it), ``short`` as letter -> argument; ``permute`` False
    for a program that runs another (``getopt``'s ``+``): its options end at the first operand.

    Example:
        >>> operands: list[str] = []
        >>> list(Options(long=(), short={"f": "no"}, permute=False).parse(["-f", "ls", "-f"],
        ...     operands)), operands
        ([('f', None)], ['ls', '-f'])
    """

    long: Sequence[tuple[str, Argument, str]]
    short: Mapping[str, Argument]
    permute: bool = True

    def parse(self, args: Sequence[str], operands: list[str]) -> Iterator[tuple[str, str | None]]:
        """glibc ``getopt_long`` with permutation: yields (key, value) for each option in
        order, collects the operands; raises :class:`Failure` as GNU reports a bad option."""
        i = 0
        while i < len(args):
            arg, i = args[i], i + 1
            if arg == "--":
                operands.extend(args[i:])
                return
            if arg.startswith("--"):
                key, value, i = self._long_option(arg, args, i)
                yield key, value
            elif arg.startswith("-") and arg != "-":
                for j, char in enumerate(arg[1:], start=2):
                    kind = self.short.get(char, "")
                    if not kind:
                        raise Failure(f"invalid option -- '{char}'", usage=True)
                    if kind == "no":
                        yield char, None
                        continue
                    if j < len(arg) or kind == "opt":  # an optional argument must be attached
                        yield char, arg[j:] or None
                    elif i < len(args):
                        yield char, args[i]
                        i += 1
                    else:
                        raise Failure(f"option requires an argument -- '{char}'", usage=True)
                    break
            else:
                operands.append(arg)
                if not self.permute:
                    operands.extend(args[i:])
                    return

    def _long_option(self, arg: str, args: Sequence[str], i: int) -> tuple[str, str | None, int]:
        name, eq, value = arg[2:].partition("=")
        found = [o for o in self.long if o[0] == name]
        found = found or [o for o in self.long if o[0].startswith(name)]
        if not found:
            raise Failure(f"unrecognized option '{arg}'", usage=True)
        # Prefixes shared only by synonyms (date's --u: uct, utc, universal) are not ambiguous.
        rivals = [o for o in found[1:] if o[1:] != found[0][1:]]
        if rivals:
            names = "".join(f" '--{o[0]}'" for o in [found[0], *rivals])
            raise Failure(f"option '{arg}' is ambiguous; possibilities:{names}", usage=True)
        long_name, kind, key = found[0]
        if eq and kind == "no":
            raise Failure(f"option '--{long_name}' doesn't allow an argument", usage=True)
        if kind == "req" and not eq:
            if i == len(args):
                raise Failure(f"option '--{long_name}' requires an argument", usage=True)
            value, i = args[i], i + 1
        return key, value if eq or kind == "req" else None, i


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n",
            "\r": "\\r", "\t": "\\t", "\v": "\\v"}  # fmt: skip


def quote(text: str) -> str:
    """gnulib ``quote`` in the C locale: apostrophes, C escapes for anything unprintable."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.extend(f"\\{byte:03o}" for byte in char.encode("utf-8", "surrogateescape"))
    return "'" + "".join(out) + "'"


#: Characters a shell gives a meaning to (``#`` and ``~`` only at a word's start): gnulib's
#: shell-escape quoting puts a name holding one in apostrophes.
_SHELL_SPECIAL = frozenset(" !\"$&()*;<=>?[\\^`|'")
_C_ESCAPES = {"\a": "a", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "\v": "v"}


def quotef(name: str) -> str:
    """gnulib ``quotef`` (shell-escape style), for file names in messages: bare when a shell
    reads the name as one word, in quotation marks when it holds an apostrophe and nothing a
    shell expands inside them, else in apostrophes, a control character as ``$'\\t'``."""
    controls = any(ord(char) < 32 or ord(char) == 127 for char in name)
    special = any(char in _SHELL_SPECIAL for char in name) or name[:1] in ("#", "~")
    if name and not controls and not special:
        return name
    if not controls and "'" in name and not any(char in name for char in '"$`\\'):
        return f'"{name}"'
    out = ["'"]
    for char in name:
        if ord(char) < 32 or ord(char) == 127:
            escape = _C_ESCAPES.get(char) or f"{ord(char):03o}"
            out.append(f"'$'\\{escape}''")
        else:
            out.append("'\\''" if char == "'" else char)
    return "".join(out) + "'"
