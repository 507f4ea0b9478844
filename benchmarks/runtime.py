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
import contextlib
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from _runtime_fake import (
    API_KEY,
    DRAIN_TIMEOUT,
    EXEC_BODY,
    ROOT,
    SHAPE,
    BenchmarkError,
    Fake,
    check_exec,
    describe,
    percentile,
    pinned,
    sample_healthz,
    serve,
    start_fake,
    verdict,
)
from _runtime_streams import measure_streams, stream_client
from _serving import open_fds, rss_bytes

if TYPE_CHECKING:
    # Imported where used: importing throughput puts this checkout first on sys.path, and the
    # server processes must import the fake_server of the tree they were started for.
    from throughput import Run

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
#: Hard bound on the wait for destroyed sandboxes (seconds).
DESTROY_TIMEOUT = 30.0


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
                    probe, healthz_url, args.healthz_seconds, 10**6, lambda: load.in_flight
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
