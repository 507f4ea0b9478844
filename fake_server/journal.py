"""The journal: every request and every lifecycle event, in order, in a bounded ring.

Requests are recorded when they finish, with the ticket they drew when they arrived, so "was
this request made while that one was in flight" is a question of comparing tickets. API keys
are never recorded: a request is attributed to its tenant's id.

Example::

    journal.requests(route="DELETE /v1/sandboxes/{id}")
    journal.history("sb_...")                         # what happened to one sandbox
    journal.overlapping(resume_entry, delete_entry)   # did these two run at the same time?
    journal.assert_requested("POST /v1/sandboxes/{id}/resume", sandbox="sb_...")
    journal.assert_requested("DELETE /v1/sandboxes/sb_1")   # a concrete path works too
"""

from __future__ import annotations

import difflib
import enum
import inspect
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from yarl import URL

from fake_server.clock import RealClock, isoformat
from fake_server.route_table import RouteTable

__all__ = ["JOURNAL_PAGE", "JOURNAL_PAGE_MAX", "Entry", "Journal", "JournalAssertionError"]

Kind = Literal["request", "transition", "process", "computer"]

DEFAULT_CAPACITY = 10_000


class JournalAssertionError(AssertionError):
    """A journal assertion failed; the message lists the closest entries."""


@dataclass(slots=True)
class Entry:
    """One journal line.

    For requests: ``route`` is the route template with its method (``"GET /v1/sandboxes/{id}"``),
    ``opened`` the ticket drawn on arrival and ``seq`` the one drawn on completion, ``status`` the
    HTTP status answered (``None`` when the connection was dropped), ``sandbox_status`` the
    sandbox's status when the request arrived, ``rules`` the fault rules that fired and
    ``detail`` why there was no answer, or that its client had left before it (``status`` is
    then what the fake answered, which nobody received).
    For lifecycle events: ``before``/``after`` statuses (``transition``) or a process ``detail``.
    For desktop actions (``computer``): ``detail`` is the action and its arguments as JSON,
    e.g. ``mouse/click {"button":"left","count":1,"screen_id":"screen-0","x":10,"y":20}``.
    """

    seq: int
    opened: int
    kind: Kind
    at: float
    #: Wall time: a datetime while recorded (formatting it costs more than recording the
    #: request), its RFC 3339 string once read as JSON.
    time: str | datetime
    tenant: str | None = None
    sandbox: str | None = None
    method: str | None = None
    route: str | None = None
    path: str | None = None
    status: int | None = None
    duration_ms: float | None = None
    sandbox_status: str | None = None
    rules: list[str] = field(default_factory=list)
    before: str | None = None
    after: str | None = None
    cause: str | None = None
    process: str | None = None
    detail: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        """An entry read back from :meth:`as_json` (unknown keys are ignored)."""
        return cls(**{key: value for key, value in data.items() if key in _ENTRY_FIELDS})

    def as_json(self) -> dict[str, Any]:
        # Field by field rather than dataclasses.asdict, which deep-copies: about five times
        # the cost, and a journal page holds a thousand entries.
        body: dict[str, Any] = {}
        for name in _ENTRY_NAMES:
            value = getattr(self, name)
            if value is None or (isinstance(value, list) and not value):
                continue
            body[name] = list(value) if isinstance(value, list) else value
        if isinstance(self.time, datetime):
            body["time"] = isoformat(self.time)
        if self.duration_ms is not None:
            body["duration_ms"] = round(self.duration_ms, 3)
        return body

    def describe(self) -> str:
        """One readable line, e.g. ``#12 DELETE /v1/sandboxes/sb_1 -> 200 (sandbox running)``."""
        if self.kind == "request":
            state = f" (sandbox {self.sandbox_status})" if self.sandbox_status else ""
            fired = f" rules={','.join(self.rules)}" if self.rules else ""
            detail = f" [{self.detail}]" if self.detail else ""
            return f"#{self.seq} {self.method} {self.path} -> {self.status}{detail}{state}{fired}"
        if self.kind == "transition":
            return (
                f"#{self.seq} {self.sandbox}: {self.before or 'new'} -> {self.after} ({self.cause})"
            )
        if self.kind == "computer":
            return f"#{self.seq} {self.sandbox} computer {self.detail}"
        return f"#{self.seq} {self.sandbox} process {self.process}: {self.detail}"


