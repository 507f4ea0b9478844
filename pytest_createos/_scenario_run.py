"""How the conformance kit plays a scenario: the run that adds gates and state faults to the
fake and undoes them, drives the host's calls within the kit's timeout, waits for the host to
show its hand, and turns what happened into a :class:`ScenarioReport` judged by the checks.

The scenarios themselves are declared in :mod:`pytest_createos._scenarios`.

Example::

    run = ScenarioRun(kit, "my-race")
    try:
        acquired = await run.acquire(host.acquire())
        ...
    finally:
        await run.close()
    run.verdict().assert_ok()
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from fake_server.journal import Entry
from pytest_createos import _kit_messages as text
from pytest_createos._checks import LeaseOutcome, Route, Violation, check_all
from pytest_createos.server import GateHandle

if TYPE_CHECKING:
    from pytest_createos.kit import ConformanceKit, Host

__all__ = [
    "ConformanceError",
    "ScenarioReport",
    "ScenarioRun",
    "violations_text",
]

T = TypeVar("T")

#: Numbers gates across kits: a gate once opened stays open, so a name is never reused.
_GATE_IDS = itertools.count(1)
#: How often the kit looks at the fake's gates and journal while it waits for the host.
_QUIET_POLL_S = 0.02


class ConformanceError(AssertionError):
    """A scenario or a check found violations; the message lists each one and its fix.

    Example:
        >>> error = ConformanceError("1 conformance violation(s)", [])
        >>> error.violations
        []
    """

    def __init__(self, message: str, violations: Sequence[Violation]) -> None:
        super().__init__(message)
        self.violations = list(violations)


def violations_text(header: str, violations: Sequence[Violation]) -> str:
    """``header`` and each violation's description, one block after the other."""
    return "\n".join([header, *(violation.describe() for violation in violations)])


