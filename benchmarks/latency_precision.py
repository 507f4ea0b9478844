"""Requested vs observed latency of a latency fault.

Runs ``fake-createos serve`` in its own process (so the client does not share its interpreter),
adds a 100 ms latency rule on one route through the control API and measures, from a client in
this process, how much longer than 100 ms each request takes compared with the
same request without the rule (measured in the same run, so the machine's own overhead cancels
out). Prints p50/p99/max of the error.

    python benchmarks/latency_precision.py [--requests 300] [--concurrency 10] [--ms 100]

Target: p99 error <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import aiohttp
from _serving import served


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def timed_requests(url: str, count: int, concurrency: int, deadline: float) -> list[float]:
    """Durations (ms) of ``count`` GETs from ``concurrency`` workers, stopping at ``deadline``."""
    durations: list[float] = []
    remaining = iter(range(count))
    headers = {"X-Api-Key": "skp_bench"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def worker() -> None:
            for _ in remaining:
                if time.monotonic() > deadline:
                    return
                started = time.perf_counter()
                async with session.get(url) as response:
                    await response.read()
                durations.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return durations


async def post_json(url: str, body: object) -> None:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        response.raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--ms", type=float, default=100.0)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args()

    with served("--seed", "1") as base_url:
        url = base_url + "/v1/whoami"
        deadline = time.monotonic() + args.max_seconds
        baseline = asyncio.run(timed_requests(url, args.requests, args.concurrency, deadline))
        rule = {"match": {"route": "GET /v1/whoami"}, "action": {"type": "latency", "ms": args.ms}}
        asyncio.run(post_json(base_url + "/_fake/faults", rule))
        delayed = asyncio.run(timed_requests(url, args.requests, args.concurrency, deadline))

    base = statistics.median(baseline)
    errors = [abs(d - args.ms - base) for d in delayed]
    print(
        f"requests: {len(delayed)} with a {args.ms:.0f} ms latency fault, "
        f"{args.concurrency} concurrent; baseline median {base:.2f} ms"
    )
    print(f"{'':10}{'p50':>10}{'p99':>10}{'max':>10}")
    print(
        f"{'observed':10}{percentile(delayed, 0.5):10.2f}{percentile(delayed, 0.99):10.2f}"
        f"{max(delayed):10.2f}  ms"
    )
    print(
        f"{'error':10}{percentile(errors, 0.5):10.2f}{percentile(errors, 0.99):10.2f}"
        f"{max(errors):10.2f}  ms"
    )
    p99 = percentile(errors, 0.99)
    print(f"p99 error {p99:.2f} ms: {'meets' if p99 <= 5 else 'misses'} the 5 ms target")


if __name__ == "__main__":
    main()
