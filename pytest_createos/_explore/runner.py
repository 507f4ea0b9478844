"""One run of a workload under one schedule: build a fresh host, set up its leases, start the
workload's calls together, let the schedule decide every step, judge the journal.

A :class:`Chooser` makes the decisions; every decision is recorded with the steps that were
possible, which is all the search strategies need to plan the next run.

Example::

    runner = Runner(kit, make_host, find_workload("release-resume"))
    with runner:
        result = await runner.run(FollowSchedule(["POST L1/pause", "GET L1"]))
    print(result.format())
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import re
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fake_server.clock import ManualClock
from fake_server.fake import FakeCreateOS
from fake_server.journal import Entry, Journal
from pytest_createos import _kit_messages as text
from pytest_createos._checks import WORK, LeaseOutcome, Violation, check_all
from pytest_createos._explore.quiescence import ExploreError, Quiescence, VirtualTime, host_task
from pytest_createos._explore.remote import DEFAULT_EXPLORE_SETTLE_S, RemoteHands, Settle
from pytest_createos._explore.steps import FakeHands, Hands, Step
from pytest_createos._explore.workloads import Op, Workload

if TYPE_CHECKING:
    from pytest_createos.kit import ConformanceKit, Host

__all__ = [
    "Chooser",
    "Decision",
    "Diverged",
    "HostFactory",
    "Redundant",
    "RunResult",
    "Runner",
]

#: Builds a fresh host for one run, and closes it afterwards.
HostFactory = Callable[["ConformanceKit"], AbstractAsyncContextManager["Host[Any]"]]
#: Steps one run may take at most (set-up, race and probes together).
MAX_STEPS_PER_RUN = 600
#: A host sleep due within this many seconds is the host's next move, not a timeout.
DEFAULT_HORIZON_S = 5.0
_GATE_IDS = itertools.count(1)
_OWN_RULE = re.compile(r" rules=\S+")


class Diverged(Exception):
    """A schedule cannot be followed: the step it names is not possible here."""


class Redundant(Exception):
    """Every step possible here leads to orders that ran already: the run is cut short."""


class Chooser(Protocol):
    """Picks the next step of the race at ``position`` (from 0) among ``steps`` (oldest first);
    ``None`` leaves it to the default (the oldest step); :class:`Diverged` says the schedule
    does not fit the run."""

    def __call__(self, position: int, steps: Sequence[Step]) -> Step | None: ...


@dataclass(frozen=True)
class Decision:
    """One decision of the race: the steps that were possible and the one taken, and whether
    the chooser took it (``False``: the default after the chooser was done)."""

    steps: tuple[Step, ...]
    chosen: Step
    chosen_by_schedule: bool


@dataclass
class RunResult:
    """What one run did and what the checks found."""

    decisions: list[Decision] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    #: The run told as readable lines (sandbox names, not ids).
    timeline: list[str] = field(default_factory=list)
    #: Why the schedule could not be followed, if it could not.
    diverged: str | None = None
    #: The run's own names for its sandboxes (id -> ``L1``...), to read its violations.
    names: dict[str, str] = field(default_factory=dict)
    #: The journal's newest ``seq`` when the race started (the set-up's entries are older).
    race_seq: int = 0
    #: Cut short: an equivalent order ran already (nothing is judged).
    redundant: bool = False
    #: The timeline line of each journal entry the run shows, by ``seq``.
    entry_lines: dict[int, int] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True when the checks found something (and the schedule was followed)."""
        return self.diverged is None and bool(self.violations)

    @property
    def failed_checks(self) -> set[str]:
        return {violation.check for violation in self.violations}

    def labels(self) -> list[str]:
        """The label of every step the race took, in order."""
        return [decision.chosen.label for decision in self.decisions]

    def alias(self, line: str) -> str:
        """``line`` with the run's names for its sandboxes, without the explorer's own rule."""
        for sandbox_id, name in self.names.items():
            line = line.replace(sandbox_id, name)
        return _OWN_RULE.sub("", line)

    def format_violations(self) -> str:
        return "\n".join(self.alias(violation.describe()) for violation in self.violations)


