"""What the installed plugin costs a pytest run that never uses it.

pytest imports every installed plugin at start-up, so ``pytest_createos.plugin`` is imported by
every run of every project that installs the package. Its dependencies' plugins (pytest-aiohttp,
pytest-asyncio, Faker's) are loaded in those runs anyway; this script measures what ours adds
on top of them, two ways, in the same run:

- **instructions** (``--instructions``, needs valgrind): callgrind counts the instructions of an
  interpreter that imports the dependencies, and of one that then imports the plugin too; the
  difference is ours, and it does not depend on how busy the machine is;
- **time**: ``python -X importtime`` reports the plugin's cumulative import time in a process
  that imported the dependencies first; the median over ``--runs`` runs.

    python benchmarks/plugin_import.py [--runs 15] [--instructions]

Goal (issue #17): at most 30M instructions and 10 ms above the dependencies.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
from pathlib import Path

from _serving import ensure_valgrind, instructions

DEPENDENCIES = "import pytest, pytest_aiohttp.plugin, pytest_asyncio.plugin, faker"
PLUGIN = "pytest_createos.plugin"


def import_ms() -> float:
    """The plugin's cumulative import time (ms) after the dependencies, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"{DEPENDENCIES}; import {PLUGIN}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    for line in done.stderr.splitlines():
        fields = [field.strip() for field in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == PLUGIN:
            return int(fields[1]) / 1000
    raise RuntimeError("python -X importtime did not report the plugin")


def compile_sources() -> None:
    """Write the packages' bytecode, as installing them does (an editable checkout run with
    ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module on every import)."""
    root = Path(__file__).resolve().parents[1]
    for package in ("fake_server", "pytest_createos"):
        compileall.compile_dir(root / package, quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs (default: 15)")
    parser.add_argument("--instructions", action="store_true", help="also count with callgrind")
    args = parser.parse_args()
    compile_sources()
    times = [import_ms() for _ in range(args.runs)]
    print(
        f"plugin import after its dependencies: median {statistics.median(times):.1f} ms "
        f"(min {min(times):.1f}, max {max(times):.1f}, {args.runs} runs; goal <= 10 ms)"
    )
    if args.instructions:
        ensure_valgrind()
        base = instructions([sys.executable, "-c", DEPENDENCIES])
        with_plugin = instructions([sys.executable, "-c", f"{DEPENDENCIES}; import {PLUGIN}"])
        print(
            f"instructions: dependencies {base / 1e6:.0f}M, with the plugin "
            f"{with_plugin / 1e6:.0f}M: +{(with_plugin - base) / 1e6:.1f}M (goal <= 30M)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
