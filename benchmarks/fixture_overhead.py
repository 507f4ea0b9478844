"""Per-test overhead of ``createos_server`` against pytest-httpserver and a fresh server per test.

Writes four throw-away test projects of N tests each (empty; one request to
``createos_server``; one request to pytest-httpserver's ``httpserver``; one request to a fresh
fake started and stopped inside each test), runs each with pytest in a subprocess, interleaved
over several rounds, and reports the per-test time above the empty project's. Per-test time is
the sum of each test's setup, call and teardown durations as pytest reports them (the session
fixture's start included), so interpreter start-up and collection noise stay out of it. They
are read by a small conftest in each project, not from a JUnit report: JUnit rounds each test
to the millisecond, and a test here takes about two, so every test of a project came out as 2
or 3 ms and a change of a few tenths of a millisecond did not show.

    python benchmarks/fixture_overhead.py [--tests 200] [--rounds 3]

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
from pathlib import Path

from _serving import child_env

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


def run(project: Path) -> tuple[float, float]:
    """Seconds spent in the project's tests (setup, call and teardown of each), and in its
    first test (where session fixtures start)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            str(project),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=project,
        timeout=600,
        env=child_env(),
    )
    times = [float(seconds) for seconds in json.loads((project / "durations.json").read_text())]
    return sum(times), times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
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
    print(f"{'project':26}{'in tests s':>11}{'per-test ms above empty':>26}{'first test ms':>15}")
    overhead = {}
    for name, samples in times.items():
        total = statistics.median(samples)
        overhead[name] = (total - empty) / args.tests * 1000
        first = (statistics.median(firsts[name]) - empty_first) * 1000
        print(f"{name:26}{total:11.3f}{overhead[name]:26.3f}{first:15.1f}")
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


if __name__ == "__main__":
    main()
