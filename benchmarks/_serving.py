"""Shared by the benchmarks: child processes as a normal installation runs them,
``fake-createos serve`` in a subprocess on a free loopback port, this process's memory and
file descriptors (Linux), and valgrind's instruction counts."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
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


def ensure_valgrind() -> str:
    """valgrind's version, installing Debian's package with apt-get when it is missing and this
    process may (root, or sudo without a password); otherwise a clear message."""
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sudo: list[str] = []
        if os.geteuid() != 0 and shutil.which("sudo"):
            probe = subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False)
            sudo = ["sudo", "-n"] if probe.returncode == 0 else []
        if not shutil.which("apt-get") or (os.geteuid() != 0 and not sudo):
            raise SystemExit(
                "--instructions needs valgrind (its callgrind tool and callgrind_control); "
                "install it (Debian/Ubuntu: apt-get install valgrind; Fedora: dnf install "
                "valgrind) and run again"
            )
        print("valgrind is missing: installing it with apt-get", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = [*sudo, "apt-get", "install", "-y", "--no-install-recommends", "valgrind"]
        if subprocess.run(install, env=env, check=False, timeout=900).returncode != 0:
            subprocess.run([*sudo, "apt-get", "update"], env=env, check=False, timeout=900)
            subprocess.run(install, env=env, check=True, timeout=900)
    version = subprocess.run(
        ["valgrind", "--version"], capture_output=True, text=True, check=True
    ).stdout
    return version.strip()


def instructions(argv: list[str], cwd: Path | None = None) -> int:
    """The instructions callgrind counts for the whole run of ``argv`` (a child run as
    :func:`child_env` makes it), start-up included."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            # Counting only: no per-instruction or jump data, which would slow the run down.
            "--dump-instr=no",
            "--collect-jumps=no",
            *argv,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env=child_env(),
        timeout=1800,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError("callgrind reported no instruction count")
    return int(found.group(1))
