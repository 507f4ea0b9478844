"""Shared by the benchmarks: child processes as a normal installation runs them,
``fake-createos serve`` in a subprocess on a free loopback port, and this process's memory
and file descriptors (Linux)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def child_env() -> dict[str, str]:
    """The environment for measured child processes: bytecode caching on, as in a normal
    installation (some shells export PYTHONDONTWRITEBYTECODE, which makes every start-up
    recompile every module and measures the compiler, not the program)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@contextlib.contextmanager
def served(*args: str) -> Iterator[str]:
    """Start ``python -m fake_server serve --port 0 ARGS``; yield its URL; stop it afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fake_server", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=child_env(),
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url:
            raise RuntimeError("fake-createos serve did not start")
        yield url
    finally:
        process.terminate()
        process.wait(10)


def rss_bytes() -> int:
    """This process's resident memory, from ``/proc``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))
