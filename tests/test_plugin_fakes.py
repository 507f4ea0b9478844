"""Which fake a test gets: the fixtures built on a fake use the test's own (never a second one
started beside it), ``createos_aiohttp_server`` refuses a sync test whose requests would hang,
and a gate a test's rules name is that test's own, wherever the rule came from."""

from __future__ import annotations

import pytest

from tests.plugin_project import make_project

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_project(pytester)


def test_the_fixtures_built_on_a_fake_use_the_same_loop_fake_of_a_test_that_uses_it(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        """
        import aiohttp
        import pytest

        async def test_one_fake(createos_aiohttp_server, createos_faults, createos_journal,
                                createos_config, createos_lease_params, createos_kit,
                                createos_server_pool):
            server = createos_aiohttp_server
            assert (createos_config["apiUrl"], createos_config["apiKey"]) == (
                server.url, server.api_key)
            assert createos_lease_params["config"] == createos_config
            assert createos_kit.server is server
            createos_faults.error(503, route="POST /v1/sandboxes", times=1)
            async with aiohttp.ClientSession(headers={"X-Api-Key": server.api_key}) as session:
                async with session.post(server.url + "/v1/sandboxes",
                                        json={"shape": "s-1vcpu-1gb"}) as answer:
                    assert answer.status == 503
            createos_journal.assert_requested("POST /v1/sandboxes", times=1)
            # No background fake was started for the shortcuts.
            assert createos_server_pool._servers == {}

        def test_the_background_fake_otherwise(createos_faults, createos_journal, createos_config,
                                               createos_server_pool):
            import urllib.error, urllib.request
            server, = createos_server_pool._servers.values()
            assert createos_config["apiUrl"] == server.url
            createos_faults.error(418, route="GET /v1/whoami", times=1)
            request = urllib.request.Request(server.url + "/v1/whoami",
                                             headers={"X-Api-Key": createos_config["apiKey"]})
            with pytest.raises(urllib.error.HTTPError, match="418"):
                urllib.request.urlopen(request, timeout=5)
            createos_journal.assert_requested("GET /v1/whoami", times=1)
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_the_fixtures_built_on_a_fake_refuse_a_test_with_two_fakes(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        """
        async def test_both(createos_server, createos_aiohttp_server, createos_journal):
            pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_both uses both createos_server and createos_aiohttp_server (two fakes), so "
            "createos_journal cannot tell which one it is for*"
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_sync_test_cannot_use_the_same_loop_fake(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        def test_sync(createos_aiohttp_server):
            raise AssertionError("never runs: its requests would hang")

        async def test_async(createos_aiohttp_server):
            assert createos_aiohttp_server.url
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_sync is not async, and createos_aiohttp_server serves the fake on the "
            "test's own event loop*use createos_server*"
        ]
    )


def test_a_markers_gate_is_the_tests_own_and_reachable_by_name(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import threading
        import pytest
        from helpers import call, create

        RELEASE = {"match": {"route": "DELETE /v1/sandboxes/{id}"},
                   "action": {"type": "gate", "name": "release"}}

        @pytest.mark.createos(faults=[RELEASE])
        def test_marker_gate(createos_server):
            sandbox = create(createos_server)
            gate = createos_server.faults.gates["release"]
            assert gate.full_name == createos_server.tenant_id + ".release"
            assert gate.name == "release"
            results = []
            worker = threading.Thread(target=lambda: results.append(
                call(createos_server, "DELETE", f"/v1/sandboxes/{sandbox}")))
            worker.start()
            gate.wait_held(1)
            assert gate.release() == 1
            worker.join(5)
            assert results[0][0] == 200

        def test_every_way_of_adding_one(createos_server):
            createos_server.faults.add({**RELEASE, "action": {"type": "gate", "name": "added"}})
            shortcut = createos_server.faults.gate("shortcut", route="POST /v1/sandboxes")
            gates = createos_server.faults.gates
            assert sorted(gates) == ["added", "shortcut"]
            assert gates["shortcut"].name == shortcut.name
            assert gates["added"].held == 0
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_two_tests_gates_of_one_name_are_apart_on_a_shared_fake(
    project: pytest.Pytester,
) -> None:
    # Under xdist with --createos-url, tests run side by side on one fake: a gate named in two
    # tests' markers was one gate, and each test's requests were held in it.
    from fake_server import BackgroundServer, FakeCreateOS, ServerConfig

    project.makepyfile(
        """
        import pytest

        GATE = {"match": {"route": "POST /v1/sandboxes"},
                "action": {"type": "gate", "name": "create"}}

        @pytest.mark.createos(faults=[GATE])
        @pytest.mark.parametrize("n", [1, 2])
        def test_gate(createos_server, n):
            NAMES.append(createos_server.faults.gates["create"].full_name)
            assert [rule["action"]["name"] for rule in createos_server.faults.rules] == [
                createos_server.tenant_id + ".create"]

        NAMES = []

        def test_names_differ():
            assert len(set(NAMES)) == 2
        """
    )
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        result = project.runpytest("-p", "no:randomly", f"--createos-url={server.url}")
    result.assert_outcomes(passed=3)


def test_every_background_fake_is_started_shielded(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Python 3.10 context shield (pytest_createos._context_shield) was applied before the
    # session's shared fake started, not before a manual-clock test's own fake.
    from pytest_createos import _context_shield

    calls: list[str] = []
    monkeypatch.setattr(_context_shield, "shield", lambda: calls.append("shield"))
    project.makepyfile(
        """
        import pytest

        @pytest.mark.createos(manual_clock=True)
        def test_own_fake(createos_server):
            pass

        def test_shared_fake(createos_server):
            pass
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    assert calls == ["shield", "shield"]


def test_a_test_that_resets_its_fake_still_tears_down_cleanly(project: pytest.Pytester) -> None:
    # A reset drops the test's tenant; the teardown then dropped it again, which a fake that
    # no longer makes a tenant of an unknown key (to drop it) answers 404.
    project.makepyfile(
        """
        import aiohttp
        from helpers import call

        def test_reset_on_the_shared_fake(createos_server):
            assert call(createos_server, "POST", "/_fake/reset", {})[0] == 200

        async def test_reset_on_the_tests_own_fake(createos_aiohttp_server):
            async with aiohttp.ClientSession() as session:
                url = createos_aiohttp_server.url + "/_fake/reset"
                async with session.post(url, json={}) as answer:
                    assert answer.status == 200
        """
    )
    project.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=2)


def test_a_failed_tests_arguments_never_show_its_api_key(project: pytest.Pytester) -> None:
    # pytest prints a failed test's arguments; the provider configuration holds the key.
    project.makepyfile(
        """
        def test_fails(createos_server, createos_lease_params, createos_config):
            assert createos_config["apiKey"] == createos_server.api_key
            assert False
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "createos_lease_params = {" in output  # the arguments were shown
    assert "'apiKey': '<hidden>'" in output
    assert "skp_" not in output
