"""What the wheel ships: every package and subpackage of the project (a subpackage once went
missing from a hand-kept list, and only an installed, non-editable copy showed it)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

# Python 3.11's; on 3.10 the other interpreters of the matrix check it.
tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]


def _packages_on_disk() -> set[str]:
    found = set()
    for top in ("fake_server", "pytest_createos"):
        for init in (ROOT / top).rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(ROOT).parts))
    return found


def test_every_package_on_disk_is_built_into_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["packages"]["find"]["include"]
    packages = _packages_on_disk()
    assert {"fake_server.routes", "pytest_createos._explore"} <= packages
    missing = sorted(p for p in packages if not any(fnmatch.fnmatch(p, i) for i in patterns))
    assert missing == []
