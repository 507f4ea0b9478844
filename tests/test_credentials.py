"""The credential headers CreateOS clients send (contract §1.2): ``X-Auth-Token``,
``X-Access-Token`` and ``Authorization: Bearer`` are read before ``X-Api-Key``, the first one
present wins, and what is not a credential stays refused."""

from __future__ import annotations

import pytest

from fake_server import FakeCreateOS, ServerConfig
from fake_server.credentials import presented_key
from tests.conftest import ClientFactory


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({"X-Api-Key": "skp_a"}, "skp_a"),
        ({"X-Access-Token": "skp_a"}, "skp_a"),
        ({"X-Auth-Token": "skp_a"}, "skp_a"),
        ({"Authorization": "Bearer skp_a"}, "skp_a"),
        ({"Authorization": "bearer  skp_a "}, "skp_a"),
        # Precedence: X-Auth-Token, X-Access-Token, Authorization, X-Api-Key.
        ({"X-Auth-Token": "skp_a", "X-Access-Token": "skp_b", "X-Api-Key": "skp_c"}, "skp_a"),
        ({"X-Access-Token": "skp_a", "Authorization": "Bearer skp_b"}, "skp_a"),
        ({"Authorization": "Bearer skp_a", "X-Api-Key": "skp_b"}, "skp_a"),
        # Another scheme is not a CreateOS credential: passed over.
        ({"Authorization": "Basic dXNlcjpwdw==", "X-Api-Key": "skp_b"}, "skp_b"),
        # Present but empty: refused, never answered with the next header's tenant.
        ({"X-Access-Token": "", "X-Api-Key": "skp_b"}, None),
        ({"Authorization": "Bearer", "X-Api-Key": "skp_b"}, None),
        ({"X-Api-Key": "  "}, None),
        ({"Authorization": "Basic dXNlcjpwdw=="}, None),
        ({}, None),
    ],
)
def test_the_presented_key(headers: dict[str, str], key: str | None) -> None:
    assert presented_key(headers) == key


async def test_each_header_reaches_the_same_tenant(aiohttp_client: ClientFactory) -> None:
    client = await aiohttp_client(FakeCreateOS(ServerConfig(transition_ms=0)).app())
    created = await client.post(
        "/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}, headers={"X-Access-Token": "skp_a"}
    )
    sandbox_id = (await created.json())["data"]["id"]
    for headers in (
        {"X-Api-Key": "skp_a"},
        {"X-Auth-Token": "skp_a"},
        {"Authorization": "Bearer skp_a"},
        {"Authorization": "Bearer skp_a", "X-Api-Key": "skp_someone_else"},
    ):
        response = await client.get(f"/v1/sandboxes/{sandbox_id}", headers=headers)
        assert response.status == 200, headers
    # The first header present wins: another tenant's key there does not see the sandbox.
    response = await client.get(
        f"/v1/sandboxes/{sandbox_id}",
        headers={"X-Access-Token": "skp_someone_else", "X-Api-Key": "skp_a"},
    )
    assert response.status == 404
    await client.delete(f"/v1/sandboxes/{sandbox_id}", headers={"X-Api-Key": "skp_a"})


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Basic c2twX2E6"},
        {"Authorization": "Bearer "},
        {"X-Access-Token": "", "X-Api-Key": "skp_a"},
        {},
    ],
)
async def test_what_is_not_a_credential_is_refused(
    aiohttp_client: ClientFactory, headers: dict[str, str]
) -> None:
    client = await aiohttp_client(FakeCreateOS().app())
    response = await client.get("/v1/sandboxes", headers=headers)
    assert response.status == 401
    body = await response.json()
    message = "missing or invalid API key"
    assert body == {"status": "fail", "message": message, "code": 401, "data": message}


async def test_strict_mode_accepts_a_registered_key_under_any_header(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(strict=True, api_keys=("skp_known",)))
    client = await aiohttp_client(fake.app())
    known = await client.get("/v1/sandboxes", headers={"Authorization": "Bearer skp_known"})
    unknown = await client.get("/v1/sandboxes", headers={"X-Access-Token": "skp_unknown"})
    assert (known.status, unknown.status) == (200, 401)
