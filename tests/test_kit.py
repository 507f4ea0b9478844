"""The conformance kit's checks on journals built by hand: each catches its bug, says what
happened to which sandbox in what order and what to change, and stays quiet on correct code.

The same checks catch real hosts and providers in tests/kit/ and examples/.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from fake_server.journal import Entry, Journal
from pytest_createos import _kit_messages as text
from pytest_createos._checks import MAX_EVIDENCE
from pytest_createos.kit import (
    CHECKS,
    ConformanceError,
    LeaseOutcome,
    ProviderCall,
    ScenarioReport,
    Violation,
    check_all,
    check_backoff,
    check_no_leaks,
    check_no_orphan_processes,
    check_no_resume_during_cleanup,
    check_no_work_on_closing,
    check_resumed_or_replaced,
    check_resumes_serialised,
    check_unconfirmed_destroyed,
)

SB = "sb_one"
NEW = "sb_two"
PAUSE = "POST /v1/sandboxes/{id}/pause"
RESUME = "POST /v1/sandboxes/{id}/resume"
DELETE = "DELETE /v1/sandboxes/{id}"
EXEC = "POST /v1/sandboxes/{id}/exec"
START = "POST /v1/sandboxes/{id}/processes"
GET = "GET /v1/sandboxes/{id}"


class Script:
    """Writes a journal the way the fake does: a request draws a ticket when it arrives
    (:meth:`send`) and another when it is answered (:meth:`answer`), which is when it is
    recorded; transitions and process events draw one ticket."""

    def __init__(self) -> None:
        self.journal = Journal()
        self._tickets = itertools.count(1)
        self.now = 0.0

    def wait(self, seconds: float) -> None:
        self.now += seconds

    def move(self, sandbox: str, before: str | None, after: str, cause: str = "test") -> Entry:
        ticket = next(self._tickets)
        return self.journal.record(
            Entry(
                seq=ticket,
                opened=ticket,
                kind="transition",
                at=self.now,
                time="",
                sandbox=sandbox,
                before=before,
                after=after,
                cause=cause,
            )
        )

    def create(self, sandbox: str) -> None:
        self.move(sandbox, None, "creating", "create")
        self.move(sandbox, "creating", "running", "create")

    def send(self, route: str, sandbox: str, *, state: str = "running") -> Entry:
        method, template = route.split(" ", 1)
        path = template.replace("{id}", sandbox).replace("{pid}", "proc_1")
        return Entry(
            seq=0,
            opened=next(self._tickets),
            kind="request",
            at=self.now,
            time="",
            sandbox=sandbox,
            method=method,
            route=template,
            path=path,
            sandbox_status=state,
        )

    def answer(self, entry: Entry, status: int | None = 200) -> Entry:
        entry.seq = next(self._tickets)
        entry.status = status
        return self.journal.record(entry)

    def call(
        self, route: str, sandbox: str, *, state: str = "running", status: int | None = 200
    ) -> Entry:
        return self.answer(self.send(route, sandbox, state=state), status)

    def process(self, sandbox: str, detail: str) -> Entry:
        ticket = next(self._tickets)
        return self.journal.record(
            Entry(
                seq=ticket,
                opened=ticket,
                kind="process",
                at=self.now,
                time="",
                sandbox=sandbox,
                process="proc_1",
                detail=detail,
            )
        )

    def release_and_resume(self, sandbox: str) -> None:
        """The correct order: pause, wait until paused, resume, wait until running."""
        self.call(PAUSE, sandbox)
        self.move(sandbox, "running", "pausing", "pause")
        self.move(sandbox, "pausing", "paused", "pause")
        self.call(RESUME, sandbox, state="paused")
        self.move(sandbox, "paused", "resuming", "resume")
        self.move(sandbox, "resuming", "running", "resume")


@pytest.fixture
def script() -> Script:
    script = Script()
    script.create(SB)
    return script


def only(violations: list[Violation], check: str) -> Violation:
    assert [v.check for v in violations] == [check], "\n".join(v.describe() for v in violations)
    return violations[0]


# -- no work on a sandbox that is going away ----------------------------------------------------


def test_work_sent_while_the_sandbox_pauses_is_caught(script: Script) -> None:
    script.call(PAUSE, SB)
    pausing = script.move(SB, "running", "pausing", "pause")
    script.call(EXEC, SB, state="pausing", status=409)
    script.call(START, SB, state="pausing", status=409)
    found = only(check_no_work_on_closing(script.journal), "no-work-on-closing-sandbox")
    assert found.sandbox == SB
    assert found.what == (
        f"{SB}: 2 work request(s) (exec, files, processes) were sent while the sandbox was going "
        f"away; the first, POST /v1/sandboxes/{SB}/exec, arrived while the sandbox was pausing."
    )
    # The status it arrived in, then the offending requests, in arrival order.
    assert found.entries[0] is pausing
    assert [e.route for e in found.entries[1:]] == [
        "/v1/sandboxes/{id}/exec",
        "/v1/sandboxes/{id}/processes",
    ]
    assert found.fix == text.WORK_ON_CLOSING_FIX


def test_work_sent_while_a_delete_is_in_flight_is_caught(script: Script) -> None:
    delete = script.send(DELETE, SB)
    script.call(EXEC, SB)  # the sandbox is still running: the delete is held before its effect
    script.answer(delete)
    found = only(check_no_work_on_closing(script.journal), "no-work-on-closing-sandbox")
    assert f"arrived while DELETE /v1/sandboxes/{SB} (its cleanup) was still in flight" in (
        found.what
    )
    assert [e.route for e in found.entries if e.kind == "request"] == [
        "/v1/sandboxes/{id}",
        "/v1/sandboxes/{id}/exec",
    ]


def test_teardown_after_work_in_flight_is_not_work_on_a_closing_sandbox(script: Script) -> None:
    work = script.send(START, SB)
    script.call(DELETE, SB)  # the host abandons the command and destroys the sandbox
    script.answer(work, None)
    script.release_and_resume(NEW)
    assert check_no_work_on_closing(script.journal) == []


# -- no resume while cleanup is in flight -------------------------------------------------------


def test_resume_racing_a_held_pause_is_caught(script: Script) -> None:
    pause = script.send(PAUSE, SB)
    resume = script.call(RESUME, SB, status=409)
    script.answer(pause)
    found = only(check_no_resume_during_cleanup(script.journal), "no-resume-during-cleanup")
    assert found.what.startswith(f"{SB}: 1 resume request(s) were sent while the lease's cleanup")
    lines = found.describe().splitlines()
    assert lines[0] == f"[no-resume-during-cleanup] {found.what}"
    assert lines[1] == "  journal, in arrival order:"
    # The pause arrived first and was answered last: its line says when it arrived.
    assert pause.opened < resume.opened < resume.seq < pause.seq
    assert lines[3] == (
        f"    #{pause.seq} POST /v1/sandboxes/{SB}/pause -> 200 (sandbox running)"
        f"  [arrived at #{pause.opened}]"
    )
    assert lines[4].startswith(f"    #{resume.seq} POST /v1/sandboxes/{SB}/resume -> 409")
    assert lines[-1] == f"  fix: {text.RESUME_DURING_CLEANUP_FIX}"
    assert "CreateOS lease cleanup must finish before resume." in lines[-1]


def test_resume_of_a_destroyed_sandbox_is_reported_as_reuse_after_destroy(script: Script) -> None:
    script.call(DELETE, SB)
    script.move(SB, "running", "destroying", "delete")
    destroyed = script.move(SB, "destroying", "destroyed", "delete")
    script.call(RESUME, SB, state="destroyed", status=409)
    script.call(RESUME, SB, state="destroyed", status=409)
    found = only(check_no_resume_during_cleanup(script.journal), "no-resume-during-cleanup")
    # Nothing was left to finish: waiting for a cleanup would not have helped.
    assert found.what == (
        f"{SB}: 2 resume request(s) were sent after the sandbox was destroyed: the lease was "
        "reused after its destroy."
    )
    assert found.fix == text.REUSED_AFTER_DESTROY_FIX
    assert found.entries[0] is destroyed


def test_resume_while_the_sandbox_is_destroying_is_a_cleanup_race(script: Script) -> None:
    script.call(DELETE, SB)
    script.move(SB, "running", "destroying", "delete")
    script.call(RESUME, SB, state="destroying", status=409)
    script.move(SB, "destroying", "destroyed", "delete")
    script.call(RESUME, SB, state="destroyed", status=409)
    found = only(check_no_resume_during_cleanup(script.journal), "no-resume-during-cleanup")
    assert found.what == (
        f"{SB}: 2 resume request(s) were sent while the lease's cleanup had not finished; the "
        "first arrived while the sandbox was destroying."
    )
    assert found.fix == text.RESUME_DURING_CLEANUP_FIX


def test_work_on_a_destroyed_sandbox_is_reported_as_use_after_destroy(script: Script) -> None:
    script.call(DELETE, SB)
    script.move(SB, "running", "destroying", "delete")
    script.move(SB, "destroying", "destroyed", "delete")
    script.call(EXEC, SB, state="destroyed", status=409)
    found = only(check_no_work_on_closing(script.journal), "no-work-on-closing-sandbox")
    assert found.what == (
        f"{SB}: 1 work request(s) (exec, files, processes) were sent after the sandbox was "
        "destroyed: the lease was used after its destroy."
    )
    assert found.fix == text.REUSED_AFTER_DESTROY_FIX


def test_resume_after_the_pause_finished_is_fine(script: Script) -> None:
    script.release_and_resume(SB)
    assert check_no_resume_during_cleanup(script.journal) == []
    assert check_all(script.journal, keep=[SB]) == []


# -- resumes serialised ---------------------------------------------------------------------


def test_two_resumes_in_flight_together_are_caught(script: Script) -> None:
    script.move(SB, "running", "paused", "pause")
    first = script.send(RESUME, SB, state="paused")
    script.call(RESUME, SB, state="paused", status=409)
    script.answer(first)
    found = only(check_resumes_serialised(script.journal), "resumes-serialised")
    assert "the first arrived while an earlier resume (POST" in found.what
    assert [e.status for e in found.entries] == [200, 409]


def test_a_resume_while_still_resuming_is_caught(script: Script) -> None:
    script.move(SB, "running", "paused", "pause")
    script.call(RESUME, SB, state="paused")
    script.call(RESUME, SB, state="resuming", status=409)
    found = only(check_resumes_serialised(script.journal), "resumes-serialised")
    assert found.what.endswith("still resuming from an earlier resume.")


def test_a_second_resume_once_running_is_fine(script: Script) -> None:
    script.release_and_resume(SB)
    script.release_and_resume(SB)
    assert check_resumes_serialised(script.journal) == []


# -- retries back off ---------------------------------------------------------------------------


def test_a_hot_loop_of_refused_resumes_is_caught(script: Script) -> None:
    for _ in range(30):
        script.call(RESUME, SB, state="pausing", status=409)
        script.wait(0.001)
    found = only(check_backoff(script.journal), "retries-back-off")
    assert found.what == (
        f"{SB}: POST /v1/sandboxes/{SB}/resume was retried 29 times within 0.028 s after failed "
        "attempts (at most 10 attempts per second are acceptable)."
    )
    assert len(found.entries) == MAX_EVIDENCE  # the first and the last few, not all 29
    assert found.entries[-1].seq > found.entries[-3].seq


def test_spaced_retries_and_successful_polls_are_not_a_hot_loop(script: Script) -> None:
    for _ in range(20):
        script.call(RESUME, SB, status=503)
        script.wait(0.25)  # four attempts a second
    for _ in range(100):
        script.call(GET, SB)  # polling a transition answers 200: not a retry
    assert check_backoff(script.journal) == []
    assert only(check_backoff(script.journal, max_per_second=3), "retries-back-off")


def test_requests_that_got_no_answer_count_as_failed(script: Script) -> None:
    for _ in range(12):
        script.call(DELETE, SB, status=None)
    assert only(check_backoff(script.journal), "retries-back-off").sandbox == SB


REFUSED = "CleanupPendingError: CreateOS lease cleanup must finish before resume."


def provider_calls(count: int, every: float, *, error: str | None = REFUSED) -> list[ProviderCall]:
    """``count`` resume calls of a watched provider, ``every`` seconds apart."""
    return [ProviderCall("resume", SB, n * every, n * every + 0.0001, error) for n in range(count)]


def test_a_hot_loop_on_the_providers_own_refusals_is_caught(script: Script) -> None:
    # The provider refused every call itself: the journal has nothing of them.
    calls = provider_calls(30, 0.001)
    found = only(check_backoff(script.journal, calls=calls), "retries-back-off")
    assert found.what == (
        f"{SB}: the provider's resume() was called again 29 times within 0.028 s after it failed "
        f"(at most 10 attempts per second are acceptable). It last raised {REFUSED}"
    )
    assert (found.entries, len(found.calls)) == ((), MAX_EVIDENCE)
    assert found.calls[0] is calls[1]  # the first retry, then the last ones
    assert found.calls[-1] is calls[-1]
    lines = found.describe().splitlines()
    assert lines[1:3] == [
        "  provider calls, oldest first:",
        f"    +0.000 s resume({SB}) raised {REFUSED}",
    ]
    assert lines[-2] == f"    +0.028 s resume({SB}) raised {REFUSED}"
    assert lines[-1] == f"  fix: {text.BACKOFF_FIX}"


def test_a_hot_loop_names_the_failure_the_host_kept_answering(script: Script) -> None:
    # Every other call succeeds; the retries that follow the failures are still a hot loop.
    calls = [
        ProviderCall("destroy", SB, n * 0.001, n * 0.001, "LeaseError: no" if n % 2 else None)
        for n in range(40)
    ]
    found = only(check_backoff(script.journal, calls=calls), "retries-back-off")
    assert found.what.startswith(f"{SB}: the provider's destroy() was called again 19 times ")
    assert found.what.endswith("It last raised LeaseError: no")


def test_spaced_or_successful_provider_calls_are_not_a_hot_loop(script: Script) -> None:
    assert check_backoff(script.journal, calls=provider_calls(20, 0.25)) == []
    assert check_backoff(script.journal, calls=provider_calls(100, 0.001, error=None)) == []
    assert only(
        check_backoff(script.journal, calls=provider_calls(20, 0.25), max_per_second=3),
        "retries-back-off",
    )


def test_a_hot_loop_the_journal_shows_is_reported_once(script: Script) -> None:
    for _ in range(30):
        script.call(RESUME, SB, state="pausing", status=409)
        script.wait(0.001)
    calls = provider_calls(30, 0.001)  # the same loop, seen from the provider
    found = only(check_backoff(script.journal, calls=calls), "retries-back-off")
    assert found.what.startswith(f"{SB}: POST /v1/sandboxes/{SB}/resume was retried 29 times")
    assert found.calls == ()


# -- resumed after cleanup, or replaced ---------------------------------------------------------


def test_resume_that_gave_no_lease_is_caught(script: Script) -> None:
    outcome = LeaseOutcome(SB, None, "resume() raised CleanupPendingError: ...")
    found = only(check_resumed_or_replaced(script.journal, [outcome]), "resumed-or-replaced")
    assert found.what == (
        f"{SB}: resume() gave back no usable lease: resume() raised CleanupPendingError: ...."
    )


def test_same_lease_handed_back_while_still_pausing_is_caught(script: Script) -> None:
    script.call(PAUSE, SB)
    script.move(SB, "running", "pausing", "pause")
    outcome = LeaseOutcome(SB, SB)
    found = only(check_resumed_or_replaced(script.journal, [outcome]), "resumed-or-replaced")
    assert found.what == (
        f"{SB}: resume() handed back the lease on {SB}, but the sandbox ended pausing."
    )


def test_older_sandbox_handed_back_as_a_replacement_is_caught() -> None:
    script = Script()
    script.create(NEW)  # created before the lease being resumed
    script.create(SB)
    outcome = LeaseOutcome(SB, NEW)
    found = only(check_resumed_or_replaced(script.journal, [outcome]), "resumed-or-replaced")
    assert "which is neither" in found.what


def test_replacement_that_is_not_running_is_caught(script: Script) -> None:
    script.create(NEW)
    script.move(NEW, "running", "error", "fault")
    found = only(
        check_resumed_or_replaced(script.journal, [LeaseOutcome(SB, NEW)]), "resumed-or-replaced"
    )
    assert found.what.endswith(f"replaced the lease with {NEW}, but {NEW} ended error.")


def test_resumed_or_replaced_leases_are_fine(script: Script) -> None:
    script.release_and_resume(SB)
    script.create(NEW)
    outcomes = [LeaseOutcome(SB, SB), LeaseOutcome(SB, NEW)]
    assert check_resumed_or_replaced(script.journal, outcomes) == []


# -- unconfirmed leases are destroyed -----------------------------------------------------------


def test_unconfirmed_lease_that_is_paused_and_resumed_is_caught(script: Script) -> None:
    lost = script.call(START, SB, status=None)
    script.release_and_resume(SB)
    found = only(
        check_unconfirmed_destroyed(script.journal, SB, after=lost.seq), "unconfirmed-destroyed"
    )
    assert found.what == (
        f"{SB}: its process cleanup became unconfirmed at #{lost.seq}, yet afterwards it got "
        "2 request(s) (pause, resume) instead of being destroyed."
    )
    assert found.entries[0] is lost


def test_unconfirmed_lease_left_alone_is_caught(script: Script) -> None:
    lost = script.call(START, SB, status=502)
    found = only(
        check_unconfirmed_destroyed(script.journal, SB, after=lost.seq), "unconfirmed-destroyed"
    )
    assert found.what.endswith("and it was never destroyed.")


def test_unconfirmed_lease_destroyed_is_fine(script: Script) -> None:
    lost = script.call(START, SB, status=None)
    script.call(GET, SB)
    script.call(DELETE, SB)
    assert check_unconfirmed_destroyed(script.journal, SB, after=lost.seq) == []


# -- no leaks, no orphans -----------------------------------------------------------------------


def test_sandbox_nobody_holds_is_a_leak(script: Script) -> None:
    script.create(NEW)
    script.call(PAUSE, SB)
    script.move(SB, "running", "pausing", "pause")
    script.move(SB, "pausing", "paused", "pause")
    found = only(check_no_leaks(script.journal, keep=[NEW]), "no-leaked-sandbox")
    assert found.what.startswith(f"{SB} was left paused: no lease the host handed back")
    assert check_no_leaks(script.journal, keep=[SB, NEW]) == []
    script.move(SB, "paused", "destroying", "delete")
    assert check_no_leaks(script.journal, keep=[NEW]) == []


def test_process_never_terminated_is_an_orphan(script: Script) -> None:
    start = script.process(SB, "start")
    found = only(check_no_orphan_processes(script.journal), "no-orphan-process")
    assert found.what == (
        f"{SB}: process proc_1 (started at #{start.seq}) was never terminated; it is still running."
    )
    script.process(SB, "exit code=None signal=SIGKILL")
    assert check_no_orphan_processes(script.journal) == []


# -- all together -------------------------------------------------------------------------------


def test_check_all_runs_every_check_and_keeps_the_final_leases(script: Script) -> None:
    script.create(NEW)
    script.move(NEW, "running", "error", "fault")
    lost = script.call(START, SB, status=None)
    pause = script.send(PAUSE, SB)
    for _ in range(12):
        script.call(RESUME, SB, status=409)
    script.answer(pause)
    script.call(RESUME, SB, state="resuming", status=409)
    script.call(EXEC, SB, state="pausing", status=409)
    script.process(SB, "start")
    limited = script.send(DELETE, NEW, state="error")
    limited.rules = ["r1"]
    script.answer(limited, 429)
    script.call(DELETE, NEW, state="error", status=429)  # at once, then never again
    found = check_all(
        script.journal,
        outcomes=[LeaseOutcome(SB, NEW)],
        unconfirmed={SB: lost.seq},
        retry_after={"r1": 1.0},
    )
    assert [v.check for v in found] == [
        "no-work-on-closing-sandbox",
        "no-resume-during-cleanup",
        "resumes-serialised",
        "retries-back-off",
        "retry-after-honoured",
        "refusals-retried",
        "resumed-or-replaced",
        "no-leaked-sandbox",
        "no-orphan-process",
        "unconfirmed-destroyed",
    ]
    assert [v.check for v in found] == list(CHECKS)
    # SB leaked: resume() handed back NEW, so only NEW is kept.
    assert next(v for v in found if v.check == "no-leaked-sandbox").sandbox == SB


def test_an_error_is_shown_by_its_type_and_message_cut_short() -> None:
    assert text.error_text(RuntimeError("no capacity")) == "RuntimeError: no capacity"
    assert text.error_text(asyncio.CancelledError()) == "CancelledError"  # no dangling ": "
    long = text.error_text(RuntimeError("x" * 500))
    assert (len(long), long[-4:]) == (text.MAX_ERROR_CHARS, "x...")


def test_report_and_error_list_violations_then_steps() -> None:
    violation = Violation("retries-back-off", SB, f"{SB}: too fast.", "Wait.")
    report = ScenarioReport("concurrent-resumes", ["acquire() created sb_one"], [violation])
    assert not report.ok
    assert report.failed_checks == {"retries-back-off"}
    assert report.format().splitlines() == [
        "scenario concurrent-resumes: 1 violation(s)",
        f"[retries-back-off] {SB}: too fast.",
        "  fix: Wait.",
        "what the host did:",
        "  acquire() created sb_one",
    ]
    with pytest.raises(ConformanceError) as raised:
        report.assert_ok()
    assert raised.value.violations == [violation]
    assert str(raised.value) == report.format()
    ScenarioReport("concurrent-resumes").assert_ok()
