"""What the conformance kit's checks share: the routes and statuses they speak of, what a
check finds (:class:`Violation`) and what a resume handed back (:class:`LeaseOutcome`), and
small readings of a :class:`~fake_server.journal.Journal`.

The checks themselves are in :mod:`pytest_createos._checks` (and, for requests refused for now,
:mod:`pytest_createos._refusal_checks`).

Example:
    >>> request_text.__name__, RESUME
    ('request_text', ('POST', '/v1/sandboxes/{id}/resume'))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from fake_server.journal import Entry, Journal
from pytest_createos import _kit_messages as text
from pytest_createos._watch import ProviderCall

__all__ = [
    "CLEANUP",
    "CLOSING_STATUSES",
    "CREATE",
    "DEFAULT_MAX_ATTEMPTS_PER_SECOND",
    "DELETE",
    "EXEC",
    "GONE_STATUSES",
    "MAX_EVIDENCE",
    "PAUSE",
    "RESUME",
    "START_PROCESS",
    "TERMINATE_PROCESS",
    "WORK",
    "LeaseOutcome",
    "Route",
    "Violation",
    "arrived_during",
    "creation_of",
    "entry_line",
    "evidence",
    "failed",
    "last_status",
    "request_text",
    "requests_on",
    "route_of",
    "trimmed",
]

Route = tuple[str, str]
T = TypeVar("T")

CREATE: Route = ("POST", "/v1/sandboxes")
RESUME: Route = ("POST", "/v1/sandboxes/{id}/resume")
PAUSE: Route = ("POST", "/v1/sandboxes/{id}/pause")
DELETE: Route = ("DELETE", "/v1/sandboxes/{id}")
EXEC: Route = ("POST", "/v1/sandboxes/{id}/exec")
START_PROCESS: Route = ("POST", "/v1/sandboxes/{id}/processes")
TERMINATE_PROCESS: Route = ("DELETE", "/v1/sandboxes/{id}/processes/{pid}")
#: Requests that put work on a sandbox.
WORK: frozenset[Route] = frozenset(
    {
        EXEC,
        START_PROCESS,
        ("PUT", "/v1/sandboxes/{id}/files"),
        ("GET", "/v1/sandboxes/{id}/files"),
        ("POST", "/v1/sandboxes/{id}/processes/{pid}/input"),
    }
)
#: Requests that tear a lease down.
CLEANUP: frozenset[Route] = frozenset({PAUSE, DELETE})
#: Statuses of a sandbox that is going away (work or a resume sent then is a bug).
CLOSING_STATUSES = frozenset({"pausing", "destroying", "destroyed"})
#: Statuses after which a sandbox holds nothing any more.
GONE_STATUSES = frozenset({"destroying", "destroyed", "failed"})
#: How many evidence lines a violation shows at most (the first ones, then the last).
MAX_EVIDENCE = 8
DEFAULT_MAX_ATTEMPTS_PER_SECOND = 10.0


@dataclass(frozen=True)
class Violation:
    """One bug a check found: which check, which sandbox, what happened, the journal lines that
    show it (in arrival order) and what to change.

    Example:
        >>> v = Violation("retries-back-off", "sb_1", "sb_1: ... retried 40 times ...", "Wait.")
        >>> print(v.describe())
        [retries-back-off] sb_1: ... retried 40 times ...
          fix: Wait.
    """

    check: str
    sandbox: str | None
    what: str
    fix: str
    entries: tuple[Entry, ...] = ()
    #: The provider calls that show it, for a host on a watched provider (oldest first).
    calls: tuple[ProviderCall, ...] = ()

    def describe(self) -> str:
        """The violation as readable lines: what happened, the journal excerpt or the provider
        calls that show it, the fix."""
        lines = [f"[{self.check}] {self.what}"]
        if self.entries:
            lines.append("  journal, in arrival order:")
            lines += [f"    {entry_line(entry)}" for entry in self.entries]
        if self.calls:
            lines.append(text.CALLS_HEADER)
            first = self.calls[0].started
            lines += [f"    +{c.started - first:.3f} s {c.describe()}" for c in self.calls]
        lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)


@dataclass(frozen=True)
class LeaseOutcome:
    """What a ``resume()`` handed back, for :func:`check_resumed_or_replaced`.

    ``original`` is the sandbox of the lease passed to ``resume()``; ``final`` the sandbox the
    returned lease ran a command on (``None`` if it ran nowhere); ``error`` says why there is
    no usable lease (``resume()`` or the command raised), if so.

    Example:
        >>> LeaseOutcome("sb_old", "sb_new").final
        'sb_new'
    """

    original: str
    final: str | None
    error: str | None = None


# -- helpers ---------------------------------------------------------------------------------


def route_of(entry: Entry) -> Route | None:
    """``(method, route template)`` of a request entry; ``None`` for anything else."""
    if entry.kind != "request" or entry.method is None or entry.route is None:
        return None
    return (entry.method, entry.route)


def requests_on(journal: Journal, routes: Iterable[Route]) -> list[Entry]:
    """The journal's requests of ``routes``, in arrival order."""
    wanted = set(routes)
    found = [entry for entry in journal.requests() if route_of(entry) in wanted]
    return sorted(found, key=lambda entry: entry.opened)


def entry_line(entry: Entry) -> str:
    """How a report shows one entry (with its arrival, when it finished later)."""
    if entry.kind == "request" and entry.opened != entry.seq:
        return f"{entry.describe()}  [arrived at #{entry.opened}]"
    return entry.describe()


def request_text(entry: Entry) -> str:
    """``METHOD /path`` of a request entry."""
    return f"{entry.method} {entry.path}"


def evidence(*groups: Iterable[Entry]) -> tuple[Entry, ...]:
    """Unique entries in arrival order, trimmed to the first and last few."""
    unique = {id(entry): entry for group in groups for entry in group}
    return trimmed(sorted(unique.values(), key=lambda entry: (entry.opened, entry.seq)))


def trimmed(ordered: Sequence[T]) -> tuple[T, ...]:
    """The first and last few of ``ordered``, at most :data:`MAX_EVIDENCE` in all."""
    if len(ordered) > MAX_EVIDENCE:
        head = MAX_EVIDENCE - 2
        return (*ordered[:head], *ordered[-2:])
    return tuple(ordered)


def failed(entry: Entry) -> bool:
    """Whether a request got an error status, or no answer at all."""
    return entry.status is None or entry.status >= 400


def last_status(journal: Journal, sandbox: str) -> str | None:
    """The status ``sandbox`` ends the journal in (``None``: it never had one)."""
    transitions = journal.transitions(sandbox)
    return transitions[-1].after if transitions else None


def creation_of(journal: Journal, sandbox: str) -> Entry | None:
    """The transition that created ``sandbox``, if the journal holds it."""
    return next((e for e in journal.transitions(sandbox) if e.before is None), None)


def arrived_during(entry: Entry, other: Entry) -> bool:
    """Whether ``entry`` arrived while ``other`` was in flight (``other`` came first)."""
    return other.opened < entry.opened < other.seq
