"""What runtime.py's measurements share: the fake each serves in a process of its own (one
tenant, one running sandbox), and how they sample ``/healthz`` and describe latencies.

Example::

    fake = start_fake("current", ROOT, None)
    try:
        check_exec(fake)
    finally:
        fake.server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from _serving import child_env

if TYPE_CHECKING:
    # Imported where used: importing throughput puts this checkout first on sys.path, and the
    # server processes must import the fake_server of the tree they were started for.
    from throughput import Server

ROOT = Path(__file__).resolve().parent.parent
#: The script: it is also the server process (``--serve``) and the stream client.
RUNTIME = str(Path(__file__).resolve().with_name("runtime.py"))
API_KEY = "skp_benchmark"
SHAPE = "s-1vcpu-1gb"
EXEC_BODY = json.dumps({"cmd": "echo", "args": ["hi"]}, separators=(",", ":"))
#: Hard bound on the loops that wait for the fake (seconds).
DRAIN_TIMEOUT = 180.0
#: The streams fake's per-process journal: all 10 MiB must stay replayable.
STREAM_OUTPUT_CAP = 16 << 20


class BenchmarkError(Exception):
    """A measurement that cannot be trusted (a failed request, a wrong answer)."""


def verdict(label: str, figure: str, target: str, met: bool) -> str:
    return f"{label}: {figure}   target {target}   {'MET' if met else 'BELOW'}"


def serve(tree: str, *, streams: bool = False) -> None:
    """Serve the fake of ``tree`` with one tenant and one running sandbox; print where. For the
    streams measurement (``streams``): a 16 MiB process journal, so that 10 MiB stays
    replayable, and a :class:`LoopWatch` that prints its figures on each SIGUSR1."""
    import fake_server
    from fake_server import FakeCreateOS, ServerConfig, cli
    from fake_server.runner import start_site
    from fake_server.sandboxes import CreateSpec

    origin = Path(fake_server.__file__).resolve()
    if not origin.is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"imported {origin}, not the fake_server of {tree}")

    async def main() -> None:
        config = ServerConfig(seed=1, api_keys=(API_KEY,), transition_ms=0)
        if streams:
            config = config.with_changes(output_cap_bytes=STREAM_OUTPUT_CAP)
            watch = LoopWatch()
            watching = asyncio.ensure_future(watch.run())
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, watch.report)
        fake = FakeCreateOS(config)
        sandbox = fake.sandboxes.create(fake.tenant(API_KEY), CreateSpec(shape=SHAPE))
        _, url = await start_site(fake, "127.0.0.1", 0)
        if hasattr(cli, "freeze_startup_heap"):  # as fake-createos serve does (older trees: not)
            cli.freeze_startup_heap()
        info = {"url": url, "sandbox": sandbox.id, "fake_server": str(origin)}
        print(json.dumps(info), flush=True)
        await asyncio.Event().wait()
        if streams:
            watching.cancel()

    # SIGTERM (how the parent stops a server) ends it as quietly as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        asyncio.run(main())


class LoopWatch:
    """A task on the served fake's loop that wakes every millisecond and keeps the longest
    stretch between two of its turns, in CPU time of the loop's thread: how long the loop ran
    something else without a break. Unlike a latency seen by a client, it does not count the
    time the process waited for a CPU (other work on the machine), so it separates a stream
    that holds the loop from a busy machine. It also keeps the longest garbage collection (CPU
    time of the thread that ran it; it holds the interpreter, so the loop too), which any
    allocation can start. ``report`` prints both as JSON and starts over."""

    TICK_S = 0.001

    def __init__(self) -> None:
        self.longest_turn = 0.0
        self.longest_gc = 0.0
        self._gc_started = 0.0
        gc.callbacks.append(self._collecting)

    async def run(self) -> None:
        cpu = time.thread_time()
        while True:
            await asyncio.sleep(self.TICK_S)
            now = time.thread_time()
            self.longest_turn = max(self.longest_turn, now - cpu)
            cpu = now

    def _collecting(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.thread_time()
        else:
            self.longest_gc = max(self.longest_gc, time.thread_time() - self._gc_started)

    def report(self) -> None:
        figures = {"turn_ms": self.longest_turn * 1000, "gc_ms": self.longest_gc * 1000}
        print(json.dumps(figures), flush=True)
        self.longest_turn = self.longest_gc = 0.0


@dataclass
class Fake:
    """A fake served by a child process: its base URL and its one sandbox."""

    base: str
    sandbox: str
    #: For throughput.py's client: the exec URL and the headers every request sends.
    server: Server

    @property
    def exec_url(self) -> str:
        return f"{self.base}/v1/sandboxes/{self.sandbox}/exec"


def start_fake(name: str, tree: Path, cpus: set[int] | None, *, streams: bool = False) -> Fake:
    """``runtime.py --serve TREE`` with ``TREE`` first on the path (and as the cwd), so the
    child imports that tree's ``fake_server``: this script's own directory, which Python puts
    first, holds none."""
    from throughput import Server, spawn_server

    env = child_env()
    env["PYTHONPATH"] = str(tree)
    command = [sys.executable, RUNTIME, "--serve", str(tree)]
    if streams:
        command.append("--serve-streams")
    process, info = spawn_server(name, command, cpus, cwd=tree, env=env)
    headers = {"X-Api-Key": API_KEY, "Content-Type": "application/json"}
    fake = Fake(info["url"], info["sandbox"], Server(name, process, "", headers))
    fake.server.url = fake.exec_url
    return fake


def check_exec(fake: Fake) -> int:
    """One exec, checked (the benchmark must measure successful answers); its body size."""
    request = urllib.request.Request(
        fake.exec_url, data=EXEC_BODY.encode(), headers=fake.server.headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body: bytes = response.read()
    except OSError as exc:  # HTTPError, URLError, timeouts
        raise BenchmarkError(f"{fake.server.name}: exec failed: {exc}") from None
    result = json.loads(body)["data"]["result"]
    if result["stdout"] != "hi\n" or result["exit_code"] != 0:
        raise BenchmarkError(f"{fake.server.name}: unexpected exec answer {result}")
    return len(body)


@contextlib.contextmanager
def pinned(cpus: set[int] | None) -> Iterator[None]:
    """Run this process (and the children it starts meanwhile) on ``cpus``; restore after."""
    affinity = os.sched_getaffinity(0) if cpus and hasattr(os, "sched_getaffinity") else None
    if affinity is None:
        yield
        return
    os.sched_setaffinity(0, cpus or affinity)
    try:
        yield
    finally:
        os.sched_setaffinity(0, affinity)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def describe(values: Sequence[float]) -> str:
    return (
        f"n={len(values):>6,}  p50 {percentile(values, 50):6.2f} ms  "
        f"p99 {percentile(values, 99):6.2f} ms  max {max(values):7.2f} ms"
    )


async def sample_healthz(
    session: aiohttp.ClientSession,
    url: str,
    seconds: float,
    limit: int,
    in_flight: Callable[[], int] = lambda: 0,
    *,
    until: asyncio.Future[Any] | None = None,
) -> tuple[list[float], list[int]]:
    """Sequential GETs for ``seconds`` (at most ``limit``, and only until ``until`` is done
    when given): their latencies in ms, and ``in_flight()`` (how many scripts ran) at each."""
    latencies: list[float] = []
    counts: list[int] = []
    deadline = time.perf_counter() + seconds
    while (
        len(latencies) < limit
        and time.perf_counter() < deadline
        and (until is None or not until.done())
    ):
        started = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise BenchmarkError(f"/healthz answered HTTP {response.status}")
        counts.append(in_flight())
    return latencies, counts
