"""Stopping: how long each way of stopping the fake takes, with its clients in various states.

For each situation (an idle server; kept-alive connections; a request head half sent; an exec
stream and a process ``connect`` open; a managed process running; a buffered exec and a
process ``wait`` in flight; a CPU-bound exec and process; a dashboard poll sent as the stop
comes; a request held at a gate, before and after its effect; a hang and a long latency fault;
a stream whose client stopped reading; a shell parsing a long command on a worker thread), it
measures the time from SIGINT and from SIGTERM to the exit of ``fake-createos serve``, and the
time ``BackgroundServer.stop()`` and aiohttp's ``TestServer.close()`` (what
``createos_aiohttp_server`` does after each test) take. After each stop it checks that every
connection the client held sees its end within 3 s, that the CLI exited with status 0 and
printed nothing but its seed line, and that the fake left no thread or task running (but a
worker thread parsing a shell's command: nothing can cut that short, and it ends with it).

    python benchmarks/stop.py [--repeat 3] [--only gate,exec_stream] [--ways cli,background]

Goal: every way of stopping ends within 0.5 s in every situation, no client waits on its
connection after the stop, and nothing is left running.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _serving import child_env

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's fake_server, installed or not

KEY = "skp_stop"
#: A command that writes a line every 50 ms until stopped.
TICKING = "while true; do echo x; sleep 0.05; done"
GOAL_S = 0.5
#: How long any one wait of the script may take before it gives up.
LIMIT_S = 10.0


class Timeout(RuntimeError):
    pass


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait (a bounded poll) until ``condition()`` holds."""
    deadline = time.monotonic() + LIMIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise Timeout(f"{what}: not within {LIMIT_S} s")
        time.sleep(0.005)


