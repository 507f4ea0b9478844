"""Shared by the benchmarks: child processes as a normal installation runs them, and
``fake-createos serve`` in a subprocess on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator


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
