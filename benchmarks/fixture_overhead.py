"""Per-test overhead of ``createos_server`` against pytest-httpserver and a fresh server per test.

Writes throw-away test projects of N tests each (empty; one request to ``createos_server``;
one request to pytest-httpserver's ``httpserver``; one request to ``createos_aiohttp_server``,
and to pytest-aiohttp's ``aiohttp_server`` serving a bare app; a sandbox created and deleted
on ``createos_aiohttp_server``, what its tests do most; one request to a fresh fake started
and stopped inside each test), runs each with pytest in a subprocess, interleaved
over several rounds, and reports the per-test time above the empty project's. A test's time is
its setup, call and teardown durations as pytest reports them, so interpreter start-up and
collection noise stay out of it. The first test of a project (where session fixtures start and
modules are first imported) is reported on its own; the per-test figure is the mean of the
others, so it is what each further test costs and does not count the first test twice. The
durations are read by a small conftest in each project, not from a JUnit report: JUnit rounds
each test to the millisecond, and a test here takes about two, so every test of a project came
out as 2 or 3 ms and a change of a few tenths of a millisecond did not show.

    python benchmarks/fixture_overhead.py [--tests 200] [--rounds 3] [--instructions [N]]
    python benchmarks/fixture_overhead.py --only-instructions [N]   # the counts alone

Timings swing by a fifth between runs on a shared machine. ``--instructions`` also counts, with
valgrind's callgrind, the instructions of whole pytest runs of each project at N and 3N tests
(default N = 200); the difference over 2N is what each further test costs, start-up and the
first test excluded by the subtraction, and it does not depend on how busy the machine is.
The window is wide because the garbage collector's full collections come every few hundred
tests, and one landing in one run and not the other moves a narrow window's figure: in runs
with ``PYTHONDONTWRITEBYTECODE=1`` (a heavier heap), the ``createos_aiohttp_server`` project
counted 9.89M per test from runs of 50 and 150 tests, 9.45M from 100 and 600, 9.48M from 250
and 750. Start-up (~16G instructions a run) still costs more than the tests.

Needs pytest-httpserver (``pip install pytest-httpserver``). Goal: createos_server's per-test
overhead no larger than pytest-httpserver's, and far below a fresh server per test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _serving import child_env, ensure_valgrind, instructions

GET = """
import json, urllib.request
def get(url, key=""):
    request = urllib.request.Request(url, headers={"X-Api-Key": key})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())
"""

PROJECTS = {
    "empty test": "def test_{n}():\n    pass\n",
    "createos_server": (
        "def test_{n}(createos_server):\n"
        "    get(createos_server.url + '/v1/whoami', createos_server.api_key)\n"
    ),
    "pytest-httpserver": (
        "def test_{n}(httpserver):\n"
        "    httpserver.expect_request('/v1/whoami').respond_with_json({{'ok': True}})\n"
        "    get(httpserver.url_for('/v1/whoami'))\n"
    ),
    "createos_aiohttp_server": (
        "@pytest.mark.asyncio\n"
        "async def test_{n}(createos_aiohttp_server):\n"
        "    async with aiohttp.ClientSession() as session:\n"
        "        await aget(session, createos_aiohttp_server.url + '/v1/whoami',"
        " createos_aiohttp_server.api_key)\n"
    ),
    "createos_aiohttp_server, a sandbox": (
        "@pytest.mark.asyncio\n"
        "async def test_{n}(createos_aiohttp_server):\n"
        "    server = createos_aiohttp_server\n"
        "    url, key = server.url + '/v1/sandboxes', server.api_key\n"
        "    async with aiohttp.ClientSession() as session:\n"
        "        made = await asend(session, 'POST', url, key, {{'shape': 's-1vcpu-1gb'}})\n"
        "        await asend(session, 'DELETE', url + '/' + made['data']['id'], key)\n"
    ),
    "aiohttp_server, bare app": (
        "@pytest.mark.asyncio\n"
        "async def test_{n}(aiohttp_server):\n"
        "    server = await aiohttp_server(bare_app())\n"
        "    async with aiohttp.ClientSession() as session:\n"
        "        await aget(session, str(server.make_url('/v1/whoami')))\n"
    ),
    "fresh fake per test": (
        "def test_{n}():\n"
        "    with BackgroundServer(FakeCreateOS()) as server:\n"
        "        get(server.url + '/v1/whoami', 'skp_x')\n"
    ),
}


#: The async projects' client and the bare app pytest-aiohttp serves (one JSON route).
ASYNC = """
import aiohttp, pytest
from aiohttp import web
async def aget(session, url, key=""):
    async with session.get(url, headers={"X-Api-Key": key}) as response:
        return await response.json()
async def asend(session, method, url, key, body=None):
    async with session.request(method, url, json=body, headers={"X-Api-Key": key}) as response:
        assert response.status == 200, await response.text()
        return await response.json()
async def whoami(request):
    return web.json_response({"status": "success", "data": {"user_id": "usr_x"}})
def bare_app():
    app = web.Application()
    app.router.add_get("/v1/whoami", whoami)
    return app
"""


#: Each project's conftest: every test's setup + call + teardown, in order, at full precision.
DURATIONS = """
import json
DURATIONS = {}
def pytest_runtest_logreport(report):
    DURATIONS[report.nodeid] = DURATIONS.get(report.nodeid, 0.0) + report.duration
