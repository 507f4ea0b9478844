"""Soak: mixed load plus clients that give up, for a bounded time, against a fake served in a
background thread of this process; RSS, open file descriptors and the fake's asyncio tasks at
the start and at the end must stay flat (within 10% by default).

Each round runs, concurrently:

- ``--clients`` clients cycling through create, get, exec, a file round trip, a short process
  and delete (the lifecycle traffic users send);
- abandoned requests: one held by a day-long latency fault, one at a gate that is never
  released, one ``connect`` on a process that writes nothing, one hang fault; each client
  gives up after 0.1 s, as real clients with timeouts do.

Usage::

    python benchmarks/soak.py                    # 60 s
    python benchmarks/soak.py --minutes 10
    python benchmarks/soak.py --check            # exit 1 when a figure grew past the bound

Nothing here is a test; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's fake_server, installed or not

from _serving import open_fds, rss_bytes  # noqa: E402

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig  # noqa: E402

KEY = {"X-Api-Key": "skp_soak"}
SHAPE = {"shape": "s-1vcpu-1gb"}
GIVE_UP_S = 0.1
#: Bound on each client's requests per round, whatever the time left.
MAX_CYCLES = 200


async def _task_count() -> int:
    return len(asyncio.all_tasks())


def figures(server: BackgroundServer) -> dict[str, int]:
    # Requests given up on end when the fake notices their closed connection (it looks every
    # 50 ms, in real time): let the last ones do so.
    time.sleep(0.3)
    gc.collect()
    return {"rss": rss_bytes(), "fds": open_fds(), "tasks": server.run(_task_count())}


async def lifecycle(session: aiohttp.ClientSession, deadline: float) -> int:
    """Create, use and delete sandboxes until ``deadline``; how many cycles ran."""
    cycles = 0
    while time.monotonic() < deadline and cycles < MAX_CYCLES:
        async with session.post("/v1/sandboxes", json=SHAPE) as created:
            sandbox = (await created.json())["data"]["id"]
        base = f"/v1/sandboxes/{sandbox}"
        async with session.get(base) as got:
            await got.read()
        async with session.post(f"{base}/exec", json={"cmd": "bash", "args": ["-c", "echo $$"]}):
            pass
        async with session.put(f"{base}/files", params={"path": "/tmp/f"}, data=b"x" * 4096):
            pass
        async with session.get(f"{base}/files", params={"path": "/tmp/f"}) as read:
            await read.read()
        async with session.post(f"{base}/processes", json={"cmd": "echo", "args": ["p"]}):
            pass
        async with session.delete(base):
            pass
        cycles += 1
    return cycles


async def give_up(session: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> None:
    """A request whose client leaves after GIVE_UP_S (it gets no answer in time)."""
    with contextlib.suppress(asyncio.TimeoutError, aiohttp.ClientError):
        async with session.request(
            method, path, timeout=aiohttp.ClientTimeout(total=GIVE_UP_S), **kwargs
        ) as response:
            await response.read()


async def abandoned(session: aiohttp.ClientSession, deadline: float) -> int:
    """Requests that never get an answer, each given up on; how many were sent."""
    async with session.post("/v1/sandboxes", json=SHAPE) as created:
        sandbox = (await created.json())["data"]["id"]
    processes = f"/v1/sandboxes/{sandbox}/processes"
    async with session.post(processes, json={"cmd": "cat"}) as started:
        process = (await started.json())["data"]["process_id"]
    sent = 0
    while time.monotonic() < deadline and sent < MAX_CYCLES * 4:
        await asyncio.gather(
            give_up(session, "GET", "/v1/whoami"),  # a day of latency
            give_up(session, "GET", "/v1/shapes"),  # a gate nobody releases
            give_up(session, "GET", "/v1/rootfs"),  # a hang
            give_up(session, "GET", f"{processes}/{process}/connect"),  # nothing to send
        )
        sent += 4
    async with session.delete(f"/v1/sandboxes/{sandbox}"):
        pass
    return sent


async def soak_round(url: str, seconds: float, clients: int) -> tuple[int, int]:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(url, headers=KEY) as session:
        results = await asyncio.gather(
            *(lifecycle(session, deadline) for _ in range(clients)),
            abandoned(session, deadline),
        )
    return sum(results[:-1]), results[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6, help="figures are read between rounds")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-growth", type=float, default=0.10)
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure grew too much")
    args = parser.parse_args(argv)

    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    fake.faults.latency(86_400_000, route="GET /v1/whoami")
    fake.faults.gate("never", route="GET /v1/shapes")
    fake.faults.add({"match": {"route": "GET /v1/rootfs"}, "action": {"type": "hang"}})
    seconds = args.minutes * 60 / args.rounds
    print(
        f"{args.rounds} rounds of {seconds:.0f} s: {args.clients} lifecycle clients and 4 "
        f"abandoned requests at a time (given up after {GIVE_UP_S:g} s)",
        flush=True,
    )
    with BackgroundServer(fake) as server:
        asyncio.run(soak_round(server.url, min(seconds, 5.0), args.clients))  # warm-up
        start = figures(server)
        print(f"start   rss {start['rss'] >> 20} MiB, fds {start['fds']}, tasks {start['tasks']}")
        for number in range(1, args.rounds + 1):
            cycles, given_up = asyncio.run(soak_round(server.url, seconds, args.clients))
            now = figures(server)
            print(
                f"round {number}: {cycles} lifecycles, {given_up} requests given up; rss "
                f"{now['rss'] >> 20} MiB, fds {now['fds']}, tasks {now['tasks']}",
                flush=True,
            )
        end = figures(server)
    met = True
    for name, before in start.items():
        growth = (end[name] - before) / before
        ok = growth <= args.max_growth
        met = met and ok
        verdict = "MET" if ok else "BELOW TARGET"
        print(f"{name}: {before:,} -> {end[name]:,} ({growth:+.1%})   target <= "
              f"+{args.max_growth:.0%}   {verdict}")  # fmt: skip
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
