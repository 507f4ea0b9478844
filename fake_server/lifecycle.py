"""The sandbox lifecycle state machine, in plain Python.

``creating → running → pausing → paused → resuming → running``, ``→ destroying → destroyed``,
``forking → running|paused``, plus ``error`` (recoverable by resume) and ``failed`` (terminal).
Pause, resume, create, fork and delete are asynchronous: the call moves the sandbox into the
in-between status and a timer on the :class:`~fake_server.clock.Clock` finishes the transition.

Nothing here knows about HTTP: illegal operations raise :class:`~fake_server.errors.ApiError`
with 409, which the HTTP layer renders as it is.

Example::

    machine = Lifecycle(clock, Durations.uniform(0.05), on_event=journal_event)
    machine.pause(sandbox)        # sandbox.status == "pausing"
    clock.advance(0.05)           # sandbox.status == "paused"
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fake_server import errors
from fake_server.clock import Clock, TimerHandle
from fake_server.errors import ApiError

if TYPE_CHECKING:
    from fake_server.sandbox import Sandbox

__all__ = [
    "MAX_DURATION_MS",
    "TERMINAL",
    "Durations",
    "Lifecycle",
    "Status",
    "TransitionEvent",
    "check_duration_ms",
]

#: The longest transition or create a tenant may ask for: far more than any test needs, yet a
#: slip (seconds typed as milliseconds) cannot park a shared server's sandboxes for days.
MAX_DURATION_MS = 3_600_000.0


class Status(str, enum.Enum):
    """A sandbox's status, exactly as the API spells it."""

    CREATING = "creating"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    RESUMING = "resuming"
    FORKING = "forking"
    ERROR = "error"
    DESTROYING = "destroying"
    DESTROYED = "destroyed"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


