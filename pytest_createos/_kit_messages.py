"""Every user-facing text of the conformance kit, in one place.

Check names are what :attr:`~pytest_createos.kit.Violation.check` holds and what tests compare
against; the ``*_WHAT`` templates say what happened (``{sandbox}`` first, so a reader sees at
once which sandbox), the ``*_FIX`` texts say what to change; :func:`error_text` is how a report
shows an exception.

Example:
    >>> NO_RESUME_DURING_CLEANUP
    'no-resume-during-cleanup'
"""

from __future__ import annotations

from typing import Final

from pytest_createos.errors import CLEANUP_PENDING_MESSAGE

# -- check names ------------------------------------------------------------------------------

NO_WORK_ON_CLOSING: Final = "no-work-on-closing-sandbox"
NO_RESUME_DURING_CLEANUP: Final = "no-resume-during-cleanup"
RESUMES_SERIALISED: Final = "resumes-serialised"
RETRIES_BACK_OFF: Final = "retries-back-off"
RETRY_AFTER_HONOURED: Final = "retry-after-honoured"
REFUSALS_RETRIED: Final = "refusals-retried"
RESUMED_OR_REPLACED: Final = "resumed-or-replaced"
UNCONFIRMED_DESTROYED: Final = "unconfirmed-destroyed"
NO_LEAKED_SANDBOX: Final = "no-leaked-sandbox"
NO_ORPHAN_PROCESS: Final = "no-orphan-process"
PROVIDER_REFUSES_RESUME: Final = "provider-refuses-resume"
PROVIDER_REFUSAL_LIFTED: Final = "provider-refusal-lifted"
#: Not a check of the journal: the host did not do what the scenario needs (or hung).
SCENARIO: Final = "scenario"

# -- what happened ------------------------------------------------------------------------------

WORK_ON_CLOSING_WHAT: Final = (
    "{sandbox}: {count} work request(s) (exec, files, processes) were sent while the sandbox "
    "was going away; the first, {request}, arrived while {reason}."
)
RESUME_DURING_CLEANUP_WHAT: Final = (
    "{sandbox}: {count} resume request(s) were sent while the lease's cleanup had not finished; "
    "the first arrived while {reason}."
)
WORK_AFTER_DESTROY_WHAT: Final = (
    "{sandbox}: {count} work request(s) (exec, files, processes) were sent after the sandbox "
    "was destroyed: the lease was used after its destroy."
)
RESUME_AFTER_DESTROY_WHAT: Final = (
    "{sandbox}: {count} resume request(s) were sent after the sandbox was destroyed: the lease "
    "was reused after its destroy."
)
REASON_STATUS: Final = "the sandbox was {status}"
REASON_OVERLAP: Final = "{request} (its cleanup) was still in flight"
RESUMES_RACED_WHAT: Final = (
    "{sandbox}: {count} resume request(s) raced another resume of the same sandbox; the first "
    "arrived while {reason}."
)
REASON_OTHER_RESUME: Final = "an earlier resume ({request}) was still in flight"
REASON_RESUMING: Final = "the sandbox was still resuming from an earlier resume"
HOT_LOOP_WHAT: Final = (
    "{sandbox}: {request} was retried {count} times within {span:.3f} s after failed attempts "
    "(at most {limit:g} attempts per second are acceptable)."
)
HOT_PROVIDER_LOOP_WHAT: Final = (
    "{sandbox}: the provider's {hook}() was called again {count} times within {span:.3f} s "
    "after it failed (at most {limit:g} attempts per second are acceptable). It last raised "
    "{error}"
)
NO_SANDBOX: Final = "(no sandbox)"
RETRY_TOO_SOON_WHAT: Final = (
    "{sandbox}: {request} was answered HTTP {status} with Retry-After: {wait:g}, and sent "
    "again {waited:.3f} s after that answer ({count} retry(ies) too soon)."
)
REFUSAL_ABANDONED_WHAT: Final = (
    "{sandbox}: {request} was refused for now with HTTP {status} (#{seq}) and never sent "
    "again; the sandbox was left {left}."
)
NO_LEASE_WHAT: Final = "{sandbox}: resume() gave back no usable lease: {error}."
NOT_RUNNING_WHAT: Final = (
    "{sandbox}: resume() handed back the lease on {sandbox}, but the sandbox ended {status}."
)
STALE_REPLACEMENT_WHAT: Final = (
    "{sandbox}: resume() handed back a lease on {final}, which is neither {sandbox} nor a "
    "sandbox acquired after it."
)
REPLACEMENT_NOT_RUNNING_WHAT: Final = (
    "{sandbox}: resume() replaced the lease with {final}, but {final} ended {status}."
)
UNCONFIRMED_REUSED_WHAT: Final = (
    "{sandbox}: its process cleanup became unconfirmed at #{after}, yet afterwards it got "
    "{requests} instead of being destroyed."
)
UNCONFIRMED_KEPT_WHAT: Final = (
    "{sandbox}: its process cleanup became unconfirmed at #{after}, and it was never destroyed."
)
LEAK_WHAT: Final = (
    "{sandbox} was left {status}: no lease the host handed back refers to it, and nothing "
    "destroyed it."
)
ORPHAN_WHAT: Final = (
    "{sandbox}: process {process} (started at #{seq}) was never terminated; it is still running."
)
PROVIDER_SENT_WHAT: Final = (
    "{sandbox}: resume() {when} sent a resume or work request to the sandbox instead of "
    "refusing at once."
)
PROVIDER_WAITED_WHAT: Final = (
    "{sandbox}: resume() {when} neither refused nor returned within {settle:g} s."
)
PROVIDER_WRONG_ANSWER_WHAT: Final = (
    "{sandbox}: resume() {when} {answer} instead of refusing with "
    f"{CLEANUP_PENDING_MESSAGE!r}."
)
PROVIDER_STILL_REFUSING_WHAT: Final = (
    "{sandbox}: resume() was still refused with {message!r} {after}."
)

