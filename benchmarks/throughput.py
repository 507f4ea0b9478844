"""Throughput of ``GET /v1/sandboxes/{id}`` on the fake versus a bare aiohttp handler.

Both servers answer the same route template with a body of the same size (the bare handler
returns the exact bytes the fake answered), each in its own process, on loopback. One client
(``wrk`` when installed, otherwise a lean asyncio keep-alive client in its own process) measures
them in interleaved rounds in the same run, so machine noise hits both alike. The ratio of the
medians is the fake's overhead: the target is >= 0.8x.

Peers users would otherwise pick are measured in the same rounds when they are installed:
pytest-httpserver serving the same bytes on the same path, and moto's server answering S3's
``ListBuckets`` (``GET /``), a comparable read of a mocked cloud API.

With ``--instructions`` it also runs both servers under valgrind's callgrind and prints the
instructions per request of each (the noise-free figure on a shared machine) and their ratio,
for ``GET /v1/sandboxes/{id}``, ``POST .../exec`` of ``echo hi`` and a list page of 100.

Usage::

    python benchmarks/throughput.py            # 5 rounds of 3 s per server
    python benchmarks/throughput.py --instructions        # and instructions under callgrind
    python benchmarks/throughput.py --quick    # 2 rounds of 1 s (a smoke run)
    python benchmarks/throughput.py --client python --check   # exit 1 below --min-ratio

Nothing here is a test; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _serving import ensure_valgrind

ROOT = Path(__file__).resolve().parent.parent
# Benchmark the checkout this file belongs to, installed or not.
sys.path.insert(0, str(ROOT))

TARGETS = ("fake", "bare")
#: Measured too when importable (module to look for).
PEERS = {"pytest-httpserver": "pytest_httpserver", "moto": "moto.server"}
ROUTE = "/v1/sandboxes/{id}"
API_KEY = "skp_benchmark"
SHAPE = "s-1vcpu-1gb"
#: Sandboxes in the fake's tenant: one list page of them is measured.
PAGE = 100
EXEC_BODY = json.dumps({"cmd": "echo", "args": ["hi"]}, separators=(",", ":"))


# -- server processes --------------------------------------------------------------------------


def serve_fake() -> None:
    """Serve the fake with one tenant of PAGE running sandboxes (the first is the one GETs
    read and execs run in); print where to find it."""
    from fake_server import FakeCreateOS, ServerConfig
    from fake_server.runner import start_site
    from fake_server.sandboxes import CreateSpec

    async def main() -> None:
        # Default config apart from the seed: the benchmark measures the fake as users run it
        # (journal, fault engine and all), with no rules installed.
        fake = FakeCreateOS(ServerConfig(seed=1, api_keys=(API_KEY,)))
        tenant = fake.tenant(API_KEY)
        ids = [fake.sandboxes.create(tenant, CreateSpec(shape=SHAPE)).id for _ in range(PAGE)]
        _, url = await start_site(fake, "127.0.0.1", 0)
        _announce(
            {
                "url": url + f"/v1/sandboxes/{ids[0]}",
                "base": url,
                "sandbox": ids[0],
                "headers": {"X-Api-Key": API_KEY},
            }
        )
        await asyncio.Event().wait()

    _run_server(main())


def serve_bare(body_file: str, page_file: str | None, exec_file: str | None) -> None:
    """Serve handlers that do the least each route needs, on the fake's route templates:
    ``GET /v1/sandboxes/{id}`` returns ``body_file``'s bytes, ``GET /v1/sandboxes`` returns
    ``page_file``'s, and ``POST /v1/sandboxes/{id}/exec`` parses the request's JSON and
    json-encodes the answer of ``exec_file`` (with its own ``exec_ms``), as any handler that
    computes its answer must."""
    from aiohttp import web

    body = Path(body_file).read_bytes()
    page = Path(page_file).read_bytes() if page_file else b""
    answer = json.loads(Path(exec_file).read_bytes()) if exec_file else {}
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def list_page(request: web.Request) -> web.Response:
        return web.Response(body=page, content_type="application/json")

    async def run(request: web.Request) -> web.Response:
        started = time.perf_counter()
        json.loads(await request.read())
        data = {**answer["data"], "exec_ms": round((time.perf_counter() - started) * 1000, 3)}
        encoded = dumps({"status": "success", "data": data}).encode()
        return web.Response(body=encoded, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get(ROUTE, handler, allow_head=False)
        app.router.add_get("/v1/sandboxes", list_page, allow_head=False)
        app.router.add_post(ROUTE + "/exec", run)
        # Same runner settings as the fake's (no access log, which would dominate both).
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        base = f"http://127.0.0.1:{port}"
        _announce({"url": f"{base}/v1/sandboxes/sb_bare", "base": base, "headers": {}})
        await asyncio.Event().wait()

    _run_server(main())


def serve_httpserver(body_file: str) -> None:
    """pytest-httpserver answering the fake's bytes on the same path."""
    from pytest_httpserver import HTTPServer

    _quiet_werkzeug()
    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request(re.compile(r"/v1/sandboxes/.+")).respond_with_data(
        Path(body_file).read_bytes(), content_type="application/json"
    )
    server.start()
    _announce({"url": server.url_for("/v1/sandboxes/sb_peer"), "headers": {}})
    _wait_for_sigterm()


