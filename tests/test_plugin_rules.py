"""The plugin's ways of adding fault rules refuse a route nobody serves, as the fake does."""

from __future__ import annotations

import pytest

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig

pytest_plugins = ["pytester"]

REFUSED = (
    "invalid fault rule: match: no route GET /v1/sandbox/{id}; did you mean GET /v1/sandboxes/{id}"
)

TESTS = """
import pytest

@pytest.mark.createos(faults=[{"match": {"route": "GET /v1/sandbox/{id}"},
                               "action": {"type": "reset"}}])
def test_marker(createos_server):
    pass

def test_shortcut(createos_server):
    createos_server.faults.reset(route="GET /v1/sandbox/{id}")

def test_add(createos_faults):
    createos_faults.add({"match": {"route": "GET /v1/sandbox/{id}"}, "action": {"type": "hang"}})

def test_served_routes_are_fine(createos_faults):
    createos_faults.reset(route="GET /v1/sandboxes/{id}")
    createos_faults.hang(method="post")
"""


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "createos-url"])
def test_marker_and_fixture_rules_get_the_fake_s_message(
    pytester: pytest.Pytester, remote: bool
) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = ignore::pytest.PytestAssertRewriteWarning\n"
    )
    pytester.makepyfile(TESTS)
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        args = [f"--createos-url={server.url}"] if remote else []
        result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=2, errors=1)  # the marker's rules fail the setup
    for test in ("test_marker", "test_shortcut", "test_add"):
        result.stdout.fnmatch_lines([f"*{test}*", f"*{REFUSED}*"])
