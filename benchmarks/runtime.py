"""What the sandbox runtime costs: exec throughput against an earlier revision, ``/healthz``
latency while heavy scripts run, the memory and file descriptors destroyed sandboxes leave, how
fast running commands stop, and whether a large stream holds the event loop.

Five measurements, each printing its figure, its target and MET or BELOW:

- **exec**: requests per second of ``POST /v1/sandboxes/{id}/exec`` (``echo hi``) on the fake at
  this checkout ("after") and at ``--baseline`` ("before", default: the last revision with the
  hand-written emulator, i.e. the parent of the commit that added bashkit to pyproject.toml;
  checked out in a temporary ``git worktree``), each served in its own process, measured by
  the lean keep-alive client of throughput.py in interleaved rounds; target: median per-round
  ratio >= 0.8x;
- **healthz**: p50/p99/max of sequential ``GET /healthz`` on this checkout's fake (own process)
  while K CPU-heavy bash loops and one script writing a few MB run through ``/exec``, against
  the same while idle, in the same run; target: p99 under load <= 20 ms above idle p99;
- **memory**: in this process, RSS and open file descriptors after a warm-up, at the peak of 30
  sandboxes holding 4 x 8 MiB files each (one exec each), and after deleting them all and
  ``gc.collect()``; target: after within 10% of before;
- **stop**: in this process, the time from a DELETE of a process running a busy loop, a DELETE
  of a sandbox whose buffered exec runs one, and a ``/_fake/reset`` with three of them, to the
  command's end; target: at most 100 ms each;
- **streams**: on this checkout's fake (own process, process journal 16 MiB), in rounds: p50/p99/
  max of sequential ``GET /healthz`` while idle, and while each of three 10 MiB streams runs to
  a client in its own process: ``POST …/exec?stream=true`` of a ``cat``, ``GET …/connect`` of a
  process followed from before its output, and ``GET …/connect`` replaying the same output once
  it exited; each stream's payload MiB/s (seen by its client, from its headers, or the
  follow's first frame, to the end of the stream; the client checks every byte arrived in
  order), timed in a second run of each stream without the probe: the probe keeps the server
  busy (~45% of a follow's time went to its ~650 requests) and hardly touches a replay, which
  is over before many are sent; beside them, the pace of bashkit alone handing the same output
  to a sink that does nothing (one event-loop round trip per chunk: the ceiling of a live
  follow) and keeping it; targets: ``/healthz`` max <= 10 ms during the streams, and
  follow at least as fast as replay (median of the per-round ratios >= 1.0x).

Usage::

    python benchmarks/runtime.py                       # all five
    python benchmarks/runtime.py --quick               # short rounds: a smoke run
    python benchmarks/runtime.py --only exec --baseline abe5c93
    python benchmarks/runtime.py --only streams --stream-rounds 5
    python benchmarks/runtime.py --check               # exit 1 when a target is missed

Nothing here is a test; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gc
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from _serving import child_env, open_fds, rss_bytes

if TYPE_CHECKING:
    # Imported where used: importing throughput puts this checkout first on sys.path, and the
    # server processes must import the fake_server of the tree they were started for.
    from throughput import Run, Server

ROOT = Path(__file__).resolve().parent.parent
#: This file, which is also the server process and the stream client.
SCRIPT = str(Path(__file__).resolve())
API_KEY = "skp_benchmark"
SHAPE = "s-1vcpu-1gb"
EXEC_BODY = json.dumps({"cmd": "echo", "args": ["hi"]}, separators=(",", ":"))
#: A CPU-heavy script: bash arithmetic in a loop, nothing written.
LOOP_SCRIPT = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); done; echo $i"
#: A script that writes 2 MiB with printf, then 4 MiB more with cat (stdout: the final size).
WRITE_SCRIPT = (
    "s=$(printf '%01023d' 0); for i in $(seq 1 2048); do printf '%s\\n' \"$s\"; done"
    " > /tmp/bench-write.1; cat /tmp/bench-write.1 /tmp/bench-write.1 > /tmp/bench-write.2;"
    " wc -c < /tmp/bench-write.2; rm -f /tmp/bench-write.1 /tmp/bench-write.2"
)
WRITE_OUTPUT = f"{4 << 20}\n"
FILE_BYTES = 8 << 20  # four per sandbox: the files API caps one file at 10 MB
FILES_PER_SANDBOX = 4
#: ``--baseline``'s default: the last revision with the hand-written emulator.
EMULATOR = "emulator"
#: Hard bounds on the loops that wait for the fake (seconds).
DRAIN_TIMEOUT = 180.0
DESTROY_TIMEOUT = 30.0


class BenchmarkError(Exception):
    """A measurement that cannot be trusted (a failed request, a wrong answer)."""


def verdict(label: str, figure: str, target: str, met: bool) -> str:
    return f"{label}: {figure}   target {target}   {'MET' if met else 'BELOW'}"


# -- the fake in its own process ---------------------------------------------------------------


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
    command = [sys.executable, str(Path(__file__).resolve()), "--serve", str(tree)]
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


# -- 1. exec throughput, before and after ------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()


def resolve(revision: str) -> str:
    """A commit for ``revision``; ``EMULATOR`` names the parent of the commit that made bashkit
    a dependency (read off the history, so it survives a rewritten one)."""
    if revision == EMULATOR:
        added = git("log", "--reverse", "--format=%H", "-S", '"bashkit>=', "--", "pyproject.toml")
        if not added:
            raise BenchmarkError("no commit adds bashkit to pyproject.toml")
        revision = added.splitlines()[0] + "^"
    return revision


@contextlib.contextmanager
def worktree(revision: str) -> Iterator[tuple[Path, str]]:
    """``revision`` checked out in a temporary worktree; yields its path and a description.
    The worktree is removed afterwards, whatever happened."""
    try:
        commit = git("rev-parse", "--verify", f"{resolve(revision)}^{{commit}}")
    except subprocess.CalledProcessError:
        raise BenchmarkError(f"not a revision: {revision}") from None
    described = git("log", "-1", "--format=%h %s", commit)
    scratch = Path(tempfile.mkdtemp(prefix="runtime-bench-"))
    tree = scratch / "tree"
    try:
        git("worktree", "add", "--detach", str(tree), commit)
        yield tree, described
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
            check=False,
            timeout=120,
        )
        shutil.rmtree(scratch, ignore_errors=True)
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "prune"],
            capture_output=True,
            check=False,
            timeout=120,
        )


def measure_exec(args: argparse.Namespace, cpus: tuple[set[int] | None, set[int] | None]) -> bool:
    from throughput import cpu_seconds, report, run_python

    server_cpus, client_cpus = cpus

    def measure(fake: Fake, seconds: float) -> Run:
        before = cpu_seconds(fake.server.process.pid)
        run = run_python(
            fake.server,
            seconds=seconds,
            connections=args.connections,
            max_requests=args.max_requests,
            cpus=client_cpus,
            method="POST",
            body=EXEC_BODY,
        )
        after = cpu_seconds(fake.server.process.pid)
        if before is not None and after is not None:
            run.server_cpu = after - before
        if run.errors:
            raise BenchmarkError(f"{fake.server.name}: {run.errors} failed requests")
        return run

    with worktree(args.baseline) as (tree, described), contextlib.ExitStack() as stack:
        fakes: dict[str, Fake] = {}
        for name, where in (("after", ROOT), ("before", tree)):
            fakes[name] = start_fake(name, where, server_cpus)
            stack.callback(fakes[name].server.stop)
        sizes = {name: check_exec(fake) for name, fake in fakes.items()}
        print(
            f"POST /v1/sandboxes/{{id}}/exec {EXEC_BODY}: after = this checkout (working tree), "
            f"before = {described}",
            flush=True,
        )
        print(
            f"answers of {sizes['after']} and {sizes['before']} bytes, python client, "
            f"{args.connections} connections, {args.rounds} x {args.seconds:g} s per server"
            + (f", servers on CPU {sorted(server_cpus)}" if server_cpus else ""),
            flush=True,
        )
        for fake in fakes.values():  # warm up: first connections, interpreters, lazy imports
            measure(fake, min(1.0, args.seconds))
        names = tuple(fakes)
        results: dict[str, list[Run]] = {name: [] for name in names}
        for round_no in range(args.rounds):
            # Alternate the order so neither server always runs first.
            for name in names if round_no % 2 == 0 else names[::-1]:
                results[name].append(measure(fakes[name], args.seconds))

    print(report(results))
    cpu = {name: [r.cpu_us for r in runs if r.cpu_us is not None] for name, runs in results.items()}
    if all(cpu.values()):
        cpu_ratio = statistics.median(cpu["before"]) / statistics.median(cpu["after"])
        print(f"ratio by server CPU per request (before/after): {cpu_ratio:.2f}x")
    ratio = statistics.median(
        after.rps / before.rps
        for after, before in zip(results["after"], results["before"], strict=True)
    )
    met = bool(ratio >= args.min_ratio)
    label = "exec req/s after/before (median of rounds)"
    print(verdict(label, f"{ratio:.2f}x", f">= {args.min_ratio:.2f}x", met), flush=True)
    return met


# -- 2. /healthz latency while heavy scripts run ---------------------------------------------


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


@dataclass
class Load:
    """Scripts kept running through ``/exec``: each slot starts its script again when it ends."""

    session: aiohttp.ClientSession
    url: str
    scripts: list[tuple[str, str]]  # (script, expected stdout)
    max_runs: int
    in_flight: int = 0
    completed: int = 0
    durations: list[float] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def slot(self, script: str, expected: str) -> None:
        body = {"cmd": "bash", "args": ["-c", script]}
        for _ in range(self.max_runs):
            if self.stop.is_set():
                return
            started = time.perf_counter()
            self.in_flight += 1
            try:
                async with self.session.post(self.url, json=body) as response:
                    answer: dict[str, Any] = await response.json()
            finally:
                self.in_flight -= 1
            result = answer.get("data", {}).get("result", {})
            if response.status != 200 or result.get("stdout") != expected:
                raise BenchmarkError(f"script failed: HTTP {response.status} {answer}")
            self.durations.append(time.perf_counter() - started)
            self.completed += 1

    async def run(self) -> None:
        await asyncio.gather(*(self.slot(script, expected) for script, expected in self.scripts))


async def sample_healthz(
    session: aiohttp.ClientSession,
    url: str,
    seconds: float,
    limit: int,
    load: Load | None = None,
    *,
    until: asyncio.Future[Any] | None = None,
) -> tuple[list[float], list[int]]:
    """Sequential GETs for ``seconds`` (at most ``limit``, and only until ``until`` is done
    when given): their latencies in ms, and how many scripts were in flight at each."""
    latencies: list[float] = []
    in_flight: list[int] = []
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
        in_flight.append(load.in_flight if load is not None else 0)
    return latencies, in_flight


async def healthz_rounds(
    args: argparse.Namespace, fake: Fake
) -> tuple[list[float], list[float], list[int], Load]:
    timeout = aiohttp.ClientTimeout(total=DRAIN_TIMEOUT)
    healthz_url = f"{fake.base}/healthz"
    scripts = [(LOOP_SCRIPT.format(n=args.loop_iterations), f"{args.loop_iterations}\n")]
    scripts = scripts * args.scripts + [(WRITE_SCRIPT, WRITE_OUTPUT)]
    headers = {"X-Api-Key": API_KEY}
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), timeout=timeout) as probe,
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=len(scripts)), timeout=timeout, headers=headers
        ) as workers,
    ):
        # Warm up: the probe's connection, one run of each script (interpreter threads).
        await sample_healthz(probe, healthz_url, 0.5, 500)
        warm = Load(workers, fake.exec_url, [(LOOP_SCRIPT.format(n=100), "100\n")], 1)
        warm.scripts.append((WRITE_SCRIPT, WRITE_OUTPUT))
        await warm.run()
        idle: list[float] = []
        busy: list[float] = []
        in_flight: list[int] = []
        load = Load(workers, fake.exec_url, scripts, args.max_script_runs)
        for round_no in range(args.healthz_rounds):
            for phase in ("idle", "busy") if round_no % 2 == 0 else ("busy", "idle"):
                if phase == "idle":
                    latencies, _ = await sample_healthz(
                        probe, healthz_url, args.healthz_seconds, 10**6
                    )
                    idle += latencies
                    continue
                load.stop.clear()
                running = asyncio.ensure_future(load.run())
                await asyncio.sleep(0.2)  # every script has started
                latencies, counts = await sample_healthz(
                    probe, healthz_url, args.healthz_seconds, 10**6, load
                )
                busy += latencies
                in_flight += counts
                load.stop.set()  # no new runs; wait for those still going
                await asyncio.wait_for(running, DRAIN_TIMEOUT)
        return idle, busy, in_flight, load


def measure_healthz(
    args: argparse.Namespace, cpus: tuple[set[int] | None, set[int] | None]
) -> bool:
    server_cpus, client_cpus = cpus
    fake = start_fake("current", ROOT, server_cpus)
    try:
        print(
            f"GET /healthz, sequential, for {args.healthz_rounds} x {args.healthz_seconds:g} s "
            f"idle and as long again while {args.scripts} loops of {args.loop_iterations:,} "
            "iterations and 1 script writing 6 MiB (2 MiB printf, 4 MiB cat) run through /exec "
            "(each started again when it ends)"
            + (f"; server on CPU {sorted(server_cpus)}" if server_cpus else ""),
            flush=True,
        )
        with pinned(client_cpus):  # this process is the client here
            idle, busy, in_flight, load = asyncio.run(healthz_rounds(args, fake))
    finally:
        fake.server.stop()
    everything = args.scripts + 1
    full = sum(1 for count in in_flight if count == everything) / len(in_flight)
    print(f"idle        {describe(idle)}")
    print(f"under load  {describe(busy)}")
    print(
        f"scripts: {load.completed} runs completed (median {statistics.median(load.durations):.2f}"
        f" s each); all {everything} in flight at {full:.1%} of the samples under load"
    )
    delta = percentile(busy, 99) - percentile(idle, 99)
    met = bool(delta <= args.max_p99_delta_ms)
    label = "healthz p99 under load minus idle p99"
    print(verdict(label, f"{delta:+.2f} ms", f"<= +{args.max_p99_delta_ms:g} ms", met), flush=True)
    return met


# -- 3. memory and file descriptors after destroyed sandboxes --------------------------------


@dataclass
class Gauge:
    """A figure read before, at its highest during, and after."""

    read: Callable[[], int]
    before: int = 0
    peak: int = 0
    after: int = 0

    def start(self) -> None:
        self.before = self.peak = self.read()

    def sample(self) -> None:
        self.peak = max(self.peak, self.read())

    def finish(self) -> None:
        self.after = self.read()
        self.peak = max(self.peak, self.after)

    @property
    def growth(self) -> float:
        return (self.after - self.before) / self.before


async def sandbox_cycle(
    session: aiohttp.ClientSession, url: str, count: int, payload: bytes, gauges: list[Gauge]
) -> None:
    """Create ``count`` sandboxes, fill, exec, delete and wait until they are destroyed."""

    def sample() -> None:
        for gauge in gauges:
            gauge.sample()

    async def call(method: str, path: str, **kwargs: Any) -> Any:
        async with session.request(method, url + path, **kwargs) as response:
            answer = await response.json()
        if response.status != 200:
            raise BenchmarkError(f"{method} {path}: HTTP {response.status} {answer}")
        return answer["data"]

    ids = [(await call("POST", "/v1/sandboxes", json={"shape": SHAPE}))["id"] for _ in range(count)]
    for sandbox in ids:
        for index in range(FILES_PER_SANDBOX):
            path = f"/root/data/f{index}"
            await call("PUT", f"/v1/sandboxes/{sandbox}/files", params={"path": path}, data=payload)
            sample()
    script = {"cmd": "bash", "args": ["-c", "cat /root/data/f0 > /dev/null"]}
    for sandbox in ids:
        result = (await call("POST", f"/v1/sandboxes/{sandbox}/exec", json=script))["result"]
        if result["exit_code"] != 0:
            raise BenchmarkError(f"exec failed: {result}")
        sample()
    for sandbox in ids:
        await call("DELETE", f"/v1/sandboxes/{sandbox}")
    deadline = time.perf_counter() + DESTROY_TIMEOUT
    for sandbox in ids:
        while (await call("GET", f"/v1/sandboxes/{sandbox}"))["status"] != "destroyed":
            if time.perf_counter() > deadline:
                raise BenchmarkError(f"{sandbox} not destroyed after {DESTROY_TIMEOUT:g} s")
            await asyncio.sleep(0.01)
    sample()


async def memory_run(count: int) -> tuple[Gauge, Gauge]:
    from fake_server import FakeCreateOS, ServerConfig, serve

    payload = os.urandom(FILE_BYTES)
    rss, fds = Gauge(rss_bytes), Gauge(open_fds)
    fake = FakeCreateOS(ServerConfig(seed=1, api_keys=(API_KEY,), transition_ms=0))
    async with (
        serve(fake) as url,
        aiohttp.ClientSession(
            headers={"X-Api-Key": API_KEY},
            connector=aiohttp.TCPConnector(limit=1),
            timeout=aiohttp.ClientTimeout(total=120),
        ) as session,
    ):
        await sandbox_cycle(session, url, 1, payload, [])  # warm-up: one full cycle
        gc.collect()
        rss.start()
        fds.start()
        await sandbox_cycle(session, url, count, payload, [rss, fds])
        gc.collect()
        rss.finish()
        fds.finish()
    return rss, fds


def measure_memory(args: argparse.Namespace) -> bool:
    sys.path.insert(0, str(ROOT))  # this checkout's fake_server, installed or not
    print(
        f"in-process fake: {args.sandboxes} sandboxes x {FILES_PER_SANDBOX} files of "
        f"{FILE_BYTES >> 20} MiB (PUT /files), one exec each (cat a file to /dev/null), then "
        "DELETE all, wait until destroyed, gc.collect()",
        flush=True,
    )
    rss, fds = asyncio.run(memory_run(args.sandboxes))
    mib = 1 << 20
    target = f"after within {args.max_growth:.0%} of before"
    met_rss = bool(rss.growth <= args.max_growth)
    met_fds = bool(fds.growth <= args.max_growth)
    figure = (
        f"before {rss.before / mib:,.1f} MiB, peak {rss.peak / mib:,.1f} MiB, "
        f"after {rss.after / mib:,.1f} MiB ({rss.growth:+.1%})"
    )
    print(verdict("RSS", figure, target, met_rss))
    figure = f"before {fds.before}, peak {fds.peak}, after {fds.after} ({fds.growth:+.1%})"
    print(verdict("open fds", figure, target, met_fds), flush=True)
    return met_rss and met_fds


# -- 4. how fast running commands stop ---------------------------------------------------------

#: A command that never ends by itself and never waits: only a stop ends it.
BUSY = {"cmd": "bash", "args": ["-c", "while :; do :; done"]}


async def stop_run(trials: int) -> dict[str, list[float]]:
    """Milliseconds from each stop to the command's end, for the three ways to stop one."""
    from fake_server import FakeCreateOS, ServerConfig, serve

    fake = FakeCreateOS(ServerConfig(seed=1, api_keys=(API_KEY,), transition_ms=0))
    times: dict[str, list[float]] = {"DELETE process": [], "DELETE sandbox": [], "reset": []}
    async with (
        serve(fake) as url,
        aiohttp.ClientSession(
            url, headers={"X-Api-Key": API_KEY}, timeout=aiohttp.ClientTimeout(total=60)
        ) as session,
    ):

        async def call(method: str, path: str, **kwargs: Any) -> Any:
            async with session.request(method, path, **kwargs) as response:
                answer = await response.json()
            if response.status != 200:
                raise BenchmarkError(f"{method} {path}: HTTP {response.status} {answer}")
            return answer["data"]

        async def sandbox() -> str:
            return str((await call("POST", "/v1/sandboxes", json={"shape": SHAPE}))["id"])

        async def busy_process(sandbox_id: str) -> str:
            base = f"/v1/sandboxes/{sandbox_id}/processes"
            process = (await call("POST", base, json=BUSY))["process_id"]
            await asyncio.sleep(0.05)  # it is looping now
            return f"{base}/{process}"

        for _ in range(trials):
            # A process: DELETE answers once the tree has exited.
            path = await busy_process(await sandbox())
            started = time.perf_counter()
            gone = await call("DELETE", path, params={"grace_ms": "1000"})
            times["DELETE process"].append((time.perf_counter() - started) * 1000)
            if not gone["tree_exited"]:
                raise BenchmarkError(f"DELETE {path} left the tree running")
            # A buffered exec: its answer (exit 137) arrives once it has stopped.
            sandbox_id = await sandbox()
            running = asyncio.ensure_future(
                call("POST", f"/v1/sandboxes/{sandbox_id}/exec", json=BUSY)
            )
            await asyncio.sleep(0.05)
            started = time.perf_counter()
            await call("DELETE", f"/v1/sandboxes/{sandbox_id}")
            result = (await running)["result"]
            times["DELETE sandbox"].append((time.perf_counter() - started) * 1000)
            if result["exit_code"] != 137:
                raise BenchmarkError(f"the exec ended with {result}")
            # Reset: every command of every tenant, until the shell is idle.
            for _ in range(3):
                await busy_process(await sandbox())
            started = time.perf_counter()
            await call("POST", "/_fake/reset")
            # Polled: the shell offers no event for "idle"; the poll is finer than the target.
            while not fake.runtime.shell.idle:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            times["reset"].append((time.perf_counter() - started) * 1000)
            fake.create_tenant(API_KEY)
    return times


