"""The lifecycle model alone: every legal and illegal transition, on a manual clock."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from fake_server.catalog import SHAPES
from fake_server.clock import ManualClock
from fake_server.errors import ApiError
from fake_server.lifecycle import Durations, Lifecycle, Status, TransitionEvent
from fake_server.sandbox import Sandbox

OPERATIONS = ("pause", "resume", "destroy")
#: operation -> statuses it is legal from (destroy is legal from everything: idempotent).
LEGAL = {
    "pause": {Status.RUNNING},
    "resume": {Status.PAUSED, Status.ERROR},
    "destroy": set(Status),
}
#: What each legal operation moves the sandbox to, at once and once its transition is done.
EFFECT = {
    "pause": (Status.PAUSING, Status.PAUSED),
    "resume": (Status.RESUMING, Status.RUNNING),
    "destroy": (Status.DESTROYING, Status.DESTROYED),
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def events() -> list[TransitionEvent]:
    return []


@pytest.fixture
def machine(clock: ManualClock, events: list[TransitionEvent]) -> Lifecycle:
    return Lifecycle(clock, Durations.uniform(1.0), on_event=events.append)


def make_sandbox(status: Status = Status.CREATING) -> Sandbox:
    return Sandbox(
        id="sb_test",
        tenant="usr_test",
        name="test",
        shape=SHAPES["s-1vcpu-1gb"],
        rootfs="devbox:1",
        region="us",
        ip="10.0.0.1",
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        spawn_ms=1.0,
        disk_mib=1024,
        status=status,
    )


def test_create_is_synchronous_by_default(
    machine: Lifecycle, events: list[TransitionEvent]
) -> None:
    sandbox = make_sandbox()
    machine.create(sandbox)
    assert sandbox.status is Status.RUNNING
    assert sandbox.running_at is not None
    assert [(e.before, e.after) for e in events] == [
        (None, Status.CREATING),
        (Status.CREATING, Status.RUNNING),
    ]


def test_create_can_hold_creating(clock: ManualClock) -> None:
    machine = Lifecycle(clock, Durations(create=2.0))
    sandbox = make_sandbox()
    machine.create(sandbox)
    assert sandbox.status is Status.CREATING
    clock.advance(1.9)
    assert sandbox.status is Status.CREATING
    clock.advance(0.1)
    assert sandbox.status is Status.RUNNING


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("status", list(Status))
def test_every_operation_from_every_status(
    machine: Lifecycle, clock: ManualClock, operation: str, status: Status
) -> None:
    sandbox = make_sandbox(status)
    legal = status in LEGAL[operation]
    if not legal:
        with pytest.raises(ApiError) as caught:
            getattr(machine, operation)(sandbox)
        assert caught.value.status == 409
        assert status.value in caught.value.message
        assert sandbox.status is status
        return
    getattr(machine, operation)(sandbox)
    if operation == "destroy" and status in (Status.DESTROYING, Status.DESTROYED, Status.FAILED):
        # Idempotent: deleting a sandbox that is already going or gone changes nothing.
        assert sandbox.status is status
        return
    during, after = EFFECT[operation]
    assert sandbox.status is during
    clock.advance(1.0)
    assert sandbox.status is after


def test_paused_and_resumed_timestamps(machine: Lifecycle, clock: ManualClock) -> None:
    sandbox = make_sandbox()
    machine.create(sandbox)
    machine.pause(sandbox)
    clock.advance(1)
    assert sandbox.paused_at is not None
    machine.resume(sandbox)
    clock.advance(1)
    assert sandbox.last_resumed_at is not None
    assert sandbox.last_resumed_at > sandbox.paused_at


def test_delete_abandons_a_transition_in_flight(machine: Lifecycle, clock: ManualClock) -> None:
    sandbox = make_sandbox(Status.RUNNING)
    machine.pause(sandbox)
    machine.destroy(sandbox)
    clock.advance(10)
    assert sandbox.status is Status.DESTROYED


def test_zero_duration_finishes_at_once(clock: ManualClock) -> None:
    machine = Lifecycle(clock, Durations.uniform(0))
    sandbox = make_sandbox(Status.RUNNING)
    machine.pause(sandbox)
    assert sandbox.status is Status.PAUSED


def test_fork_runs_or_stays_paused(machine: Lifecycle, clock: ManualClock) -> None:
    running, paused = make_sandbox(), make_sandbox()
    machine.fork(running, start_paused=False)
    machine.fork(paused, start_paused=True)
    assert running.status is paused.status is Status.FORKING
    clock.advance(1)
    assert (running.status, paused.status) == (Status.RUNNING, Status.PAUSED)


@pytest.mark.parametrize("status", list(Status))
def test_only_paused_can_be_forked(machine: Lifecycle, status: Status) -> None:
    sandbox = make_sandbox(status)
    if status is Status.PAUSED:
        machine.check_fork_source(sandbox)
    else:
        with pytest.raises(ApiError, match=status.value):
            machine.check_fork_source(sandbox)


@pytest.mark.parametrize("status", list(Status))
def test_runtime_needs_running(status: Status) -> None:
    sandbox = make_sandbox(status)
    if status is Status.RUNNING:
        Lifecycle.check_running(sandbox)
        return
    with pytest.raises(ApiError) as caught:
        Lifecycle.check_running(sandbox)
    assert caught.value.status == 409
    # It says what would get the sandbox running: "resume it" only where a resume would.
    remedy = {
        Status.PAUSED: "resume it before accessing files",
        Status.ERROR: "resume it before accessing files",
        Status.PAUSING: "resume it once it is paused before accessing files",
        Status.CREATING: "wait until it is running before accessing files",
        Status.RESUMING: "wait until it is running before accessing files",
        Status.FORKING: "wait until it is running before accessing files",
    }.get(status)
    expected = (
        f"sandbox is {status.value}; {remedy}"
        if remedy
        else f"sandbox is {status.value} and cannot run again; create a new one"
    )
    assert caught.value.message == expected


def test_held_transition_waits_for_release(machine: Lifecycle, clock: ManualClock) -> None:
    sandbox = make_sandbox(Status.RUNNING)
    machine.pause(sandbox)
    assert machine.hold(sandbox)
    clock.advance(100)
    assert sandbox.status is Status.PAUSING
    machine.release(sandbox)
    assert sandbox.status is Status.PAUSED


def test_release_before_due_time_keeps_the_schedule(machine: Lifecycle, clock: ManualClock) -> None:
    sandbox = make_sandbox(Status.RUNNING)
    machine.pause(sandbox)
    machine.hold(sandbox)
    machine.release(sandbox)
    assert sandbox.status is Status.PAUSING
    clock.advance(1)
    assert sandbox.status is Status.PAUSED


def test_hold_without_transition_reports_nothing_to_hold(machine: Lifecycle) -> None:
    assert not machine.hold(make_sandbox(Status.RUNNING))


def test_redirected_transition_ends_in_error(machine: Lifecycle, clock: ManualClock) -> None:
    sandbox = make_sandbox(Status.PAUSED)
    machine.resume(sandbox)
    assert machine.redirect(sandbox, Status.ERROR)
    clock.advance(1)
    assert sandbox.status is Status.ERROR
    machine.resume(sandbox)  # error is resumable
    clock.advance(1)
    assert sandbox.status is Status.RUNNING


def test_force_destroys_behind_the_clients_back(
    machine: Lifecycle, events: list[TransitionEvent]
) -> None:
    sandbox = make_sandbox(Status.RUNNING)
    machine.force(sandbox, Status.DESTROYED)
    assert sandbox.status is Status.DESTROYED
    assert sandbox.destroyed_at is not None
    assert events[-1].cause == "fault"


def test_enter_hooks_see_every_status(machine: Lifecycle, clock: ManualClock) -> None:
    seen: list[Status] = []
    machine.on_enter(lambda sandbox, status: seen.append(status))
    sandbox = make_sandbox()
    machine.create(sandbox)
    machine.destroy(sandbox)
    clock.advance(1)
    assert seen == [Status.CREATING, Status.RUNNING, Status.DESTROYING, Status.DESTROYED]
