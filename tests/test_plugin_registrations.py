"""Commands and network responders a test registers through its fixture handle: they work in
the test's sandboxes, are gone when it ends (what they replaced comes back), and a fake in
another process (``--createos-url``) refuses them with a message that says why."""

from __future__ import annotations

import pytest

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from tests.plugin_project import make_project

pytest_plugins = ["pytester"]

#: A downstream module's helper: run a command in a sandbox, answer (exit code, stdout, stderr).
EXEC = """
from helpers import call, create

def run(server, sandbox, script):
    status, body = call(server, "POST", f"/v1/sandboxes/{sandbox}/exec",
                        {"cmd": "bash", "args": ["-lc", script]})
    assert status == 200, body
    result = body["data"]["result"]
    return result["exit_code"], result["stdout"], result["stderr"]

def destroy(server, sandbox):
    call(server, "DELETE", f"/v1/sandboxes/{sandbox}")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    project = make_project(pytester)
    project.makepyfile(sandbox_exec=EXEC)
    return project


def test_a_tests_commands_and_responders_work_and_are_gone_after_it(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        """
        from fake_server import SimulatedResponse
        from sandbox_exec import create, destroy, run

        async def python3(ctx, args):
            ctx.stdout.write(f"python {' '.join(args)}\\n".encode())
            return 0

        def test_registers(createos_server):
            createos_server.register_command("python3", python3)
            createos_server.register_command("git", lambda ctx, args: 3)
            createos_server.register_responder(
                "api.example.com", lambda request: SimulatedResponse(200, f"hi {request.path}"))
            sandbox = create(createos_server)
            assert run(createos_server, sandbox, "python3 -c 'print(1)'")[:2] == (
                0, "python -c print(1)\\n")
            assert run(createos_server, sandbox, "git status")[0] == 3
            assert run(createos_server, sandbox, "curl -s https://api.example.com/health")[:2] == (
                0, "hi /health")
            destroy(createos_server, sandbox)

        def test_the_next_test_sees_none_of_them(createos_server):
            sandbox = create(createos_server)
            assert run(createos_server, sandbox, "python3 -c 'print(1)'")[0] == 127
            assert run(createos_server, sandbox, "git status")[0] == 127
            assert run(createos_server, sandbox, "curl -s https://api.example.com/health")[0] == 6
            destroy(createos_server, sandbox)
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_what_a_test_replaced_comes_back_after_it(project: pytest.Pytester) -> None:
    # A command (or responder) put on the shared fake for the whole session, by a fixture of
    # the user's, must survive a test that registers its own under the same name.
    project.makepyfile(
        """
        from fake_server import SimulatedResponse
        from sandbox_exec import create, destroy, run

        def test_a_session_wide_registration(createos_server):
            fake = createos_server.channel.fake
            createos_server.channel._server.call(
                fake.register_command, "hello", lambda ctx, args: 10)
            createos_server.channel._server.call(
                fake.register_responder, "*.example.com",
                lambda request: SimulatedResponse(200, "session"))

        def test_shadows_them(createos_server):
            createos_server.register_command("hello", lambda ctx, args: 20)
            createos_server.register_command("hello", lambda ctx, args: 30)  # twice: still undone
            createos_server.register_responder("*.EXAMPLE.com",
                                               lambda request: SimulatedResponse(200, "test"))
            sandbox = create(createos_server)
            assert run(createos_server, sandbox, "hello")[0] == 30
            assert run(createos_server, sandbox, "curl -s http://a.example.com")[1] == "test"
            destroy(createos_server, sandbox)

        def test_the_session_wide_ones_are_back(createos_server):
            sandbox = create(createos_server)
            assert run(createos_server, sandbox, "hello")[0] == 10
            assert run(createos_server, sandbox, "curl -s http://a.example.com")[1] == "session"
            destroy(createos_server, sandbox)
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=3)


def test_the_same_loop_fake_takes_them_too(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import aiohttp

        async def test_same_loop(createos_aiohttp_server):
            server = createos_aiohttp_server
            server.register_command("node", lambda ctx, args: 0)
            async with aiohttp.ClientSession(server.url,
                                             headers={"X-Api-Key": server.api_key}) as session:
                async with session.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as made:
                    sandbox = (await made.json())["data"]["id"]
                async with session.post(f"/v1/sandboxes/{sandbox}/exec",
                                        json={"cmd": "node", "args": ["-v"]}) as ran:
                    assert (await ran.json())["data"]["result"]["exit_code"] == 0
                async with session.delete(f"/v1/sandboxes/{sandbox}"):
                    pass
        """
    )
    project.runpytest().assert_outcomes(passed=1)


def test_a_fake_in_another_process_refuses_them_saying_why(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest
        from fake_server import SimulatedResponse
        from pytest_createos.channel import ControlError

        def test_remote(createos_server):
            with pytest.raises(ControlError, match=r"register_command\\('python3'\\) needs the "
                               r"fake in this process.*--createos-url"):
                createos_server.register_command("python3", lambda ctx, args: 0)
            with pytest.raises(ControlError, match=r"register_responder\\('api.example.com'\\)"):
                createos_server.register_responder("api.example.com",
                                                   lambda request: SimulatedResponse())
        """
    )
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        project.runpytest(f"--createos-url={server.url}").assert_outcomes(passed=1)
        assert server.call(lambda: sorted(server.fake.commands.names())) == []
