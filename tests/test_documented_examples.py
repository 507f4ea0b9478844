"""Every example in README.md and docs/ runs exactly as printed.

Each Python block that holds a test becomes a module of one downstream project with pytest's
defaults (no conftest, no ini, pytest-asyncio in strict mode), run once; a block without a test
is a script and runs as one; the README's curl session runs against a real
``fake-createos serve``; and the README's test command is the one ``.ci/run`` runs.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


def test_every_page_has_runnable_examples() -> None:
    assert {where.split("_")[0] for where, _ in TESTS} >= {"readme", "docs"}
    assert SCRIPTS
    assert SESSIONS


def test_every_test_example_passes_as_printed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{f"test_{where}": code for where, code in TESTS})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rfEs")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes.get("passed", 0) >= len(TESTS)
    assert not outcomes.get("skipped"), result.stdout.str()


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


def test_the_readme_test_command_is_what_ci_runs() -> None:
    command = next(
        line
        for line in README.splitlines()
        if line.startswith("python3 -m venv") and "pytest" in line
    )
    assert command in (ROOT / ".ci" / "run").read_text()