def serve_moto() -> None:
    """moto's server (the usual way to fake a cloud API over HTTP), answering ListBuckets."""
    from moto.server import ThreadedMotoServer

    _quiet_werkzeug()
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    _announce({"url": f"http://127.0.0.1:{port}/", "headers": {}})
    _wait_for_sigterm()


def _quiet_werkzeug() -> None:
    """Both peers serve through werkzeug, which logs every request to stderr: thousands of
    lines per round, and the cost of writing them would be measured too."""
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_sigterm() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        while True:
            time.sleep(3600)


def _announce(info: dict[str, object]) -> None:
    """Tell the parent where a set-up server is, its start-up objects frozen first: a full
    collection that scans them lands in whichever probe's window it happens to (one window of
    300 requests read ~57k instructions more per request for it); frozen, the collections while
    measuring scan what serving makes, in every server alike."""
    gc.collect()
    gc.freeze()
    print(json.dumps(info), flush=True)


def _run_server(main: Coroutine[Any, Any, None]) -> None:
    # SIGTERM (how the parent stops a server) ends it at once and quietly: raising SystemExit
    # from the handler could land in a weakref callback, where Python prints it and carries on.
    # Nothing is left to flush (callgrind writes its counts at any exit).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main)


@dataclass
class Server:
    name: str
    process: subprocess.Popen[str]
    url: str
    headers: dict[str, str]
    #: What else the server announced (``base`` URL, ``sandbox`` id).
    info: dict[str, Any] = field(default_factory=dict)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def spawn_server(
    name: str, command: Sequence[str], cpus: set[int] | None, **popen: Any
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start a server process (pinned to ``cpus``) that prints one JSON line when it listens;
    the process and that line. Also used by benchmarks/runtime.py."""
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, text=True, preexec_fn=_pin(cpus), **popen
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait()
        raise SystemExit(f"the {name} server did not start (exit code {process.returncode})")
    info: dict[str, Any] = json.loads(line)
    return process, info


def start_server(
    name: str, extra: Sequence[str], cpus: set[int] | None, *, wrapper: Sequence[str] = ()
) -> Server:
    """Start one of this file's servers, in ``wrapper`` (e.g. valgrind) when given."""
    command = [*wrapper, sys.executable, str(Path(__file__).resolve()), "--serve", name, *extra]
    # valgrind talks on stderr; the server's own errors would show there too.
    popen = {"stderr": subprocess.DEVNULL} if wrapper else {}
    process, info = spawn_server(name, command, cpus, **popen)
    return Server(name, process, info["url"], info["headers"], info)


def _pin(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` pinning the child to ``cpus`` (set before it starts any thread)."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def fetch(server: Server, url: str | None = None, data: bytes | None = None) -> bytes:
    """One request (a GET, or a POST of ``data``), checked: the benchmark must measure
    successful answers."""
    request = urllib.request.Request(url or server.url, data=data, headers=server.headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        if response.status != 200:
            raise SystemExit(f"{server.name}: HTTP {response.status}")
        body: bytes = response.read()
        return body


# -- clients -----------------------------------------------------------------------------------


@dataclass
class Run:
    requests: int
    seconds: float
    errors: int
    #: CPU seconds the server process spent during the run (None where /proc is unavailable).
    server_cpu: float | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_us(self) -> float | None:
        """Server CPU per request: far steadier than req/s on a machine shared with other work,
        because time the server spends waiting for a CPU is not counted."""
        if self.server_cpu is None or not self.requests:
            return None
        return self.server_cpu / self.requests * 1e6


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # Fields 14 and 15 of stat(5) (utime, stime), counted after the ")" that ends the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_wrk(server: Server, *, seconds: float, connections: int, cpus: set[int] | None) -> Run:
    """``wrk`` on one thread: C, so the client is never the bottleneck against Python."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s"]
    for name, value in server.headers.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run(
        [*command, server.url],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 30,  # a hard bound even if wrk never returns
        preexec_fn=_pin(cpus),
    ).stdout
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+)", output)
    if total is None:
        raise SystemExit(f"cannot parse wrk output:\n{output}")
    elapsed = float(total.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[total.group(3)]
    errors = 0
    for pattern in (r"Non-2xx or 3xx responses: (\d+)", r"Socket errors: (.*)"):
        found = re.search(pattern, output)
        if found:
            errors += sum(int(n) for n in re.findall(r"\d+", found.group(1)))
    return Run(int(total.group(1)), elapsed, errors)


def run_python(
    server: Server,
    *,
    seconds: float,
    connections: int,
    max_requests: int,
    cpus: set[int] | None,
    method: str = "GET",
    body: str = "",
) -> Run:
    """The fallback client, in its own process so it never shares the servers' loops
    (``method`` and ``body`` for routes other than a GET, e.g. benchmarks/runtime.py's exec)."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--load",
        server.url,
        json.dumps(server.headers),
        str(seconds),
        str(connections),
        str(max_requests),
        f"--load-method={method}",
        f"--load-body={body}",
    ]
    output = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 30,
        preexec_fn=_pin(cpus),
    ).stdout
    result = json.loads(output)
    return Run(result["requests"], result["seconds"], result["errors"])


def load(
    url: str,
    headers: dict[str, str],
    seconds: float,
    connections: int,
    limit: int,
    *,
    method: str = "GET",
    body: bytes = b"",
) -> None:
    """Keep-alive requests (GETs unless told otherwise) over ``connections`` raw asyncio
    streams until ``limit`` requests or ``seconds`` elapse. Hand-rolled HTTP/1.1 (both servers
    answer with Content-Length) keeps the client far cheaper per request than an HTTP client
    library, so it is not the bottleneck it would otherwise be against a Python server."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    lines = [f"{method} {parts.path} HTTP/1.1", f"Host: {parts.netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    counts = {"requests": 0, "errors": 0}

    async def worker(deadline: float) -> None:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            while counts["requests"] < limit and time.perf_counter() < deadline:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
                await reader.readexactly(length)
                counts["requests" if head.startswith(b"HTTP/1.1 200") else "errors"] += 1
        finally:
            writer.close()

    async def main() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(worker(started + seconds) for _ in range(connections)))
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    print(json.dumps({**counts, "seconds": elapsed}))


# -- instructions under callgrind -------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One route measured by instructions: the same request sent to both servers."""

    label: str
    method: str
    #: The path, with ``{id}`` for the fake's sandbox.
    path: str
    body: str
    #: The goal for bare / fake instructions per request.
    target: float


PROBES = (
    Probe("GET /v1/sandboxes/{id}", "GET", "/v1/sandboxes/{id}", "", 0.88),
    Probe(
        "POST /v1/sandboxes/{id}/exec (echo hi)", "POST", "/v1/sandboxes/{id}/exec", EXEC_BODY, 0.75
    ),
    Probe(
        f"GET /v1/sandboxes?limit={PAGE} ({PAGE} sandboxes)",
        "GET",
        f"/v1/sandboxes?limit={PAGE}",
        "",
        0.5,
    ),
)


def callgrind(out_file: Path) -> list[str]:
    """The command prefix running a server under callgrind, dumps going to ``out_file.N``."""
    return [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out_file}",
        # Counting only: no per-instruction or jump data, which would slow the run down.
        "--dump-instr=no",
        "--collect-jumps=no",
    ]


def callgrind_control(option: str, server: Server) -> None:
    subprocess.run(
        ["callgrind_control", option, str(server.process.pid)],
        capture_output=True,
        check=True,
        timeout=120,
    )


def dumped_instructions(out_file: Path) -> int:
    """Instructions (Ir) in the newest dump of ``out_file``."""
    dumps = sorted(
        out_file.parent.glob(out_file.name + ".*"), key=lambda p: int(p.suffix.lstrip("."))
    )
    if not dumps:
        raise SystemExit(f"callgrind wrote no dump next to {out_file}")
    for line in dumps[-1].read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {dumps[-1]}")


def instructions_per_request(
    server: Server, out_file: Path, probe: Probe, sandbox: str, *, requests: int, warmup: int
) -> float:
    """Warm up, zero the server's counters, send ``requests`` (one connection, each answered
    before the next is sent), dump the counters: instructions per request, the load
    client's process not included (it runs outside valgrind)."""
    url = server.info["base"] + probe.path.replace("{id}", sandbox)
    target = replace(server, url=url)

    def send(count: int) -> None:
        run = run_python(
            target,
            seconds=600.0,  # the bound; under callgrind a request takes a few milliseconds
            connections=1,
            max_requests=count,
            cpus=None,
            method=probe.method,
            body=probe.body,
        )
        if run.errors or run.requests != count:
            raise SystemExit(
                f"{server.name} {probe.label}: {run.requests} of {count} answered, "
                f"{run.errors} failed; not a valid result"
            )

    send(warmup)
    callgrind_control("--zero", server)
    send(requests)
    callgrind_control("--dump", server)
    return dumped_instructions(out_file) / requests


def measure_instructions(requests: int, warmup: int) -> list[tuple[Probe, float, float]]:
    """Both servers under callgrind: instructions per request of each probe, fake and bare."""
    version = ensure_valgrind()
    print(
        f"instructions per request under callgrind ({version}): {requests} requests per route "
        f"after {warmup} warm-up, one connection, both servers in valgrind",
        flush=True,
    )
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        outs = {name: Path(scratch, f"{name}.callgrind") for name in TARGETS}
        started: list[Server] = []
        try:
            fake = start_server("fake", [], None, wrapper=callgrind(outs["fake"]))
            started.append(fake)
            sandbox = fake.info["sandbox"]
            bodies = {
                "body": fetch(fake),
                "page-body": fetch(fake, fake.info["base"] + PROBES[2].path),
                "exec-answer": fetch(
                    fake,
                    fake.info["base"] + PROBES[1].path.replace("{id}", sandbox),
                    data=EXEC_BODY.encode(),
                ),
            }
            extra = []
            for option, body in bodies.items():
                Path(scratch, option).write_bytes(body)
                extra += [f"--{option}", str(Path(scratch, option))]
            bare = start_server("bare", extra, None, wrapper=callgrind(outs["bare"]))
            started.append(bare)
            for probe in PROBES:
                counts = [
                    instructions_per_request(
                        server, outs[server.name], probe, sandbox, requests=requests, warmup=warmup
                    )
                    for server in (fake, bare)
                ]
                results.append((probe, counts[0], counts[1]))
        finally:
            for server in started:
                server.stop()
    return results


def instructions_report(results: list[tuple[Probe, float, float]]) -> tuple[str, bool]:
    """The table of instructions per request and ratios; whether every target is met."""
    width = max(len(probe.label) for probe, _, _ in results)
    lines = [
        f"{'route':<{width}}  {'fake Ir/req':>12}  {'bare Ir/req':>12}  {'bare/fake':>9}  target"
    ]
    met = True
    for probe, fake, bare in results:
        ratio = bare / fake
        ok = ratio >= probe.target
        met = met and ok
        lines.append(
            f"{probe.label:<{width}}  {fake:>12,.0f}  {bare:>12,.0f}  {ratio:>8.2f}x  "
            f">= {probe.target:.2f}x {'OK' if ok else 'BELOW TARGET'}"
        )
    return "\n".join(lines), met


# -- the measurement ---------------------------------------------------------------------------


def split_cpus() -> tuple[set[int] | None, set[int] | None]:
    """Server on one CPU, client on the others, so neither steals the other's core."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    return {available[0]}, set(available[1:])


@contextlib.contextmanager
def servers(server_cpus: set[int] | None, peers: Sequence[str]) -> Iterator[dict[str, Server]]:
    started: dict[str, Server] = {}
    with tempfile.TemporaryDirectory() as scratch:
        try:
            started["fake"] = start_server("fake", [], server_cpus)
            body = fetch(started["fake"])
            body_file = Path(scratch, "body.json")
            body_file.write_bytes(body)
            started["bare"] = start_server("bare", ["--body", str(body_file)], server_cpus)
            if len(fetch(started["bare"])) != len(body):
                raise SystemExit("the bare handler's body differs in size from the fake's")
            for peer in peers:
                started[peer] = start_server(peer, ["--body", str(body_file)], server_cpus)
            yield started
        finally:
            for server in started.values():
                server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 1 s (a smoke run)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="per server per round")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument(
        "--max-requests", type=int, default=1_000_000, help="per run (python client)"
    )
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--min-ratio", type=float, default=0.8)
    parser.add_argument("--check", action="store_true", help="exit 1 when below --min-ratio")
    parser.add_argument("--no-pin", action="store_true", help="do not pin server/client CPUs")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per request (GET, exec, a list page) of both servers "
        "under valgrind's callgrind, and their ratios",
    )
    parser.add_argument(
        "--only-instructions", action="store_true", help="--instructions without the req/s rounds"
    )
    parser.add_argument("--instr-requests", type=int, default=300, help="per route and server")
    parser.add_argument("--instr-warmup", type=int, default=50, help="per route and server")
    # Internal entry points: this file is also the server and the fallback client processes.
    parser.add_argument("--no-peers", action="store_true", help="measure only fake and bare")
    parser.add_argument("--serve", choices=(*TARGETS, *PEERS), help=argparse.SUPPRESS)
    parser.add_argument("--body", help=argparse.SUPPRESS)
    parser.add_argument("--page-body", help=argparse.SUPPRESS)
    parser.add_argument("--exec-answer", help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--load-method", default="GET", help=argparse.SUPPRESS)
    parser.add_argument("--load-body", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve == "fake":
        serve_fake()
        return 0
    if args.serve == "bare":
        serve_bare(args.body, args.page_body, args.exec_answer)
        return 0
    if args.serve == "pytest-httpserver":
        serve_httpserver(args.body)
        return 0
    if args.serve == "moto":
        serve_moto()
        return 0
    if args.load:
        url, headers, seconds, connections, limit = args.load
        load(
            url,
            json.loads(headers),
            float(seconds),
            int(connections),
            int(limit),
            method=args.load_method,
            body=args.load_body.encode(),
        )
        return 0

    if args.quick:
        args.rounds, args.seconds = 2, 1.0
    client = args.client
    if client == "auto":
        client = "wrk" if shutil.which("wrk") else "python"
    elif client == "wrk" and not shutil.which("wrk"):
        parser.error("wrk is not installed")
    server_cpus, client_cpus = (None, None) if args.no_pin else split_cpus()
    instructions_met = True
    if args.instructions or args.only_instructions:
        table, instructions_met = instructions_report(
            measure_instructions(args.instr_requests, args.instr_warmup)
        )
        print(table, flush=True)
        if args.only_instructions:
            return 1 if args.check and not instructions_met else 0

    def measure(server: Server, seconds: float) -> Run:
        before = cpu_seconds(server.process.pid)
        if client == "wrk":
            run = run_wrk(server, seconds=seconds, connections=args.connections, cpus=client_cpus)
        else:
            run = run_python(
                server,
                seconds=seconds,
                connections=args.connections,
                max_requests=args.max_requests,
                cpus=client_cpus,
            )
        after = cpu_seconds(server.process.pid)
        if before is not None and after is not None:
            run.server_cpu = after - before
        return run

    peers = (
        []
        if args.no_peers
        else [
            name for name, module in PEERS.items() if importlib.util.find_spec(module.split(".")[0])
        ]
    )
    names = (*TARGETS, *peers)
    results: dict[str, list[Run]] = {name: [] for name in names}
    with servers(server_cpus, peers) as running:
        body_size = len(fetch(running["fake"]))
        print(
            f"GET {ROUTE}: {body_size}-byte body, client={client}, "
            f"{args.connections} connections, {args.rounds} x {args.seconds:g} s per server"
            + (f", servers on CPU {sorted(server_cpus)}" if server_cpus else ""),
            flush=True,
        )
        for server in running.values():  # warm up: first connections, caches, lazy imports
            measure(server, min(1.0, args.seconds))
        for round_no in range(args.rounds):
            # Alternate the order so neither server always runs first.
            order = names if round_no % 2 == 0 else names[::-1]
            for name in order:
                run = measure(running[name], args.seconds)
                if run.errors:
                    raise SystemExit(f"{name}: {run.errors} failed requests; not a valid result")
                results[name].append(run)

    # Each round measured both servers back to back: the median of those paired ratios is less
    # sensitive to load drifting over the run than a ratio of overall figures.
    ratio = statistics.median(
        fake.rps / bare.rps for fake, bare in zip(results["fake"], results["bare"], strict=True)
    )
    print(report(results))
    cpu = {name: [r.cpu_us for r in runs if r.cpu_us is not None] for name, runs in results.items()}
    if all(cpu.values()):
        cpu_ratio = statistics.median(cpu["bare"]) / statistics.median(cpu["fake"])
        print(f"ratio by server CPU per request (bare/fake): {cpu_ratio:.2f}x")
    for peer in peers:
        peer_ratio = statistics.median(
            run.rps / bare.rps for run, bare in zip(results[peer], results["bare"], strict=True)
        )
        print(f"ratio {peer}/bare req/s (median of rounds): {peer_ratio:.2f}x")
    verdict = "OK" if ratio >= args.min_ratio else "BELOW TARGET"
    print(
        f"ratio fake/bare req/s (median of rounds): {ratio:.2f}x   "
        f"target >= {args.min_ratio:.2f}x   {verdict}"
    )
    return 1 if args.check and (ratio < args.min_ratio or not instructions_met) else 0


def report(results: dict[str, list[Run]]) -> str:
    rounds = len(next(iter(results.values())))
    header = ["server", *(f"round {i + 1}" for i in range(rounds)), "median req/s", "CPU us/req"]
    rows = []
    for name, runs in results.items():
        cpu = [r.cpu_us for r in runs if r.cpu_us is not None]
        rows.append(
            [
                name,
                *(f"{run.rps:,.0f}" for run in runs),
                f"{statistics.median(r.rps for r in runs):,.0f}",
                f"{statistics.median(cpu):.1f}" if cpu else "n/a",
            ]
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), *(line(row) for row in rows)])


if __name__ == "__main__":
    sys.exit(main())
