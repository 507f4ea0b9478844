"""Dockerfiles as a template build reads them: instructions, line continuations, comments.

A template is built without a build context (the API uploads only the Dockerfile), so the
instructions that copy files in are refused, and the ones that only describe how a container
starts are accepted and ignored: a sandbox runs its own init, not the image's command.

Example:
    >>> [step.instruction for step in parse("FROM devbox:1\\nRUN echo hi \\\\\\n  there\\n")]
    ['FROM', 'RUN']
    >>> parse("FROM x\\nRUN a \\\\\\n b")[1].argument
    'a  b'
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "IGNORED",
    "REFUSED",
    "RUNS",
    "DockerfileError",
    "Step",
    "assignments",
    "expand",
    "parse",
    "shell_form",
]

#: Instructions that change what the image holds (or how later steps run).
RUNS = frozenset({"FROM", "RUN", "ENV", "ARG", "WORKDIR"})
#: Instructions that need a build context the API never uploads.
REFUSED = frozenset({"COPY", "ADD"})
#: Instructions about how a container starts or is described: a sandbox has no use for them.
IGNORED = frozenset(
    {
        "CMD",
        "ENTRYPOINT",
        "EXPOSE",
        "HEALTHCHECK",
        "LABEL",
        "MAINTAINER",
        "ONBUILD",
        "SHELL",
        "STOPSIGNAL",
        "USER",
        "VOLUME",
    }
)


class DockerfileError(ValueError):
    """A Dockerfile no build can start from; the message says which line and why."""


@dataclass(frozen=True)
class Step:
    """One instruction: its line number (of its first line), name and argument text."""

    line: int
    instruction: str
    argument: str

    def __str__(self) -> str:
        return f"{self.instruction} {self.argument}".rstrip()


def parse(text: str) -> list[Step]:
    """The instructions of ``text``, or :class:`DockerfileError` for an unknown instruction, a
    missing or late ``FROM``, or no instruction at all.

    Example::

        parse("FROM x\\nBOGUS y")   # DockerfileError: line 2: unknown instruction: BOGUS
    """
    steps: list[Step] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        steps.append(_step(start, " ".join(part for part in pending if part)))
        pending = []
    if pending:
        steps.append(_step(start, " ".join(pending)))
    if not steps:
        raise DockerfileError("the Dockerfile has no instructions")
    first = next((step for step in steps if step.instruction != "ARG"), None)
    if first is None or first.instruction != "FROM":
        raise DockerfileError("the first instruction must be FROM")
    return steps


def _step(line: int, text: str) -> Step:
    instruction, _, argument = text.partition(" ")
    name = instruction.upper()
    if name not in RUNS | REFUSED | IGNORED:
        raise DockerfileError(f"line {line}: unknown instruction: {instruction}")
    return Step(line, name, argument.strip())


def shell_form(argument: str) -> str:
    """A ``RUN`` argument as one shell command: the exec form (``["a", "b c"]``) quoted, the
    shell form as written.

    Example:
        >>> shell_form('["echo", "a b"]')
        "echo 'a b'"
    """
    if argument.startswith("["):
        try:
            words = json.loads(argument)
        except ValueError:
            return argument
        if isinstance(words, list) and all(isinstance(word, str) for word in words):
            return shlex.join(words)
    return argument


_VARIABLE = re.compile(r"\\\$|\$(?:\{(\w+)(?::([-+])([^}]*))?\}|(\w+))")


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$VAR``, ``${VAR}``, ``${VAR:-default}`` and ``${VAR:+alternative}``
    replaced from ``env`` (unset: empty), ``\\$`` kept as a dollar: what Docker does in
    ``ENV``, ``ARG`` and ``WORKDIR``.

    Example:
        >>> expand("${HOME}/app:${MISSING:-none}:$HOME", {"HOME": "/root"})
        '/root/app:none:/root'
    """

    def value(match: re.Match[str]) -> str:
        if match.group(0) == "\\$":
            return "$"
        name = match.group(1) or match.group(4)
        current = env.get(name, "")
        if match.group(2) == "-":
            return current or match.group(3)
        if match.group(2) == "+":
            return match.group(3) if current else ""
        return current

    return _VARIABLE.sub(value, text)


def assignments(argument: str) -> dict[str, str]:
    """The variables an ``ENV``/``ARG`` sets: ``K=V ...`` (quotes allowed) or the legacy
    ``ENV K V``; an ``ARG`` without a default sets nothing.

    Example:
        >>> assignments('A=1 B="two words"'), assignments("K some value")
        ({'A': '1', 'B': 'two words'}, {'K': 'some value'})
    """
    words = shlex.split(argument)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])} if len(words) > 1 else {}
    found: dict[str, str] = {}
    for word in words:
        name, equals, value = word.partition("=")
        if equals:
            found[name] = value
    return found