# -- what to change -----------------------------------------------------------------------------

WORK_ON_CLOSING_FIX: Final = (
    "Never attach work to a lease that is being released: stop accepting commands once a "
    "release starts, and before running on a lease that was released, wait until the resume "
    "has finished and the sandbox is running again (or use a freshly acquired lease)."
)
RESUME_DURING_CLEANUP_FIX: Final = (
    "Serialise lifecycle calls per lease, so a resume waits until the release (pause or "
    f"delete) has finished. When the provider refuses with {CLEANUP_PENDING_MESSAGE!r}, retry "
    "with backoff; when the cleanup is unconfirmed, destroy the lease and acquire a fresh one."
)
#: The same checks' fixes for a provider scenario, where the code under test is the provider's
#: own lifecycle (the host's advice, "serialise your calls", is not the provider's to follow).
PROVIDER_WORK_ON_CLOSING_FIX: Final = (
    "The provider sent work to a sandbox going away: from the start of release() or destroy() "
    "until its pause or delete has finished, refuse execute() and resume() at once, and let "
    "release() return only once that cleanup is over (the sandbox paused or gone)."
)
PROVIDER_RESUME_DURING_CLEANUP_FIX: Final = (
    "The provider sent a resume while its own pause or delete of the lease was in flight: keep "
    "a closing state per lease from the start of release() or destroy() until its cleanup "
    f"ends, refuse resume() at once with {CLEANUP_PENDING_MESSAGE!r} while it is set, and let "
    "release() return only once the pause or delete has finished."
)
REUSED_AFTER_DESTROY_FIX: Final = (
    "A destroyed lease is gone for good: forget it once its destroy is sent, and acquire a "
    "fresh lease (resume() may return that replacement) instead of resuming or using it."
)
RESUMES_SERIALISED_FIX: Final = (
    "Keep one lock per lease around resume (and release): a second resume of the same lease "
    "must wait for the first and reuse its result instead of sending another resume."
)
BACKOFF_FIX: Final = (
    "Wait between attempts: exponentially growing, jittered and bounded delays, honouring "
    "Retry-After, and a bounded number of attempts. A refusal because cleanup is in flight is "
    "answered by waiting for that cleanup, not by asking again at once."
)
RETRY_AFTER_FIX: Final = (
    "Honour Retry-After: before sending the request again, wait at least the seconds it names "
    "(or until the HTTP date it gives), and give up after a bounded number of attempts."
)
REFUSALS_RETRIED_FIX: Final = (
    "A 409 on a pause or resume means the sandbox was not in a state for it yet: keep polling "
    "its status and submit again once it is paused (or running); a 429 means slow down: send "
    "the same request again after its Retry-After. Neither fails the call or expires the "
    "lease; only the call's own deadline does."
)
RESUMED_OR_REPLACED_FIX: Final = (
    "resume() must end with a usable lease: the same sandbox resumed (running) after its "
    "cleanup finished, or - when it cannot be kept (cleanup unconfirmed, sandbox gone, marker "
    "mismatch) - the old sandbox destroyed and a freshly acquired lease returned."
)
UNCONFIRMED_FIX: Final = (
    "A lease whose process cleanup could not be confirmed (a lost or failed process start or "
    "termination) must never be paused, resumed or given work again: destroy it and acquire a "
    "fresh lease."
)
LEAK_FIX: Final = (
    "Destroy the old sandbox whenever you replace a lease (also when its cleanup is "
    "unconfirmed), and release or destroy every lease you stop using."
)
ORPHAN_FIX: Final = (
    "On shutdown (or when abandoning a command) terminate the command's process tree "
    "(DELETE .../processes/{pid}) or destroy the sandbox; when that cannot be confirmed, treat "
    "the lease as unconfirmed and destroy it."
)
PROVIDER_REFUSAL_FIX: Final = (
    "While a release or destroy of a lease is in flight, or after a cleanup that could not be "
    "confirmed, resume must fail at once, before sending anything, with "
    f"{CLEANUP_PENDING_MESSAGE!r}."
)
PROVIDER_LIFTED_FIX: Final = (
    "Clear the lease's closing state when the release or destroy ends, and its unconfirmed "
    "state when a destroy succeeds, so a later resume is answered (resumed or expired)."
)
PROVIDER_RESUMED_FIX: Final = (
    "resume() must hand back the lease, resumed, while its sandbox is intact: a 409 or 429 on "
    "the way is no reason to fail or expire it (send the request again, after its "
    "Retry-After); expire a lease only when its sandbox is gone or its marker does not match."
)
SCENARIO_FIX: Final = (
    "The Host adapter must map acquire/release/resume/run onto your code and let every call "
    "finish; see the scenario's steps for what the host did."
)