def measure_stop(args: argparse.Namespace) -> bool:
    sys.path.insert(0, str(ROOT))
    print(
        f"in-process fake, {args.stop_trials} trials each: DELETE of a process running a busy"
        " loop (until it answers tree_exited), DELETE of a sandbox whose buffered exec runs one"
        " (until the exec answers 137), /_fake/reset with 3 of them (until the shell is idle)",
        flush=True,
    )
    met = True
    for label, values in asyncio.run(stop_run(args.stop_trials)).items():
        ok = bool(max(values) <= args.max_stop_ms)
        met = met and ok
        figure = f"p50 {percentile(values, 50):.1f} ms, max {max(values):.1f} ms"
        print(verdict(f"{label}: time to stop", figure, f"<= {args.max_stop_ms:g} ms", ok))
    return met


# -- 5. /healthz while a 10 MiB stream is written; live follow vs replay ----------------------

#: A file of a line short of 2 MiB that the streamed commands write five times (a line short of
#: 10 MiB each: the interpreter passes on 10 MiB of one run's stdout, and a stream that reaches
#: that gets the fake's notice on stderr), made once per run.
STREAM_PART = "/tmp/bench-stream"
STREAM_PART_LINES = 2047
STREAM_PART_BYTES = STREAM_PART_LINES * 1024
STREAM_BYTES = 5 * STREAM_PART_BYTES
MAKE_STREAM_PART = (
    "s=$(printf '%01023d' 0);"
    f" for i in $(seq 1 {STREAM_PART_LINES}); do printf '%s\\n' \"$s\"; done"
    f" > {STREAM_PART}; wc -c < {STREAM_PART}"
)
CAT_STREAM = "cat " + " ".join([STREAM_PART] * 5)
#: A process that says it is ready, waits for a line of input, then writes the 10 MiB: a
#: ``connect`` opened before the input sees every byte live.
READY = "ready\n"
GATED_STREAM = f"printf {READY!r}; read -r go; {CAT_STREAM}"
#: The streams fake's per-process journal: all 10 MiB must stay replayable.
STREAM_OUTPUT_CAP = 16 << 20
STREAM_KINDS = ("exec ?stream=true", "connect follow", "connect replay")