# -- a minimal HTTP/1.1 client: raw sockets, so the script holds connections as it likes ------


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def send(url: str, method: str, path: str, body: Any = None, close: bool = False) -> socket.socket:
    """A new connection with one request sent on it (its answer not read)."""
    sock = socket.create_connection(_address(url), timeout=LIMIT_S)
    data = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        + ("Connection: close\r\n" if close else "")
        + "\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def answer(sock: socket.socket) -> Any:
    """The JSON body of an answer with a ``Content-Length`` (the connection stays open)."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed before the answer's head")
        buffer += chunk
    head, _, body = buffer.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed mid-answer")
        body += chunk
    return json.loads(body[:length]) if length else None


def call(url: str, method: str, path: str, body: Any = None) -> Any:
    with send(url, method, path, body, close=True) as sock:
        return answer(sock)


def sandbox(url: str) -> str:
    sandbox_id = str(call(url, "POST", "/v1/sandboxes", {"shape": "s-1vcpu-256mb"})["data"]["id"])
    _until(
        lambda: call(url, "GET", f"/v1/sandboxes/{sandbox_id}")["data"]["status"] == "running",
        "the sandbox to run",
    )
    return sandbox_id


def process(url: str, sandbox_id: str, body: dict[str, Any]) -> str:
    data = call(url, "POST", f"/v1/sandboxes/{sandbox_id}/processes", body)["data"]
    return str(data["process_id"])


def streaming(sock: socket.socket) -> socket.socket:
    sock.recv(1)  # the answer began: the stream is open
    return sock


def settled(sock: socket.socket) -> socket.socket:
    """A request that gives nothing to wait for: a short pause lets the server take it up."""
    time.sleep(0.3)
    return sock


def held(url: str, gate: str) -> None:
    _until(lambda: call(url, "GET", f"/_fake/gates/{gate}")["data"]["held"] >= 1, "a held request")


# -- situations: each sets one up and returns the connections its client holds open ----------


def idle(url: str) -> list[socket.socket]:
    return []


def keepalive(url: str) -> list[socket.socket]:
    kept = [send(url, "GET", path) for path in ("/healthz", "/v1/sandboxes", "/_fake/state")]
    for sock in kept:
        answer(sock)
    return kept


def half_head(url: str) -> list[socket.socket]:
    sock = socket.create_connection(_address(url), timeout=LIMIT_S)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return [settled(sock)]


def exec_stream(url: str) -> list[socket.socket]:
    body = {"cmd": "/bin/bash", "args": ["-c", TICKING]}
    path = f"/v1/sandboxes/{sandbox(url)}/exec?stream=true"
    return [streaming(send(url, "POST", path, body))]


def connect(url: str) -> list[socket.socket]:
    sandbox_id = sandbox(url)
    process_id = process(url, sandbox_id, {"cmd": "/bin/bash", "args": ["-c", TICKING]})
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/connect"
    return [streaming(send(url, "GET", path))]


def running_process(url: str) -> list[socket.socket]:
    process(url, sandbox(url), {"cmd": "sleep", "args": ["100000"]})
    return []


def buffered_exec(url: str) -> list[socket.socket]:
    body = {"cmd": "/bin/bash", "args": ["-c", TICKING]}
    return [settled(send(url, "POST", f"/v1/sandboxes/{sandbox(url)}/exec", body))]


def process_wait(url: str) -> list[socket.socket]:
    sandbox_id = sandbox(url)
    process_id = process(url, sandbox_id, {"cmd": "sleep", "args": ["100000"]})
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/wait"
    return [settled(send(url, "GET", path))]


def busy_exec(url: str) -> list[socket.socket]:
    body = {"cmd": "/bin/bash", "args": ["-c", "while true; do :; done"]}
    return [settled(send(url, "POST", f"/v1/sandboxes/{sandbox(url)}/exec", body))]


def busy_process(url: str) -> list[socket.socket]:
    body = {"cmd": "/bin/bash", "args": ["-c", "x=0; while true; do x=$((x+1)); done"]}
    process(url, sandbox(url), body)
    time.sleep(0.3)  # it runs
    return []


def dashboard(url: str) -> list[socket.socket]:
    page = send(url, "GET", "/_fake/")
    page.recv(1 << 16)
    for _ in range(200):  # a journal worth reading
        call(url, "GET", "/healthz")
    poll = send(url, "GET", "/_fake/state")
    answer(poll)
    # Sent as the stop comes: the server may not even have accepted its connection yet.
    return [page, poll, send(url, "GET", "/_fake/journal?since=0")]


def gate(url: str) -> list[socket.socket]:
    sandbox_id = sandbox(url)
    rule = {"match": {"route": "GET /v1/sandboxes/{id}"}, "action": {"type": "gate", "name": "g"}}
    call(url, "POST", "/_fake/faults", rule)
    sock = send(url, "GET", f"/v1/sandboxes/{sandbox_id}")
    held(url, "g")
    return [sock]


def gate_after(url: str) -> list[socket.socket]:
    call(url, "GET", "/v1/sandboxes")  # the key's tenant exists
    rule = {
        "match": {"route": "POST /v1/sandboxes"},
        "action": {"type": "gate", "name": "g", "when": "after"},
    }
    call(url, "POST", "/_fake/faults", rule)
    sock = send(url, "POST", "/v1/sandboxes", {"shape": "s-1vcpu-256mb"})
    held(url, "g")
    return [sock]


def hang(url: str) -> list[socket.socket]:
    rule = {"match": {"route": "GET /v1/sandboxes"}, "action": {"type": "hang"}}
    call(url, "POST", "/_fake/faults", rule)
    return [settled(send(url, "GET", "/v1/sandboxes"))]


def latency(url: str) -> list[socket.socket]:
    rule = {"match": {"route": "GET /v1/sandboxes"}, "action": {"type": "latency", "ms": 1e8}}
    call(url, "POST", "/_fake/faults", rule)
    return [settled(send(url, "GET", "/v1/sandboxes"))]


def stalled_stream(url: str) -> list[socket.socket]:
    sandbox_id = sandbox(url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    sock.settimeout(LIMIT_S)
    sock.connect(_address(url))
    body = json.dumps({"cmd": "/bin/bash", "args": ["-c", f"while true; do echo {'x' * 60}; done"]})
    sock.sendall(
        f"POST /v1/sandboxes/{sandbox_id}/exec?stream=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"X-Api-Key: {KEY}\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
    )
    time.sleep(1.0)  # the client reads nothing: the server's buffers fill
    return [sock]


def shell_parse(url: str) -> list[socket.socket]:
    sandbox_id = sandbox(url)
    process_id = process(url, sandbox_id, {"cmd": "bash", "pty": {"rows": 24, "cols": 80}})
    # ~1 MB: the longest command a shell gathers, parsed on a worker thread for about a second.
    line = b"echo" + b" a" * 480_000 + b"\n"
    for start in range(0, len(line), 200_000):
        chunk = base64.b64encode(line[start : start + 200_000]).decode()
        path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/input"
        call(url, "POST", path, {"data_base64": chunk})
    time.sleep(0.1)  # the parse runs
    return []


SITUATIONS: dict[str, Callable[[str], list[socket.socket]]] = {
    situation.__name__: situation
    for situation in (
        idle,
        keepalive,
        half_head,
        exec_stream,
        connect,
        running_process,
        buffered_exec,
        process_wait,
        busy_exec,
        busy_process,
        dashboard,
        gate,
        gate_after,
        hang,
        latency,
        stalled_stream,
        shell_parse,
    )
}


def ended(connections: list[socket.socket], within: float = 3.0) -> bool:
    """Whether every connection sees its end (closed or reset) within ``within`` seconds (what
    was still on its way to it is read and dropped)."""
    deadline = time.monotonic() + within
    try:
        for sock in connections:
            try:
                while True:
                    sock.settimeout(max(0.01, deadline - time.monotonic()))
                    if not sock.recv(1 << 16):
                        break
            except TimeoutError:
                return False
            except OSError:
                pass  # reset: ended too
        return True
    finally:
        for sock in connections:
            sock.close()


# -- ways of stopping: each returns the seconds the stop took and what went wrong ------------


def cli(situation: str, signum: signal.Signals) -> tuple[float, list[str]]:
    server = subprocess.Popen(
        [sys.executable, "-m", "fake_server", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=child_env(),
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        connections = SITUATIONS[situation](url)
        exited: list[float] = []

        def wait() -> None:  # blocking: Popen.wait(timeout) polls, at up to 50 ms a look
            server.wait()
            exited.append(time.perf_counter())

        waiter = threading.Thread(target=wait)
        started = time.perf_counter()
        server.send_signal(signum)
        waiter.start()
        waiter.join(LIMIT_S)
        if not exited:
            raise Timeout(f"{situation}: the server did not exit within {LIMIT_S} s")
        took = exited[0] - started
        status = server.returncode
    finally:
        if server.poll() is None:
            server.kill()
        _, stderr = server.communicate()
    notes = [] if ended(connections) else ["a client waits"]
    if status != 0:
        notes.append(f"exit status {status}")
    if any(not line.startswith("seed=") for line in stderr.splitlines()):
        notes.append("stderr: " + " | ".join(stderr.splitlines())[:120])
    return took, notes


def background(situation: str) -> tuple[float, list[str]]:
    from fake_server import BackgroundServer, FakeCreateOS

    before = set(threading.enumerate())
    server = BackgroundServer(FakeCreateOS()).start()
    connections = SITUATIONS[situation](server.url)
    started = time.perf_counter()
    server.stop()
    took = time.perf_counter() - started
    notes = [] if ended(connections) else ["a client waits"]
    left = sorted(thread.name for thread in set(threading.enumerate()) - before)
    # A parse on a worker thread cannot be cut short: its thread ends with it, on its own.
    left = [name for name in left if name != "fake-createos-worker"]
    if left:
        notes.append(f"threads left: {', '.join(left)}")
    return took, notes


def test_server(situation: str) -> tuple[float, list[str]]:
    """As ``createos_aiohttp_server`` ends a test: reset the fake, close aiohttp's TestServer
    (its loop here runs in a thread, so the script's blocking clients can reach it)."""
    from aiohttp.test_utils import TestServer

    from fake_server import FakeCreateOS
    from fake_server.http_protocol import harden_connections

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    fake = FakeCreateOS()

    async def start() -> TestServer:
        server = TestServer(fake.app(), host="127.0.0.1")
        await server.start_server()
        assert server.runner is not None
        harden_connections(server.runner, fake)
        return server

    async def close(server: TestServer) -> int:
        fake.reset()
        await server.close()
        await asyncio.sleep(0)  # what the close set going ends
        return len(asyncio.all_tasks()) - 1

    try:
        server = asyncio.run_coroutine_threadsafe(start(), loop).result(LIMIT_S)
        connections = SITUATIONS[situation](str(server.make_url("")).rstrip("/"))
        started = time.perf_counter()
        tasks = asyncio.run_coroutine_threadsafe(close(server), loop).result(LIMIT_S * 20)
        took = time.perf_counter() - started
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join()
        loop.close()
    notes = [] if ended(connections) else ["a client waits"]
    if tasks:
        notes.append(f"{tasks} tasks left")
    return took, notes


WAYS: dict[str, dict[str, Callable[[str], tuple[float, list[str]]]]] = {
    "cli": {
        "SIGINT": lambda situation: cli(situation, signal.SIGINT),
        "SIGTERM": lambda situation: cli(situation, signal.SIGTERM),
    },
    "background": {"BackgroundServer.stop": background},
    "testserver": {"TestServer.close": test_server},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="stops per cell; the slowest shows")
    parser.add_argument("--only", default=",".join(SITUATIONS), help="situations, comma-separated")
    parser.add_argument("--ways", default=",".join(WAYS), help="of " + ", ".join(WAYS))
    args = parser.parse_args()
    ways = {name: way for group in args.ways.split(",") for name, way in WAYS[group].items()}
    print(f"slowest of {args.repeat} stops, ms; then what went wrong, if anything")
    print(f"{'situation':16}" + "".join(f"{name:>22}" for name in ways))
    problems: list[str] = []
    slowest = 0.0
    for situation in args.only.split(","):
        cells = []
        for name, way in ways.items():
            took = 0.0
            for _ in range(args.repeat):
                seconds, notes = way(situation)
                took = max(took, seconds)
                problems += [f"{situation}, {name}: {note}" for note in notes]
            slowest = max(slowest, took)
            cells.append(f"{took * 1000:22.0f}")
        print(f"{situation:16}" + "".join(cells), flush=True)
    for problem in dict.fromkeys(problems):
        print(problem)
    verdict = "meets" if slowest <= GOAL_S and not problems else "misses"
    print(f"slowest stop: {slowest * 1000:.0f} ms ({verdict} the goal: {GOAL_S} s, nothing left)")


if __name__ == "__main__":
    main()