# -- scenario problems (check SCENARIO) -------------------------------------------------------

ACQUIRE_FAILED: Final = "acquire() failed, so the scenario could not start: {error}"
NOTHING_CREATED: Final = "acquire() returned without creating a sandbox"
NO_CLEANUP_SENT: Final = "{sandbox}: {call} sent no pause or delete for the sandbox{error}"
NO_COMMAND_SENT: Final = (
    "{sandbox}: run() sent no command to the sandbox (neither POST .../processes nor "
    ".../exec), so the scenario could not make its process state unconfirmed{error}"
)
TIMED_OUT: Final = "{call} did not finish within {timeout:g} s"
HUNG: Final = TIMED_OUT + " after the kit let everything through"

# -- steps (what the kit and the host did) --------------------------------------------------

STEP_RETURNED: Final = "{call} returned"
STEP_CANCELLED: Final = "{call} was still running at the end and was cancelled"
STEP_CREATED: Final = "{call} created {sandbox}"
STEP_HOLDING: Final = "the kit holds {what} of {sandbox}"
STEP_LOSING: Final = "the kit loses the answer to {what} of {sandbox} (the effect still happens)"
STEP_FAILING: Final = "the kit answers the next {routes} with HTTP {status}"
STEP_RETRY_AFTER: Final = " and Retry-After: {seconds}"
STEP_CONFLICT_NO_EFFECT: Final = (
    "a 409 changes nothing: {sandbox} stays as it is until the request is sent again"
)
STEP_PAUSED_BEHIND: Final = "the fake pauses {sandbox} on its own (as its auto-pause would)"
STEP_STICK: Final = "the kit keeps the next transition of {sandbox} in flight"
STEP_RACED: Final = "the host sent a resume or work request while its release was held"
STEP_TWO_RESUMES: Final = "the host sent two resumes of the lease at once"
STEP_SETTLED: Final = "the host was quiet for {settle:g} s (nothing sent but reads)"
STEP_LET_GO: Final = "the kit lets {what} of {sandbox} through"
STEP_PROBE: Final = "{call} ran on {sandbox}"
STEP_SKIPPED: Final = "skipped: {reason}"

# -- fragments of steps and verdicts --------------------------------------------------------

CALL: Final = "{hook}(lease on {sandbox})"
CALL_RUN: Final = "{hook}(lease on {sandbox}, {command!r})"
CALL_WHEN: Final = "{hook}(lease on {sandbox}) {when}"
CALL_PROBE: Final = "run(lease resume() returned, {command!r})"
HELD_CLEANUP: Final = "pause and delete"
HELD_WORK: Final = "resume and work"
HELD_RESUME: Final = "resume"
HELD_COMMAND: Final = "the command"
HELD_TRANSITION: Final = "the transition"
LOST_START: Final = "the command start"
RAISED: Final = "{call} raised {error}"
RAISED_SUFFIX: Final = "; it raised {error}"
ANSWER_RETURNED: Final = "returned"
ANSWER_RAISED: Final = "raised {error}"
WHEN_IN_FLIGHT: Final = "while its {hook} is in flight"
WHEN_START_LOST: Final = "after its process start was lost"
WHEN_DELETE_FAILED: Final = "after its delete failed"
AFTER_CLEANUP: Final = "after the {hook} finished"
AFTER_DESTROY: Final = "after a successful destroy"

