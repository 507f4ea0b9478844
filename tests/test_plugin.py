"""The plugin, black-box with pytester: fixtures, isolation, marker, options, reports."""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
from collections.abc import Callable, Iterator

import pytest

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from tests.plugin_project import make_project

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_project(pytester)


def test_fixtures_give_each_test_its_own_tenant(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        from helpers import call, create

        def test_first(createos_server):
            sandbox = create(createos_server)
            call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
            createos_server.faults.error(500, route="/v1/whoami")
            createos_server.journal.assert_requested("DELETE /v1/sandboxes/{id}", times=1)

        def test_second_sees_nothing_of_the_first(createos_server):
            status, body = call(createos_server, "GET", "/v1/sandboxes")
            assert body["data"]["pagination"]["total"] == 0
            assert call(createos_server, "GET", "/v1/whoami")[0] == 200
            assert createos_server.faults.rules == []
            assert createos_server.journal.requests(route="DELETE /v1/sandboxes/{id}") == []
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_leaked_sandboxes_fail_at_teardown_naming_them(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest
        from helpers import create

        def test_leaks(createos_server):
            create(createos_server)

        @pytest.mark.createos(leak_check=False)
        def test_opted_out(createos_server):
            create(createos_server)
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.re_match_lines([r".*test_leaks left 1 sandbox\(es\) alive: sb_\w+ \(running\).*"])
    project.runpytest("--createos-no-leak-check").assert_outcomes(passed=2)
    warned = project.runpytest("--createos-leak-check=warn", "-W", "default")
    warned.assert_outcomes(passed=2)
    warned.stdout.fnmatch_lines(["*CreateosLeakWarning: *test_leaks left 1 sandbox(es) alive*"])


def test_a_leak_warning_points_at_the_test(project: pytest.Pytester) -> None:
    # It pointed at the plugin's own line, where nothing can be fixed.
    project.makepyfile(
        test_leaky="""
        from helpers import create


        def test_leaks(createos_server):
            create(createos_server)
        """
    )
    warned = project.runpytest("--createos-leak-check=warn", "-W", "default")
    warned.assert_outcomes(passed=1)
    warned.stdout.fnmatch_lines(["*test_leaky.py:4: CreateosLeakWarning: *test_leaks left 1*"])
    assert "plugin.py" not in warned.stdout.str()


def test_a_leak_names_the_gates_still_holding_its_requests(project: pytest.Pytester) -> None:
    # A sandbox left running because its DELETE waits at a gate the test never opened was
    # reported as "(running)" alone.
    project.makepyfile(
        """
        import threading
        from helpers import call, create

        def test_held(createos_server):
            sandbox = create(createos_server)
            gate = createos_server.faults.gate("release", route="DELETE /v1/sandboxes/{id}")
            createos_server.faults.gate("unused", route="POST /v1/sandboxes/{id}/resume")
            threading.Thread(target=call, daemon=True,
                             args=(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")).start()
            gate.wait_held(1)
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.re_match_lines(
        [
            r".*test_held left 1 sandbox\(es\) alive: (sb_\w+) \(running\)\. Gate 'release' "
            r"still held 1 request\(s\), never let through: DELETE /v1/sandboxes/\1 \(release "
            r"them, or gate.open\(\), before the test ends\)\. Destroy them in the test, .*"
        ]
    )
    assert "'unused'" not in result.stdout.str()  # a gate that held nothing is no lead


def test_a_failed_test_is_not_reported_again_for_what_it_left(project: pytest.Pytester) -> None:
    # It failed, then failed its teardown for the sandbox its cleanup never reached: one
    # problem, reported twice.
    project.makepyfile(
        """
        from helpers import create

        def test_fails_before_its_cleanup(createos_server):
            create(createos_server)
            assert False, "the test's own failure"

        def test_leaks(createos_server):
            create(createos_server)
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.re_match_lines([r".*::test_leaks left 1 sandbox\(es\) alive.*"])


def test_marker_configures_faults_latency_and_seed(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest
        from helpers import call

        @pytest.mark.createos(seed=7, faults=[{"match": {"route": "GET /v1/whoami"},
                                               "action": {"type": "error", "status": 503}}])
        def test_faulted(createos_server):
            assert createos_server.seed == 7
            assert call(createos_server, "GET", "/v1/whoami")[0] == 503

        @pytest.mark.createos(transition_ms=0)
        def test_unfaulted(createos_server):
            assert call(createos_server, "GET", "/v1/whoami")[0] == 200
        """
    )
    project.runpytest("--strict-markers").assert_outcomes(passed=2)


def test_bad_marker_options_are_usage_errors(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.createos(latency=5)
        def test_typo(createos_server):
            pass
        """
    )
    result = project.runpytest()
    result.stdout.fnmatch_lines(["*has no option 'latency'*"])
    assert result.ret != 0


def test_failures_carry_a_createos_section(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        from helpers import call, create

        def test_fails(createos_server):
            sandbox = create(createos_server)
            createos_server.faults.gate("slow", route="POST /v1/sandboxes/{id}/fork")
            call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
            assert False, "boom"
        """
    )
    result = project.runpytest("--createos-seed=99")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- createos -*",
            "seed: *",
            "*gate*slow*held 0*",
            "*DELETE /v1/sandboxes/sb_*-> 200 (sandbox running)*",
        ]
    )


def test_header_prints_the_seed_and_a_seed_replays_ids(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        from helpers import call, create

        def test_ids(createos_server):
            sandbox = create(createos_server)
            print("SANDBOX-ID", sandbox)
            call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
        """
    )
    first = project.runpytest("-s", "--createos-seed=1234")
    first.stdout.fnmatch_lines(["createos: seed=1234 *"])
    again = project.runpytest("-s", "--createos-seed=1234")
    other = project.runpytest("-s", "--createos-seed=4321")

    def sandbox_id(result: pytest.RunResult) -> str:
        return re.findall(r"SANDBOX-ID (\S+)", result.stdout.str())[0]

    assert sandbox_id(first) == sandbox_id(again) != sandbox_id(other)


def test_tests_with_the_same_seed_share_ids_but_not_tenants(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest
        from helpers import call, create

        SEEN = {}

        @pytest.mark.createos(seed=7)
        @pytest.mark.parametrize("run", ["first", "second"])
        def test_seeded(createos_server, run):
            # Nothing of the other run shows in this test's journal ...
            assert createos_server.journal.requests() == []
            sandbox = create(createos_server)
            SEEN[run] = (createos_server.tenant_id, sandbox)
            call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
            assert len(createos_server.journal.requests(route="POST /v1/sandboxes")) == 1

        def test_compare():
            (tenant_1, sandbox_1), (tenant_2, sandbox_2) = SEEN["first"], SEEN["second"]
            assert sandbox_1 == sandbox_2  # ... its ids replay with the seed ...
            assert tenant_1 != tenant_2  # ... and its tenant is its own
        """
    )
    project.runpytest().assert_outcomes(passed=3)


def test_a_shared_fake_keeps_the_rules_other_tests_added(project: pytest.Pytester) -> None:
    # Another worker's (or person's) rule, added while this test runs, outlives its teardown.
    project.makepyfile(
        """
        def test_adds_one(createos_server):
            createos_server.faults.error(418, route="GET /v1/whoami")
            import json, urllib.request
            rule = {"id": "someone-elses", "match": {"route": "GET /v1/shapes"},
                    "action": {"type": "error", "status": 503}}
            request = urllib.request.Request(createos_server.url + "/_fake/faults",
                data=json.dumps(rule).encode(), method="POST",
                headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=5).read()
        """
    )
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        project.runpytest(f"--createos-url={server.url}").assert_outcomes(passed=1)
        left = server.call(lambda: [rule.id for rule in server.fake.faults.rules])
    assert left == ["someone-elses"]


MANUAL_CLOCK_TEST = """
import pytest
from helpers import call, create

@pytest.mark.createos(manual_clock=True, transition_ms=1000)
def test_clock(createos_server):
    sandbox = create(createos_server)
    paused = call(createos_server, "POST", f"/v1/sandboxes/{sandbox}/pause")[1]
    assert paused["data"]["status"] == "pausing"
    createos_server.clock.advance(1)
    assert createos_server.state[0]["status"] == "paused"
    call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
    createos_server.clock.advance(1)
"""


def test_manual_clock_and_gates_from_a_sync_test(project: pytest.Pytester) -> None:
    gate_test = """
import threading

def test_gate(createos_server):
    sandbox = create(createos_server)
    gate = createos_server.faults.gate("delete", route="DELETE /v1/sandboxes/{id}")
    results = []
    worker = threading.Thread(target=lambda: results.append(
        call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")))
    worker.start()
    gate.wait_held(1)
    assert gate.held == 1 and results == []
    assert gate.release() == 1
    worker.join(5)
    assert results[0][0] == 200
"""
    project.makepyfile(MANUAL_CLOCK_TEST + gate_test)
    project.runpytest().assert_outcomes(passed=2)


def test_async_tests_and_the_same_loop_fixture(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import asyncio
        import aiohttp

        async def test_background_server_from_async(createos_server):
            gate = createos_server.faults.gate("create", route="POST /v1/sandboxes")
            async with aiohttp.ClientSession(headers={"X-Api-Key": createos_server.api_key}) as s:
                task = asyncio.ensure_future(s.post(createos_server.url + "/v1/sandboxes",
                                                    json={"shape": "s-1vcpu-1gb"}))
                await gate.async_wait_held(1)
                gate.release()
                sandbox = (await (await task).json())["data"]["id"]
                async with s.delete(f"{createos_server.url}/v1/sandboxes/{sandbox}") as gone:
                    assert gone.status == 200

        async def test_same_loop(createos_aiohttp_server):
            server = createos_aiohttp_server
            gate = server.faults.gate("create", route="POST /v1/sandboxes")
            async with aiohttp.ClientSession(headers={"X-Api-Key": server.api_key}) as s:
                task = asyncio.ensure_future(s.post(server.url + "/v1/sandboxes",
                                                    json={"shape": "s-1vcpu-1gb"}))
                await gate.async_wait_held(1)
                gate.release()
                sandbox = (await (await task).json())["data"]["id"]
                async with s.delete(f"{server.url}/v1/sandboxes/{sandbox}") as gone:
                    assert gone.status == 200
        """
    )
    project.runpytest().assert_outcomes(passed=2)


def test_a_finished_tests_fake_is_not_kept_by_its_item(project: pytest.Pytester) -> None:
    # pytest keeps every item until the session ends: a handle left in one kept that test's
    # fake alive (and in every garbage collection) until then. A failure's report still reads
    # the fake (test_failures_carry_a_createos_section).
    project.makepyfile(
        """
        import gc, weakref

        REFS = []

        async def test_same_loop(createos_aiohttp_server):
            REFS.append(weakref.ref(createos_aiohttp_server.channel.same_loop_fake))

        def test_shared(createos_server):
            REFS.append(weakref.ref(createos_server))

        def test_both_are_gone(request):
            gc.collect()
            assert [ref() for ref in REFS] == [None, None]
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=3)


def test_url_option_uses_a_running_fake(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        from helpers import call, create

        def test_remote(createos_server):
            createos_server.faults.error(418, route="/v1/whoami", times=1)
            assert call(createos_server, "GET", "/v1/whoami")[0] == 418
            sandbox = create(createos_server)
            call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
            createos_server.journal.assert_requested("GET /v1/whoami", status=418)
        """
    )
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        project.runpytest(f"--createos-url={server.url}").assert_outcomes(passed=1)
        assert server.call(lambda: server.fake.faults.rules) == []  # cleaned up


def test_url_option_with_a_control_token(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        from helpers import call

        def test_remote(createos_server):
            createos_server.faults.error(418, route="/v1/whoami", times=1)
            assert call(createos_server, "GET", "/v1/whoami")[0] == 418
        """
    )
    config = ServerConfig(transition_ms=0, control_token="t0ken")
    with BackgroundServer(FakeCreateOS(config)) as server:
        url = f"--createos-url={server.url}"
        refused = project.runpytest(url)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR  # once for the session, not per test
        refused.stderr.fnmatch_lines(
            [
                "ERROR: --createos-url *HTTP 403*control token*give its --control-token as "
                "--createos-control-token"
            ]
        )
        wrong = project.runpytest(url, "--createos-control-token=guess")
        assert wrong.ret == pytest.ExitCode.USAGE_ERROR
        wrong.stderr.fnmatch_lines(
            ["ERROR: *--createos-control-token given is not the --control-token the fake*"]
        )
        assert "guess" not in wrong.stderr.str()  # a token is never echoed
        project.runpytest(url, "--createos-control-token=t0ken").assert_outcomes(passed=1)
        assert server.call(lambda: server.fake.faults.rules) == []


def test_bad_options_are_usage_errors(project: pytest.Pytester) -> None:
    project.makepyfile("def test_nothing(): pass")
    result = project.runpytest("--createos-url=ftp://nowhere")
    result.stderr.fnmatch_lines(["*--createos-url must be an http(s) URL*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_xdist_workers_share_the_seed(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        def test_a(createos_server):
            assert createos_server.seed >= 0

        def test_b(createos_server):
            assert createos_server.seed >= 0
        """
    )
    result = project.runpytest_subprocess("-n", "2", "--createos-seed=5", timeout=300)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["createos: seed=5 *"])


def test_releasing_an_unknown_gate_is_refused_not_created() -> None:
    from pytest_createos.channel import ControlError, LocalChannel

    fake = FakeCreateOS(ServerConfig(transition_ms=0))
    channel = LocalChannel(fake, "http://127.0.0.1:1")
    with pytest.raises(ControlError, match="gate 'nope' not found"):
        channel.release_gate("nope", None)
    assert fake.faults.gates == {}


def test_a_gate_wait_times_out_alike_in_process_and_over_http() -> None:
    from fake_server.gates import GateTimeout
    from pytest_createos.channel import HttpChannel, LocalChannel

    fake = FakeCreateOS(ServerConfig(transition_ms=0))
    with BackgroundServer(fake) as server:
        rule = {"match": {"route": "POST /v1/sandboxes"}, "action": {"type": "gate", "name": "g"}}
        remote = HttpChannel(server.url)
        remote.add_rules([rule])
        local = LocalChannel(fake, server.url, server=server)
        expected = "gate 'g': 0 request(s) held after 0.05s, expected 1"
        for channel in (local, remote):
            with pytest.raises(GateTimeout) as timed_out:
                channel.wait_gate("g", 1, timeout=0.05)
            assert str(timed_out.value) == expected


# -- the marker's durations, per tenant, in process and on a shared fake --------------------

TIMED_TESTS = """
import pytest
from helpers import call, create

@pytest.mark.createos(transition_ms=0)
def test_instant_transitions(createos_server):
    sandbox = create(createos_server)
    paused = call(createos_server, "POST", f"/v1/sandboxes/{sandbox}/pause")[1]
    assert paused["data"]["status"] == "paused"
    call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")

@pytest.mark.createos(create_ms=60_000, leak_check=False)
def test_slow_create(createos_server):
    status, body = call(createos_server, "POST", "/v1/sandboxes", {"shape": "s-1vcpu-1gb"})
    assert body["data"]["status"] == "creating"

def test_the_fakes_own_durations(createos_server):
    sandbox = create(createos_server)
    paused = call(createos_server, "POST", f"/v1/sandboxes/{sandbox}/pause")[1]
    assert paused["data"]["status"] == "pausing"
    call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")
"""


def test_marker_durations_apply_in_process(project: pytest.Pytester) -> None:
    project.makepyfile(TIMED_TESTS)
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=3)


def test_marker_durations_apply_per_tenant_on_a_shared_fake(project: pytest.Pytester) -> None:
    # Once silently ignored there: 'pausing' == 'paused'. The shared fake's own transitions are
    # long, so only the tenant's own durations can make the first test pass.
    project.makepyfile(TIMED_TESTS)
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=60_000))) as server:
        url = f"--createos-url={server.url}"
        project.runpytest(url, "-p", "no:randomly").assert_outcomes(passed=3)
        tenants = server.call(lambda: [tenant.durations for tenant in server.fake.tenants])
    assert tenants == []  # each test's tenant, durations and all, went with it


