"""Requested vs observed latency of a latency fault.

Runs ``fake-createos serve`` in its own process (so the client does not share its interpreter),
adds a 100 ms latency rule on one route through the control API and measures, from a client in
this process, how much longer than 100 ms each request takes compared with the
same request without the rule (measured in the same run, so the machine's own overhead cancels
out).

An answer that arrives before the requested latency has passed breaks the rule's promise, so it
is counted apart, with the worst of them, rather than folded into the error (an absolute error
would show 2 ms early exactly like 2 ms late). For the others it prints p50/p99/max of the
signed error: observed minus the requested latency minus the baseline's median (slightly below
zero for an answer quicker than the median baseline request).

    python benchmarks/latency_precision.py [--requests 300] [--concurrency 10] [--ms 100]

Target: p99 error <= 5 ms, and no early answer.
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


def spread(values: list[float]) -> str:
    """min, p50, p99 and max of ``values``, in columns."""
    figures = (min(values), percentile(values, 0.5), percentile(values, 0.99), max(values))
    return "".join(f"{figure:10.2f}" for figure in figures)


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
    # Before the requested latency: whatever the machine's overhead, the rule was not honoured.
    early = [args.ms - d for d in delayed if d < args.ms]
    errors = [d - args.ms - base for d in delayed if d >= args.ms]
    print(
        f"requests: {len(delayed)} with a {args.ms:.0f} ms latency fault, "
        f"{args.concurrency} concurrent; baseline median {base:.2f} ms"
    )
    print(f"{'':12}{'min':>10}{'p50':>10}{'p99':>10}{'max':>10}")
    print(f"{'observed':12}{spread(delayed)}  ms")
    if errors:
        print(
            f"{'late error':12}{spread(errors)}  ms  (observed - {args.ms:.0f} ms - baseline "
            f"median; the {len(errors)} answers not early)"
        )
    worst = f"worst {max(early):.2f} ms early" if early else "none"
    print(
        f"early answers: {len(early)} of {len(delayed)} came before the requested "
        f"{args.ms:.0f} ms ({worst})"
    )
    p99 = percentile(errors, 0.99) if errors else float("inf")
    met = p99 <= 5 and not early
    print(
        f"p99 error {p99:.2f} ms, {len(early)} early: "
        f"{'meets' if met else 'misses'} the target (p99 <= 5 ms, none early)"
    )


if __name__ == "__main__":
    main()
