"""pytest's assertion rewriting stays off the fake's modules (pytest_createos._rewrite): where
no bytecode is written, rewriting them made every run compile the whole fake again."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

#: What pytest does for an installed (not editable) pytest-createos: every module of a
#: distribution that registers a plugin is marked for rewriting before plugins load. An editable
#: install lists no modules, so the test marks them the same way itself.
AS_INSTALLED = """
import pytest
pytest.register_assert_rewrite("fake_server", "pytest_createos")
"""

LOADERS = """
from _pytest.assertion.rewrite import AssertionRewritingHook

def test_loaders(createos_server):
    import fake_server.fake, pytest_createos.server
    assert not isinstance(fake_server.fake.__loader__, AssertionRewritingHook)
    # The plugin's own modules are left as pytest makes them.
    assert isinstance(pytest_createos.server.__loader__, AssertionRewritingHook) == REWRITES
"""


@pytest.mark.parametrize(
    ("option", "rewrites"), [("--assert=rewrite", True), ("--assert=plain", False)]
)
def test_the_fake_is_imported_unrewritten(
    pytester: pytest.Pytester, option: str, rewrites: bool
) -> None:
    pytester.makepyfile(as_installed=AS_INSTALLED)
    pytester.makepyfile(f"REWRITES = {rewrites}\n" + LOADERS)
    pytester.syspathinsert()
    # A process of its own: this one imported the fake long ago.
    result = pytester.runpytest_subprocess(
        option, "-p", "as_installed", "-p", "no:cacheprovider", timeout=120
    )
    result.assert_outcomes(passed=1)
