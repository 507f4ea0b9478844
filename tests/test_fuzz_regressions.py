"""Answers Schemathesis found wrong (see ``test_schemathesis.py``), pinned so they stay fixed even
where Schemathesis is not installed (it needs Python 3.11+)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import create_sandbox


@pytest.fixture
def fake_config() -> ServerConfig:
    return ServerConfig(seed=1234, transition_ms=0, max_wait_ms=50)


@pytest.mark.parametrize("mode", ["wipe", "replace", "garble"])
@pytest.mark.parametrize(("path", "problem"), [("/", "Is a directory"), ("/srv/f/x", "Not a dir")])
async def test_marker_fault_on_a_path_that_cannot_hold_a_file_is_a_400(
    client: TestClient[Any, Any], mode: str, path: str, problem: str
) -> None:
    sandbox = await create_sandbox(client)
    upload = await client.put(f"/v1/sandboxes/{sandbox['id']}/files?path=/srv/f", data=b"x")
    assert upload.status == 200
    response = await client.post(
        f"/_fake/sandboxes/{sandbox['id']}/marker", json={"mode": mode, "path": path}
    )
    body = await response.json()
    if mode == "wipe" and problem.startswith("Not"):
        assert response.status == 200, body  # nothing there to wipe
    else:
        assert response.status == 400, body
        assert problem in body["data"]["path"]


async def test_wait_with_timeout_ms_0_uses_the_servers_maximum(
    client: TestClient[Any, Any],
) -> None:
    sandbox = await create_sandbox(client)
    started = await client.post(f"/v1/sandboxes/{sandbox['id']}/processes", json={"cmd": "cat"})
    process = (await started.json())["data"]["process_id"]
    # Before the fix, 0 meant "wait forever": a live process made this call hang.
    response = await client.get(
        f"/v1/sandboxes/{sandbox['id']}/processes/{process}/wait?timeout_ms=0"
    )
    assert response.status == 408


async def test_an_offset_beyond_any_integer_index_is_an_empty_page(
    client: TestClient[Any, Any],
) -> None:
    await create_sandbox(client)
    response = await client.get(f"/v1/sandboxes?offset={10**32}")
    body = await response.json()
    assert response.status == 200, body
    assert body["data"]["data"] == []
    assert body["data"]["pagination"]["total"] == 1


async def test_dropping_a_tenant_needs_a_key_and_never_answers_401(
    fake: FakeCreateOS, client: TestClient[Any, Any]
) -> None:
    blank = await client.delete("/_fake/tenants", json={"api_key": "  "})
    assert blank.status == 400
    fake.tenants.strict = True
    unknown = await client.delete("/_fake/tenants", json={"api_key": "skp_nobody"})
    assert unknown.status == 404