def test_manual_clock_on_a_real_clock_fake_is_one_setup_error(project: pytest.Pytester) -> None:
    project.makepyfile(MANUAL_CLOCK_TEST)
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        result = project.runpytest(f"--createos-url={server.url}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.createos(manual_clock=True) needs the in-process fake, or a server "
            "started with `fake-createos serve --manual-clock`: the fake at http://127.0.0.1:* "
            "runs on the real clock*"
        ]
    )
    assert "plugin.py" not in result.stdout.str()  # the message alone, no traceback


def test_manual_clock_on_a_manual_clock_fake_uses_its_shared_clock(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(MANUAL_CLOCK_TEST)
    with BackgroundServer(FakeCreateOS(ServerConfig(manual_clock=True))) as server:
        project.runpytest(f"--createos-url={server.url}").assert_outcomes(passed=1)
        assert server.call(lambda: server.fake.clock.now()) == 2.0  # the test moved it


# -- marker input errors: one short error naming the argument ---------------------------------

BAD_MARKERS = {
    "dict_faults": (
        'faults={"match": {}, "action": {"type": "reset"}}',
        "*createos(faults={*}): must be a list of rules (got dict), e.g. *",
    ),
    "typo_in_faults": (
        'faults=[{"match": {"route": "GET /v1/whoami"}, "action": {"type": "eror"}}]',
        "*createos(faults=*): rule 0: action.type 'eror' is unknown; use one of latency, *",
    ),
    # Checked by the marker as an action is, not only by the fake (whose message named no rule).
    "route_typo_in_faults": (
        'faults=[{"action": {"type": "reset"}}, '
        '{"match": {"route": "GET /v1/whoamii"}, "action": {"type": "reset"}}]',
        "*createos(faults=*): rule 1: match: no route GET /v1/whoamii; did you mean GET /v1/w*",
    ),
    "unknown_rule_field": (
        'faults=[{"action": {"type": "reset"}, "time": 1}]',
        "*createos(faults=*): rule 0: a rule has no field 'time' (did you mean 'times'?); its "
        "fields: action, after, id, match, probability, times",
    ),
    "negative_transition": ("transition_ms=-5", "*createos(transition_ms=-5): must not be neg*"),
    "nan_create": ('create_ms=float("nan")', "*createos(create_ms=nan): must be finite*"),
    "string_latency": (
        'latency_ms="5"',
        "*createos(latency_ms='5'): must be a number of milliseconds*",
    ),
    "negative_seed": ("seed=-1", "*createos(seed=-1): must not be negative*"),
    "manual_clock_text": ('manual_clock="yes"', "*(manual_clock='yes'): must be True or False*"),
    "leak_mode": ('leak_check="never"', "*(leak_check='never'): must be True, False or one of*"),
    "unknown_keyword": ("latency=5", "*@pytest.mark.createos has no option 'latency' (options:*"),
    "positional": ("5", "*@pytest.mark.createos takes keywords only, not 5*"),
    # Each rule passes alone; only the fault engine, adding them together, refuses the pair.
    "duplicate_rule_ids": (
        'faults=[{"id": "r", "action": {"type": "reset"}}, '
        '{"id": "r", "action": {"type": "hang"}}]',
        "*createos(faults=...): invalid fault rule: a rule with id 'r' exists already*",
    ),
}


def test_every_marker_problem_is_one_short_error_naming_the_argument(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        "import pytest\n"
        + "".join(
            f"\n@pytest.mark.createos({marker})\ndef test_{name}(createos_server):\n    pass\n"
            for name, (marker, _) in BAD_MARKERS.items()
        )
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=len(BAD_MARKERS))
    for name, (_, line) in BAD_MARKERS.items():
        result.stdout.fnmatch_lines([f"*ERROR at setup of test_{name}*", f"test_*::{line}"])
    output = result.stdout.str()
    assert "plugin.py" not in output  # the messages alone, no traceback
    assert "_marker.py" not in output
    assert "During handling" not in output


def test_marker_faults_add_up_and_other_keywords_are_the_closest(
    project: pytest.Pytester,
) -> None:
    # A module's gate and a test's error rule once left only the error rule: `faults` merged
    # per keyword like the others, the closest marker's list replacing the farther ones.
    project.makepyfile(
        """
        import pytest

        GATE = {"match": {"route": "DELETE /v1/sandboxes/{id}"},
                "action": {"type": "gate", "name": "release"}}

        def error(status):
            return {"match": {"route": "GET /v1/whoami"},
                    "action": {"type": "error", "status": status}}

        pytestmark = pytest.mark.createos(faults=[GATE], seed=1, transition_ms=0)

        class TestMerged:
            pytestmark = pytest.mark.createos(faults=[error(503)], seed=2)

            @pytest.mark.createos(faults=[error(418)], seed=None)
            @pytest.mark.createos(faults=[error(429)])
            def test_every_rule(self, createos_server):
                statuses = [r["action"].get("status") for r in createos_server.faults.rules]
                assert statuses == [None, 503, 418, 429]  # farthest first, then top to bottom
                assert list(createos_server.faults.gates) == ["release"]
                assert createos_server.seed == 2  # the class's: None counts as not given

            @pytest.mark.createos(seed=3)
            def test_closest_seed(self, createos_server):
                assert createos_server.seed == 3
                assert len(createos_server.faults.rules) == 2
        """
    )
    project.runpytest().assert_outcomes(passed=2)


def test_good_marker_values_are_accepted(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.createos(seed=0, latency_ms=0.5, faults=(), transition_ms=0, create_ms=0,
                              manual_clock=False, leak_check="warn")
        def test_all(createos_server):
            assert createos_server.seed == 0

        @pytest.mark.createos(seed=None, transition_ms=None, leak_check=None)
        def test_nones_are_defaults(createos_server):
            pass
        """
    )
    project.runpytest().assert_outcomes(passed=2)


def test_a_marker_on_a_test_without_the_fixtures_warns(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.createos(transition_ms=0)
        def test_forgot_the_fixture():
            pass

        @pytest.mark.createos(transition_ms=0)
        def test_through_a_shortcut(createos_journal):
            pass
        """
    )
    marker_warning = "pytest_createos.plugin.CreateosMarkerWarning"
    warned = project.runpytest("-p", "no:randomly", "-W", f"default::{marker_warning}")
    warned.assert_outcomes(passed=2, warnings=1)
    warned.stdout.fnmatch_lines(
        [
            "*_warns.py:3: CreateosMarkerWarning: *test_forgot_the_fixture is marked "
            "@pytest.mark.createos but uses none of createos_server, createos_aiohttp_server*"
        ]
    )
    strict = project.runpytest("-W", f"error::{marker_warning}")
    strict.assert_outcomes(passed=1, errors=1)


# -- blocking helpers on a running loop -------------------------------------------------------


def test_blocking_gate_wait_in_an_async_test_fails_at_once(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest
        from pytest_createos.server import BlockingCallError

        async def test_blocking_wait(createos_server):
            gate = createos_server.faults.gate("create", route="POST /v1/sandboxes")
            # Once: a 2 s stall of the loop, then "GateTimeout ... 0 request(s) held".
            with pytest.raises(BlockingCallError, match=r"await gate.async_wait_held\\(1, "):
                gate.wait_held(1, timeout=2)
        """
    )
    project.runpytest().assert_outcomes(passed=1)


def test_blocking_gate_wait_on_the_fakes_own_loop_fails_at_once() -> None:
    from pytest_createos.channel import LocalChannel
    from pytest_createos.server import BlockingCallError, GateHandle

    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        server.call(server.fake.faults.gate, "g", route="/v1/whoami")
        gate = GateHandle(LocalChannel(server.fake, server.url, server), "g")

        async def on_the_fakes_loop() -> None:  # e.g. from a registered command's handler
            gate.wait_held(1, timeout=30)

        with pytest.raises(BlockingCallError, match="running an event loop"):
            server.run(on_the_fakes_loop(), timeout=5)


# -- --createos-url checked once per session ---------------------------------------------------


def test_an_unreachable_url_is_one_session_error(project: pytest.Pytester) -> None:
    import socket

    project.makepyfile("def test_a(createos_server): pass\ndef test_b(createos_server): pass\n")
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
        result = project.runpytest(f"--createos-url={url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --createos-url: cannot reach the fake at {url}: *refused*. Start the fake "
            "with `fake-createos serve` (it prints its URL), or drop --createos-url *"
        ]
    )
    assert "test_a" not in result.stdout.str()  # no test ran


def test_a_url_with_a_path_is_told_to_give_the_root(project: pytest.Pytester) -> None:
    project.makepyfile("def test_a(createos_server): pass\n")
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        result = project.runpytest(f"--createos-url={server.url}/v1/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --createos-url must be the fake's root URL, e.g. {server.url}, "
            f"not {server.url}/v1 *"
        ]
    )


@contextlib.contextmanager
def _stub_server(answer: Callable[[str, str], tuple[int, bytes]]) -> Iterator[str]:
    """A plain HTTP server answering ``answer(method, path) -> (status, body)``; yields its
    URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            status, body = answer(self.command, self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        thread = threading.Thread(target=server.serve_forever)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join()


def test_a_server_that_is_not_the_fake_is_named_so(project: pytest.Pytester) -> None:
    project.makepyfile("def test_a(createos_server): pass\n")
    other = b'{"status": "success", "data": {"server": "something-else"}}'
    with _stub_server(lambda method, path: (200, other)) as url:
        result = project.runpytest(f"--createos-url={url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --createos-url {url} answers, but not as fake-createos does*"]
    )


def test_a_fake_that_fails_after_the_check_is_one_short_error_per_test(
    project: pytest.Pytester,
) -> None:
    project.makepyfile("def test_a(createos_server): pass\n")
    info = b'{"status": "success", "data": {"server": "fake-createos"}}'
    down = b'{"status": "error", "message": "down for maintenance", "code": 503}'

    def answer(method: str, path: str) -> tuple[int, bytes]:
        return (200, info) if path == "/_fake/info" else (503, down)

    with _stub_server(answer) as url:
        result = project.runpytest(f"--createos-url={url}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["createos: GET /_fake/faults: HTTP 503: down for maintenance"])
    assert "channel.py" not in result.stdout.str()  # the message alone, no traceback
