"""The control channels: what the plugin reads of a fake reads alike in process and over HTTP."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from fake_server.gates import GateTimeout
from pytest_createos.channel import HttpChannel, LocalChannel

GATE = {"type": "gate", "name": "g"}


def _create_sandbox(url: str, api_key: str) -> str:
    request = urllib.request.Request(
        url + "/v1/sandboxes",
        data=json.dumps({"shape": "s-1vcpu-1gb"}).encode(),
        headers={"X-Api-Key": api_key, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(json.loads(response.read())["data"]["id"])


def test_a_tenants_sandboxes_read_alike_in_process_and_over_http() -> None:
    # The leak check reads a tenant's sandboxes on every test: in process without building the
    # whole state, yet listing exactly what the state lists for the tenant.
    fake = FakeCreateOS(ServerConfig(seed=3, transition_ms=0))
    with BackgroundServer(fake) as server:
        local = LocalChannel(fake, server.url, server=server)
        remote = HttpChannel(server.url)
        key, tenant_id = local.new_tenant()
        other_key, _ = local.new_tenant()
        mine = [_create_sandbox(server.url, key) for _ in range(2)]
        _create_sandbox(server.url, other_key)
        listed = local.sandboxes(tenant_id)
        assert [sandbox["id"] for sandbox in listed] == mine
        assert all(sandbox["processes"] == [] for sandbox in listed)
        assert listed == local.state(tenant_id)["tenants"][0]["sandboxes"]
        assert remote.sandboxes(tenant_id) == listed
        assert local.sandboxes("usr_nobody") == remote.sandboxes("usr_nobody") == []


def test_over_http_a_wait_for_a_held_request_is_one_long_poll() -> None:
    # It polled GET /_fake/gates/{name} every 2 ms until the count was reached.
    fake = FakeCreateOS(ServerConfig(seed=3, transition_ms=0))
    with BackgroundServer(fake) as server:
        remote = HttpChannel(server.url)
        key, _ = LocalChannel(fake, server.url, server=server).new_tenant()
        remote.add_rules([{"match": {"route": "POST /v1/sandboxes"}, "action": GATE}])
        asked: list[str] = []
        request = remote._request

        def counted(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            asked.append(path)
            return request(method, path, *args, **kwargs)

        remote._request = counted  # type: ignore[method-assign]
        with pytest.raises(GateTimeout, match=r"gate 'g': 0 request\(s\) held after 0.05s"):
            remote.wait_gate("g", 1, 0.05)
        asked.clear()
        creating = threading.Thread(target=_create_sandbox, args=(server.url, key))
        creating.start()
        remote.wait_gate("g", 1, 10.0)
        [path] = asked  # one request, answered once the create was held
        assert path.startswith("/_fake/gates/g?held=1&timeout_ms=")
        remote.release_gate("g", None)
        creating.join(timeout=10)
        assert not creating.is_alive()
