"""Scale: memory per idle sandbox, and GET / list-page time as one tenant grows.

Fills one tenant with N idle sandboxes (through the fake's own service layer: creating 100,000
over HTTP would measure the client, not the fake), then times ``GET /v1/sandboxes/{id}`` and
``GET /v1/sandboxes?limit=500`` over HTTP against an in-process server, at each size. Memory is
measured with tracemalloc around the fill. Reports growth factors between the smallest and the
largest size.

    python benchmarks/scale.py [--sizes 10000 100000] [--requests 300]

Goals: <= 4 KB per idle sandbox; page and GET time flat within 1.5x.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

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
    durations = []
    for url in urls:
        started = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
            assert response.status == 200
        durations.append((time.perf_counter() - started) * 1000)
    return statistics.median(durations)


async def measure(size: int, requests: int) -> tuple[float, float, float]:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    key = fake.create_tenant("skp_scale")
    ids, per_sandbox = fill(fake, key, size)
    async with serve(fake) as url, aiohttp.ClientSession(headers={"X-Api-Key": key}) as session:
        step = max(1, len(ids) // requests)
        get_urls = [f"{url}/v1/sandboxes/{sandbox_id}" for sandbox_id in ids[::step][:requests]]
        await median_ms(session, get_urls[:20])  # warm up
        get_ms = await median_ms(session, get_urls)
        page_urls = [f"{url}/v1/sandboxes?limit=500"] * max(10, requests // 10)
        page_ms = await median_ms(session, page_urls)
    return per_sandbox, get_ms, page_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    results = {size: asyncio.run(measure(size, args.requests)) for size in args.sizes}
    print(f"{'sandboxes':>10}{'bytes/sandbox':>15}{'GET ms (p50)':>14}{'page-500 ms (p50)':>19}")
    for size, (memory, get_ms, page_ms) in results.items():
        print(f"{size:>10}{memory:>15.0f}{get_ms:>14.3f}{page_ms:>19.3f}")
    small, large = results[min(results)], results[max(results)]
    print(
        f"growth {min(results)} -> {max(results)}: GET x{large[1] / small[1]:.2f}, "
        f"page x{large[2] / small[2]:.2f} (goal: within 1.5x); "
        f"memory {max(r[0] for r in results.values()) / 1024:.2f} KB/sandbox (goal: <= 4 KB)"
    )


if __name__ == "__main__":
    main()
