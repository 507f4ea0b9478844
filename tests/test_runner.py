"""BackgroundServer: a fake on its own loop in a thread, reached from other threads."""

from __future__ import annotations

import pytest

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig


async def _one() -> int:
    return 1


def test_run_on_the_servers_own_loop_refuses_instead_of_waiting_forever() -> None:
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:

        async def on_the_servers_loop() -> int:  # e.g. a registered command's handler
            return server.run(_one())

        with pytest.raises(RuntimeError, match="own loop, which would wait for itself forever"):
            server.run(on_the_servers_loop(), timeout=5)
        assert server.run(_one(), timeout=5) == 1  # from another thread, as meant
