"""Answers Schemathesis found wrong (see ``test_schemathesis.py``), pinned so they stay fixed even
where Schemathesis is not installed (it needs Python 3.11+)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from fake_server import FakeCreateOS, ServerConfig
from fake_server.errors import ApiError
from tests.conftest import create_sandbox
from tests.test_api_sandboxes import expect_error


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


async def test_an_offset_past_the_last_page_is_an_empty_page_and_past_64_bits_a_400(
    client: TestClient[Any, Any],
) -> None:
    await create_sandbox(client)
    # Past the last page: an empty page.
    response = await client.get(f"/v1/sandboxes?offset={2**63 - 1}")
    body = await response.json()
    assert response.status == 200, body
    assert body["data"]["data"] == []
    assert body["data"]["pagination"]["total"] == 1
    # Past 64 bits: refused, as in a body (answered, it was echoed in `pagination`, where a
    # client decoding 64-bit integers could not read it).
    await expect_error(
        await client.get(f"/v1/sandboxes?offset={2**63}"), 400, f"must be at most {2**63 - 1}"
    )
    await expect_error(await client.get(f"/v1/sandboxes?limit={10**32}"), 400, "at most")


async def test_dropping_a_tenant_needs_a_key_and_never_answers_401(
    fake: FakeCreateOS, client: TestClient[Any, Any]
) -> None:
    blank = await client.delete("/_fake/tenants", json={"api_key": "  "})
    assert blank.status == 400
    fake.tenants.strict = True
    unknown = await client.delete("/_fake/tenants", json={"api_key": "skp_nobody"})
    assert unknown.status == 404


async def test_dropping_a_key_the_fake_never_saw_is_a_404_and_makes_no_tenant(
    fake: FakeCreateOS, client: TestClient[Any, Any]
) -> None:
    # Without --strict the key was made a tenant first, then dropped: 200 {"dropped": true}.
    before = len(fake.tenants)
    unknown = await client.delete("/_fake/tenants", json={"api_key": "skp_never_seen"})
    await expect_error(unknown, 404, "tenant")
    assert len(fake.tenants) == before
    with pytest.raises(ApiError) as refused:
        fake.drop_tenant("skp_never_seen")
    assert refused.value.status == 404
    key = fake.create_tenant("skp_made")
    assert (await client.delete("/_fake/tenants", json={"api_key": key})).status == 200
    assert key not in fake.tenants.known
