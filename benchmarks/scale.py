"""Scale: memory per idle sandbox, and GET / list-page time as one tenant grows.

Fills one tenant with N idle sandboxes (through the fake's own service layer: creating 100,000
over HTTP would measure the client, not the fake), pauses every tenth, then times over HTTP
against an in-process server, at each size (median CPU time of sequential requests, client
and server together in this process; wall time swings far more on a shared machine):

- ``GET /v1/sandboxes/{id}`` and the first page of 500;
- the deep page: the last page of 100 (``offset`` = N - 100);
- ``status=`` filters: the first and the last page of 100 paused sandboxes (N / 10 of them);
- ``GET /v1/whoami``, whose stats count the tenant's sandboxes by status.

Memory is measured with tracemalloc around the fill. Reports growth factors between the
smallest and the largest size.

    python benchmarks/scale.py [--sizes 10000 100000] [--requests 300]

Goals: <= 4 KB per idle sandbox; GET and first page flat within 1.5x; deep pages and filters
cost O(page): flat within 1.2x; whoami flat within 1.2x.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field

import aiohttp

from fake_server import FakeCreateOS, ServerConfig, serve
from fake_server.sandboxes import CreateSpec


def fill(fake: FakeCreateOS, key: str, count: int) -> tuple[list[str], float]:
    """Create ``count`` sandboxes; return their ids and the bytes allocated per sandbox."""
    tenant = fake.tenant(key)
    spec = CreateSpec(shape="s-1vcpu-1gb")
    first = fake.sandboxes.create(tenant, spec).id  # pays for lazy imports (Faker) up front
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    ids = [first] + [fake.sandboxes.create(tenant, spec).id for _ in range(count - 1)]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # The ids list is the benchmark's own, not the fake's.
    own = ids.__sizeof__()
    return ids, (after - before - own) / (count - 1)


async def median_ms(session: aiohttp.ClientSession, urls: list[str]) -> float:
    """The median CPU time of this process (client and server: they share it) per request:
    unlike wall time, it does not count waiting for a CPU that other work holds."""
    durations = []
    for url in urls:
        started = time.process_time()
        async with session.get(url) as response:
            await response.read()
            assert response.status == 200
        durations.append((time.process_time() - started) * 1000)
    return statistics.median(durations)


#: The columns measured besides memory, in order: (heading, goal for the growth factor).
COLUMNS = (
    ("GET", 1.5),
    ("page-500", 1.5),
    ("last page", 1.2),
    ("paused p1", 1.2),
    ("paused last", 1.2),
    ("whoami", 1.2),
)
#: Every this-many sandboxes, one is paused (what the status filter finds).
PAUSED_EVERY = 10


@dataclass
class Sized:
    """One fake holding ``size`` sandboxes, served, with the URLs of each column."""

    size: int
    per_sandbox: float
    session: aiohttp.ClientSession
    urls: list[list[str]]
    #: Per column, the median of each round.
    rounds: list[list[float]] = field(default_factory=lambda: [[] for _ in COLUMNS])


async def prepare(stack: contextlib.AsyncExitStack, size: int, requests: int) -> Sized:
    """Fill a fake with ``size`` sandboxes (every PAUSED_EVERY-th paused) and serve it."""
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    key = fake.create_tenant("skp_scale")
    ids, per_sandbox = fill(fake, key, size)
    tenant = fake.tenant(key)
    for sandbox_id in ids[::PAUSED_EVERY]:
        fake.sandboxes.pause(tenant.get(sandbox_id))
    paused = len(ids[::PAUSED_EVERY])
    pages = max(10, requests // 3)
    url = await stack.enter_async_context(serve(fake))
    session = await stack.enter_async_context(aiohttp.ClientSession(headers={"X-Api-Key": key}))
    step = max(1, len(ids) // requests)
    lists = f"{url}/v1/sandboxes?limit"
    urls = [
        [f"{url}/v1/sandboxes/{sandbox_id}" for sandbox_id in ids[::step][:requests]],
        [f"{lists}=500"] * pages,
        [f"{lists}=100&offset={size - 100}"] * pages,
        [f"{lists}=100&status=paused"] * pages,
        [f"{lists}=100&status=paused&offset={paused - 100}"] * pages,
        [f"{url}/v1/whoami"] * pages,
    ]
    for column in urls:
        await median_ms(session, column[:20])  # warm up: connections, encoded views
    return Sized(size, per_sandbox, session, urls)


async def measure(sizes: list[int], requests: int, rounds: int) -> list[Sized]:
    """Every size served at once, measured in interleaved rounds (the order alternating), so
    that the machine slowing down hits every size alike."""
    async with contextlib.AsyncExitStack() as stack:
        fakes = [await prepare(stack, size, requests) for size in sizes]
        for round_no in range(rounds):
            for column in range(len(COLUMNS)):
                for sized in fakes if round_no % 2 == 0 else fakes[::-1]:
                    figure = await median_ms(sized.session, sized.urls[column])
                    sized.rounds[column].append(figure)
    return fakes


def verdict(growth: float, goal: float) -> str:
    return "OK" if growth <= goal else "ABOVE"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if min(args.sizes) < 100 * PAUSED_EVERY:
        parser.error(f"sizes must be at least {100 * PAUSED_EVERY} (a last page of 100 paused)")
    sizes = sorted(set(args.sizes))
    fakes = asyncio.run(measure(sizes, args.requests, args.rounds))
    print(
        "median CPU ms per request, median of rounds (last page: limit=100&offset=N-100; "
        f"paused: status=paused, one sandbox in {PAUSED_EVERY}, limit=100, first and last page)"
    )
    print(f"{'sandboxes':>10}{'bytes/sandbox':>15}" + "".join(f"{h:>13}" for h, _ in COLUMNS))
    for sized in fakes:
        figures = [statistics.median(column) for column in sized.rounds]
        print(
            f"{sized.size:>10}{sized.per_sandbox:>15.0f}"
            + "".join(f"{ms:>13.3f}" for ms in figures)
        )
    small, large = fakes[0], fakes[-1]
    growths = []
    for column, (heading, goal) in enumerate(COLUMNS):
        # The median of the per-round ratios: each round measured both sizes back to back.
        growth = statistics.median(
            big / little
            for big, little in zip(large.rounds[column], small.rounds[column], strict=True)
        )
        growths.append(f"{heading} x{growth:.2f} (goal {goal:g}x {verdict(growth, goal)})")
    print(
        f"growth {small.size} -> {large.size} (median of {args.rounds} paired rounds): "
        + ", ".join(growths)
    )
    memory = max(sized.per_sandbox for sized in fakes) / 1024
    print(f"memory {memory:.2f} KB/sandbox (goal: <= 4 KB)")


if __name__ == "__main__":
    main()