class Runner:
    """Runs a workload again and again on one kit's fake, each time with a fresh host."""

    def __init__(
        self,
        kit: ConformanceKit,
        make_host: HostFactory,
        workload: Workload,
        *,
        horizon_s: float = DEFAULT_HORIZON_S,
        settle_s: float = DEFAULT_EXPLORE_SETTLE_S,
    ) -> None:
        self.kit = kit
        self.make_host = make_host
        self.workload = workload
        self.hands: Hands
        self.quiet: Quiescence | Settle
        loop = asyncio.get_running_loop()
        gate = f"explore-{next(_GATE_IDS)}"
        server = kit.server
        fake: FakeCreateOS | None = getattr(server.channel, "same_loop_fake", None)
        if fake is None:
            # A fake the explorer cannot look into: it waits for the fake to settle.
            hands = RemoteHands(server.channel, server.api_key, server.tenant_id, gate)
            self.hands = hands
            self.time = VirtualTime(loop, server.channel.advance)
            self.quiet = Settle(Quiescence(loop, self.time, horizon_s), hands, settle_s=settle_s)
        else:
            if not isinstance(fake.clock, ManualClock):
                raise ExploreError(
                    "the explorer decides when transitions end on the fake's manual clock: "
                    "mark the test @pytest.mark.createos(manual_clock=True)"
                )
            same_loop = FakeHands(fake, server.api_key, gate)
            self.hands = same_loop
            self.time = VirtualTime(loop, fake.clock.advance)
            shell = fake.runtime.shell
            clock = fake.clock

            def computing() -> bool:
                # A command the fake's shell runs may compute on its interpreter's thread,
                # which the loop cannot see; one waiting for its stdin or in a `sleep` on the
                # clock is not computing.
                return shell.computing > 0

            def wake_up() -> float | None:
                due = clock.next_wake_up()
                return None if due is None else due - clock.now()

            self.quiet = Quiescence(
                loop, self.time, horizon_s, busy=computing, fake_wake_up=wake_up
            )
        #: Runs made so far.
        self.runs = 0

    def __enter__(self) -> Runner:
        self.hands.__enter__()
        self.time.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.time.__exit__()
        self.hands.__exit__()

    async def run(self, choose: Chooser) -> RunResult:
        """One run of the workload with ``choose`` deciding the race's steps."""
        self.runs += 1
        self.hands.new_run()
        run = _OneRun(self, choose)
        # The host is built and closed as host calls too: whatever it sends then is let
        # through by default, rather than held with nobody to let it go.
        factory = self.make_host(self.kit)
        opened = await run.call("", factory.__aenter__(), shown=False)
        if opened.cancelled() or opened.exception() is not None:
            await run.close()
            raise ExploreError(f"make_host(kit) failed to build a host: {_ending(opened)}")
        try:
            await run.play(opened.result())
        finally:
            await run.leftovers()
            await run.call("", factory.__aexit__(None, None, None), shown=False)
            await run.close()
        return run.result


class _HostCall:
    """A host call of a run: its text, the sandbox it concerns (run name), how to start it,
    and its task once started."""

    def __init__(
        self,
        text: str,
        sandbox: str | None,
        start: Callable[[], Coroutine[Any, Any, Any]] | None,
        task: asyncio.Task[Any] | None = None,
    ) -> None:
        self.text = text
        self.sandbox = sandbox
        self._start = start
        self.task = task
        self.start_step: Step | None = None
        self.reported = False

    def start(self) -> asyncio.Task[Any]:
        assert self._start is not None, "a call made of a running task is started already"
        self.task = host_task(self._start())
        return self.task

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()


class _Unshown(_HostCall):
    """A call whose end the timeline does not show (building the host, a run cut short)."""

    def __init__(self, call: _HostCall) -> None:
        super().__init__(call.text, None, None, call.task)
        self.reported = True