#: Entries one ``GET /_fake/journal`` answers unless its ``limit`` says otherwise, and at most.
JOURNAL_PAGE = 1000
JOURNAL_PAGE_MAX = 10_000

_ENTRY_NAMES = tuple(field.name for field in fields(Entry))
_ENTRY_FIELDS = frozenset(_ENTRY_NAMES)

#: A request kept packed until someone reads the journal (see :meth:`Journal.request`).
_Packed = tuple[Any, ...]


class Journal:
    """A bounded, ordered record of requests and lifecycle events.

    ``wall_at`` turns a clock reading into wall time (the fake passes its clock's), for the
    ``time`` of requests, which are recorded with their clock reading only. ``routes``, the
    routes the fake serves, lets an assertion on a route nobody serves say what was meant
    instead of passing (``assert_not_requested``) or failing with "found 0".
    """

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        wall_at: Callable[[float], datetime] | None = None,
        routes: RouteTable | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("journal capacity must be at least 1")
        self.routes = routes
        self._entries: deque[Entry | _Packed] = deque(maxlen=capacity)
        self._tickets = itertools.count(1)
        #: Draws the next ordering ticket (requests draw one on arrival): the counter's own
        #: ``next``, as a call of a method of ours would cost more on every request.
        self.ticket: Callable[[], int] = self._tickets.__next__
        self._wall_at = wall_at or RealClock().wall_at
        #: Items appended since the journal was made or cleared: what it dropped and what may
        #: still be packed follow from it, so recording a request only counts.
        self._appended = 0
        #: ``_appended`` when the journal was last settled (newer items may be packed).
        self._settled_at = 0

    @classmethod
    def of(cls, entries: Iterable[Entry], *, routes: RouteTable | None = None) -> Journal:
        """A journal holding exactly ``entries`` (to query a snapshot with the same methods)."""
        kept = list(entries)
        journal = cls(capacity=max(1, len(kept)), routes=routes)
        journal._entries.extend(kept)
        journal._appended = journal._settled_at = len(kept)
        return journal

    @property
    def capacity(self) -> int:
        return self._entries.maxlen or 0

    @property
    def dropped(self) -> int:
        """How many of the oldest entries the ring has let go of since it was made or cleared."""
        return self._appended - len(self._entries)

    def record(self, entry: Entry) -> Entry:
        self._append(entry)
        return entry

    def request(
        self,
        opened: int,
        at: float,
        method: str,
        route: str | None,
        target: str,
        tenant: str | None,
        sandbox: str | None,
        sandbox_status: str | None,
        status: int | None,
        finished: float,
        rules: tuple[str, ...],
        detail: str | None,
    ) -> None:
        """Record a finished request (its ``seq`` is drawn now); ``at`` and ``finished`` are
        clock readings, ``target`` is the path as sent (percent-encoded; anything from a ``?``
        on is left out of the entry).

        The request layer calls this once per request, positionally: building an
        :class:`Entry` costs more than serving a cached ``GET``, so the entry (its duration,
        its decoded path) is built the first time someone reads the journal.
        ``sandbox_status`` may be a str enum's member.
        """
        # _append's work, inline: this runs on every request.
        self._entries.append(
            (
                next(self._tickets),
                opened,
                at,
                method,
                route,
                target,
                tenant,
                sandbox,
                sandbox_status,
                status,
                finished,
                rules,
                detail,
            )
        )
        self._appended += 1

    def _append(self, item: Entry | _Packed) -> None:
        self._entries.append(item)
        self._appended += 1

    def _settled(self) -> deque[Entry]:
        """The entries, with every packed request built into its :class:`Entry`."""
        entries = self._entries
        # Only the newest items can be packed; indexing a deque near its end is cheap.
        for index in range(-min(self._appended - self._settled_at, len(entries)), 0):
            item = entries[index]
            if isinstance(item, tuple):
                entries[index] = self._unpack(item)
        self._settled_at = self._appended
        return entries  # type: ignore[return-value]  # every item is an Entry now

    def _unpack(self, packed: _Packed) -> Entry:
        found = dict(zip(_PACKED_FIELDS, packed, strict=True))
        status = found["sandbox_status"]
        found["sandbox_status"] = status.value if isinstance(status, enum.Enum) else status
        found["rules"] = list(found["rules"])
        found["duration_ms"] = (found.pop("finished") - found["at"]) * 1000
        found["path"] = _request_path(found.pop("target"))
        return Entry(kind="request", time=self._wall_at(found["at"]), **found)

    def clear(self) -> None:
        self._entries.clear()
        self._appended = self._settled_at = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._settled()))

    # -- queries ---------------------------------------------------------------------------

    def entries(
        self,
        *,
        kind: Kind | None = None,
        route: str | None = None,
        method: str | None = None,
        sandbox: str | None = None,
        tenant: str | None = None,
        status: int | None = None,
        since: int = 0,
        limit: int | None = None,
    ) -> list[Entry]:
        """Entries matching every given filter, oldest first (the first ``limit`` of them).

        ``route`` is a route template or a concrete path, with or without its method:
        ``"DELETE /v1/sandboxes/{id}"``, ``"/v1/sandboxes/{id}/exec"``,
        ``"DELETE /v1/sandboxes/sb_1"``.
        """
        matching = (
            entry
            for entry in self._settled()
            if entry.seq > since
            and (kind is None or entry.kind == kind)
            and (route is None or _route_matches(entry, route))
            and (method is None or entry.method == method.upper())
            and (sandbox is None or entry.sandbox == sandbox)
            and (tenant is None or entry.tenant == tenant)
            and (status is None or entry.status == status)
        )
        return list(itertools.islice(matching, limit))

    def newer_than(self, seq: int, *, tenant: str | None = None) -> list[Entry]:
        """Entries with a ``seq`` above ``seq`` (of one tenant, if given), oldest first.

        Entries are kept in ``seq`` order, so this reads from the newest end back to ``seq``
        only: what a reader that polls after every step (the schedule explorer) can afford
        on a full journal, where :meth:`entries` reads it all.

        Example:
            >>> Journal().newer_than(0)
            []
        """
        newer: list[Entry] = []
        for entry in reversed(self._settled()):
            if entry.seq <= seq:
                break
            if tenant is None or entry.tenant == tenant:
                newer.append(entry)
        newer.reverse()
        return newer

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest entry (0 for an empty journal).

        Example:
            >>> Journal().last_seq
            0
        """
        entries = self._settled()
        return entries[-1].seq if entries else 0

    def requests(self, **filters: Any) -> list[Entry]:
        """Request entries matching the filters of :meth:`entries`."""
        _check_filters("requests", filters, _REQUEST_FILTERS)
        return self.entries(kind="request", **filters)

    def history(self, sandbox: str) -> list[Entry]:
        """Everything that happened to one sandbox, requests and transitions, in order."""
        return self.entries(sandbox=sandbox)

    def transitions(self, sandbox: str | None = None) -> list[Entry]:
        return self.entries(kind="transition", sandbox=sandbox)

    def computer_actions(self, sandbox: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """What was done on desktops (one sandbox's, if given), oldest first: each action
        (the route under ``…/computer``) with its arguments.

        Example::

            journal.computer_actions(sandbox_id)
            # [('launch', {'application': 'xterm', 'screen_id': 'screen-0', 'window': ...}),
            #  ('keyboard/type', {'screen_id': 'screen-0', 'text': 'ls', 'window': ...})]
        """
        actions = []
        for entry in self.entries(kind="computer", sandbox=sandbox):
            action, _, arguments = (entry.detail or "").partition(" ")
            actions.append((action, json.loads(arguments or "{}")))
        return actions

    @staticmethod
    def overlapping(first: Entry, second: Entry) -> bool:
        """Whether two requests were in flight at the same time."""
        return first.opened < second.seq and second.opened < first.seq

    def in_flight_during(self, entry: Entry, **filters: Any) -> list[Entry]:
        """Requests matching ``filters`` that overlapped ``entry``."""
        return [
            other
            for other in self.requests(**filters)
            if other is not entry and self.overlapping(entry, other)
        ]

    # -- assertions --------------------------------------------------------------------------

    def assert_requested(self, route: str, *, times: int | None = None, **filters: Any) -> None:
        """Fail unless ``route`` was requested (``times`` times, if given), listing near misses.

        Example::

            journal.assert_requested("POST /v1/sandboxes/{id}/pause", sandbox=sandbox_id, times=1)
        """
        _check_filters("assert_requested", filters, _ASSERTION_FILTERS)
        found = self.requests(route=route, **filters)
        if (times is None and found) or (times is not None and len(found) == times):
            return
        expected = f"{times} time(s)" if times is not None else "at least once"
        unknown = self._unknown_route(route)
        raise JournalAssertionError(
            f"expected {route} {_describe_filters(filters)}{expected}, found {len(found)}.\n"
            + (f"{unknown}\n" if unknown else "")
            + _near_misses(self.requests(), route)
        )

    def assert_not_requested(self, route: str, **filters: Any) -> None:
        """Fail if ``route`` was requested with these filters, listing the offending entries.

        Example::

            journal.assert_not_requested("POST /v1/sandboxes/{id}/resume", sandbox=sandbox_id)
        """
        if "times" in filters:
            raise TypeError(
                "assert_not_requested() takes no times=; to count requests use"
                " assert_requested(route, times=N) (times=0: never)"
            )
        _check_filters("assert_not_requested", filters, _ASSERTION_FILTERS)
        found = self.requests(route=route, **filters)
        unknown = None if found else self._unknown_route(route)
        if unknown:  # it could never fail: say so rather than pass
            raise ValueError(f"assert_not_requested({route!r}): {unknown}")
        if found:
            lines = "\n".join("  " + entry.describe() for entry in found)
            raise JournalAssertionError(
                f"expected no {route} {_describe_filters(filters)}but found:\n{lines}"
            )

    def _unknown_route(self, route: str) -> str | None:
        """Why ``route`` names no route the fake serves (``None`` if it does, or if this
        journal was not told the routes)."""
        if self.routes is None:
            return None
        method, _, path = route.partition(" ") if " " in route else ("", "", route)
        return self.routes.problem(method.upper() or None, path, paths=True)

    def tail(self, count: int = 20) -> list[Entry]:
        return list(self._settled())[-count:]

    def format(self, entries: Iterable[Entry] | None = None) -> str:
        return "\n".join(entry.describe() for entry in (entries or self._settled()))


#: The filters :meth:`Journal.requests` takes, and those the assertions take beside ``route``.
_REQUEST_FILTERS = ("route", "method", "sandbox", "tenant", "status", "since", "limit")
_ASSERTION_FILTERS = ("method", "sandbox", "tenant", "status", "since")


def _check_filters(call: str, filters: dict[str, Any], valid: tuple[str, ...]) -> None:
    """A clear ``TypeError`` for a filter the journal does not have (``sandbox_id=``)."""
    for name in filters:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]}=?)" if close else ""
            raise TypeError(
                f"{call}() has no filter {name}={hint}; the filters are "
                + ", ".join(f"{valid_name}=" for valid_name in valid)
            )


def _route_matches(entry: Entry, route: str) -> bool:
    """Whether a request was to ``route``: its template or its concrete path, with or
    without the method."""
    if " " in route:
        method, _, target = route.partition(" ")
        if entry.method != method.upper():
            return False
    else:
        target = route
    return target in (entry.route, entry.path)


def _describe_filters(filters: dict[str, Any]) -> str:
    if not filters:
        return ""
    return "with " + ", ".join(f"{key}={value!r}" for key, value in filters.items()) + " "


def _near_misses(entries: list[Entry], route: str) -> str:
    target = route.partition(" ")[2] or route
    similar = [entry for entry in entries if target in (entry.route, entry.path)] or entries[-10:]
    if not similar:
        return "The journal has no requests."
    return "Closest requests:\n" + "\n".join("  " + entry.describe() for entry in similar[-10:])


def _request_path(target: str) -> str:
    """The decoded path of a request target, as aiohttp gives a request's ``path``: the
    origin form (``/v1/a%2Fb?x=1`` -> ``/v1/a/b``), or a whole URL's path. A ``#`` in a target
    (which no client sends) starts its fragment, as in a URL; some aiohttp versions split
    ``/x#f?y`` at the ``?`` instead. A target with no ``/`` at all names no path: CONNECT's
    ``host:port`` and ``OPTIONS *`` are kept as they came.

    Example:
        >>> _request_path("/v1/%E2%82%AC?limit=1"), _request_path("http://h/a%20b")
        ('/v1/€', '/a b')
        >>> _request_path("127.0.0.1:22"), _request_path("*")
        ('127.0.0.1:22', '*')
    """
    if "/" not in target:
        return target
    if target.startswith("/"):
        path = target.partition("?")[0].partition("#")[0]
        return URL.build(path=path, encoded=True).path
    return URL(target, encoded=True).path


#: The fields of a packed request, in order: its ``seq``, then what :meth:`Journal.request`
#: takes, read off its signature so the two cannot drift apart.
_PACKED_FIELDS = ("seq", *list(inspect.signature(Journal.request).parameters)[1:])