@dataclass
class ScenarioReport:
    """What happened in one scenario: the host's steps and the violations found.

    Example::

        report = await createos_kit.run("concurrent-resumes", host)
        print(report.format())
        assert "resumes-serialised" not in report.failed_checks
        report.assert_ok()
    """

    scenario: str
    steps: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    #: Why the scenario did not apply to this host (then there are no violations).
    skipped: str | None = None
    #: What each program under test wrote to stderr during the scenario, by its name.
    output: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.violations

    @property
    def failed_checks(self) -> set[str]:
        """Names of the checks that found something (see ``pytest_createos.kit.CHECKS``)."""
        return {violation.check for violation in self.violations}

    def format(self) -> str:
        """Violations first, then every step of the scenario, one per line, then what the
        programs under test wrote to stderr."""
        header = text.VIOLATIONS_HEADER.format(scenario=self.scenario, count=len(self.violations))
        lines = [violations_text(header, self.violations), text.STEPS_HEADER]
        lines += [f"  {step}" for step in self.steps]
        for name, output in self.output.items():
            lines.append(text.OUTPUT_HEADER.format(name=name))
            lines += [f"  {line}" for line in output.splitlines()]
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raise :class:`ConformanceError` with :meth:`format` if anything was found."""
        if self.violations:
            raise ConformanceError(self.format(), self.violations)


@dataclass
class _Call:
    """How one host call ended."""

    value: Any = None
    error: BaseException | None = None
    #: The kit's timeout, when the call did not finish within it (the kit cancelled it).
    timed_out: float | None = None

    @property
    def failed(self) -> bool:
        return self.timed_out is not None or self.error is not None

    def raised_suffix(self) -> str:
        return text.RAISED_SUFFIX.format(error=text.error_text(self.error)) if self.error else ""

    def failure(self, call: str) -> str:
        """What went wrong, as a phrase: ``<call> raised <error>`` or ``<call> did not finish
        within <timeout> s``."""
        if self.error is not None:
            return text.RAISED.format(call=call, error=text.error_text(self.error))
        assert self.timed_out is not None, "only a failed call has a failure"
        return text.TIMED_OUT.format(call=call, timeout=self.timed_out)


def _routes_text(routes: Iterable[Route]) -> str:
    return ", ".join(sorted(f"{method} {template}" for method, template in routes))


async def _pause(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """One polling interval, cut short if a task ends. The fake runs on another loop (or in
    another process), so its gates and journal can only be polled, not awaited."""
    pending = {task for task in tasks if not task.done()}
    if pending:
        await asyncio.wait(pending, timeout=_QUIET_POLL_S)
    else:
        await asyncio.sleep(_QUIET_POLL_S)


class ScenarioRun:
    """The bookkeeping of one scenario: steps, the rules and gates it added, host tasks and
    verdicts. Everything it adds to the fake is undone by :meth:`close`."""

    def __init__(self, kit: ConformanceKit, scenario: str) -> None:
        self.kit = kit
        self.faults = kit.server.faults
        self.report = ScenarioReport(scenario)
        self.problems: list[Violation] = []
        self.outcomes: list[LeaseOutcome] = []
        self.keep: set[str] = set()
        self.unconfirmed: dict[str, int] = {}
        #: The Retry-After, in seconds, of each fault rule the scenario added with one.
        self.retry_after: dict[str, float] = {}
        self.start = kit.mark()
        self.first_call = len(kit.calls)
        self._baseline_rules = {rule["id"] for rule in self.faults.rules}
        self._gates: list[GateHandle] = []
        self._stuck: set[str] = set()
        self._tasks: dict[asyncio.Future[Any], str] = {}
        self._hung: set[asyncio.Future[Any]] = set()

    # -- reporting ------------------------------------------------------------------------------

    def step(self, line: str) -> None:
        self.report.steps.append(line)

    def problem(self, sandbox: str | None, what: str) -> None:
        self.problems.append(Violation(text.SCENARIO, sandbox, what, text.SCENARIO_FIX))
        if sandbox is not None:
            # The scenario could not finish with it: what is left of it says nothing more.
            self.keep.add(sandbox)

    def violation(self, check: str, sandbox: str, what: str, fix: str) -> None:
        self.problems.append(Violation(check, sandbox, what, fix))

    def skip(self, reason: str) -> None:
        self.report.skipped = reason
        self.step(text.STEP_SKIPPED.format(reason=reason))

    # -- faults ---------------------------------------------------------------------------------

    def gate(
        self,
        label: str,
        sandbox: str,
        before: Iterable[Route],
        *,
        after: Iterable[Route] = (),
        times: int | None = None,
    ) -> GateHandle:
        """One gate on ``sandbox``: it holds ``before`` requests before their effect and
        ``after`` requests after it (only their answer waits)."""
        name = f"kit{next(_GATE_IDS)}-{label.replace(' ', '-')}"
        extra = {} if times is None else {"times": times}
        holds = [(route, "before") for route in sorted(before)]
        holds += [(route, "after") for route in sorted(after)]
        handle = None
        for (method, template), when in holds:
            route = f"{method} {template}"
            handle = self.faults.gate(name, when=when, route=route, sandbox=sandbox, **extra)
        assert handle is not None, "a gate needs at least one route"
        self._gates.append(handle)
        self.step(text.STEP_HOLDING.format(what=label, sandbox=sandbox))
        return handle

    def let_go(self, gate: GateHandle, label: str, sandbox: str) -> None:
        gate.open()
        self.step(text.STEP_LET_GO.format(what=label, sandbox=sandbox))

    def lose_answers(self, label: str, routes: Iterable[Route], sandbox: str) -> set[str]:
        """The next request of each route takes effect, but its answer is lost; returns the
        rules' ids."""
        self.step(text.STEP_LOSING.format(what=label, sandbox=sandbox))
        return self._rules({"type": "drop_response"}, routes, sandbox)

    def fail_next(
        self,
        status: int,
        routes: Iterable[Route],
        sandbox: str | None,
        *,
        retry_after: int | None = None,
    ) -> set[str]:
        """The next request of each route (to ``sandbox``; ``None``: any of the test's) is
        answered ``status`` without effect (with a ``Retry-After`` of that many seconds, which
        the verdict then holds retries to)."""
        action: dict[str, Any] = {"type": "error", "status": status}
        step = text.STEP_FAILING.format(status=status, routes=_routes_text(routes))
        if retry_after is not None:
            action["retry_after"] = retry_after
            step += text.STEP_RETRY_AFTER.format(seconds=retry_after)
        self.step(step)
        rules = self._rules(action, routes, sandbox)
        if retry_after is not None:
            self.retry_after.update(dict.fromkeys(rules, float(retry_after)))
        return rules

    def _rules(
        self, action: dict[str, Any], routes: Iterable[Route], sandbox: str | None
    ) -> set[str]:
        narrow = {} if sandbox is None else {"sandbox": sandbox}
        added = self.faults.add_all(
            [
                {"match": {"route": f"{m} {t}", **narrow}, "action": action, "times": 1}
                for m, t in sorted(routes)
            ]
        )
        return {rule["id"] for rule in added}

    def remove_rules(self, rule_ids: Iterable[str]) -> None:
        for rule_id in rule_ids:
            self.faults.remove(rule_id)

    def fired(self, rule_ids: set[str], sandbox: str) -> Entry | None:
        """The first request of ``sandbox`` that one of the rules acted on."""
        for entry in self.kit.journal().requests(sandbox=sandbox):
            if rule_ids & set(entry.rules):
                return entry
        return None

    def pause_behind(self, sandbox: str) -> None:
        """The fake pauses ``sandbox`` on its own, as the service's auto-pause would."""
        self.faults.set_status(sandbox, "paused")
        self.step(text.STEP_PAUSED_BEHIND.format(sandbox=sandbox))

    def stick(self, sandbox: str) -> None:
        self.faults.stick(sandbox)
        self._stuck.add(sandbox)
        self.step(text.STEP_STICK.format(sandbox=sandbox))

    def unstick(self, sandbox: str) -> None:
        self.faults.unstick(sandbox)
        self._stuck.discard(sandbox)
        self.step(text.STEP_LET_GO.format(what=text.HELD_TRANSITION, sandbox=sandbox))

    # -- host calls -------------------------------------------------------------------------

    def spawn(
        self, call: str, coroutine: Coroutine[Any, Any, T], *, quiet: bool = False
    ) -> asyncio.Task[T]:
        """Start a host call; how it ends is recorded as a step when it ends (a ``quiet``
        call's success is not)."""
        task = asyncio.ensure_future(coroutine)
        self._tasks[task] = call
        task.add_done_callback(lambda done: self._ended(done, quiet))
        return task

    def _ended(self, task: asyncio.Future[Any], quiet: bool) -> None:
        call = self._tasks[task]
        if task in self._hung:
            self.step(text.HUNG.format(call=call, timeout=self.kit.timeout_s))
        elif task.cancelled():
            self.step(text.STEP_CANCELLED.format(call=call))
        elif (error := task.exception()) is not None:
            self.step(text.RAISED.format(call=call, error=text.error_text(error)))
        elif not quiet:
            self.step(text.STEP_RETURNED.format(call=call))

    async def finish(self, task: asyncio.Future[Any]) -> _Call:
        """Wait for a host call, bounded by the kit's timeout (a hung call is a problem)."""
        timeout = self.kit.timeout_s
        if task in self._hung:
            return _Call(timed_out=timeout)  # cancelled by the kit, and reported, already
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            self._hung.add(task)
            task.cancel()
            await asyncio.wait({task})
            self.problem(None, text.HUNG.format(call=self._tasks[task], timeout=timeout))
            return _Call(timed_out=timeout)
        if task.cancelled():
            return _Call(error=asyncio.CancelledError())
        error = task.exception()
        return _Call(error=error) if error is not None else _Call(value=task.result())

    async def call(self, call: str, coroutine: Coroutine[Any, Any, Any]) -> _Call:
        return await self.finish(self.spawn(call, coroutine))

    async def settle(
        self, *tasks: asyncio.Future[Any], gate: GateHandle | None = None, count: int = 1
    ) -> bool:
        """Wait until ``count`` requests are held at ``gate``, a task ends, or the host has
        been quiet (see :meth:`wait_until`); returns whether the gate holds them."""
        held = False

        def shown() -> bool:
            nonlocal held
            held = gate is not None and gate.held >= count
            return held or any(task.done() for task in tasks)

        await self.wait_until(shown, *tasks)
        return held

    async def wait_until(self, reached: Callable[[], bool], *tasks: asyncio.Future[Any]) -> bool:
        """Wait until ``reached()`` (then True), or until the host has been quiet (nothing sent
        but reads) for the settle time (then False); ``tasks`` only cut a polling interval
        short. A host that keeps sending requests is still showing its hand, however slowly a
        loaded machine lets it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.kit.timeout_s
        changes = self.kit.changes_since(self.start)
        quiet_from = loop.time()
        while not reached():
            now = loop.time()
            latest = self.kit.changes_since(self.start)
            if latest != changes:
                changes, quiet_from = latest, now
            elif now - quiet_from >= self.kit.settle_s or now >= deadline:
                self.step(text.STEP_SETTLED.format(settle=self.kit.settle_s))
                return False
            await _pause(tasks)
        return True

    async def hold(self, gate: GateHandle, task: asyncio.Future[Any]) -> bool:
        """Wait (up to the kit's timeout) until ``gate`` holds a request of ``task``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.kit.timeout_s
        ended: float | None = None
        while gate.held == 0:
            now = loop.time()
            if task.done():
                # A request sent just before the call ended, or by a task the host started
                # and left running, may still be on its way: give it the settle time.
                ended = now if ended is None else ended
                if now - ended >= self.kit.settle_s:
                    return False
            if now >= deadline:
                return False
            await _pause([task])
        return True

    async def no_cleanup(self, task: asyncio.Future[Any], sandbox: str) -> None:
        """Report that ``task`` (a release or destroy) never sent a pause or delete."""
        result = await self.finish(task)
        call = self._tasks[task]
        what = text.NO_CLEANUP_SENT.format(sandbox=sandbox, call=call, error=result.raised_suffix())
        self.problem(sandbox, what)

    async def acquire(self, coroutine: Coroutine[Any, Any, T]) -> tuple[T, str] | None:
        """Run an acquire; returns the lease and the sandbox it created."""
        mark = self.kit.mark()
        result = await self.finish(self.spawn("acquire()", coroutine, quiet=True))
        if result.failed:
            self.problem(None, text.ACQUIRE_FAILED.format(error=result.failure("acquire()")))
            return None
        created = self.kit.created_since(mark)
        if not created:
            self.problem(None, text.NOTHING_CREATED)
            return None
        self.step(text.STEP_CREATED.format(call="acquire()", sandbox=created[-1]))
        return result.value, created[-1]

    async def judge_resume(
        self, host: Host[Any], resume: asyncio.Future[Any], original: str
    ) -> None:
        """Take what ``resume()`` handed back and run a command on it at once, as its caller
        would; records the :class:`LeaseOutcome`. Host calls still running at that moment must
        not send work of their own, or the kit cannot tell where the command ran."""
        result = await self.finish(resume)
        if result.failed:
            self.outcomes.append(LeaseOutcome(original, None, result.failure("resume()")))
            return
        mark = self.kit.mark()
        call = text.CALL_PROBE.format(command=self.kit.probe_command)
        ran = await self.finish(
            self.spawn(call, host.run(result.value, self.kit.probe_command), quiet=True)
        )
        targets = self.kit.work_since(mark)
        final = targets[-1] if targets else None
        if final is not None:
            self.step(text.STEP_PROBE.format(call=call, sandbox=final))
        problem = ran.failure("run() on it") if ran.failed else None
        self.outcomes.append(LeaseOutcome(original, final, problem))

    # -- the end ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Let everything through, end every host task, remove the scenario's rules."""
        for gate in self._gates:
            gate.open()
        for sandbox in list(self._stuck):
            self.faults.unstick(sandbox)
        self._stuck.clear()
        for task in self._tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.remove_rules(r["id"] for r in self.faults.rules if r["id"] not in self._baseline_rules)

    def verdict(self) -> ScenarioReport:
        keep = self.keep | {o.final for o in self.outcomes if o.final is not None}
        self.report.violations = [
            *self.problems,
            *check_all(
                self.kit.journal(),
                outcomes=self.outcomes,
                keep=keep,
                unconfirmed=self.unconfirmed,
                max_attempts_per_second=self.kit.max_attempts_per_second,
                calls=self.kit.calls[self.first_call :],
                retry_after=self.retry_after,
            ),
        ]
        return self.report
