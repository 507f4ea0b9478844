"""The checks of requests refused for now, on journals built by hand: a 429's Retry-After is
waited out, and a pause, resume or delete refused with 409 or 429 is sent again until it takes
(unless the sandbox got there anyway)."""

from __future__ import annotations

from pytest_createos._refusal_checks import RETRY_AFTER_SLACK_S
from pytest_createos.kit import check_refusals_retried, check_retry_after
from tests.test_kit import DELETE, GET, PAUSE, RESUME, SB, Script, only, script

#: ``script`` is tests/test_kit.py's fixture (a journal in which SB was created), used here too.
__all__ = ["script"]


def rate_limited(script: Script, route: str, *, rule: str = "r1", took: float = 0.0) -> None:
    """``route`` answered 429 by fault rule ``rule``, after ``took`` seconds."""
    entry = script.send(route, SB, state="paused")
    entry.rules = [rule]
    entry.duration_ms = took * 1000
    script.wait(took)
    script.answer(entry, 429)


# -- Retry-After honoured ----------------------------------------------------------------------


def test_a_retry_sooner_than_retry_after_is_caught(script: Script) -> None:
    rate_limited(script, RESUME)
    script.wait(0.25)
    script.call(RESUME, SB, state="paused")
    found = only(check_retry_after(script.journal, {"r1": 1.0}), "retry-after-honoured")
    assert found.what == (
        f"{SB}: POST /v1/sandboxes/{SB}/resume was answered HTTP 429 with Retry-After: 1, and "
        "sent again 0.250 s after that answer (1 retry(ies) too soon)."
    )
    assert [e.status for e in found.entries] == [429, 200]


def test_the_wait_counts_from_the_answer_not_the_arrival(script: Script) -> None:
    rate_limited(script, RESUME, took=0.5)  # the 429 took half a second to come back
    script.wait(0.75)
    script.call(RESUME, SB, state="paused")
    found = only(check_retry_after(script.journal, {"r1": 1.0}), "retry-after-honoured")
    assert "sent again 0.750 s after that answer" in found.what


def test_a_retry_after_the_wait_is_fine(script: Script) -> None:
    rate_limited(script, RESUME)
    script.call(GET, SB, state="paused")  # reads of other routes meanwhile are not retries
    script.wait(1.0)
    script.call(RESUME, SB, state="paused")
    assert check_retry_after(script.journal, {"r1": 1.0}) == []


def test_a_retry_early_by_less_than_the_slack_is_fine(script: Script) -> None:
    # The client measured its wait from a moment later than the fake's answer: float rounding.
    rate_limited(script, RESUME, took=0.1)
    script.wait(1.0 - RETRY_AFTER_SLACK_S / 2)
    script.call(RESUME, SB, state="paused")
    assert check_retry_after(script.journal, {"r1": 1.0}) == []
    rate_limited(script, RESUME, rule="r2", took=0.1)
    script.wait(1.0 - RETRY_AFTER_SLACK_S * 2)
    script.call(RESUME, SB, state="paused")
    only(check_retry_after(script.journal, {"r2": 1.0}), "retry-after-honoured")


def test_only_the_rules_named_set_a_wait(script: Script) -> None:
    rate_limited(script, RESUME, rule="other")
    script.call(RESUME, SB, state="paused")
    assert check_retry_after(script.journal, {"r1": 1.0}) == []


# -- refusals retried -----------------------------------------------------------------------------


def test_a_resume_refused_with_409_and_never_sent_again_is_caught(script: Script) -> None:
    script.move(SB, "running", "paused", "fault")
    refused = script.call(RESUME, SB, state="paused", status=409)
    script.call(GET, SB, state="paused")
    found = only(check_refusals_retried(script.journal), "refusals-retried")
    assert found.what == (
        f"{SB}: POST /v1/sandboxes/{SB}/resume was refused for now with HTTP 409 "
        f"(#{refused.seq}) and never sent again; the sandbox was left paused."
    )
    assert found.entries[0] is refused


def test_a_delete_refused_with_429_and_never_sent_again_is_caught(script: Script) -> None:
    refused = script.call(DELETE, SB, status=429)
    found = only(check_refusals_retried(script.journal), "refusals-retried")
    assert found.what.endswith(
        f"with HTTP 429 (#{refused.seq}) and never sent again; the sandbox was left running."
    )


def test_a_refusal_sent_again_until_it_took_is_fine(script: Script) -> None:
    script.move(SB, "running", "paused", "fault")
    script.call(RESUME, SB, state="paused", status=409)
    script.call(RESUME, SB, state="paused")
    script.move(SB, "paused", "resuming", "resume")
    script.move(SB, "resuming", "running", "resume")
    script.call(PAUSE, SB, status=429)  # and a pause that took later, then a resume again
    script.call(PAUSE, SB)
    script.release_and_resume(SB)
    assert check_refusals_retried(script.journal) == []


def test_a_refusal_is_moot_once_the_sandbox_got_there_or_went_away(script: Script) -> None:
    script.call(PAUSE, SB, state="pausing", status=409)  # someone else's pause: there anyway
    script.move(SB, "running", "pausing", "auto-pause")
    script.move(SB, "pausing", "paused", "auto-pause")
    script.call(PAUSE, SB, state="paused", status=409)  # already paused
    script.call(RESUME, SB, state="paused", status=409)
    script.call(DELETE, SB, state="paused")  # given up on, and gone
    script.move(SB, "paused", "destroying", "delete")
    assert check_refusals_retried(script.journal) == []