@dataclass
class StreamRun:
    """What the stream client saw: seconds from ``connected`` (see :func:`stream_client`) to
    the end of the stream, the payload bytes its frames carried, and the exit frame's status."""

    seconds: float
    payload: int
    frames: int
    exit_code: int | None

    @property
    def mib_per_s(self) -> float:
        return self.payload / (1 << 20) / self.seconds if self.seconds else 0.0


def stream_client(spec_json: str) -> None:
    """The client of one stream, in its own process so that reading 14 MB of NDJSON never
    delays the ``/healthz`` probe, and over a bare socket with a 1 MiB receive buffer so that it
    costs little CPU and is never what limits the stream's speed (http.client decodes chunks in
    Python and was). Prints ``connected`` once the headers (and ``skip_lines`` lines) arrived,
    ``done`` at the end of the stream, then its :class:`StreamRun` as JSON (or ``{"error":
    ...}``); the frames are decoded and checked only after the clock stopped."""
    import socket
    import urllib.parse

    spec = json.loads(spec_json)
    url = urllib.parse.urlsplit(spec["url"])
    body = (spec["body"] or "").encode()
    head = [
        f"{spec['method']} {url.path}?{url.query} HTTP/1.1",
        f"Host: {url.netloc}",
        "Connection: close",  # the end of the answer is the end of the connection
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in spec["headers"].items()),
    ]
    received = bytearray()
    buffer = bytearray(1 << 20)

    def say(line: str) -> None:
        print(line, flush=True)

    with socket.create_connection((url.hostname, url.port), timeout=DRAIN_TIMEOUT) as sock:

        def receive() -> int:
            count = sock.recv_into(buffer)
            received.extend(memoryview(buffer)[:count])
            return count

        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        while b"\r\n\r\n" not in received and receive():
            pass
        headers, _, _ = bytes(received).partition(b"\r\n\r\n")
        if not headers.startswith(b"HTTP/1.1 200 "):
            say(json.dumps({"error": f"answer {bytes(received[:300])!r}"}))
            return
        # Every NDJSON line ends in "}\n", which neither JSON text nor chunk framing contains.
        while received.count(b"}\n") < spec["skip_lines"] and receive():
            pass
        started = time.perf_counter()
        say("connected")
        while receive():
            pass
        seconds = time.perf_counter() - started
    say("done")
    frames, problem = _ndjson_frames(bytes(received))
    if problem:
        say(json.dumps({"error": problem}))
        return
    payload, exit_code, seq = 0, None, None
    for frame in frames[spec["skip_lines"] :]:
        if exit_code is not None or "error" in frame:
            say(json.dumps({"error": f"unexpected frame {json.dumps(frame)[:200]}"}))
            return
        if "data_base64" in frame:
            if seq is not None and frame["seq"] != seq + 1:
                say(json.dumps({"error": f"seq {frame['seq']} after {seq}"}))
                return
            seq = frame["seq"]
            payload += len(base64.b64decode(frame["data_base64"]))
        elif "stdout" in frame or "stderr" in frame:
            payload += len((frame.get("stdout") or frame.get("stderr") or "").encode())
        elif "exit_code" in frame:
            exit_code = frame["exit_code"]
    frame_count = len(frames) - spec["skip_lines"]
    say(
        json.dumps(
            {"seconds": seconds, "payload": payload, "frames": frame_count, "exit": exit_code}
        )
    )


