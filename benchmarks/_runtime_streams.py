"""runtime.py's streams measurement: ``/healthz`` while a 10 MiB stream is written (an exec
``?stream=true``, a live ``connect`` follow, a ``connect`` replay), each stream read by a client
in a process of its own, and live follow against replay.

Example::

    met = measure_streams(args, (None, None))   # args: runtime.py's parsed options
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from _runtime_fake import (
    API_KEY,
    DRAIN_TIMEOUT,
    ROOT,
    RUNTIME,
    STREAM_OUTPUT_CAP,
    BenchmarkError,
    Fake,
    describe,
    pinned,
    sample_healthz,
    start_fake,
    verdict,
)
from _serving import child_env

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
            RUNTIME,
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
