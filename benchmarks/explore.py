"""How many complete schedules per second the explorer runs, and what it costs over a plain run.

Serves a fake on this process's own event loop (as ``createos_aiohttp_server`` does, with a
manual clock), and explores a workload of the reference ``LeaseHost`` on the reference
provider exhaustively for a fixed number of schedules. For comparison, in the same run, it
plays the same host calls (set-up, the workload's calls started together, a probe command on
what ``resume`` returned) with nothing held: the *plain* run, what the host costs by itself.
Rounds alternate between the two; the figures are medians over the rounds.

    python benchmarks/explore.py [--workload release-resume-run] [--schedules 200] [--rounds 3]
    python benchmarks/explore.py --profile     # one round under cProfile, the top entries
    python benchmarks/explore.py --over-http 0.05   # also over HTTP, settling 0.05 s a step

Goal: >= 50 complete schedules per second for a three-call workload (release-resume-run).
Every schedule is a full run: a fresh host, the set-up's acquire, the race step by step with a
quiescence check before each step, a probe of what ``resume`` returned, the checks.

With ``--over-http SETTLE_S`` it also explores ``--http-schedules`` schedules against the fake
in a background thread, reached over HTTP (as ``createos_server`` with a manual clock, or
``--createos-url``), where each step waits ``SETTLE_S`` for the fake to settle, and prints
its cost against the explored figure on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aiohttp import web

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from pytest_createos._explore import find_workload
from pytest_createos.channel import LocalChannel, open_test
from pytest_createos.kit import ConformanceKit, reference_host
from pytest_createos.server import CreateosServer


@asynccontextmanager
async def served_kit() -> AsyncIterator[ConformanceKit]:
    """A kit on a fake served by this loop on 127.0.0.1, with a manual clock."""
    fake = FakeCreateOS(ServerConfig(manual_clock=True))
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    channel = LocalChannel(fake, f"http://127.0.0.1:{port}")
    tenant = open_test(channel, seed=1)
    server = CreateosServer(channel, api_key=tenant.api_key, tenant_id=tenant.tenant_id, seed=1)
    try:
        yield ConformanceKit(server)
    finally:
        await runner.cleanup()


@contextmanager
def threaded_kit() -> Iterator[ConformanceKit]:
    """A kit on a fake in a background thread (reached over HTTP), with a manual clock."""
    with BackgroundServer(FakeCreateOS(ServerConfig(manual_clock=True))) as background:
        channel = LocalChannel(background.fake, background.url, background)
        tenant = open_test(channel, seed=1)
        yield ConformanceKit(
            CreateosServer(channel, api_key=tenant.api_key, tenant_id=tenant.tenant_id, seed=1)
        )


async def explored(
    kit: ConformanceKit, workload: str, schedules: int, **options: float
) -> tuple[float, int]:
    """Seconds per schedule and how many schedules ran."""
    started = time.perf_counter()
    report = await kit.explore(reference_host(), workload, max_schedules=schedules, **options)
    elapsed = time.perf_counter() - started
    if report.failure is not None:
        raise SystemExit("the reference host failed an explored schedule:\n" + report.format())
    return elapsed / report.schedules, report.schedules


async def plain(kit: ConformanceKit, workload_name: str, runs: int) -> float:
    """Seconds per plain run: the same calls, nothing held, the fake's transitions instant."""
    workload = find_workload(workload_name)
    fake = kit.server.channel.same_loop_fake  # type: ignore[attr-defined]
    fake.set_durations(kit.server.api_key, transition_ms=0)
    make_host = reference_host()
    started = time.perf_counter()
    for _ in range(runs):
        async with make_host(kit) as host:
            leases = [await host.acquire() for _ in range(workload.leases)]
            for lease in workload.released:
                await host.release(leases[lease])
            calls: list[Awaitable[Any]] = [op.call(host, leases) for op in workload.ops]
            results = await asyncio.gather(*calls, return_exceptions=True)
            for op, result in zip(workload.ops, results, strict=True):
                if op.hook == "resume" and not isinstance(result, BaseException):
                    await host.run(result, kit.probe_command)
    fake.set_durations(kit.server.api_key)
    return (time.perf_counter() - started) / runs


async def rounds(
    workload: str, schedules: int, count: int, settle_s: float | None, http_schedules: int
) -> None:
    explore_times: list[float] = []
    plain_times: list[float] = []
    ran = 0
    async with served_kit() as kit:
        await plain(kit, workload, 5)  # warm-up: imports, first connections
        for number in range(count):
            measures: list[Callable[[], Awaitable[None]]] = []

            async def measure_explore() -> None:
                nonlocal ran
                per, ran = await explored(kit, workload, schedules)
                explore_times.append(per)

            async def measure_plain() -> None:
                plain_times.append(await plain(kit, workload, max(20, schedules // 4)))

            measures = [measure_explore, measure_plain]
            for measure in measures if number % 2 == 0 else reversed(measures):
                await measure()
    per_schedule = statistics.median(explore_times)
    per_plain = statistics.median(plain_times)
    print(f"workload: {workload} ({find_workload(workload).describe()})")
    print(f"schedules per round: {ran} (exhaustive, bounded), rounds: {count}")
    print(f"explored: {per_schedule * 1000:7.2f} ms per schedule  ({1 / per_schedule:6.1f}/s)")
    print(f"plain:    {per_plain * 1000:7.2f} ms per run       ({1 / per_plain:6.1f}/s)")
    print(f"ratio explored/plain: {per_schedule / per_plain:.2f}x")
    goal = "met" if 1 / per_schedule >= 50 else "NOT met"
    print(f"goal >= 50 schedules/s: {goal}")
    if settle_s is not None:
        with threaded_kit() as kit:
            per_http, ran = await explored(kit, workload, http_schedules, settle_s=settle_s)
        print(
            f"over HTTP, settle_s={settle_s:g}: {per_http * 1000:7.1f} ms per schedule "
            f"({ran} schedules), {per_http / per_schedule:.1f}x the explored figure on the loop"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="release-resume-run")
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--over-http", type=float, default=None, metavar="SETTLE_S")
    parser.add_argument("--http-schedules", type=int, default=10)
    args = parser.parse_args()
    http = (args.over_http, args.http_schedules)
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        asyncio.run(rounds(args.workload, args.schedules, 1, *http))
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
        return
    asyncio.run(rounds(args.workload, args.schedules, args.rounds, *http))


if __name__ == "__main__":
    main()