def _ndjson_frames(answer: bytes) -> tuple[list[dict[str, Any]], str]:
    """The frames of a chunked NDJSON answer (headers included), or a problem."""
    headers, _, raw = answer.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in headers.lower():
        return [], f"not a chunked answer: {headers!r}"
    body = bytearray()
    position = 0
    while True:
        end = raw.find(b"\r\n", position)
        if end < 0:
            return [], "the answer ends inside its chunks"
        size = int(raw[position:end].split(b";")[0], 16)
        if size == 0:
            break
        body += raw[end + 2 : end + 2 + size]
        position = end + 2 + size + 2
    return [json.loads(line) for line in body.splitlines()], ""


class StreamClient:
    """A :func:`stream_client` process and the lines it prints."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(
        cls, url: str, *, method: str = "GET", body: Any = None, skip_lines: int = 0
    ) -> StreamClient:
        spec = {
            "url": url,
            "method": method,
            "headers": {"X-Api-Key": API_KEY, "Content-Type": "application/json"},
            "body": None if body is None else json.dumps(body),
            "skip_lines": skip_lines,
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            SCRIPT,
            "--stream-client",
            json.dumps(spec),
            stdout=asyncio.subprocess.PIPE,
            env=child_env(),
        )
        return cls(process)

    async def line(self) -> str:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), DRAIN_TIMEOUT)
        text = raw.decode().strip()
        if not text or text.startswith("{"):
            # Too early: an error, or the process ended.
            raise BenchmarkError(f"stream client: {text or 'ended without a word'}")
        return text

    async def result(self) -> StreamRun:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), DRAIN_TIMEOUT)
        await asyncio.wait_for(self.process.wait(), DRAIN_TIMEOUT)
        answer = json.loads(raw or b'{"error": "no result"}')
        if "error" in answer:
            raise BenchmarkError(f"stream client: {answer['error']}")
        return StreamRun(answer["seconds"], answer["payload"], answer["frames"], answer["exit"])

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


async def probed_stream(
    probe: aiohttp.ClientSession, healthz_url: str, client: StreamClient, expected: int
) -> list[float]:
    """``/healthz`` latencies sampled until the client (connected) saw the end of its stream
    (checked as :func:`stream_end` checks it)."""
    done = asyncio.ensure_future(client.line())
    try:
        latencies, _ = await sample_healthz(probe, healthz_url, DRAIN_TIMEOUT, 10**6, until=done)
        await done
    finally:
        done.cancel()
    await stream_end(client, expected)
    return latencies


async def stream_end(client: StreamClient, expected: int) -> StreamRun:
    """What the client saw of its stream, once it said ``done`` (checked: ``expected`` bytes of
    payload and exit 0)."""
    run = await client.result()
    if run.payload != expected or run.exit_code != 0:
        raise BenchmarkError(f"stream carried {run.payload:,} bytes and exit {run.exit_code}")
    return run


@dataclass
class StreamFigures:
    """By phase (``idle`` and each of ``STREAM_KINDS``): ``/healthz`` latencies (ms), and the
    server loop's longest turn and longest garbage collection (CPU ms, one per round); each
    stream's runs; and the seconds a process took to write the 10 MiB with no reader."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    loop_turn_ms: dict[str, list[float]] = field(default_factory=dict)
    gc_ms: dict[str, list[float]] = field(default_factory=dict)
    runs: dict[str, list[StreamRun]] = field(default_factory=dict)
    unread_seconds: list[float] = field(default_factory=list)

    def add(self, phase: str, latencies: list[float], stretch: tuple[float, float]) -> None:
        self.latencies.setdefault(phase, []).extend(latencies)
        self.loop_turn_ms.setdefault(phase, []).append(stretch[0])
        self.gc_ms.setdefault(phase, []).append(stretch[1])


