"""Start-up: time from launch to the first answered request.

Launches each server as a fresh process, polls ``/healthz`` (or ``/``) on loopback until it
answers, and reports the median over several launches, next to a bare aiohttp script measured
the same way in the same run.

    python benchmarks/startup.py [--runs 10]

Goal: ``fake-createos serve`` answers its first request within 0.25 s of launch.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from _serving import child_env

BARE_AIOHTTP = """
import sys
from aiohttp import web
async def health(request):
    return web.json_response({"status": "success", "data": {"up": True}})
app = web.Application()
app.router.add_get("/healthz", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def time_to_first_answer(command: list[str], url: str, limit: float = 10.0) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
    )
    try:
        while time.perf_counter() - started < limit:
            try:
                with urllib.request.urlopen(url, timeout=0.5) as response:
                    response.read()
                return time.perf_counter() - started
            except OSError:
                time.sleep(0.002)
        raise RuntimeError(f"{command[:3]} did not answer within {limit}s")
    finally:
        process.terminate()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    candidates = {
        "bare aiohttp": lambda port: [sys.executable, "-c", BARE_AIOHTTP, str(port)],
        "fake-createos serve": lambda port: [
            sys.executable,
            "-m",
            "fake_server",
            "serve",
            "--port",
            str(port),
        ],
    }
    results: dict[str, list[float]] = {name: [] for name in candidates}
    for command in candidates.values():  # warm up: write bytecode caches once
        port = free_port()
        time_to_first_answer(command(port), f"http://127.0.0.1:{port}/healthz")
    for _ in range(args.runs):  # interleaved, so machine noise hits both alike
        for name, command in candidates.items():
            port = free_port()
            url = f"http://127.0.0.1:{port}/healthz"
            results[name].append(time_to_first_answer(command(port), url))
    base = statistics.median(results["bare aiohttp"])
    print(f"{'server':22}{'median s':>10}{'min s':>8}{'ratio':>8}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:22}{median:10.3f}{min(times):8.3f}{median / base:8.2f}x")
    fake = statistics.median(results["fake-createos serve"])
    print(
        f"fake-createos serve: {fake:.3f} s to first answer "
        f"({'meets' if fake <= 0.25 else 'misses'} the 0.25 s goal)"
    )


if __name__ == "__main__":
    main()
