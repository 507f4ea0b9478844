"""Every example in README.md and docs/ runs exactly as printed.

Each Python block that holds a test becomes a module of one downstream project with pytest's
defaults (no conftest, no ini, pytest-asyncio in strict mode), run once; a block without a test
is a script and runs as one; the README's curl session and every page's curl lines (the
control API's one curl per action) run against a real ``fake-createos serve``; a printed
fault-rule refusal is the fake's own text; and the README's test command is the one
``.ci/run`` runs.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fake_server import FakeCreateOS
from fake_server.fault_rules import FaultError
from tests import test_cli

pytest_plugins = ["pytester"]

#: ``fake-createos serve --port 0`` in a subprocess, as the CLI tests start it.
serve = test_cli.serve

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_TEST = re.compile(r"^(?:async )?def test_|^class Test", re.MULTILINE)


def _blocks(language: str) -> list[tuple[str, str]]:
    """``(where, code)`` of every block in ``language``, ``where`` naming page and position."""
    found = []
    for page in PAGES:
        name = page.relative_to(ROOT).with_suffix("").as_posix().replace("/", "_")
        for number, (lang, code) in enumerate(_BLOCK.findall(page.read_text()), 1):
            if lang == language:
                found.append((f"{name}_{number}".replace("-", "_").lower(), code))
    return found


PYTHON = _blocks("python")
TESTS = [(where, code) for where, code in PYTHON if _TEST.search(code)]
SCRIPTS = [(where, code) for where, code in PYTHON if not _TEST.search(code)]
SESSIONS = [code for _, code in _blocks("console") if "\n$ " in "\n" + code]
#: Blocks of shell lines without prompts that hold a curl (a reader pastes them line by line).
CURLS = [
    (where, code)
    for where, code in _blocks("console")
    if "\ncurl " in "\n" + code and "\n$ " not in "\n" + code
]


def test_every_page_has_runnable_examples() -> None:
    assert {where.split("_")[0] for where, _ in TESTS} >= {"readme", "docs"}
    assert SCRIPTS
    assert SESSIONS
    assert {where.split("_")[0] for where, _ in CURLS} == {"docs"}


#: Seconds past which a documented example is too slow to be an example.
SLOW_EXAMPLE_S = 15


def test_every_test_example_passes_as_printed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{f"test_{where}": code for where, code in TESTS})
    # As strict as a project with `filterwarnings = error`: an example that leaks a client's
    # socket would fail there. A hang (it happened: see pytest_createos/_context_shield.py)
    # fails here, not at CI's limit.
    strict = (
        "-W",
        "error::ResourceWarning",
        "-W",
        "error::pytest.PytestUnraisableExceptionWarning",
    )
    # Each example's phases are listed when one takes longer than a reader would wait (one
    # sent a retry into a gate and waited out two 60 s client timeouts, inside the run's 300 s).
    slow = ("--durations=0", f"--durations-min={SLOW_EXAMPLE_S}")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rfEs", *strict, *slow, timeout=300
    )
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes.get("passed", 0) >= len(TESTS)
    assert not outcomes.get("skipped"), result.stdout.str()
    too_slow = [
        line for line in result.stdout.lines if re.match(r"\d+\.\d+s (setup|call|teardown) ", line)
    ]
    assert not too_slow, too_slow


@pytest.mark.parametrize("code", [code for _, code in SCRIPTS], ids=[w for w, _ in SCRIPTS])
def test_every_script_example_runs_as_printed(tmp_path: Path, code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def _expected(line: str) -> re.Pattern[str]:
    # doctest's ELLIPSIS: "..." stands for any text.
    return re.compile(".*?".join(map(re.escape, line.split("..."))), re.DOTALL)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's session uses curl")
@pytest.mark.parametrize("session", SESSIONS)
def test_console_session_answers_as_printed(serve: Any, session: str) -> None:
    server = serve()
    sandbox_id = ""
    lines = session.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        command = line[2:].replace("localhost:8080", server.url.removeprefix("http://"))
        command = command.replace("sb_...", sandbox_id)
        done = subprocess.run(
            shlex.split(command), capture_output=True, text=True, timeout=30, check=True
        )
        expected = lines[index + 1]
        assert _expected(expected).fullmatch(done.stdout.strip()), (command, done.stdout)
        sandbox_id = json.loads(done.stdout)["data"].get("id", sandbox_id)


def _lines(code: str) -> list[str]:
    """A block's shell lines; an indented line continues the one before (a quoted argument
    printed over two lines)."""
    lines: list[str] = []
    for line in code.splitlines():
        if line.startswith(" ") and lines:
            lines[-1] += "\n" + line
        elif line.strip():
            lines.append(line)
    return lines


@pytest.mark.skipif(shutil.which("curl") is None, reason="the pages' examples use curl")
@pytest.mark.parametrize("code", [code for _, code in CURLS], ids=[w for w, _ in CURLS])
def test_every_curl_line_answers_as_printed(serve: Any, code: str) -> None:
    # The reader started `fake-createos serve --port 8080` (the manual clock for the clock's
    # line) and made a sandbox as the README's quickstart does: `sb_…` is its id, `skp_me` its
    # key. Each line must succeed; a `# {...}` comment names keys its answer has.
    server = serve("--manual-clock")
    address = server.url.removeprefix("http://")
    create = ["curl", "-s", "-X", "POST", f"{server.url}/v1/sandboxes", "-H", "X-Api-Key: skp_me"]
    shape = '{"shape": "s-1vcpu-1gb"}'
    made = subprocess.run([*create, "-d", shape], capture_output=True, text=True, timeout=30)
    names = {"sb_…": json.loads(made.stdout)["data"]["id"]}
    for line in _lines(code):
        command, _, comment = line.partition(" #")
        for old, new in [("127.0.0.1:8080", address), ("localhost:8080", address), *names.items()]:
            command = command.replace(old, new)
        assignment = re.fullmatch(r"([A-Z]+)=(\S+)", command)
        if assignment:
            names["$" + assignment[1]] = assignment[2]
            continue
        if command.startswith("fake-createos serve"):
            continue  # the server the test started
        argv = shlex.split(command)
        assert argv[0] == "curl", f"a line the test cannot run: {line!r}"
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
        assert json.loads(done.stdout)["status"] == "success", (line, done.stdout)
        if comment.strip().startswith("{"):
            for key in re.findall(r'"(\w+)":', comment):
                assert f'"{key}":' in done.stdout, (line, key, done.stdout)


#: The pages' shell scripts (``bash`` blocks), each run whole as a reader would paste it.
SHELL_SCRIPTS = _blocks("bash")
#: What the scripts use ``jq`` for (a field of an answer), for machines without jq.
_JQ = """#!/usr/bin/env python3
import json, sys
path = [a for a in sys.argv[1:] if not a.startswith("-")][0]
value = json.load(sys.stdin)
for name in filter(None, path.split(".")):
    value = value[name]