async def loop_stretch(fake: Fake) -> tuple[float, float]:
    """The served fake's longest loop turn and longest garbage collection (CPU ms) since the
    last call (see LoopWatch)."""
    process = fake.server.process
    assert process.stdout is not None
    process.send_signal(signal.SIGUSR1)
    line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), DRAIN_TIMEOUT)
    figures = json.loads(line)
    return float(figures["turn_ms"]), float(figures["gc_ms"])


async def stream_rounds(args: argparse.Namespace, fake: Fake) -> StreamFigures:
    timeout = aiohttp.ClientTimeout(total=DRAIN_TIMEOUT)
    healthz_url = f"{fake.base}/healthz"
    sandbox_url = f"{fake.base}/v1/sandboxes/{fake.sandbox}"
    figures = StreamFigures()
    clients: list[StreamClient] = []
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), timeout=timeout) as probe,
        aiohttp.ClientSession(timeout=timeout, headers={"X-Api-Key": API_KEY}) as api,
    ):

        async def call(method: str, path: str, body: Any = None) -> Any:
            async with api.request(method, sandbox_url + path, json=body) as response:
                answer = await response.json()
            if response.status != 200:
                raise BenchmarkError(f"{method} {path}: HTTP {response.status} {answer}")
            return answer["data"]

        async def stream(
            kind: str,
            url: str,
            expected: int,
            *,
            probed: bool,
            start: str | None = None,
            **options: Any,
        ) -> None:
            """Run one stream (its client connected first, then a line of input to the
            process at ``start`` if given): while sampling ``/healthz`` when ``probed``, else
            for its throughput alone."""
            await loop_stretch(fake)  # start the watch over
            client = await StreamClient.start(url, **options)
            clients.append(client)
            await client.line()  # connected
            if start is not None:
                go = base64.b64encode(b"go\n").decode()
                await call("POST", start + "/input", {"data_base64": go})
            if probed:
                latencies = await probed_stream(probe, healthz_url, client, expected)
                figures.add(kind, latencies, await loop_stretch(fake))
            else:
                await client.line()  # done
                figures.runs.setdefault(kind, []).append(await stream_end(client, expected))

        made = await call("POST", "/exec", {"cmd": "bash", "args": ["-c", MAKE_STREAM_PART]})
        if made["result"]["stdout"] != f"{STREAM_PART_BYTES}\n":
            raise BenchmarkError(f"could not write {STREAM_PART}: {made['result']}")
        await sample_healthz(probe, healthz_url, 0.5, 500)  # warm up the probe's connection
        try:
            for _ in range(args.stream_rounds):
                await loop_stretch(fake)
                latencies, _ = await sample_healthz(
                    probe, healthz_url, args.stream_idle_seconds, 10**6
                )
                figures.add("idle", latencies, await loop_stretch(fake))
                for probed in (True, False):
                    # exec ?stream=true: the command writes its 10 MiB as the stream goes.
                    body = {"cmd": "bash", "args": ["-c", CAT_STREAM], "stream": True}
                    url = sandbox_url + "/exec?stream=true"
                    await stream(
                        "exec ?stream=true",
                        url,
                        STREAM_BYTES,
                        probed=probed,
                        method="POST",
                        body=body,
                    )
                    # connect follow: connected (past the "ready" frame) before the output
                    # exists; then replay: the same output again, all of it in the journal.
                    body = {"cmd": "bash", "args": ["-c", GATED_STREAM]}
                    path = f"/processes/{(await call('POST', '/processes', body))['process_id']}"
                    url = f"{sandbox_url}{path}/connect"
                    await stream(
                        "connect follow",
                        url + "?after=0",
                        STREAM_BYTES,
                        probed=probed,
                        start=path,
                        skip_lines=1,
                    )
                    await stream("connect replay", url + "?after=1", STREAM_BYTES, probed=probed)
                    await call("DELETE", path)
                # No reader: how fast the shell hands a process's output to the fake.
                started = time.perf_counter()
                body = {"cmd": "bash", "args": ["-c", CAT_STREAM]}
                path = f"/processes/{(await call('POST', '/processes', body))['process_id']}"
                ended = await call("GET", path + "/wait")
                figures.unread_seconds.append(time.perf_counter() - started)
                if ended["output"]["bytes"] != STREAM_BYTES:  # nothing dropped, no notice
                    raise BenchmarkError(f"the unread process wrote {ended['output']}")
                await call("DELETE", path)
        finally:
            for client in clients:
                client.kill()
    return figures


