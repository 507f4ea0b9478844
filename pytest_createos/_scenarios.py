"""The conformance kit's scenarios: each builds one race on the fake with gates and state
faults, lets the host (or provider) act, and reports what it did.

A scenario never sleeps to make a race happen. Where the kit must learn that a host is *not*
going to do something (for example, not send a resume while its release is held), it gives the
host ``settle_s`` to show its hand; a host that behaves never depends on that time, and one that
misbehaves is caught as soon as its request reaches a gate. What a scenario does to the fake and
to the host goes through its :class:`~pytest_createos._scenario_run.ScenarioRun`.

Example::

    report = await ConformanceKit(createos_server).run("concurrent-resumes", host)
    print(report.format())
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_createos import _kit_messages as text
from pytest_createos._checks import (
    CLEANUP,
    CREATE,
    DELETE,
    EXEC,
    PAUSE,
    RESUME,
    START_PROCESS,
    WORK,
)
from pytest_createos._scenario_run import ScenarioReport, ScenarioRun
from pytest_createos.errors import is_cleanup_pending
from pytest_createos.host import LeaseProviderLike

if TYPE_CHECKING:
    from pytest_createos.kit import ConformanceKit, Host

__all__ = [
    "PROVIDER_SCENARIOS",
    "SCENARIOS",
    "Scenario",
    "find_scenario",
    "play",
]

#: What the kit runs when it needs a command that is still running when it acts.
LONG_COMMAND = "sleep 30"


# -- host scenarios -------------------------------------------------------------------------


async def _resume_while_release_in_flight(
    kit: ConformanceKit, run: ScenarioRun, host: Host[Any]
) -> None:
    acquired = await run.acquire(host.acquire())
    if acquired is None:
        return
    lease, sandbox = acquired
    cleanup = run.gate(text.HELD_CLEANUP, sandbox, CLEANUP)
    watch = run.gate(text.HELD_WORK, sandbox, WORK | {RESUME})
    release = run.spawn(text.CALL.format(hook="release", sandbox=sandbox), host.release(lease))
    if not await run.hold(cleanup, release):
        await run.no_cleanup(release, sandbox)
        return
    resume = run.spawn(text.CALL.format(hook="resume", sandbox=sandbox), host.resume(lease))
    if await run.settle(resume, gate=watch):
        run.step(text.STEP_RACED)
        # The cleanup stays held: whatever the host does next still races it.
        run.let_go(watch, text.HELD_WORK, sandbox)
        await run.settle(resume)
    else:
        watch.open()  # nothing came: the host's later requests need not be held
    judged = resume.done()
    if judged:
        await run.judge_resume(host, resume, sandbox)  # at once, while the release is held
    run.let_go(cleanup, text.HELD_CLEANUP, sandbox)
    await run.finish(release)
    if not judged:
        await run.judge_resume(host, resume, sandbox)


async def _resume_after_failed_release(
    kit: ConformanceKit, run: ScenarioRun, host: Host[Any]
) -> None:
    acquired = await run.acquire(host.acquire())
    if acquired is None:
        return
    lease, sandbox = acquired
    # The pause or delete takes effect but its answer is lost, and the transition it started
    # stays in flight: the sandbox is going away while the host only knows the call failed.
    lost = run.lose_answers(text.HELD_CLEANUP, CLEANUP, sandbox)
    run.stick(sandbox)
    release = run.spawn(text.CALL.format(hook="release", sandbox=sandbox), host.release(lease))
    # A host may send the pause after release() returned, from a task of its own: what counts
    # is whether the pause or delete arrives before the host falls quiet, not before it returns.
    fired = await run.wait_until(lambda: run.fired(lost, sandbox) is not None, release)
    if not fired and release.done():
        await run.no_cleanup(release, sandbox)
        return
    run.remove_rules(lost)
    resume = run.spawn(text.CALL.format(hook="resume", sandbox=sandbox), host.resume(lease))
    await run.settle(resume)
    judged = resume.done()
    if judged:
        await run.judge_resume(host, resume, sandbox)  # at once, while the cleanup is in flight
    run.unstick(sandbox)
    await run.finish(release)
    if not judged:
        await run.judge_resume(host, resume, sandbox)


async def _resume_unconfirmed_lease(kit: ConformanceKit, run: ScenarioRun, host: Host[Any]) -> None:
    acquired = await run.acquire(host.acquire())
    if acquired is None:
        return
    lease, sandbox = acquired
    # The command starts, but its answer is lost: nobody knows its process id, so nobody can
    # confirm it was cleaned up.
    lost_rules = run.lose_answers(text.LOST_START, {START_PROCESS, EXEC}, sandbox)
    call = text.CALL_RUN.format(hook="run", sandbox=sandbox, command=kit.probe_command)
    await run.call(call, host.run(lease, kit.probe_command))
    lost = run.fired(lost_rules, sandbox)
    run.remove_rules(lost_rules)
    if lost is None:
        run.problem(sandbox, text.NO_COMMAND_SENT.format(sandbox=sandbox, error=""))
        return
    run.unconfirmed[sandbox] = lost.seq
    await run.call(text.CALL.format(hook="release", sandbox=sandbox), host.release(lease))
    resume = run.spawn(text.CALL.format(hook="resume", sandbox=sandbox), host.resume(lease))
    await run.judge_resume(host, resume, sandbox)


async def _released(
    kit: ConformanceKit, run: ScenarioRun, host: Host[Any]
) -> tuple[Any, str] | None:
    """Acquire a lease and release it, and wait for its cleanup to be over: for the scenarios
    about the resumes that follow, not the release. ``None`` when the host acquired none."""
    acquired = await run.acquire(host.acquire())
    if acquired is None:
        return None
    lease, sandbox = acquired
    await run.call(text.CALL.format(hook="release", sandbox=sandbox), host.release(lease))
    await kit.wait_still(sandbox)
    return acquired


async def _concurrent_resumes(kit: ConformanceKit, run: ScenarioRun, host: Host[Any]) -> None:
    released = await _released(kit, run, host)
    if released is None:
        return
    lease, sandbox = released
    watch = run.gate(text.HELD_RESUME, sandbox, {RESUME})
    resume = text.CALL.format(hook="resume", sandbox=sandbox)
    first = run.spawn(f"{resume} #1", host.resume(lease))
    second = run.spawn(f"{resume} #2", host.resume(lease))
    if await run.settle(first, second, gate=watch, count=2):
        run.step(text.STEP_TWO_RESUMES)
    run.let_go(watch, text.HELD_RESUME, sandbox)
    # Both must be over before either lease is used: a resume still replacing its lease would
    # send work of its own while the kit looks for where its command ran.
    await run.finish(first)
    await run.finish(second)
    await run.judge_resume(host, first, sandbox)
    await run.judge_resume(host, second, sandbox)


async def _resume_refused_for_now(kit: ConformanceKit, run: ScenarioRun, host: Host[Any]) -> None:
    released = await _released(kit, run, host)
    if released is None:
        return
    lease, sandbox = released
    # The service refuses a resume that meets its sandbox still settling: nothing happens.
    run.fail_next(409, {RESUME}, sandbox)
    run.step(text.STEP_CONFLICT_NO_EFFECT.format(sandbox=sandbox))
    run.fail_next(429, {RESUME}, sandbox, retry_after=kit.retry_after_s)
    # A host whose release deleted the sandbox acquires a fresh one instead: it meets the 429.
    run.fail_next(429, {CREATE}, None, retry_after=kit.retry_after_s)
    resume = run.spawn(text.CALL.format(hook="resume", sandbox=sandbox), host.resume(lease))
    await run.judge_resume(host, resume, sandbox)


async def _shutdown_during_run(kit: ConformanceKit, run: ScenarioRun, host: Host[Any]) -> None:
    shutdown: Callable[[], Coroutine[Any, Any, None]] | None = getattr(host, "shutdown", None)
    if not callable(shutdown):
        run.skip(text.NO_SHUTDOWN)
        return
    acquired = await run.acquire(host.acquire())
    if acquired is None:
        return
    lease, sandbox = acquired
    run.keep.add(sandbox)  # a host may keep its lease across a restart; its commands it may not
    # A managed process is held once it has started; a buffered exec before it starts.
    started = run.gate(text.HELD_COMMAND, sandbox, {EXEC}, after={START_PROCESS}, times=1)
    call = text.CALL_RUN.format(hook="run", sandbox=sandbox, command=LONG_COMMAND)
    command = run.spawn(call, host.run(lease, LONG_COMMAND))
    if not await run.hold(started, command):
        result = await run.finish(command)
        what = text.NO_COMMAND_SENT.format(sandbox=sandbox, error=result.raised_suffix())
        run.problem(sandbox, what)
        return
    stopping = run.spawn("shutdown()", shutdown())
    await run.settle(stopping)
    run.let_go(started, text.HELD_COMMAND, sandbox)
    await run.finish(stopping)
    await run.finish(command)


# -- provider scenarios -----------------------------------------------------------------------


def _lease_args(params: Mapping[str, Any], lease: Any) -> dict[str, Any]:
    return {
        **params,
        "provider_lease_id": lease.provider_lease_id,
        "lease_metadata": lease.metadata,
    }


def _execute_probe(
    kit: ConformanceKit,
    provider: LeaseProviderLike,
    params: Mapping[str, Any],
    lease: Any,
    sandbox: str,
) -> tuple[str, Coroutine[Any, Any, Any]]:
    """How a step names it, and the ``execute()`` call itself, of the kit's probe command on
    ``lease`` (of ``sandbox``)."""
    program, *words = shlex.split(kit.probe_command)
    call = text.CALL_RUN.format(hook="execute", sandbox=sandbox, command=kit.probe_command)
    return call, provider.execute(**params, lease=lease, command=program, args=words)


async def _expect_refusal(
    run: ScenarioRun, provider: LeaseProviderLike, args: Mapping[str, Any], sandbox: str, when: str
) -> asyncio.Future[Any]:
    """``resume()`` now must fail at once with the cleanup-pending refusal, sending nothing.

    Returns the resume's task: one that waits instead of refusing may wait for the very cleanup
    the kit holds, so the caller finishes it once it has let that cleanup go."""
    watch = run.gate(text.HELD_WORK, sandbox, WORK | {RESUME, PAUSE})
    call = text.CALL_WHEN.format(hook="resume", sandbox=sandbox, when=when)
    resume = run.spawn(call, provider.resume(**args))
    sent = await run.settle(resume, gate=watch)
    run.let_go(watch, text.HELD_WORK, sandbox)
    what = None
    if sent:
        what = text.PROVIDER_SENT_WHAT.format(sandbox=sandbox, when=when)
    elif not resume.done():
        what = text.PROVIDER_WAITED_WHAT.format(sandbox=sandbox, when=when, settle=run.kit.settle_s)
    else:
        result = await run.finish(resume)
        if result.error is None or not is_cleanup_pending(result.error):
            answer = (
                text.ANSWER_RETURNED
                if result.error is None
                else text.ANSWER_RAISED.format(error=text.error_text(result.error))
            )
            what = text.PROVIDER_WRONG_ANSWER_WHAT.format(sandbox=sandbox, when=when, answer=answer)
    if what is not None:
        run.violation(text.PROVIDER_REFUSES_RESUME, sandbox, what, text.PROVIDER_REFUSAL_FIX)
    return resume


async def _expect_no_refusal(
    run: ScenarioRun, provider: LeaseProviderLike, args: Mapping[str, Any], sandbox: str, after: str
) -> None:
    """Once the cleanup is over, ``resume()`` is answered (resumed or expired), not refused."""
    call = text.CALL_WHEN.format(hook="resume", sandbox=sandbox, when=after)
    result = await run.call(call, provider.resume(**args))
    if result.error is not None and is_cleanup_pending(result.error):
        what = text.PROVIDER_STILL_REFUSING_WHAT.format(
            sandbox=sandbox, message=str(result.error), after=after
        )
        run.violation(text.PROVIDER_REFUSAL_LIFTED, sandbox, what, text.PROVIDER_LIFTED_FIX)


async def _provider_lease(
    run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> tuple[Any, str, dict[str, Any]] | None:
    acquired = await run.acquire(provider.acquire(**params))
    if acquired is None:
        return None
    lease, sandbox = acquired
    run.keep.add(sandbox)  # the provider scenarios judge refusals, not what is left over
    return lease, sandbox, _lease_args(params, lease)


async def _provider_resume_while_cleanup(
    run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any], hook: str
) -> None:
    acquired = await _provider_lease(run, provider, params)
    if acquired is None:
        return
    _, sandbox, args = acquired
    cleanup = run.gate(text.HELD_CLEANUP, sandbox, CLEANUP)
    hook_call = provider.release if hook == "release" else provider.destroy
    cleaning = run.spawn(text.CALL.format(hook=hook, sandbox=sandbox), hook_call(**args))
    if not await run.hold(cleanup, cleaning):
        await run.no_cleanup(cleaning, sandbox)
        return
    when = text.WHEN_IN_FLIGHT.format(hook=hook)
    resume = await _expect_refusal(run, provider, args, sandbox, when)
    run.let_go(cleanup, text.HELD_CLEANUP, sandbox)
    await run.finish(cleaning)
    await run.finish(resume)
    await _expect_no_refusal(run, provider, args, sandbox, text.AFTER_CLEANUP.format(hook=hook))


async def _provider_resume_while_release(
    kit: ConformanceKit, run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> None:
    await _provider_resume_while_cleanup(run, provider, params, "release")


async def _provider_resume_while_destroy(
    kit: ConformanceKit, run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> None:
    await _provider_resume_while_cleanup(run, provider, params, "destroy")


async def _provider_resume_after_lost_start(
    kit: ConformanceKit, run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> None:
    acquired = await _provider_lease(run, provider, params)
    if acquired is None:
        return
    lease, sandbox, args = acquired
    lost_rules = run.lose_answers(text.LOST_START, {START_PROCESS, EXEC}, sandbox)
    await run.call(*_execute_probe(kit, provider, params, lease, sandbox))
    lost = run.fired(lost_rules, sandbox)
    run.remove_rules(lost_rules)
    if lost is None:
        run.problem(sandbox, text.NO_COMMAND_SENT.format(sandbox=sandbox, error=""))
        return
    await run.finish(await _expect_refusal(run, provider, args, sandbox, text.WHEN_START_LOST))
    await run.call(text.CALL.format(hook="destroy", sandbox=sandbox), provider.destroy(**args))
    await _expect_no_refusal(run, provider, args, sandbox, text.AFTER_DESTROY)


async def _provider_resume_after_failed_delete(
    kit: ConformanceKit, run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> None:
    acquired = await _provider_lease(run, provider, params)
    if acquired is None:
        return
    _, sandbox, args = acquired
    failing = run.fail_next(500, {DELETE}, sandbox)
    destroying = run.spawn(
        text.CALL.format(hook="destroy", sandbox=sandbox), provider.destroy(**args)
    )
    await run.finish(destroying)
    fired = run.fired(failing, sandbox)
    run.remove_rules(failing)
    if fired is None:
        await run.no_cleanup(destroying, sandbox)
        return
    await run.finish(await _expect_refusal(run, provider, args, sandbox, text.WHEN_DELETE_FAILED))
    await run.call(text.CALL.format(hook="destroy", sandbox=sandbox), provider.destroy(**args))
    await _expect_no_refusal(run, provider, args, sandbox, text.AFTER_DESTROY)


async def _judge_provider_resume(
    kit: ConformanceKit,
    run: ScenarioRun,
    provider: LeaseProviderLike,
    params: Mapping[str, Any],
    resume: asyncio.Future[Any],
    sandbox: str,
) -> Any:
    """Take the lease ``resume()`` handed back and execute the kit's command on it at once, as
    a host would: it must be the same sandbox's lease, resumed. Returns it if so (a violation
    of ``resumed-or-replaced`` otherwise: the sandbox was intact, there was nothing to replace)."""
    result = await run.finish(resume)
    lease = result.value
    if result.failed:
        problem: str | None = result.failure("resume()")
    elif getattr(lease, "provider_lease_id", None) != sandbox:
        problem = text.EXPIRED_INTACT
    else:
        mark = kit.mark()
        call, executing = _execute_probe(kit, provider, params, lease, sandbox)
        ran = await run.finish(run.spawn(call, executing, quiet=True))
        if ran.failed:
            problem = ran.failure("execute() on it")
        elif sandbox not in kit.work_since(mark):
            problem = text.NO_COMMAND_SENT_ON.format(sandbox=sandbox)
        else:
            problem = None
            run.step(text.STEP_PROBE.format(call=call, sandbox=sandbox))
    if problem is None:
        return lease
    what = text.NO_LEASE_WHAT.format(sandbox=sandbox, error=problem)
    run.violation(text.RESUMED_OR_REPLACED, sandbox, what, text.PROVIDER_RESUMED_FIX)
    return None


async def _provider_through_refusals(
    kit: ConformanceKit,
    run: ScenarioRun,
    provider: LeaseProviderLike,
    params: Mapping[str, Any],
    status: int,
) -> None:
    """The lease, paused behind the provider's back, is resumed and released while the fake
    refuses the first resume, pause and delete of it with ``status`` (409: not in a state for
    it yet; 429: slow down, with the kit's Retry-After). Neither is a failure: each must be
    sent again (after the Retry-After), and the lease come back resumed."""
    acquired = await _provider_lease(run, provider, params)
    if acquired is None:
        return
    _, sandbox, args = acquired
    run.pause_behind(sandbox)
    if status == 429:
        run.fail_next(status, {RESUME, PAUSE, DELETE}, sandbox, retry_after=kit.retry_after_s)
    else:
        # A real service refuses a resume (or pause) that meets its sandbox still settling:
        # nothing happens, and only a submit sent again gets it moving. (A delete it accepts
        # in every state.)
        run.fail_next(status, {RESUME, PAUSE}, sandbox)
        run.step(text.STEP_CONFLICT_NO_EFFECT.format(sandbox=sandbox))
    call = text.CALL.format(hook="resume", sandbox=sandbox)
    resume = run.spawn(call, provider.resume(**args))
    lease = await _judge_provider_resume(kit, run, provider, params, resume, sandbox)
    if lease is not None:
        # The release's pause or delete meets its refusal too (which one is the config's).
        release = text.CALL.format(hook="release", sandbox=sandbox)
        await run.call(release, provider.release(**_lease_args(params, lease)))


async def _provider_resume_conflict(
    kit: ConformanceKit, run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> None:
    await _provider_through_refusals(kit, run, provider, params, 409)


async def _provider_rate_limited(
    kit: ConformanceKit, run: ScenarioRun, provider: LeaseProviderLike, params: Mapping[str, Any]
) -> None:
    await _provider_through_refusals(kit, run, provider, params, 429)


@dataclass(frozen=True)
class Scenario:
    """A race the kit builds: its name (the test id) and what it expects of the code.

    Example:
        >>> SCENARIOS[0].name
        'resume-while-release-in-flight'
    """

    name: str
    summary: str
    play: Callable[..., Awaitable[None]] = field(repr=False, compare=False)
    #: What to change, by check, where the code under test needs other advice than a host's.
    fixes: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "resume-while-release-in-flight",
        "resume() while the host's own release is held mid-flight: no resume or work may reach "
        "the sandbox until the release finished; then the lease is resumed or replaced",
        _resume_while_release_in_flight,
    ),
    Scenario(
        "resume-after-failed-release",
        "the release's pause/delete takes effect but its answer is lost; resume() right after "
        "must wait for that cleanup or destroy the lease and acquire a fresh one",
        _resume_after_failed_release,
    ),
    Scenario(
        "resume-unconfirmed-lease",
        "a command's process start is lost (cleanup unconfirmed), then release and resume: the "
        "lease must be destroyed and replaced, never paused, resumed or used again",
        _resume_unconfirmed_lease,
    ),
    Scenario(
        "concurrent-resumes",
        "two resume() calls for one released lease at once: one resume at a time, both end "
        "with a usable lease, no hot loop on the 409s",
        _concurrent_resumes,
    ),
    Scenario(
        "resume-refused-for-now",
        "the released lease's first resume is refused with 409 (changing nothing), the next "
        "answered 429 with Retry-After (and so is a fresh acquire's create): each is sent "
        "again, not before its Retry-After, and resume() ends with a usable lease",
        _resume_refused_for_now,
    ),
    Scenario(
        "shutdown-during-run",
        "shutdown() while a command runs: the command's process must not be left running "
        "(hosts without shutdown() skip it)",
        _shutdown_during_run,
    ),
)

#: A provider scenario's advice for the journal's checks (see :attr:`Scenario.fixes`).
_PROVIDER_FIXES = {
    text.NO_WORK_ON_CLOSING: text.PROVIDER_WORK_ON_CLOSING_FIX,
    text.NO_RESUME_DURING_CLEANUP: text.PROVIDER_RESUME_DURING_CLEANUP_FIX,
}


def _provider_scenario(name: str, summary: str, play: Callable[..., Awaitable[None]]) -> Scenario:
    """A scenario whose code under test is a provider (it gets a provider's advice)."""
    return Scenario(name, summary, play, _PROVIDER_FIXES)


PROVIDER_SCENARIOS: tuple[Scenario, ...] = (
    _provider_scenario(
        "resume-while-release-in-flight",
        "resume() while the provider's own release is in flight is refused at once",
        _provider_resume_while_release,
    ),
    _provider_scenario(
        "resume-while-destroy-in-flight",
        "resume() while the provider's own destroy is in flight is refused at once",
        _provider_resume_while_destroy,
    ),
    _provider_scenario(
        "resume-after-lost-process-start",
        "after execute() lost a process start, resume() is refused until a destroy succeeds",
        _provider_resume_after_lost_start,
    ),
    _provider_scenario(
        "resume-after-failed-delete",
        "after a failed delete, resume() is refused until a destroy succeeds",
        _provider_resume_after_failed_delete,
    ),
    _provider_scenario(
        "resume-refused-with-409",
        "the lease was paused behind the provider's back; the first resume (and the release's "
        "pause) is refused with 409 and changes nothing: each is submitted again, and resume() "
        "hands the lease back resumed",
        _provider_resume_conflict,
    ),
    _provider_scenario(
        "lifecycle-rate-limited",
        "the lease was paused behind the provider's back; its first resume, pause and delete "
        "are answered 429 with Retry-After: each is sent again, no sooner, and resume() hands "
        "the lease back resumed",
        _provider_rate_limited,
    ),
)


def find_scenario(scenarios: Sequence[Scenario], name: str | Scenario) -> Scenario:
    """The scenario called ``name`` (``ValueError`` listing the names otherwise).

    Example:
        >>> find_scenario(SCENARIOS, "concurrent-resumes").name
        'concurrent-resumes'
    """
    wanted = name.name if isinstance(name, Scenario) else name
    for scenario in scenarios:
        if scenario.name == wanted:
            return scenario
    names = ", ".join(s.name for s in scenarios)
    raise ValueError(text.UNKNOWN_SCENARIO.format(name=wanted, names=names))


async def play(kit: ConformanceKit, scenario: Scenario, *subject: Any) -> ScenarioReport:
    """Play ``scenario`` against ``subject`` (a host, or a provider and its parameters), judge
    the journal, and destroy what it left alive (after the verdict)."""
    run = ScenarioRun(kit, scenario.name)
    try:
        await scenario.play(kit, run, *subject)
    finally:
        await run.close()
    report = run.verdict()
    report.violations = [
        dataclasses.replace(v, fix=scenario.fixes[v.check]) if v.check in scenario.fixes else v
        for v in report.violations
    ]
    kit.destroy_created_since(run.start)
    return report
