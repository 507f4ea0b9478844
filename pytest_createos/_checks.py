"""The conformance kit's checks: pure functions over a :class:`~fake_server.journal.Journal`.

Each check finds one kind of cleanup-before-resume bug and returns a :class:`Violation` per
sandbox it concerns (an empty list means the journal is clean); :func:`check_all` runs them
together. They read only the journal (and :func:`check_backoff` a watched provider's calls,
:class:`~pytest_createos.kit.ProviderCall`), so they work on a journal built by hand as well as
on ``createos_server.journal.snapshot()``.

Example::

    journal = createos_server.journal.snapshot()
    for violation in check_all(journal):
        print(violation.describe())
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TypeVar

from fake_server.journal import Entry, Journal
from pytest_createos import _kit_messages as text
from pytest_createos._check_base import (
    CLEANUP,
    CLOSING_STATUSES,
    CREATE,
    DEFAULT_MAX_ATTEMPTS_PER_SECOND,
    DELETE,
    EXEC,
    GONE_STATUSES,
    MAX_EVIDENCE,
    PAUSE,
    RESUME,
    START_PROCESS,
    WORK,
    LeaseOutcome,
    Route,
    Violation,
    arrived_during,
    creation_of,
    evidence,
    failed,
    last_status,
    request_text,
    requests_on,
    route_of,
    trimmed,
)
from pytest_createos._refusal_checks import check_refusals_retried, check_retry_after
from pytest_createos._watch import ProviderCall

__all__ = [
    "CHECKS",
    "CLEANUP",
    "CREATE",
    "DEFAULT_MAX_ATTEMPTS_PER_SECOND",
    "DELETE",
    "EXEC",
    "MAX_EVIDENCE",
    "PAUSE",
    "RESUME",
    "START_PROCESS",
    "WORK",
    "LeaseOutcome",
    "Route",
    "Violation",
    "check_all",
    "check_backoff",
    "check_no_leaks",
    "check_no_orphan_processes",
    "check_no_resume_during_cleanup",
    "check_no_work_on_closing",
    "check_refusals_retried",
    "check_resumed_or_replaced",
    "check_resumes_serialised",
    "check_retry_after",
    "check_unconfirmed_destroyed",
]


T = TypeVar("T")


def _closing_reason(entry: Entry, cleanups: Sequence[Entry]) -> tuple[str, list[Entry]] | None:
    """Why ``entry`` arrived at a sandbox that was going away, and the cleanup that shows it.

    Only a cleanup that was already in flight when ``entry`` arrived counts: a cleanup sent
    while the request was in flight is the host tearing down after it, not racing it."""
    overlapping = [c for c in cleanups if arrived_during(entry, c)]
    if overlapping:
        return text.REASON_OVERLAP.format(request=request_text(overlapping[0])), overlapping
    if entry.sandbox_status in CLOSING_STATUSES:
        return text.REASON_STATUS.format(status=entry.sandbox_status), []
    return None


@dataclass(frozen=True)
class _Wording:
    """What a check says about requests sent while a cleanup had not finished (and the fix),
    and about requests sent once the sandbox was destroyed."""

    during: str
    during_fix: str
    gone: str


def _during_cleanup(
    journal: Journal, routes: Iterable[Route], check: str, wording: _Wording
) -> list[Violation]:
    cleanups: dict[str | None, list[Entry]] = defaultdict(list)
    for cleanup in requests_on(journal, CLEANUP):
        cleanups[cleanup.sandbox].append(cleanup)
    offending: dict[str, list[tuple[Entry, str, list[Entry]]]] = defaultdict(list)
    for entry in requests_on(journal, routes):
        found = _closing_reason(entry, cleanups[entry.sandbox])
        if found is not None and entry.sandbox is not None:
            offending[entry.sandbox].append((entry, *found))
    violations = []
    for sandbox, found_list in offending.items():
        first, reason, shown_cleanups = found_list[0]
        # A destroyed sandbox stays destroyed, so every later request came after it too: the
        # lease was reused after its destroy, which no waiting for a cleanup would have fixed.
        gone = not shown_cleanups and first.sandbox_status == "destroyed"
        if gone:
            what, fix = wording.gone, text.REUSED_AFTER_DESTROY_FIX
        else:
            what, fix = wording.during, wording.during_fix
        message = what.format(
            sandbox=sandbox, count=len(found_list), request=request_text(first), reason=reason
        )
        entries = [entry for entry, _, _ in found_list]
        statuses = [t for t in journal.transitions(sandbox) if t.seq < first.opened][-1:]
        violations.append(
            Violation(check, sandbox, message, fix, evidence(shown_cleanups, statuses, entries[:3]))
        )
    return violations


_WORK_WORDING = _Wording(
    during=text.WORK_ON_CLOSING_WHAT,
    during_fix=text.WORK_ON_CLOSING_FIX,
    gone=text.WORK_AFTER_DESTROY_WHAT,
)
_RESUME_WORDING = _Wording(
    during=text.RESUME_DURING_CLEANUP_WHAT,
    during_fix=text.RESUME_DURING_CLEANUP_FIX,
    gone=text.RESUME_AFTER_DESTROY_WHAT,
)

# -- the checks --------------------------------------------------------------------------------


def check_no_work_on_closing(journal: Journal) -> list[Violation]:
    """No exec, files or process request arrived at a sandbox that was pausing, destroying
    or destroyed, or while a pause or delete of it was in flight. Requests to a destroyed
    sandbox are reported as a lease used after its destroy.

    Example:
        >>> check_no_work_on_closing(Journal())
        []
    """
    return _during_cleanup(journal, WORK, text.NO_WORK_ON_CLOSING, _WORK_WORDING)


def check_no_resume_during_cleanup(journal: Journal) -> list[Violation]:
    """No resume request arrived at a sandbox while a pause or delete of it was in flight, or
    while it was pausing, destroying or destroyed. Resumes of a destroyed sandbox are reported
    as a lease reused after its destroy.

    Example:
        >>> check_no_resume_during_cleanup(Journal())
        []
    """
    return _during_cleanup(journal, [RESUME], text.NO_RESUME_DURING_CLEANUP, _RESUME_WORDING)


def check_resumes_serialised(journal: Journal) -> list[Violation]:
    """No two resume requests of one sandbox were in flight together, and none arrived while
    the sandbox was still resuming from an earlier one.

    Example:
        >>> check_resumes_serialised(Journal())
        []
    """
    by_sandbox: dict[str | None, list[Entry]] = defaultdict(list)
    for resume in requests_on(journal, [RESUME]):
        by_sandbox[resume.sandbox].append(resume)
    violations = []
    for sandbox, resumes in by_sandbox.items():
        raced: list[tuple[Entry, str, list[Entry]]] = []
        for index, resume in enumerate(resumes):
            earlier = [r for r in resumes[:index] if arrived_during(resume, r)]
            if earlier:
                reason = text.REASON_OTHER_RESUME.format(request=request_text(earlier[0]))
                raced.append((resume, reason, earlier[:1]))
            elif resume.sandbox_status == "resuming":
                raced.append((resume, text.REASON_RESUMING, []))
        if raced and sandbox is not None:
            _, reason, shown = raced[0]
            what = text.RESUMES_RACED_WHAT.format(sandbox=sandbox, count=len(raced), reason=reason)
            entries = [resume for resume, _, _ in raced[:3]]
            violations.append(
                Violation(
                    text.RESUMES_SERIALISED,
                    sandbox,
                    what,
                    text.RESUMES_SERIALISED_FIX,
                    evidence(shown, entries),
                )
            )
    return violations


def check_backoff(
    journal: Journal,
    *,
    max_per_second: float = DEFAULT_MAX_ATTEMPTS_PER_SECOND,
    calls: Sequence[ProviderCall] = (),
) -> list[Violation]:
    """Retries back off: a request repeated after a failure (an HTTP error or no answer) is
    repeated at most ``max_per_second`` times in any one second of the fake's clock (the
    journal's ``at``). Successful polls are not retries and never count.

    ``calls`` are a watched provider's calls (see ``ConformanceKit.watch``): a provider call
    repeated after it raised counts the same way, on the event loop's clock. Refusals the
    provider makes before sending anything (``CleanupPendingError`` while the lease's cleanup
    is in flight) reach no journal, so only these calls show a host that hammers them.

    Under ``manual_clock`` the journal's time moves only when the test advances it, so the
    journal part means something there only if the test does.

    Example:
        >>> check_backoff(Journal(), max_per_second=5)
        []
    """
    requests: dict[Hashable, list[Entry]] = defaultdict(list)
    for entry in journal.requests():
        requests[(entry.method, entry.route, entry.sandbox)].append(entry)
    violations = []
    for entries in requests.values():
        entries.sort(key=lambda entry: entry.opened)
        window = _busiest_retries(entries, failed, lambda entry: entry.at)
        if len(window) <= max_per_second:
            continue
        sandbox = window[0].sandbox
        what = text.HOT_LOOP_WHAT.format(
            sandbox=sandbox or text.NO_SANDBOX,
            request=request_text(window[0]),
            count=len(window),
            span=window[-1].at - window[0].at,
            limit=max_per_second,
        )
        violations.append(
            Violation(text.RETRIES_BACK_OFF, sandbox, what, text.BACKOFF_FIX, evidence(window))
        )
    # A hot loop whose requests reached the fake is reported from the journal already; the
    # provider's side of it would only say the same again.
    flagged = {violation.sandbox for violation in violations}
    hooks: dict[Hashable, list[ProviderCall]] = defaultdict(list)
    for call in sorted(calls, key=lambda call: call.started):
        if call.sandbox not in flagged:
            hooks[(call.hook, call.sandbox)].append(call)
    for hook_calls in hooks.values():
        found = _busiest_retries(hook_calls, lambda call: call.failed, lambda call: call.started)
        if len(found) <= max_per_second:
            continue
        sandbox = found[0].sandbox
        # A retry may itself succeed: what the host was told is the failure just before it.
        end = next(i for i, call in enumerate(hook_calls) if call is found[-1])
        last_failure = next(call for call in reversed(hook_calls[:end]) if call.failed)
        what = text.HOT_PROVIDER_LOOP_WHAT.format(
            sandbox=sandbox or text.NO_SANDBOX,
            hook=found[0].hook,
            count=len(found),
            span=found[-1].started - found[0].started,
            limit=max_per_second,
            error=last_failure.error,
        )
        violations.append(
            Violation(text.RETRIES_BACK_OFF, sandbox, what, text.BACKOFF_FIX, calls=trimmed(found))
        )
    return violations


def _busiest_retries(
    attempts: Sequence[T], failed: Callable[[T], bool], at: Callable[[T], float]
) -> Sequence[T]:
    """The retries among ``attempts`` (each one that follows a failed one), in the busiest
    second: the longest run of them that fits in one second of ``at``."""
    retries = [current for previous, current in pairwise(attempts) if failed(previous)]
    best: Sequence[T] = retries[:0]
    start = 0
    for end, retry in enumerate(retries):
        while at(retry) - at(retries[start]) >= 1.0:
            start += 1
        if end + 1 - start > len(best):
            best = retries[start : end + 1]
    return best


def check_resumed_or_replaced(
    journal: Journal, outcomes: Iterable[LeaseOutcome]
) -> list[Violation]:
    """Each ``resume()`` ended with a usable lease: the same sandbox, running at the end of
    the journal, or a sandbox acquired after the original one, running, and a command ran on
    it. See :class:`LeaseOutcome`.

    Example:
        >>> check_resumed_or_replaced(Journal(), [LeaseOutcome("sb_1", None, "it raised")])[0].what
        'sb_1: resume() gave back no usable lease: it raised.'
    """
    violations = []
    for outcome in outcomes:
        what = _outcome_problem(journal, outcome)
        if what is None:
            continue
        related = [outcome.original] + ([outcome.final] if outcome.final else [])
        history = [e for sandbox in related for e in journal.history(sandbox)]
        violations.append(
            Violation(
                text.RESUMED_OR_REPLACED,
                outcome.original,
                what,
                text.RESUMED_OR_REPLACED_FIX,
                evidence(history),
            )
        )
    return violations


def _outcome_problem(journal: Journal, outcome: LeaseOutcome) -> str | None:
    original, final = outcome.original, outcome.final
    if outcome.error is not None or final is None:
        return text.NO_LEASE_WHAT.format(sandbox=original, error=outcome.error or "no command ran")
    status = last_status(journal, final)
    if final == original:
        if status != "running":
            return text.NOT_RUNNING_WHAT.format(sandbox=original, status=status)
        return None
    old, new = creation_of(journal, original), creation_of(journal, final)
    if new is None or (old is not None and new.seq < old.seq):
        return text.STALE_REPLACEMENT_WHAT.format(sandbox=original, final=final)
    if status != "running":
        return text.REPLACEMENT_NOT_RUNNING_WHAT.format(
            sandbox=original, final=final, status=status
        )
    return None


def check_unconfirmed_destroyed(journal: Journal, sandbox: str, *, after: int) -> list[Violation]:
    """``sandbox``, whose process cleanup became unconfirmed at journal ticket ``after`` (the
    ``seq`` of the lost or failed process request), was destroyed afterwards and never paused,
    resumed or given work again.

    Example:
        >>> check_unconfirmed_destroyed(Journal(), "sb_1", after=0)[0].check
        'unconfirmed-destroyed'
    """
    later = [e for e in journal.requests(sandbox=sandbox) if e.opened > after]
    reused = [e for e in later if route_of(e) in WORK | {PAUSE, RESUME}]
    destroys = [e for e in later if route_of(e) == DELETE]
    if destroys and not reused:
        return []
    cause = [e for e in journal.requests(sandbox=sandbox) if e.seq == after]
    if reused:
        kinds = sorted({request_text(e).rsplit("/", 1)[-1] for e in reused})
        requests = f"{len(reused)} request(s) ({', '.join(kinds)})"
        what = text.UNCONFIRMED_REUSED_WHAT.format(sandbox=sandbox, after=after, requests=requests)
    else:
        what = text.UNCONFIRMED_KEPT_WHAT.format(sandbox=sandbox, after=after)
    return [
        Violation(
            text.UNCONFIRMED_DESTROYED,
            sandbox,
            what,
            text.UNCONFIRMED_FIX,
            evidence(cause, reused[:4], destroys[:1]),
        )
    ]


def check_no_leaks(journal: Journal, *, keep: Iterable[str] = ()) -> list[Violation]:
    """Every sandbox created in the journal ended destroying, destroyed or failed, unless it is
    in ``keep`` (the sandboxes of the leases the host still holds).

    Example:
        >>> check_no_leaks(Journal(), keep=["sb_1"])
        []
    """
    kept = set(keep)
    violations = []
    for creation in journal.transitions():
        sandbox = creation.sandbox
        if creation.before is not None or sandbox is None or sandbox in kept:
            continue
        status = last_status(journal, sandbox)
        if status in GONE_STATUSES:
            continue
        history = journal.history(sandbox)
        violations.append(
            Violation(
                text.NO_LEAKED_SANDBOX,
                sandbox,
                text.LEAK_WHAT.format(sandbox=sandbox, status=status),
                text.LEAK_FIX,
                evidence(history[:2], history[-3:]),
            )
        )
    return violations


def check_no_orphan_processes(journal: Journal) -> list[Violation]:
    """Every managed process that started also exited (or was terminated) by the end of the
    journal. Buffered ``/exec`` commands are not processes and are not seen here.

    Example:
        >>> check_no_orphan_processes(Journal())
        []
    """
    started: dict[str, Entry] = {}
    for event in journal.entries(kind="process"):
        if event.process is None:
            continue
        if event.detail == "start":
            started[event.process] = event
        else:
            started.pop(event.process, None)
    violations = []
    for process, start in started.items():
        sandbox = start.sandbox
        later = [e for e in journal.history(sandbox or "") if e.seq > start.seq][-3:]
        what = text.ORPHAN_WHAT.format(sandbox=sandbox, process=process, seq=start.seq)
        violations.append(
            Violation(
                text.NO_ORPHAN_PROCESS, sandbox, what, text.ORPHAN_FIX, evidence([start], later)
            )
        )
    return violations


def check_all(
    journal: Journal,
    *,
    outcomes: Sequence[LeaseOutcome] = (),
    keep: Iterable[str] | None = None,
    unconfirmed: Mapping[str, int] | None = None,
    max_attempts_per_second: float = DEFAULT_MAX_ATTEMPTS_PER_SECOND,
    calls: Sequence[ProviderCall] = (),
    retry_after: Mapping[str, float] | None = None,
) -> list[Violation]:
    """Every check at once.

    ``outcomes`` feeds :func:`check_resumed_or_replaced`; ``keep`` the leak check (default:
    the final sandboxes of ``outcomes``); ``unconfirmed`` maps sandboxes to the ticket at
    which their cleanup became unconfirmed (:func:`check_unconfirmed_destroyed`); ``calls``
    (a watched provider's calls) feed :func:`check_backoff` along with the journal;
    ``retry_after`` maps the ids of fault rules that answer with a ``Retry-After`` to its
    seconds (:func:`check_retry_after`).

    Example::

        violations = check_all(createos_server.journal.snapshot(), keep=[lease_sandbox])
        assert not violations, "\\n".join(v.describe() for v in violations)
    """
    if keep is None:
        keep = [outcome.final for outcome in outcomes if outcome.final is not None]
    found = [
        *check_no_work_on_closing(journal),
        *check_no_resume_during_cleanup(journal),
        *check_resumes_serialised(journal),
        *check_backoff(journal, max_per_second=max_attempts_per_second, calls=calls),
        *check_retry_after(journal, retry_after or {}),
        *check_refusals_retried(journal),
        *check_resumed_or_replaced(journal, outcomes),
        *check_no_leaks(journal, keep=keep),
        *check_no_orphan_processes(journal),
    ]
    for sandbox, after in (unconfirmed or {}).items():
        found += check_unconfirmed_destroyed(journal, sandbox, after=after)
    return found


#: Every check by name, with a one-line summary, in the order :func:`check_all` runs them.
CHECKS: dict[str, str] = {
    text.NO_WORK_ON_CLOSING: "no exec/files/process request to a sandbox going away or gone",
    text.NO_RESUME_DURING_CLEANUP: "no resume while the pause or delete is in flight, or once gone",
    text.RESUMES_SERIALISED: "concurrent resumes of one lease send one resume at a time",
    text.RETRIES_BACK_OFF: "retries of failed requests or provider calls are bounded per second",
    text.RETRY_AFTER_HONOURED: "a request answered with Retry-After is not sent again sooner",
    text.REFUSALS_RETRIED: "a pause, resume or delete refused for now (409, 429) is sent again",
    text.RESUMED_OR_REPLACED: "resume ends resumed after cleanup, or replaced by a fresh lease",
    text.NO_LEAKED_SANDBOX: "no sandbox is left alive that no lease refers to",
    text.NO_ORPHAN_PROCESS: "no command's process is left running (e.g. after shutdown)",
    text.UNCONFIRMED_DESTROYED: "a lease with unconfirmed process cleanup is destroyed, not reused",
}