EXPIRED_INTACT: Final = "it returned an expired lease, though the sandbox was paused and intact"
NO_COMMAND_SENT_ON: Final = "execute() on it sent no command to {sandbox}"
NO_SHUTDOWN: Final = "the host has no async shutdown() method"
UNKNOWN_SCENARIO: Final = "unknown scenario {name!r}; the scenarios are: {names}"
VIOLATIONS_HEADER: Final = "scenario {scenario}: {count} violation(s)"
CHECK_HEADER: Final = "{count} conformance violation(s)"
KEEP_HINT: Final = (
    "If a sandbox reported as left alive is still in use on purpose, list it in keep=: "
    "createos_kit.assert_ok(keep={sandboxes!r})"
)
STEPS_HEADER: Final = "what the host did:"
#: Ahead of what a program under test (see ``pytest_createos.bridge``) wrote to stderr.
OUTPUT_HEADER: Final = "what {name} wrote to stderr:"
CALLS_HEADER: Final = "  provider calls, oldest first:"

# -- the explorer ---------------------------------------------------------------------------------

#: Not a check of the journal: a host call of an explored workload never finished.
HOST_FINISHES: Final = "host-call-finishes"
NEVER_FINISHED_WHAT: Final = (
    "{call} never finished: no request of it was held and no timer of the host was pending, "
    "so it waits for something nothing will bring (a lock or event never released?)."
)
NEVER_FINISHED_FIX: Final = (
    "Release every lock and wake every waiter on every path, errors and cancellation included "
    "(``async with lock:``, ``try/finally``)."
)
TOO_MANY_STEPS_WHAT: Final = (
    "the run took more than {limit} steps: the host keeps sending requests (a loop that never "
    "ends?)."
)
EXPLORE_VIOLATIONS_HEADER: Final = (
    "workload {workload} ({ops}) fails: {count} violation(s) in schedule #{number} of {total} "
    "explored ({strategy}), shrunk from {original} to {steps} step(s)."
)
EXPLORE_OK: Final = (
    "workload {workload} ({ops}): {total} schedule(s) explored ({strategy}), nothing found{more}."
)
EXPLORE_PRUNED: Final = "; {pruned} redundant order(s) skipped by partial-order reduction"
EXPLORE_BOUNDED: Final = "; the search stopped at its budget of {budget} schedule(s)"
REPLAY_HINT: Final = "replay it with:\n    await createos_kit.replay(make_host, {schedule!r})"
SCHEDULE_DIVERGED: Final = (
    "the schedule does not fit this host: step {position} is {label!r}, but the possible steps "
    "there are {enabled} (the host sent other requests than when the schedule was found)"
)
BAD_SCHEDULE: Final = (
    "{schedule!r} is not a schedule: write '<workload>: <step> > <step> > ...', as a failing "
    "exploration prints it"
)
NOT_DETERMINISTIC: Final = (
    "the host is not deterministic: run again with the same steps, it sent other requests "
    "({why}); the explorer needs a host whose requests depend only on the fake's answers"
)
FIRST_FLAGGED: Final = "   <-- the first request the checks flag"
TIMELINE_HEADER: Final = (
    "timeline (steps the schedule chose are marked *, the others are the default):"
)
NO_SHUTDOWN_WORKLOAD: Final = "the host has no shutdown(): workload {workload} needs one"

#: How much of an exception's text a report shows.
MAX_ERROR_CHARS: Final = 200


def error_text(error: BaseException) -> str:
    """An exception as a report shows it: its type, and its message if it has one, cut short.

    Example:
        >>> error_text(RuntimeError("no capacity")), error_text(TimeoutError())
        ('RuntimeError: no capacity', 'TimeoutError')
    """
    shown = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return shown if len(shown) <= MAX_ERROR_CHARS else shown[: MAX_ERROR_CHARS - 3] + "..."


# -- the checks made of the calls themselves --------------------------------------------------

#: Checks the scenarios and the explorer make of what the host's or provider's calls did (the
#: journal's are ``pytest_createos._checks.CHECKS``), with a one-line summary each.
CALL_CHECKS: Final[dict[str, str]] = {
    PROVIDER_REFUSES_RESUME: "a provider's resume() while its lease's release or destroy is in "
    "flight, or after a cleanup it could not confirm, refuses at once, sending nothing",
    PROVIDER_REFUSAL_LIFTED: "once that cleanup has ended, resume() is answered again (resumed "
    "or expired), not refused",
    HOST_FINISHES: "every host call of an explored workload finishes",
    SCENARIO: "the host did what the scenario needs (acquired, sent its cleanup, ran its command)",
}
