"""Knowing the host has settled: an idle loop, host timers moved to in virtual time, a busy
shell waited for (within bounds), a host that never settles or a loop that cannot be read
refused."""

from __future__ import annotations

import asyncio

import pytest

from pytest_createos._explore.quiescence import ExploreError, Quiescence, VirtualTime, host_task


def settler(**options: object) -> tuple[Quiescence, VirtualTime, list[float]]:
    loop = asyncio.get_running_loop()
    jumps: list[float] = []
    time = VirtualTime(loop, jumps.append)
    return Quiescence(loop, time, 5.0, **options), time, jumps  # type: ignore[arg-type]


async def test_a_host_sleep_within_the_horizon_is_taken_in_virtual_time() -> None:
    quiet, time, jumps = settler()
    with time:
        napping = host_task(asyncio.sleep(3))
        await quiet()
        assert napping.done()
    assert jumps
    assert sum(jumps) >= 2.99
    assert "time" not in vars(asyncio.get_running_loop())  # the loop's own clock is back


async def test_a_host_timer_past_the_horizon_is_a_timeout_left_alone() -> None:
    quiet, time, jumps = settler()
    with time:
        waiting = host_task(asyncio.sleep(60))
        await quiet()
        assert not waiting.done()
        assert jumps == []
        assert quiet.jump_to_next_timer()  # nothing else to wait for: let it come
        await quiet()
        assert waiting.done()
        assert not quiet.jump_to_next_timer()  # no host timer left


async def test_with_nothing_else_to_wait_for_the_first_of_two_timers_comes() -> None:
    # A host timer (a timeout, 60 s away) and the fake's sleeper (a `sleep 3` command).
    wake_up = [3.0]
    quiet, time, jumps = settler(fake_wake_up=lambda: wake_up[0] if wake_up else None)
    with time:
        waiting = host_task(asyncio.sleep(60))
        await quiet()
        assert jumps == []  # the sleeper is not the host's next move: it waits for steps
        assert quiet.jump_to_next_timer()
        assert jumps == [3.0]
        await quiet()
        assert not waiting.done()
        wake_up.clear()  # it woke
        assert quiet.jump_to_next_timer()
        await quiet()
        assert waiting.done()
        assert not quiet.jump_to_next_timer()


async def test_timers_outside_host_tasks_are_not_the_hosts() -> None:
    quiet, time, jumps = settler()
    with time:
        other = asyncio.ensure_future(asyncio.sleep(1))
        await quiet()
        assert not other.done()
        assert jumps == []
        other.cancel()


async def test_a_busy_shell_is_waited_for_then_given_up_on() -> None:
    calls = 0

    def busy() -> bool:
        nonlocal calls
        calls += 1
        return calls < 3  # busy twice, then done

    quiet, time, _ = settler(busy=busy)
    with time:
        await quiet()
    assert calls == 3
    forever, time, _ = settler(busy=lambda: True, busy_settle_s=0.01)
    with time:
        await forever()  # returns: what still runs counts as long-lived


async def test_a_host_that_never_settles_is_refused() -> None:
    quiet, time, _ = settler(max_turns=50)

    async def spin() -> None:
        while True:  # noqa: ASYNC110 - busy on purpose: it never waits for anything
            await asyncio.sleep(0)

    with time:
        spinning = host_task(spin())
        with pytest.raises(ExploreError, match="the host never settled: after 50 event-loop"):
            await quiet()
        spinning.cancel()


async def test_a_loop_it_cannot_read_is_refused() -> None:
    class OtherLoop:
        time = staticmethod(lambda: 0.0)

    with pytest.raises(ExploreError, match=r"needs asyncio's own event loop.*OtherLoop"):
        Quiescence(OtherLoop(), VirtualTime(OtherLoop(), print), 5.0)  # type: ignore[arg-type]