class _OneRun:
    def __init__(self, runner: Runner, choose: Chooser) -> None:
        self.runner = runner
        self.hands = runner.hands
        self.choose = choose
        self.result = RunResult()
        self.first_call = len(runner.kit.calls)
        self.seen = runner.hands.last_seq()
        self.start = self.seen
        self.steps = 0
        self.tasks: list[asyncio.Task[Any]] = []
        self.problems: list[Violation] = []
        self.keep: set[str] = set()
        self.outcomes: list[LeaseOutcome] = []
        #: Set while the calls that never finished are being cancelled.
        self.draining = False

    # -- the timeline ---------------------------------------------------------------------------

    def line(self, line: str) -> None:
        self.result.timeline.append(self.hands.alias(line))

    def _new_entries(self) -> list[Entry]:
        entries = self.hands.entries_after(self.seen)
        if entries:
            self.seen = entries[-1].seq
        return entries

    def _answers(self) -> None:
        for entry in self._new_entries():
            self.result.entry_lines[entry.seq] = len(self.result.timeline)
            # Every request fires the explorer's own gate rule: saying so is noise.
            self.line("        " + _OWN_RULE.sub("", entry.describe()))

    # -- driving --------------------------------------------------------------------------------

    async def drive(self, calls: Sequence[_HostCall], *, race: bool = False) -> None:
        """Take steps until every call is over; in the race, ``choose`` decides (starting a
        call is a step too there)."""
        while True:
            await self.runner.quiet()
            self._answers()
            self._report_ended(calls)
            outcomes = self.runner.workload.outcomes if race else ()
            steps = self._starts(calls) + self.hands.enabled(outcomes)
            if not steps:
                if all(call.done for call in calls):
                    return
                quiet = self.runner.quiet
                # Against a fake over HTTP, a request may still be on its way to it.
                if isinstance(quiet, Settle) and await quiet.something_arrives():
                    continue
                # Only far timers are left (timeouts, a command's `sleep` on the fake's clock):
                # the first one fires, then look again.
                if quiet.jump_to_next_timer():
                    continue
                await self._hung(calls)
                return
            if self.steps >= MAX_STEPS_PER_RUN:
                self.problems.append(
                    Violation(
                        text.HOST_FINISHES,
                        None,
                        text.TOO_MANY_STEPS_WHAT.format(limit=MAX_STEPS_PER_RUN),
                        text.NEVER_FINISHED_FIX,
                    )
                )
                await self._hung(calls)
                return
            self.steps += 1
            step = self._decide(steps) if race else steps[0]
            if step is None:
                return  # an order equivalent to this one ran already: cut the run short
            self.take(step, race=race)
            for call in calls:
                if call.start_step is not None and call.start_step.label == step.label:
                    self.tasks.append(call.start())

    @staticmethod
    def _starts(calls: Sequence[_HostCall]) -> list[Step]:
        """Starting the next call not started yet is a step (before every other step by
        default): calls start in the workload's order, each while the ones before it are in
        flight, or later, as the schedule says."""
        for index, call in enumerate(calls):
            if call.task is None:
                repeats = sum(1 for other in calls[:index] if other.text == call.text)
                label = f"start {call.text}" + (f"#{repeats + 1}" if repeats else "")
                call.start_step = Step(label, call.sandbox, -1)
                return [call.start_step]
        return []

    def _decide(self, steps: list[Step]) -> Step | None:
        position = len(self.result.decisions)
        chosen = None
        if self.result.diverged is None:
            try:
                chosen = self.choose(position, steps)
            except Diverged as exc:
                self.result.diverged = str(exc)
            except Redundant:
                self.result.redundant = True
                return None
        decision = Decision(tuple(steps), chosen or steps[0], chosen is not None)
        self.result.decisions.append(decision)
        return decision.chosen

    def take(self, step: Step, *, race: bool) -> None:
        mark = "*" if race and self.result.decisions[-1].chosen_by_schedule else " "
        number = f"{len(self.result.decisions)}." if race else "-"
        self.line(f"  {mark}{number:>4} {step.label}")
        if not step.label.startswith("start "):
            self.hands.take(step)

    def _report_ended(self, calls: Sequence[_HostCall]) -> None:
        for call in calls:
            if call.task is not None and call.task.done() and not call.reported:
                call.reported = True
                self.line(f"        {call.text} {_ending(call.task)}")

    async def _hung(self, calls: Sequence[_HostCall]) -> None:
        """Report and cancel the calls still running; their cancellation may send requests
        of its own (a terminate), which are let through by default."""
        hung = [call for call in calls if call.task is not None and not call.task.done()]
        for call in hung:
            self.problems.append(
                Violation(
                    text.HOST_FINISHES,
                    None,
                    self.hands.alias(text.NEVER_FINISHED_WHAT.format(call=call.text)),
                    text.NEVER_FINISHED_FIX,
                )
            )
            assert call.task is not None
            call.task.cancel()
        if hung and not self.draining:
            self.draining = True
            await self.drive(hung)

    async def call(
        self, text_: str, coroutine: Coroutine[Any, Any, Any], *, shown: bool = True
    ) -> asyncio.Task[Any]:
        """A host call outside the race (set-up, probes), every step the default."""
        call = _HostCall(text_, None, lambda: coroutine)
        self.tasks.append(call.start())
        if shown:
            self.line(f"  {text_}")
        await self.drive([call] if shown else [_Unshown(call)])
        task = call.task
        assert task is not None
        await asyncio.wait({task})
        return task

    async def leftovers(self) -> None:
        """Cancel every host task still running (a run cut short), and let what they still
        send through by default until they are over."""
        running = [task for task in self.tasks if not task.done()]
        for task in running:
            task.cancel()
        if running:
            await self.drive([_Unshown(_HostCall("", None, None, task)) for task in running])

    # -- the run --------------------------------------------------------------------------------

    async def play(self, host: Any) -> None:
        workload = self.runner.workload
        if workload.needs_shutdown and not callable(getattr(host, "shutdown", None)):
            raise ExploreError(text.NO_SHUTDOWN_WORKLOAD.format(workload=workload.name))
        self.line("set-up:")
        leases: list[Any] = []
        sandboxes: list[str] = []
        for _ in range(workload.leases):
            before = set(self.hands.sandboxes)
            task = await self.call("acquire()", host.acquire())
            if task.cancelled() or task.exception() is not None:
                raise ExploreError(f"the set-up's acquire() failed: {_ending(task)}")
            leases.append(task.result())
            created = [s for s in self.hands.sandboxes if s not in before]
            if not created:
                raise ExploreError("the set-up's acquire() created no sandbox")
            sandboxes.append(created[-1])
        self.keep.update(sandboxes)
        for lease in workload.released:
            await self.call(f"release(L{lease + 1})", host.release(leases[lease]))
        self._answers()
        self.result.race_seq = self.seen
        self.line(f"race: {workload.describe()}")
        names = self.hands.sandboxes
        calls = [
            _HostCall(
                op.describe(),
                None if op.lease is None else names[sandboxes[op.lease]],
                functools.partial(op.call, host, leases),
            )
            for op in workload.ops
        ]
        await self.drive(calls, race=True)
        if self.result.redundant:
            return
        self.line("after the race:")
        for call, op in zip(calls, workload.ops, strict=True):
            assert call.task is not None, "the race starts every call"
            await self._judge(host, call.text, op, call.task, sandboxes)

    async def _judge(
        self, host: Any, call: str, op: Op, task: asyncio.Task[Any], sandboxes: list[str]
    ) -> None:
        failed = task.cancelled() or task.exception() is not None
        if op.hook == "acquire" and not failed:
            self.keep.update(s for s in self.hands.sandboxes if s in repr(task.result()))
        if op.hook != "resume":
            return
        assert op.lease is not None
        original = sandboxes[op.lease]
        if failed:
            self.outcomes.append(LeaseOutcome(original, None, f"{call} {_ending(task)}"))
            return
        self._answers()
        mark = self.seen
        command = self.runner.kit.probe_command
        probe = await self.call(f"run(<{call}>, {command})", host.run(task.result(), command))
        work = [
            entry.sandbox
            for entry in self.hands.entries_after(mark)
            if entry.kind == "request" and (entry.method, entry.route) in WORK
        ]
        final = work[-1] if work else None
        error = None if not (probe.cancelled() or probe.exception()) else _ending(probe)
        self.outcomes.append(LeaseOutcome(original, final, error and f"run() on it {error}"))
        if final is not None and final != original:
            self.keep.discard(original)  # replaced: the old sandbox must be gone
            self.keep.add(final)

    async def close(self) -> None:
        runner = self.runner
        self.result.names = self.hands.sandboxes
        if self.result.redundant:
            self.hands.destroy_run_sandboxes()
            return
        journal = Journal.of(self.hands.entries_after(self.start))
        self.result.violations = [
            *self.problems,
            *check_all(
                journal,
                outcomes=self.outcomes,
                keep=self.keep,
                max_attempts_per_second=runner.kit.max_attempts_per_second,
                calls=runner.kit.calls[self.first_call :],
            ),
        ]
        self.hands.destroy_run_sandboxes()


def _ending(task: asyncio.Task[Any]) -> str:
    if task.cancelled():
        return "was cancelled"
    error = task.exception()
    if error is not None:
        return f"raised {text.error_text(error)}"
    return "returned"