def pytest_sessionfinish(session):
    (session.config.rootpath / "durations.json").write_text(json.dumps(list(DURATIONS.values())))
"""


def write_project(root: Path, body: str, count: int) -> Path:
    root.mkdir()
    header = GET + ASYNC + "from fake_server import BackgroundServer, FakeCreateOS\n"
    tests = "\n".join(body.format(n=n) for n in range(count))
    (root / "test_overhead.py").write_text(header + "\n" + tests)
    (root / "conftest.py").write_text(DURATIONS)
    return root


#: How each project runs (in its own directory): no cache written, no random order.
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
#: The projects whose goals compare them, counted with ``--instructions``.
COUNTED = (
    "empty test",
    "createos_server",
    "pytest-httpserver",
    "createos_aiohttp_server",
    "aiohttp_server, bare app",
    "createos_aiohttp_server, a sandbox",
)


def instructions_per_test(tmp: Path, name: str, count: int) -> float:
    """What each test of project ``name`` costs in instructions beyond its first ``count``:
    whole runs at ``count`` and ``3 * count`` tests, the difference over ``2 * count``."""
    totals = []
    for size in (count, 3 * count):
        project = write_project(tmp / f"instructions-{name}-{size}", PROJECTS[name], size)
        run_pytest(project)  # byte-compiles the project, as every timed run finds it
        totals.append(instructions(PYTEST, cwd=project))
    return (totals[1] - totals[0]) / (2 * count)


def run_pytest(project: Path) -> None:
    subprocess.run(
        PYTEST,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=project,
        timeout=600,
        env=child_env(),
    )


def run(project: Path) -> tuple[float, float]:
    """Seconds spent in the project's tests after the first (setup, call and teardown of
    each), and in its first test (where session fixtures start)."""
    run_pytest(project)
    times = [float(seconds) for seconds in json.loads((project / "durations.json").read_text())]
    return sum(times[1:]), times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    counted = parser.add_mutually_exclusive_group()
    for flag, what in (
        ("--instructions", "also count instructions per test under callgrind"),
        ("--only-instructions", "count instructions per test only (no timed rounds)"),
    ):
        help_text = f"{what} (runs of N and 3N tests)"
        counted.add_argument(flag, type=int, nargs="?", const=200, metavar="N", help=help_text)
    args = parser.parse_args()
    if args.only_instructions:
        report_instructions(args.only_instructions)
        return
    if args.tests < 2:
        parser.error("--tests: at least 2 (the first test is reported on its own)")
    with tempfile.TemporaryDirectory() as tmp:
        projects = {
            name: write_project(Path(tmp) / str(i), body, args.tests)
            for i, (name, body) in enumerate(PROJECTS.items())
        }
        times: dict[str, list[float]] = {name: [] for name in projects}
        firsts: dict[str, list[float]] = {name: [] for name in projects}
        for project in projects.values():  # warm up: byte-compile, fill OS caches
            run(project)
        for _ in range(args.rounds):
            for name, project in projects.items():
                total, first = run(project)
                times[name].append(total)
                firsts[name].append(first)
    empty = statistics.median(times["empty test"])
    empty_first = statistics.median(firsts["empty test"])
    print(f"{args.tests} tests per project, median of {args.rounds} runs")
    print(f"{'project':36}{'tests 2..N s':>13}{'per-test ms above empty':>26}{'first test ms':>15}")
    overhead = {}
    for name, samples in times.items():
        total = statistics.median(samples)
        overhead[name] = (total - empty) / (args.tests - 1) * 1000
        first = (statistics.median(firsts[name]) - empty_first) * 1000
        print(f"{name:36}{total:13.3f}{overhead[name]:26.3f}{first:15.1f}")
    ours, theirs = overhead["createos_server"], overhead["pytest-httpserver"]
    print(
        f"createos_server / pytest-httpserver overhead: {ours / theirs:.2f}x; "
        f"fresh fake per test / createos_server: {overhead['fresh fake per test'] / ours:.1f}x"
    )
    ours, theirs = overhead["createos_aiohttp_server"], overhead["aiohttp_server, bare app"]
    print(
        f"createos_aiohttp_server / aiohttp_server with a bare app: {ours / theirs:.2f}x "
        "(goal <= 1.0x); first test above an empty one: see 'first test ms' (goal <= 40 ms)"
    )
    if args.instructions:
        report_instructions(args.instructions)


def report_instructions(count: int) -> None:
    print(f"valgrind: {ensure_valgrind()}; instructions per test beyond the first {count}")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        # Two at a time: a count does not depend on what else runs.
        per_test = pool.map(lambda name: instructions_per_test(Path(tmp), name, count), COUNTED)
        counted = dict(zip(COUNTED, per_test, strict=True))
    above = {name: counted[name] - counted["empty test"] for name in COUNTED}
    for name in COUNTED:
        print(
            f"{name:36}{counted[name] / 1e6:10.2f}M per test, {above[name] / 1e6:8.2f}M above empty"
        )
    print(
        "instructions: createos_server / pytest-httpserver "
        f"{above['createos_server'] / above['pytest-httpserver']:.2f}x; "
        "createos_aiohttp_server / aiohttp_server with a bare app "
        f"{above['createos_aiohttp_server'] / above['aiohttp_server, bare app']:.2f}x"
    )


if __name__ == "__main__":
    main()
