"""The kit's checks of requests the service refused for now: a 409 (the sandbox was not in a
state for it yet) or a 429 (slow down, with a ``Retry-After``). Pure functions over a
:class:`~fake_server.journal.Journal`, as the other checks in :mod:`pytest_createos._checks`.

Example:
    >>> check_refusals_retried(Journal()), check_retry_after(Journal(), {})
    ([], [])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from itertools import pairwise

from fake_server.journal import Entry, Journal
from pytest_createos import _kit_messages as text
from pytest_createos._check_base import (
    DELETE,
    GONE_STATUSES,
    PAUSE,
    RESUME,
    Route,
    Violation,
    evidence,
    failed,
    last_status,
    request_text,
    requests_on,
    route_of,
)

__all__ = [
    "LIFECYCLE_TARGETS",
    "REFUSALS",
    "RETRY_AFTER_SLACK_S",
    "check_refusals_retried",
    "check_retry_after",
]

#: What each lifecycle request asks for: once the sandbox got there (or is gone), a refused one
#: need not be sent again.
LIFECYCLE_TARGETS: dict[Route, frozenset[str]] = {
    RESUME: frozenset({"resuming", "running"}),
    PAUSE: frozenset({"pausing", "paused"}),
    DELETE: GONE_STATUSES,
}
#: Answers that refuse a request for now, not for good: the sandbox was not in a state for it
#: yet (409), or the service asks the caller to slow down (429).
REFUSALS = frozenset({409, 429})
#: How much sooner than its Retry-After a retry may arrive (float rounding only: the fake's
#: clock reads the retry's arrival after the client's own wait, measured from a later moment).
RETRY_AFTER_SLACK_S = 0.001


def check_refusals_retried(journal: Journal) -> list[Violation]:
    """A pause, resume or delete refused for now (409 or 429) was sent again until it took,
    unless the sandbox was already, or got, where it asked for (or went away) afterwards.

    Example:
        >>> check_refusals_retried(Journal())
        []
    """
    by_sandbox: dict[str, list[Entry]] = defaultdict(list)
    for entry in requests_on(journal, LIFECYCLE_TARGETS):
        if entry.sandbox is not None:
            by_sandbox[entry.sandbox].append(entry)
    violations = []
    for sandbox, requests in by_sandbox.items():
        transitions = journal.transitions(sandbox)
        abandoned = []
        for index, entry in enumerate(requests):
            route = route_of(entry)
            if entry.status not in REFUSALS or route is None:
                continue
            wanted = LIFECYCLE_TARGETS[route] | GONE_STATUSES
            taken = any(route_of(r) == route and not failed(r) for r in requests[index + 1 :])
            there = entry.sandbox_status in wanted or any(
                t.seq > entry.seq and t.after in wanted for t in transitions
            )
            if not taken and not there:
                abandoned.append(entry)
        if not abandoned:
            continue
        first = abandoned[0]
        what = text.REFUSAL_ABANDONED_WHAT.format(
            sandbox=sandbox,
            request=request_text(first),
            status=first.status,
            seq=first.seq,
            left=last_status(journal, sandbox),
        )
        later = [e for e in journal.history(sandbox) if e.seq > first.seq][-3:]
        violations.append(
            Violation(
                text.REFUSALS_RETRIED,
                sandbox,
                what,
                text.REFUSALS_RETRIED_FIX,
                evidence(abandoned[:3], later),
            )
        )
    return violations


def check_retry_after(journal: Journal, waits: Mapping[str, float]) -> list[Violation]:
    """A request answered by a fault rule of ``waits`` (rule id to the seconds of the
    ``Retry-After`` it sends) was not sent again before those seconds had passed since the
    answer, on the fake's clock (the journal's ``at``). Under ``manual_clock`` it means
    something only if the test moves the clock as the client waits.

    Example:
        >>> check_retry_after(Journal(), {"r1": 1.0})
        []
    """
    requests: dict[Hashable, list[Entry]] = defaultdict(list)
    for entry in journal.requests():
        requests[(entry.method, entry.route, entry.sandbox)].append(entry)
    violations = []
    for entries in requests.values():
        entries.sort(key=lambda entry: entry.opened)
        early: list[tuple[Entry, Entry, float, float]] = []
        for previous, current in pairwise(entries):
            wait = max((waits[rule] for rule in previous.rules if rule in waits), default=None)
            if wait is None or previous.status is None:
                continue
            waited = current.at - (previous.at + (previous.duration_ms or 0.0) / 1000)
            if waited < wait - RETRY_AFTER_SLACK_S:
                early.append((previous, current, waited, wait))
        if not early:
            continue
        answer, _, waited, wait = early[0]
        what = text.RETRY_TOO_SOON_WHAT.format(
            sandbox=answer.sandbox or text.NO_SANDBOX,
            request=request_text(answer),
            status=answer.status,
            wait=wait,
            waited=max(0.0, waited),
            count=len(early),
        )
        shown = [entry for pair in early[:3] for entry in pair[:2]]
        violations.append(
            Violation(
                text.RETRY_AFTER_HONOURED,
                answer.sandbox,
                what,
                text.RETRY_AFTER_FIX,
                evidence(shown),
            )
        )
    return violations