print(value if isinstance(value, str) else json.dumps(value))
"""


@pytest.mark.skipif(shutil.which("curl") is None, reason="the pages' scripts use curl")
def test_the_race_from_outside_python_runs_as_printed(serve: Any, tmp_path: Path) -> None:
    [(_, script)] = SHELL_SCRIPTS  # the one in faults.md: a new script needs its own test
    server = serve("--transition-ms", "0")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "jq").write_text(_JQ)
    (tools / "jq").chmod(0o755)
    environment = {"PATH": f"{tools}:/usr/bin:/bin"}
    code = script.replace("127.0.0.1:8080", server.url.removeprefix("http://"))
    done = subprocess.run(
        ["bash", "-ec", code], capture_output=True, text=True, timeout=60, env=environment
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.replace("}{", "}\n{").splitlines()]
    assert all(answer["status"] == "success" for answer in answers), done.stdout
    assert [a["data"]["status"] for a in answers if "status" in a["data"]] == ["paused", "running"]
    # The server saw the resume answered before the cleanup it held was.
    request = urllib.request.Request(server.url + "/_fake/journal?since=0")
    with urllib.request.urlopen(request, timeout=10) as response:
        entries = json.loads(response.read())["data"]["entries"]
    order = [e["route"] for e in entries if e["kind"] == "request" and e["method"] != "GET"]
    assert order.index("/v1/sandboxes/{id}/resume") < order.index(
        "/v1/sandboxes/{id}/processes/{pid}"
    )


_REFUSAL = re.compile(
    r"^ *(invalid fault rule: match: no (?:route (\S+ \S+)|method '(\w+)');.*)$", re.MULTILINE
)


def test_every_printed_fault_rule_refusal_is_the_fakes() -> None:
    # Printed in a list item's indented block, which _blocks does not see: search the pages.
    printed = [found for page in PAGES for found in _REFUSAL.finditer(page.read_text())]
    assert len(printed) >= 2
    for found in printed:
        match = {"route": found[2]} if found[2] else {"method": found[3]}
        with pytest.raises(FaultError) as refused:
            FakeCreateOS().faults.add({"match": match, "action": {"type": "reset"}})
        assert str(refused.value) == found[1]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    command = next(
        line
        for line in README.splitlines()
        if line.startswith("python3 -m venv") and "pytest" in line
    )
    assert command in (ROOT / ".ci" / "run").read_text()