async def interpreter_pace(rounds: int = 3) -> tuple[float, float]:
    """MiB/s at which bashkit itself runs the streams' ``cat`` in this process, median of
    ``rounds``: handing its output to an async sink that does nothing (the way the fake takes
    output: one event-loop round trip per chunk), and keeping it to itself (no sink). Whatever
    the fake does with output, a live follower cannot go faster than the first."""
    import bashkit

    tree = bashkit.FileSystem()
    tree.mkdir("/tmp", True)
    made = bashkit.Bash()
    made.mount("/", tree)
    await made.execute(MAKE_STREAM_PART)

    async def discard(_: bytes) -> None:
        pass

    timings: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for with_sink in timings:
            bash = bashkit.Bash(profile=bashkit.ExecutionProfile.Interactive)
            bash.mount("/", tree)
            started = time.perf_counter()
            if with_sink:
                await bash.execute(CAT_STREAM, stdout=discard, stderr=discard)
            else:
                await bash.execute(CAT_STREAM)
            timings[with_sink].append(time.perf_counter() - started)
    mib = STREAM_BYTES / (1 << 20)
    return mib / statistics.median(timings[True]), mib / statistics.median(timings[False])


def measure_streams(
    args: argparse.Namespace, cpus: tuple[set[int] | None, set[int] | None]
) -> bool:
    server_cpus, client_cpus = cpus
    fake = start_fake("streams", ROOT, server_cpus, streams=True)
    try:
        print(
            f"GET /healthz, sequential, {args.stream_rounds} rounds of: "
            f"{args.stream_idle_seconds:g} s idle, then while each of these streams "
            f"{STREAM_BYTES >> 20} MiB (cat of a 2 MiB file x5) to a client in its own process:"
            " POST /exec?stream=true; GET /connect"
            " following a process from before its output (live); GET /connect replaying it"
            f" after it exited (journal {STREAM_OUTPUT_CAP >> 20} MiB)"
            + (f"; server on CPU {sorted(server_cpus)}" if server_cpus else ""),
            flush=True,
        )
        with pinned(client_cpus):  # this process and its stream clients are the client here
            figures = asyncio.run(stream_rounds(args, fake))
    finally:
        fake.server.stop()
    phases = ("idle", *STREAM_KINDS)
    for phase in phases:
        print(f"{phase:<19}{describe(figures.latencies[phase])}")
    print("server loop (CPU time, max of rounds): longest turn / longest garbage collection")
    print(
        "  "
        + ", ".join(
            f"{phase} {max(figures.loop_turn_ms[phase]):.1f} / {max(figures.gc_ms[phase]):.1f} ms"
            for phase in phases
        )
    )
    for kind in STREAM_KINDS:
        rates = [run.mib_per_s for run in figures.runs[kind]]
        frames = statistics.median(run.frames for run in figures.runs[kind])
        print(
            f"{kind:<19}{statistics.median(rates):7.1f} MiB/s of payload (median of rounds, "
            f"timed without the probe; {frames:,.0f} frames)"
        )
    unread = STREAM_BYTES / (1 << 20) / statistics.median(figures.unread_seconds)
    print(
        f"{'no reader':<19}{unread:7.1f} MiB/s: a process writing the 10 MiB while nobody"
        " reads (create to /wait): the pace at which bash hands output to the fake"
    )
    with pinned(server_cpus):
        with_sink, alone = asyncio.run(interpreter_pace())
    print(
        f"{'the interpreter':<19}{with_sink:7.1f} MiB/s into a sink that does nothing, {alone:.1f}"
        " MiB/s with no sink: bashkit alone, in this process (on the server's CPUs): what"
        " following live can reach"
    )
    worst = max(max(figures.latencies[kind]) for kind in STREAM_KINDS)
    met_max = bool(worst <= args.max_stream_healthz_ms)
    label = "healthz max during 10 MiB streams"
    figure = f"{worst:.2f} ms (idle: {max(figures.latencies['idle']):.2f} ms)"
    print(verdict(label, figure, f"<= {args.max_stream_healthz_ms:g} ms", met_max))
    ratio = statistics.median(
        follow.mib_per_s / replay.mib_per_s
        for follow, replay in zip(
            figures.runs["connect follow"], figures.runs["connect replay"], strict=True
        )
    )
    met_ratio = bool(ratio >= args.min_follow_ratio)
    label = "connect follow/replay throughput (median of rounds)"
    print(
        verdict(label, f"{ratio:.2f}x", f">= {args.min_follow_ratio:.2f}x", met_ratio), flush=True
    )
    return met_max and met_ratio


