"""Every example in README.md runs exactly as printed: each Python block as a test module (or a
script) in a fresh directory with pytest's defaults, and the curl session against a real
``fake-createos serve``; the suite command is the one ``.ci/run`` runs."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import test_cli

pytest_plugins = ["pytester"]

#: ``fake-createos serve --port 0`` in a subprocess, as the CLI tests start it.
serve = test_cli.serve

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, re.MULTILINE | re.DOTALL)
PYTHON = [code for language, code in BLOCKS if language == "python"]
SESSIONS = [code for language, code in BLOCKS if language == "console" and "\n$ " in "\n" + code]


def _name(code: str) -> str:
    found = re.search(r"^(?:async )?def (test_\w+)|^class (Test\w+)", code, re.MULTILINE)
    assert found, "a README Python example without a test in it"
    return found.group(1) or found.group(2)


def test_the_readme_has_examples() -> None:
    assert len(PYTHON) >= 4
    assert SESSIONS


@pytest.mark.parametrize("code", PYTHON, ids=[_name(code) for code in PYTHON])
def test_python_example_passes_as_printed(pytester: pytest.Pytester, code: str) -> None:
    # A project of its own: no conftest, no ini, pytest-asyncio in its default (strict) mode.
    pytester.makepyfile(test_readme_example=code)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes.get("passed", 0) >= 1
    assert not outcomes.get("skipped"), result.stdout.str()


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


def test_the_readme_test_command_is_what_ci_runs() -> None:
    command = next(
        line
        for line in README.splitlines()
        if line.startswith("python3 -m venv") and "pytest" in line
    )
    assert command in (ROOT / ".ci" / "run").read_text()