TERMINAL = frozenset({Status.DESTROYED, Status.FAILED})
#: Statuses that still hold their name (names are unique among these).
LIVE = frozenset(Status) - TERMINAL
#: Statuses a resume is accepted from.
RESUMABLE = frozenset({Status.PAUSED, Status.ERROR})
#: What gets a sandbox that is not running running again, as its 409s say it (a status not
#: here, going or gone, never runs again).
_RUN_AGAIN = {
    **dict.fromkeys(RESUMABLE, "resume it"),
    Status.PAUSING: "resume it once it is paused",
    Status.CREATING: "wait until it is running",
    Status.RESUMING: "wait until it is running",
    Status.FORKING: "wait until it is running",
}
#: Statuses in which PATCH, egress and ssh keys may still change the sandbox.
MODIFIABLE = frozenset(
    {
        Status.CREATING,
        Status.RUNNING,
        Status.PAUSING,
        Status.PAUSED,
        Status.RESUMING,
        Status.FORKING,
        Status.ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class Durations:
    """How long each asynchronous transition takes, in seconds (0 finishes it at once)."""

    create: float = 0.0
    pause: float = 0.05
    resume: float = 0.05
    fork: float = 0.05
    destroy: float = 0.05

    @classmethod
    def uniform(cls, seconds: float, *, create: float = 0.0) -> Durations:
        """Every transition but create takes ``seconds``; create is synchronous by default,
        as on the real service (the POST answers once the sandbox is running)."""
        return cls(create=create, pause=seconds, resume=seconds, fork=seconds, destroy=seconds)


def check_duration_ms(value: object) -> float:
    """``value`` as a duration in milliseconds, or ``ValueError`` saying what is wrong with it
    (not a number, not finite, negative, above :data:`MAX_DURATION_MS`); callers name the field.

    Example:
        >>> check_duration_ms(0)
        0.0
        >>> check_duration_ms(-5)
        Traceback (most recent call last):
        ...
        ValueError: must not be negative (got -5)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number of milliseconds (got {value!r})")
    if not math.isfinite(value):
        raise ValueError(f"must be finite (got {value!r})")
    if value < 0:
        raise ValueError(f"must not be negative (got {value!r})")
    if value > MAX_DURATION_MS:
        raise ValueError(f"must be at most {MAX_DURATION_MS:.0f}, one hour (got {value!r})")
    return float(value)


@dataclass(frozen=True, slots=True)
class TransitionEvent:
    """A status change, reported to the lifecycle's listener (the journal)."""

    sandbox_id: str
    tenant: str
    before: Status | None
    after: Status
    cause: str


@dataclass(slots=True)
class PendingTransition:
    """The transition a sandbox is in the middle of."""

    target: Status
    cause: str
    timer: TimerHandle | None = None
    #: Held by a state fault: the transition finishes only when released.
    stuck: bool = False
    #: A state fault may redirect where the transition ends (``error`` or ``failed``).
    outcome: Status | None = None


class Lifecycle:
    """Drives sandboxes through their statuses on a clock, and refuses illegal operations.

    ``durations`` are the fake's; ``tenant_durations(tenant_id)`` may give a tenant its own
    (``None``: the fake's), so tests sharing one fake each keep the timing they asked for.
    """

    def __init__(
        self,
        clock: Clock,
        durations: Durations,
        *,
        on_event: Callable[[TransitionEvent], None] = lambda event: None,
        tenant_durations: Callable[[str], Durations | None] = lambda tenant_id: None,
    ) -> None:
        self.clock = clock
        self.durations = durations
        self._tenant_durations = tenant_durations
        self._on_event = on_event
        self._on_enter: list[Callable[[Sandbox, Status], None]] = []
        #: State faults armed for a sandbox's next transition: sandbox id -> (stuck, outcome).
        self._armed: dict[str, tuple[bool, Status | None]] = {}

    def on_enter(self, hook: Callable[[Sandbox, Status], None]) -> None:
        """Call ``hook(sandbox, status)`` whenever a sandbox enters a status (e.g. to stop its
        processes when it leaves ``running``)."""
        self._on_enter.append(hook)

    def durations_for(self, sandbox: Sandbox) -> Durations:
        """The durations of the sandbox's tenant, or the fake's when it has none of its own."""
        return self._tenant_durations(sandbox.tenant) or self.durations

    # -- operations -------------------------------------------------------------------------

    def create(self, sandbox: Sandbox) -> None:
        """Start a new sandbox: ``creating``, then ``running``."""
        self._set(sandbox, Status.CREATING, "create", initial=True)
        self._begin(sandbox, Status.RUNNING, "create", self.durations_for(sandbox).create)

    def fork(self, child: Sandbox, *, start_paused: bool) -> None:
        """Start a fork: ``forking``, then ``running`` (or ``paused`` with ``start_paused``)."""
        self._set(child, Status.FORKING, "fork", initial=True)
        target = Status.PAUSED if start_paused else Status.RUNNING
        self._begin(child, target, "fork", self.durations_for(child).fork)

    def pause(self, sandbox: Sandbox, *, cause: str = "pause") -> None:
        """``running → pausing → paused``; 409 from any other status."""
        if sandbox.status is not Status.RUNNING:
            raise ApiError.conflict(errors.CANNOT_PAUSE, sandbox.status.value)
        self._set(sandbox, Status.PAUSING, cause)
        self._begin(sandbox, Status.PAUSED, cause, self.durations_for(sandbox).pause)

    def resume(self, sandbox: Sandbox) -> None:
        """``paused|error → resuming → running``; 409 from any other status."""
        if sandbox.status not in RESUMABLE:
            raise ApiError.conflict(errors.CANNOT_RESUME, sandbox.status.value)
        self._set(sandbox, Status.RESUMING, "resume")
        self._begin(sandbox, Status.RUNNING, "resume", self.durations_for(sandbox).resume)

    def destroy(self, sandbox: Sandbox, *, cause: str = "delete") -> None:
        """Any live status ``→ destroying → destroyed``; a terminal sandbox stays as it is
        (DELETE is idempotent). A transition in flight is abandoned: deleting wins."""
        if sandbox.status in TERMINAL or sandbox.status is Status.DESTROYING:
            return
        self._cancel_pending(sandbox)
        self._set(sandbox, Status.DESTROYING, cause)
        self._begin(sandbox, Status.DESTROYED, cause, self.durations_for(sandbox).destroy)

    def check_fork_source(self, sandbox: Sandbox) -> None:
        """Only a paused sandbox can be forked."""
        if sandbox.status is not Status.PAUSED:
            raise ApiError.conflict(errors.CANNOT_FORK, sandbox.status.value)

    @staticmethod
    def check_running(sandbox: Sandbox, action: str = "accessing files") -> None:
        """Exec, files and processes (``action``: what the caller wanted to do) need a running
        sandbox: 409 otherwise, saying what would get it running.

        Example:
            >>> from types import SimpleNamespace
            >>> try:
            ...     Lifecycle.check_running(SimpleNamespace(status=Status.PAUSING))
            ... except ApiError as refused:
            ...     print(refused.status, refused.message)
            409 sandbox is pausing; resume it once it is paused before accessing files
        """
        status = sandbox.status
        if status is Status.RUNNING:
            return
        remedy = _RUN_AGAIN.get(status)
        if remedy is None:
            raise ApiError(409, errors.NOT_RUNNING_GONE.format(status=status.value))
        raise ApiError(
            409, errors.NOT_RUNNING.format(status=status.value, remedy=remedy, action=action)
        )

    @staticmethod
    def check_modifiable(sandbox: Sandbox) -> None:
        """PATCH, egress and ssh keys are refused once a sandbox is going away."""
        if sandbox.status not in MODIFIABLE:
            raise ApiError.conflict(errors.CANNOT_MODIFY, sandbox.status.value)

    # -- state faults ------------------------------------------------------------------------

    def hold(self, sandbox: Sandbox) -> bool:
        """Keep the sandbox's current transition from finishing until :meth:`release`; with
        none in flight, hold the next one instead. Returns whether one was in flight."""
        pending = sandbox.pending
        if pending is None:
            _, outcome = self._armed.get(sandbox.id, (False, None))
            self._armed[sandbox.id] = (True, outcome)
            return False
        pending.stuck = True
        return True

    def release(self, sandbox: Sandbox) -> None:
        """Let a held transition finish (now, if its time has already come)."""
        self._armed.pop(sandbox.id, None)
        pending = sandbox.pending
        if pending is None or not pending.stuck:
            return
        pending.stuck = False
        if pending.timer is None:
            self._finish(sandbox, pending)

    def finish_now(self, sandbox: Sandbox) -> bool:
        """Finish the sandbox's in-flight transition at once, whatever its clock says (a
        schedule explorer deciding when a pause completes); a held (stuck) one stays held.
        Returns whether a transition finished.

        Example::

            machine.pause(sandbox)          # pausing, due in 0.05 s of the clock
            machine.finish_now(sandbox)     # paused, the clock unmoved
        """
        pending = sandbox.pending
        if pending is None or pending.stuck:
            return False
        if pending.timer is not None:
            pending.timer.cancel()
            pending.timer = None
        self._finish(sandbox, pending)
        return True

    def redirect(self, sandbox: Sandbox, outcome: Status) -> bool:
        """Make the in-flight transition (or, with none in flight, the next one) end in
        ``outcome`` (``error`` or ``failed``). Returns whether one was in flight."""
        if sandbox.pending is None:
            stuck, _ = self._armed.get(sandbox.id, (False, None))
            self._armed[sandbox.id] = (stuck, outcome)
            return False
        sandbox.pending.outcome = outcome
        return True

    def force(self, sandbox: Sandbox, status: Status, *, cause: str = "fault") -> None:
        """Put the sandbox into ``status`` at once, abandoning any transition (a state fault:
        "destroyed behind the client's back", "crashed into error")."""
        self._cancel_pending(sandbox)
        self._set(sandbox, status, cause)

    # -- machinery -----------------------------------------------------------------------------

    def _begin(self, sandbox: Sandbox, target: Status, cause: str, seconds: float) -> None:
        stuck, outcome = self._armed.pop(sandbox.id, (False, None))
        pending = PendingTransition(target, cause, stuck=stuck, outcome=outcome)
        sandbox.pending = pending
        if seconds <= 0 and not stuck:
            self._finish(sandbox, pending)
        elif seconds > 0:
            pending.timer = self.clock.call_later(seconds, self._due, sandbox, pending)

    def _due(self, sandbox: Sandbox, pending: PendingTransition) -> None:
        pending.timer = None
        if sandbox.pending is pending and not pending.stuck:
            self._finish(sandbox, pending)

    def _finish(self, sandbox: Sandbox, pending: PendingTransition) -> None:
        sandbox.pending = None
        self._set(sandbox, pending.outcome or pending.target, pending.cause, settling=True)

    def abandon(self, sandbox: Sandbox) -> None:
        """Drop the sandbox's in-flight transition and armed faults (its tenant is gone)."""
        self._armed.pop(sandbox.id, None)
        self._cancel_pending(sandbox)

    def _cancel_pending(self, sandbox: Sandbox) -> None:
        pending = sandbox.pending
        if pending is not None:
            if pending.timer is not None:
                pending.timer.cancel()
            sandbox.pending = None

    def _set(
        self,
        sandbox: Sandbox,
        status: Status,
        cause: str,
        *,
        initial: bool = False,
        settling: bool = False,
    ) -> None:
        previous = None if initial else sandbox.status
        if not settling:
            # A settling step ends the action that began it; what a lagging read still shows
            # is the status before that action (`paused` after a resume), not its midway one.
            sandbox.previous_status = previous
        sandbox.status = status
        _stamp(sandbox, status, self.clock.wall())
        self._on_event(TransitionEvent(sandbox.id, sandbox.tenant, previous, status, cause))
        for hook in self._on_enter:
            hook(sandbox, status)


def _stamp(sandbox: Sandbox, status: Status, now: datetime) -> None:
    if status is Status.RUNNING:
        if sandbox.running_at is None:
            sandbox.running_at = now
        else:
            sandbox.last_resumed_at = now
    elif status is Status.PAUSED:
        sandbox.paused_at = now
    elif status in TERMINAL:
        sandbox.destroyed_at = now
