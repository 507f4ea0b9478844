"""The shell corpus as data: the scripts (``scripts.txt``, written by hand) and what GNU bash
answered for each (``expected.json``, written by :mod:`tests.shell_corpus.regenerate`).

Every script runs three ways in bash: with no stdin at all (``</dev/null``, an ``/exec`` without
``stdin``) and with its stdin (its own, else :data:`DEFAULT_STDIN`: an ``/exec`` with
``stdin``, or a managed process fed through ``POST …/input`` and then closed); and
with no stdin of its own: the script is itself the input of ``bash -s`` (an interactive shell,
a managed process without a script, sent the script's lines through ``POST …/input``).

Example:
    >>> entries = parse("=== hello\\necho hi\\n\\n=== reader\\ncat\\n--- stdin \\"x\\\\n\\"\\n")
    >>> [(e.name, e.script, e.stdin) for e in entries]
    [('hello', 'echo hi', None), ('reader', 'cat', 'x\\n')]
    >>> entries[0].given_stdin
    'corpus stdin line 1\\ncorpus stdin line 2\\n'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts.txt"
EXPECTED = HERE / "expected.json"
#: The stdin of a script that does not name its own: non-empty, so that an ``/exec`` given it
#: takes the fake's stdin path, and a script that reads stdin shows it.
DEFAULT_STDIN = "corpus stdin line 1\ncorpus stdin line 2\n"
#: Where a script runs, and its ``$HOME``: in the fake a fresh sandbox's ``/root``; in bash a
#: fresh temporary directory, written as this in what bash printed.
HOME = "/root"
_ENTRY = "=== "
_STDIN = "--- stdin "


@dataclass(frozen=True)
class Entry:
    """One script of the corpus and the stdin it names (None: :data:`DEFAULT_STDIN`)."""

    name: str
    script: str
    stdin: str | None = None

    @property
    def given_stdin(self) -> str:
        """What the script reads when it is given a stdin."""
        return DEFAULT_STDIN if self.stdin is None else self.stdin

    @property
    def script_input(self) -> str:
        """The script as an interactive shell is sent it: its lines, each ended."""
        return self.script + "\n"


@dataclass(frozen=True)
class Outcome:
    """What one run printed and how it ended; only stderr's emptiness is compared (its
    wording is the interpreter's), the text is kept to show in a failure."""

    status: int
    stdout: str
    stderr: str

    def compared(self) -> tuple[int, str, bool]:
        return self.status, self.stdout, self.stderr == ""


@dataclass(frozen=True)
class Expected:
    """An entry and what bash answered without stdin, with it, and given the script as its
    stdin."""

    entry: Entry
    without_stdin: Outcome
    with_stdin: Outcome
    script_on_stdin: Outcome


def parse(text: str) -> list[Entry]:
    """The entries of a ``scripts.txt``: ``=== NAME``, the script's lines, and optionally
    ``--- stdin "JSON STRING"``; lines before the first entry are comments."""
    entries: list[Entry] = []
    name: str | None = None
    lines: list[str] = []
    stdin: str | None = None

    def flush() -> None:
        if name is not None:
            script = "\n".join(lines).rstrip("\n")
            if not script:
                raise ValueError(f"corpus entry {name!r} has no script")
            entries.append(Entry(name, script, stdin))

    for line in text.splitlines():
        if line.startswith(_ENTRY):
            flush()
            name, lines, stdin = line[len(_ENTRY) :].strip(), [], None
        elif name is not None and line.startswith(_STDIN):
            stdin = json.loads(line[len(_STDIN) :])
        elif name is not None:
            lines.append(line)
    flush()
    names = [entry.name for entry in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"corpus names used twice: {duplicates}")
    return entries


def load_scripts() -> list[Entry]:
    """The corpus's entries, from ``scripts.txt``."""
    return parse(SCRIPTS.read_text())


def _outcome(data: dict[str, Any]) -> Outcome:
    return Outcome(int(data["status"]), str(data["stdout"]), str(data["stderr"]))


def load_expected() -> tuple[str, list[Expected]]:
    """The bash version the answers came from, and every entry with its answers."""
    data = json.loads(EXPECTED.read_text())
    expected = [
        Expected(
            Entry(item["name"], item["script"], item["stdin"]),
            _outcome(item["without_stdin"]),
            _outcome(item["with_stdin"]),
            _outcome(item["script_on_stdin"]),
        )
        for item in data["entries"]
    ]
    return str(data["bash_version"]), expected