# -- the script --------------------------------------------------------------------------------


MEASUREMENTS = ("exec", "healthz", "memory", "stop", "streams")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short rounds (a smoke run)")
    parser.add_argument("--only", choices=MEASUREMENTS, help="run one measurement")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--no-pin", action="store_true", help="do not pin server/client CPUs")
    exec_group = parser.add_argument_group("exec")
    exec_group.add_argument(
        "--baseline",
        default=EMULATOR,
        help="revision to compare with (default: the last one with the hand-written emulator)",
    )
    exec_group.add_argument("--rounds", type=int, default=5)
    exec_group.add_argument("--seconds", type=float, default=3.0, help="per server per round")
    exec_group.add_argument("--connections", type=int, default=32)
    exec_group.add_argument("--max-requests", type=int, default=1_000_000, help="per run")
    exec_group.add_argument("--min-ratio", type=float, default=0.8)
    healthz_group = parser.add_argument_group("healthz")
    healthz_group.add_argument("--healthz-rounds", type=int, default=3)
    healthz_group.add_argument(
        "--healthz-seconds", type=float, default=4.0, help="per phase per round"
    )
    healthz_group.add_argument("--scripts", type=int, default=4, help="CPU-heavy loops (K)")
    healthz_group.add_argument("--loop-iterations", type=int, default=200_000)
    healthz_group.add_argument("--max-script-runs", type=int, default=1000, help="per slot")
    healthz_group.add_argument("--max-p99-delta-ms", type=float, default=20.0)
    memory_group = parser.add_argument_group("memory")
    memory_group.add_argument("--sandboxes", type=int, default=30)
    memory_group.add_argument("--max-growth", type=float, default=0.10)
    stop_group = parser.add_argument_group("stop")
    stop_group.add_argument("--stop-trials", type=int, default=10)
    stop_group.add_argument("--max-stop-ms", type=float, default=100.0)
    streams_group = parser.add_argument_group("streams")
    streams_group.add_argument("--stream-rounds", type=int, default=5)
    streams_group.add_argument(
        "--stream-idle-seconds", type=float, default=1.0, help="idle sampling per round"
    )
    streams_group.add_argument("--max-stream-healthz-ms", type=float, default=10.0)
    streams_group.add_argument("--min-follow-ratio", type=float, default=1.0)
    # Internal entry points: this file is also the server process and the stream client.
    parser.add_argument("--serve", metavar="TREE", help=argparse.SUPPRESS)
    parser.add_argument("--serve-streams", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stream-client", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        serve(args.serve, streams=args.serve_streams)
        return 0
    if args.stream_client:
        stream_client(args.stream_client)
        return 0
    if args.quick:
        args.rounds, args.seconds = 2, 1.0
        args.healthz_rounds, args.healthz_seconds = 1, 1.5
        args.sandboxes = 10
        args.stop_trials = 3
        args.stream_rounds, args.stream_idle_seconds = 2, 0.5

    from throughput import split_cpus

    cpus = (None, None) if args.no_pin else split_cpus()
    missed: list[str] = []
    for name in MEASUREMENTS:
        if args.only not in (None, name):
            continue
        print(f"== {name}", flush=True)
        try:
            if name == "exec":
                met = measure_exec(args, cpus)
            elif name == "healthz":
                met = measure_healthz(args, cpus)
            elif name == "memory":
                met = measure_memory(args)
            elif name == "stop":
                met = measure_stop(args)
            else:
                met = measure_streams(args, cpus)
        except BenchmarkError as exc:
            print(f"{name}: not a valid result: {exc}   INVALID", flush=True)
            met = False
        if not met:
            missed.append(name)
        print(flush=True)
    print("all targets met" if not missed else f"targets missed: {', '.join(missed)}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
