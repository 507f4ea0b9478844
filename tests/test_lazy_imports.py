"""An installed plugin costs nothing in a run that does not use it: loading it imports neither
the fake nor the provider nor the kit, and the package roots import a public name's module only
when the name is used, while every public name stays where it was."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("bashkit", "fake_server.fake", "fake_server.app", "fake_server.runtime")
OURS = (
    "pytest_createos.provider",
    "pytest_createos.kit",
    "pytest_createos.channel",
    "pytest_createos.bridge",
)


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_loading_the_plugin_imports_nothing_heavy() -> None:
    modules = imported_after("import pytest_createos.plugin")
    assert not modules & {*HEAVY, *OURS}


def test_a_public_name_imports_its_module_when_used() -> None:
    modules = imported_after("import fake_server\nfake_server.FakeCreateOS")
    assert "fake_server.fake" in modules


@pytest.mark.parametrize("package", ["fake_server", "pytest_createos"])
def test_the_lazy_root_declares_each_name_once(package: str) -> None:
    # The names are listed for type checkers (the TYPE_CHECKING imports), for star imports
    # (__all__) and for the lazy loader: the three lists must agree.
    module = importlib.import_module(package)
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    declared = {
        alias.name: node.module
        for node in ast.walk(tree)
        # pytest_createos also re-exports errors of the fake a test meets (GateTimeout...).
        if isinstance(node, ast.ImportFrom) and node.module
        if node.module.startswith((package, "fake_server.")) and node.module != "fake_server._lazy"
        for alias in node.names
    }
    assert sorted(declared) == sorted(module.__all__)
    for name, where in declared.items():
        value = getattr(module, name)
        assert getattr(importlib.import_module(where), name) is value
    assert set(module.__all__) <= set(dir(module))


def test_an_unknown_name_is_an_attribute_error() -> None:
    import fake_server

    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        fake_server.Nope  # noqa: B018
