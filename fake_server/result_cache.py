"""Results of scripts that depend on nothing but their own text, kept so that the same probe
(``echo ok``, ``true``, ``printf ready``) does not start an interpreter every time.

A script qualifies when the interpreter's own static analysis (``bashkit.Bash.analyze``) shows
that every command it runs is one of a few output-only builtins (``echo``, ``printf``, ``true``,
``false``, ``:``, ``exit``) with fully literal words: no expansion, no glob, no redirection, no
assignment, no function, no substitution, nothing opaque. Such a script reads no file, no
variable, no clock and no stdin, so what bash answered the first time is what it answers every
time. The first run of each such script still runs in bash; later runs replay what it wrote.
Anything else always runs.

Example::

    cache = ResultCache(registry.get)
    key = cache.key("echo ok", env)
    if key is not None and (hit := cache.get(key)) is not None:
        hit.replay(stdout_sink, stderr_sink)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import bashkit

from fake_server.streams import OutputSink

__all__ = ["CachedResult", "Recorder", "ResultCache"]

#: Builtins whose output is a function of their literal arguments alone.
OUTPUT_ONLY = frozenset({"echo", "printf", "true", "false", ":", "exit"})
#: Characters that make a word depend on the filesystem or the environment (globs, ``~``).
_UNSTABLE = frozenset("*?[~")


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

    ``registered`` looks up a command the fake's users registered by name (None if there is
    none): a script calling one never qualifies, even where it shadows a builtin.
    """

    def __init__(
        self,
        registered: Callable[[str], object | None],
        *,
        entries: int = 256,
        max_script: int = 4096,
        max_output: int = 16 << 10,
    ) -> None:
        self.registered = registered
        self.entries = entries
        self.max_script = max_script
        self.max_output = max_output
        self._results: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], CachedResult]
        self._results = OrderedDict()
        self._analyzer: bashkit.Bash | None = None
        #: Replays so far (for tests and benchmarks).
        self.hits = 0

    def key(
        self, script: str, env: Mapping[str, str]
    ) -> tuple[str, tuple[tuple[str, str], ...]] | None:
        """The cache key of ``script`` run with ``env``, or None when it does not qualify."""
        if len(script) > self.max_script or not self._qualifies(script):
            return None
        return script, tuple(env.items())

    def get(self, key: tuple[str, tuple[tuple[str, str], ...]]) -> CachedResult | None:
        result = self._results.get(key)
        if result is not None:
            self._results.move_to_end(key)
            self.hits += 1
        return result

    def put(
        self,
        key: tuple[str, tuple[tuple[str, str], ...]],
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

    def _qualifies(self, script: str) -> bool:
        if self._analyzer is None:
            self._analyzer = bashkit.Bash()
        try:
            analysis = self._analyzer.analyze(script)
        except bashkit.BashError:  # it does not parse: bash will say so, every time
            return False
        if (
            analysis.is_opaque
            or analysis.truncated
            or analysis.has_dynamic_commands
            or analysis.has_command_substitution
            or analysis.has_interpreter_reentry
            or analysis.redirects
            or analysis.functions
            or not analysis.commands
        ):
            return False
        for command in analysis.commands:
            name = command.name
            if name not in OUTPUT_ONLY or self.registered(name) is not None:
                return False
            if command.assignments:
                return False
            for word in command.args:
                if word is None or not _UNSTABLE.isdisjoint(word):
                    return False
                if name == "printf" and "%(" in word:  # %(...)T prints the clock
                    return False
        return True
