"""What a test names through the plugin's handles (a rule's route, a journal assertion's route
and filters) is checked as the fake checks it, in process and with ``--createos-url``."""

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


JOURNAL_TESTS = """
import json, urllib.request
import pytest

def delete_one(server):
    def call(method, path):
        request = urllib.request.Request(server.url + path, method=method,
            data=b'{"shape": "s-1vcpu-1gb"}', headers={"X-Api-Key": server.api_key,
            "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())["data"]
    sandbox = call("POST", "/v1/sandboxes")["id"]
    call("DELETE", f"/v1/sandboxes/{sandbox}")
    return sandbox

def test_journal(createos_server):
    sandbox = delete_one(createos_server)
    journal = createos_server.journal
    journal.assert_requested(f"DELETE /v1/sandboxes/{sandbox}", times=1)
    with pytest.raises(TypeError, match="has no filter sandbox_id= .did you mean sandbox=."):
        journal.assert_requested("DELETE /v1/sandboxes/{id}", sandbox_id=sandbox)
    with pytest.raises(TypeError, match="takes no times="):
        journal.assert_not_requested("DELETE /v1/sandboxes/{id}", times=0)
    with pytest.raises(ValueError, match="did you mean POST /v1/sandboxes/.id./pause"):
        journal.assert_not_requested("POST /v1/sandbox/{id}/pause")
"""


def run(pytester: pytest.Pytester, tests: str, *, remote: bool) -> pytest.RunResult:
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = ignore::pytest.PytestAssertRewriteWarning\n"
    )
    pytester.makepyfile(tests)
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        return pytester.runpytest(*([f"--createos-url={server.url}"] if remote else []))


REMOTE = pytest.mark.parametrize("remote", [False, True], ids=["in-process", "createos-url"])


@REMOTE
def test_marker_and_fixture_rules_get_the_fake_s_message(
    pytester: pytest.Pytester, remote: bool
) -> None:
    result = run(pytester, TESTS, remote=remote)
    result.assert_outcomes(passed=1, failed=2, errors=1)  # the marker's rules fail the setup
    for test in ("test_marker", "test_shortcut", "test_add"):
        result.stdout.fnmatch_lines([f"*{test}*", f"*{REFUSED}*"])


@REMOTE
def test_journal_assertions_take_paths_and_explain_bad_names(
    pytester: pytest.Pytester, remote: bool
) -> None:
    run(pytester, JOURNAL_TESTS, remote=remote).assert_outcomes(passed=1)
