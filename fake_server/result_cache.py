"""Results of scripts that depend on nothing but their own text, kept so that the same probe
(``echo ok``, ``true``, ``printf ready``) does not start an interpreter every time.

A script qualifies when it is a list of simple commands (``;``, ``&&``, ``||``, newlines), each
one of a few output-only builtins (``echo``, ``printf``, ``true``, ``false``, ``:``, ``exit``)
with literal words: plain characters or single-quoted strings; no ``$``, no glob, no quote
other than ``'``, no redirection, no assignment, no substitution, nothing else. Such a script
reads no file, no variable, no clock and no stdin, so what bash answered the first time (even a
syntax error) is what it answers every time. The first run of each such script still runs in
bash; later runs replay what it wrote. Anything else always runs.

The check is a strict scan of the text rather than the interpreter's own analysis: an
analyzer is an interpreter, and each one holds a runtime and file descriptors for as long as
it lives.

Example::

    cache = ResultCache(registry.names())
    key = cache.key("echo ok", env)
    if key is not None and (hit := cache.get(key)) is not None:
        hit.replay(stdout_sink, stderr_sink)
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Set
from dataclasses import dataclass

from fake_server.streams import OutputSink

__all__ = ["CacheKey", "CachedResult", "Recorder", "ResultCache"]

#: A script and the environment it runs with.
CacheKey = tuple[str, tuple[tuple[str, str], ...]]

#: Builtins whose output is a function of their literal arguments alone.
OUTPUT_ONLY = frozenset({"echo", "printf", "true", "false", ":", "exit"})
#: One token of a qualifying script: blanks, a command separator, or a literal word (plain
#: characters that bash never expands, and single-quoted strings, which it takes as they are).
_TOKEN = re.compile(r"[ \t]+|(;|&&|\|\||\n)|((?:[A-Za-z0-9_.,:/=+@%-]|'[^']*')+)")


@dataclass(frozen=True)
class CachedResult:
    """What one run of a qualifying script wrote, and its exit status."""

    stdout: bytes
    stderr: bytes
    status: int

    def replay(self, stdout: OutputSink, stderr: OutputSink) -> int:
        """Write the recorded output to the sinks; the exit status."""
        if self.stdout:
            stdout.write(self.stdout)
        if self.stderr:
            stderr.write(self.stderr)
        return self.status


class Recorder:
    """An output sink that passes everything on and keeps a copy while it stays small."""

    def __init__(self, sink: OutputSink, limit: int) -> None:
        self.sink = sink
        self.limit = limit
        self.data = bytearray()
        self.overflowed = False

    def write(self, data: bytes) -> None:
        self.sink.write(data)
        if len(self.data) + len(data) > self.limit:
            self.overflowed = True
        elif not self.overflowed:
            self.data += data


class ResultCache:
    """A bounded LRU of qualifying scripts' results, keyed by script and environment.

    ``registered`` holds the names of the commands the fake's users registered (a live view of
    them): a script calling one never qualifies, even where it shadows a builtin.
    """

    def __init__(
        self,
        registered: Set[str],
        *,
        entries: int = 256,
        max_script: int = 4096,
        max_output: int = 16 << 10,
    ) -> None:
        self.registered = registered
        self.entries = entries
        self.max_script = max_script
        self.max_output = max_output
        self._results: OrderedDict[CacheKey, CachedResult] = OrderedDict()
        #: Recent scripts' builtins, empty for one that does not qualify (a poller sends the
        #: same text again and again: it is scanned once).
        self._scanned: dict[str, frozenset[str]] = {}
        #: Replays so far (for tests and benchmarks).
        self.hits = 0

    def key(self, script: str, env: Mapping[str, str]) -> CacheKey | None:
        """The cache key of ``script`` run with ``env``, or None when it does not qualify."""
        if len(script) > self.max_script:
            return None
        builtins = self._scanned.get(script)
        if builtins is None:
            if len(self._scanned) >= self.entries * 4:
                self._scanned.clear()
            builtins = self._scanned[script] = self._builtins_of(script)
        if not builtins or not self.registered.isdisjoint(builtins):
            return None
        return script, tuple(env.items())

    def get(self, key: CacheKey) -> CachedResult | None:
        result = self._results.get(key)
        if result is not None:
            self._results.move_to_end(key)
            self.hits += 1
        return result

    def put(
        self,
        key: CacheKey,
        stdout: Recorder,
        stderr: Recorder,
        status: int,
    ) -> None:
        """Keep a run's result, unless its output was too large to keep."""
        if stdout.overflowed or stderr.overflowed:
            return
        self._results[key] = CachedResult(bytes(stdout.data), bytes(stderr.data), status)
        self._results.move_to_end(key)
        while len(self._results) > self.entries:
            self._results.popitem(last=False)

    def clear(self) -> None:
        self._results.clear()
        self._scanned.clear()

    @staticmethod
    def _builtins_of(script: str) -> frozenset[str]:
        """The output-only builtins a script calls, none when its text does not qualify
        (whether one of them is shadowed by a registered command is checked on each use)."""
        commands: list[list[str]] = [[]]
        position = 0
        while position < len(script):
            token = _TOKEN.match(script, position)
            if token is None:
                return frozenset()
            separator, word = token.groups()
            if separator is not None:
                commands.append([])
            elif word is not None:
                commands[-1].append(word)
            position = token.end()
        commands = [command for command in commands if command]
        if not commands:
            return frozenset()
        for name, *args in commands:
            if name not in OUTPUT_ONLY:
                return frozenset()
            if name == "printf" and any("%(" in word for word in args):  # %(...)T: the clock
                return frozenset()
        return frozenset(command[0] for command in commands)
