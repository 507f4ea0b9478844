"""The explorer against a fake it reaches over HTTP (the plugin's server in a background thread,
as with ``--createos-url``): it settles instead of looking at the fake's loop. The example hosts'
bugs are found over HTTP in examples/tests/test_interleaving_bugs.py."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from pytest_createos._explore.quiescence import ExploreError, Quiescence, VirtualTime
from pytest_createos._explore.remote import Settle
from pytest_createos.channel import ControlError, HttpChannel
from pytest_createos.kit import ConformanceKit, reference_host
from pytest_createos.server import CreateosServer

#: Settle time of these tests: the fake is in this process, a loopback hop away.
SETTLE_S = 0.01

over_http = pytest.mark.createos(manual_clock=True)


@over_http
async def test_the_reference_host_is_clean_over_http(createos_server: CreateosServer) -> None:
    kit = ConformanceKit(createos_server)
    report = await kit.explore(
        reference_host(), "release-resume", max_schedules=2, settle_s=SETTLE_S
    )
    assert report.ok, report.format()
    assert report.schedules == 2
    # The explorer's gate rule is gone, and the tenant's durations are its own again.
    assert createos_server.faults.rules == []


def steps_of(timeline: list[str]) -> list[str]:
    """The steps a run took (set-up, race and probes), without the journal lines."""
    return [
        line.strip()
        for line in timeline
        if line.strip().split(" ")[0] in ("-", "*")
        or line.strip().split(" ")[0].rstrip(".").isdigit()
    ]


@over_http
async def test_a_replay_over_http_takes_the_steps_it_takes_in_the_loop(
    createos_server: CreateosServer, createos_aiohttp_server: CreateosServer
) -> None:
    schedule = "release-resume: start release(L1) > start resume(L1) > GET L1"
    remote = await ConformanceKit(createos_server).replay(
        reference_host(), schedule, settle_s=SETTLE_S
    )
    in_loop = await ConformanceKit(createos_aiohttp_server).replay(reference_host(), schedule)
    assert remote.ok, remote.format()
    assert steps_of(remote.result.timeline) == steps_of(in_loop.result.timeline)
    # The pause went on after the chosen read, and the explorer ended it as a step of its own.
    assert "5. finish L1 pausing" in steps_of(remote.result.timeline)


def control_api(server: CreateosServer) -> CreateosServer:
    """The same fake and tenant, controlled over the fake's HTTP control API (as with
    ``--createos-url``) rather than handed to its thread."""
    return CreateosServer(
        HttpChannel(server.url), api_key=server.api_key, tenant_id=server.tenant_id, seed=1
    )


@over_http
async def test_a_replay_over_the_control_api_finds_what_it_finds_in_the_thread(
    createos_server: CreateosServer,
) -> None:
    schedule = "release-resume: start release(L1) > start resume(L1) > GET L1"
    threaded = await ConformanceKit(createos_server).replay(
        reference_host(), schedule, settle_s=SETTLE_S
    )
    over_api = await ConformanceKit(control_api(createos_server)).replay(
        reference_host(), schedule, settle_s=SETTLE_S
    )
    assert over_api.ok, over_api.format()
    assert steps_of(over_api.result.timeline) == steps_of(threaded.result.timeline)


@over_http
def test_releasing_a_request_no_gate_holds_is_refused(createos_server: CreateosServer) -> None:
    with pytest.raises(ControlError, match="holds no request 7"):
        createos_server.channel.release_held("nope", 7)
    with pytest.raises(ControlError, match="HTTP 404") as refused:
        control_api(createos_server).channel.release_held("nope", 7)
    assert refused.value.status == 404
    with pytest.raises(ControlError, match="HTTP 404"):
        control_api(createos_server).channel.finish_transition("sb_nope")


class Changing:
    """Hands whose journal gains an entry at every look, or only after ``quiet_after`` looks."""

    def __init__(self, quiet_after: int | None = None) -> None:
        self.looks = itertools.count()
        self.quiet_after = quiet_after

    def poll(self) -> tuple[object, ...]:
        look = next(self.looks)
        if self.quiet_after is not None and look >= self.quiet_after:
            return ((), self.quiet_after)
        return ((), look)

    def look(self) -> None:
        return None


def settle(hands: Any, **options: Any) -> Settle:
    loop = asyncio.get_running_loop()
    quiet = Quiescence(loop, VirtualTime(loop, lambda seconds: None), 5.0)
    return Settle(quiet, hands, **options)


async def test_a_fake_that_keeps_changing_never_settles() -> None:
    with pytest.raises(ExploreError, match="never settled"):
        await settle(Changing(), settle_s=0.01, max_settle_s=0.05)()


async def test_a_fake_that_stops_changing_settles() -> None:
    hands = Changing(quiet_after=3)
    await settle(hands, settle_s=0.01)()
    assert next(hands.looks) >= 4


async def test_before_a_timeout_a_late_request_is_waited_for() -> None:
    hands = Changing(quiet_after=2)
    waiting = settle(hands, settle_s=0.01, patience_s=0.05)
    await waiting()
    assert not await waiting.something_arrives()  # nothing comes: the timeout may fire
    hands.quiet_after = 100  # the journal gains an entry: a request was still on its way
    assert await waiting.something_arrives()


async def test_a_settle_time_must_be_positive() -> None:
    with pytest.raises(ValueError, match="settle_s"):
        settle(Changing(), settle_s=0)
