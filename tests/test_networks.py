"""Overlay networks over HTTP: create, list, get by id or name (with members), delete (refused
while it has members), attach and detach a sandbox, membership that ends with the sandbox, a
create that names networks; per tenant, journaled, faultable and gated like every route."""

from __future__ import annotations

import asyncio
from typing import Any

from fake_server import FakeCreateOS
from tests.conftest import Client, ClientFactory, create_sandbox, data_of
from tests.test_api_sandboxes import expect_error


async def create_network(client: Client, name: str = "backend") -> dict[str, Any]:
    """Create a network and return its ``data``."""
    data: dict[str, Any] = await data_of(await client.post("/v1/networks", json={"name": name}))
    return data


async def test_create_list_get_delete(client: Client) -> None:
    made = await create_network(client)
    assert made["id"].startswith("net_")
    assert made["name"] == "backend"
    assert made["member_count"] == 0
    assert made["members"] == []
    assert made["created_at"].endswith("Z")
    await create_network(client, "frontend")
    listed = await data_of(await client.get("/v1/networks", params={"limit": "1", "offset": "1"}))
    assert [n["name"] for n in listed["data"]] == ["frontend"]
    assert listed["pagination"] == {"total": 2, "limit": 1, "offset": 1, "count": 1}
    assert "members" not in listed["data"][0]
    by_name = await data_of(await client.get("/v1/networks/backend"))
    assert by_name == await data_of(await client.get(f"/v1/networks/{made['id']}"))
    assert await data_of(await client.delete("/v1/networks/backend")) == {"ok": True}
    await expect_error(await client.get(f"/v1/networks/{made['id']}"), 404, "network not found")
    await expect_error(await client.delete("/v1/networks/backend"), 404, "network not found")


async def test_bad_and_duplicate_names(client: Client) -> None:
    await create_network(client)
    await expect_error(await client.post("/v1/networks", json={"name": "backend"}), 409, "exists")
    for bad in ({"name": "Back End"}, {}, {"name": 5}, {"name": "ok", "extra": 1}):
        await expect_error(await client.post("/v1/networks", json=bad), 400)


async def test_attach_detach_and_members(client: Client) -> None:
    net = await create_network(client)
    sandbox = await create_sandbox(client)
    path = f"/v1/sandboxes/{sandbox['id']}/networks"
    assert await data_of(await client.post(path, json={"id": "backend"})) == {"ok": True}
    assert await data_of(await client.post(path, json={"id": net["id"]})) == {"ok": True}  # again
    got = await data_of(await client.get("/v1/networks/backend"))
    assert got["member_count"] == 1
    assert got["members"] == [
        {
            "sandbox_id": sandbox["id"],
            "status": "running",
            "name": sandbox["name"],
            "ip": sandbox["ip"],
        }
    ]
    await expect_error(await client.delete("/v1/networks/backend"), 409, "members")
    await expect_error(await client.post(path, json={"id": "nope"}), 404, "network not found")
    await expect_error(await client.post(path, json={}), 400, "id")
    assert await data_of(await client.delete(f"{path}/backend")) == {"ok": True}
    await expect_error(await client.delete(f"{path}/backend"), 404, "not attached")
    assert (await data_of(await client.get("/v1/networks/backend")))["member_count"] == 0
    await expect_error(
        await client.post("/v1/sandboxes/sb_missing/networks", json={"id": "x"}), 404
    )


async def test_a_destroyed_sandbox_leaves_its_networks(client: Client) -> None:
    await create_network(client)
    sandbox = await create_sandbox(client, networks=[{"id": "backend"}])
    got = await data_of(await client.get("/v1/networks/backend"))
    assert [m["sandbox_id"] for m in got["members"]] == [sandbox["id"]]
    await client.delete(f"/v1/sandboxes/{sandbox['id']}")
    assert (await data_of(await client.get("/v1/networks/backend")))["members"] == []
    assert await data_of(await client.delete("/v1/networks/backend")) == {"ok": True}


async def test_a_create_naming_an_unknown_network_makes_nothing(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    await create_network(client)
    response = await client.post(
        "/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "networks": [{"id": "backend"}, {"id": "x"}]}
    )
    await expect_error(response, 404, "network not found")
    bad = await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "networks": ["x"]})
    await expect_error(bad, 400, "networks[0]")
    assert fake.tenant(api_key).sandboxes == {}
    assert (await data_of(await client.get("/v1/networks/backend")))["member_count"] == 0


async def test_tenants_never_see_each_others_networks(
    fake: FakeCreateOS, client: Client, aiohttp_client: ClientFactory
) -> None:
    net = await create_network(client)
    mine = await create_sandbox(client)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant("skp_b")})
    for ref in ("backend", net["id"]):
        await expect_error(await other.get(f"/v1/networks/{ref}"), 404, "network not found")
        await expect_error(await other.delete(f"/v1/networks/{ref}"), 404)
    assert (await data_of(await other.get("/v1/networks")))["data"] == []
    theirs = await create_sandbox(other)
    attach = await other.post(f"/v1/sandboxes/{theirs['id']}/networks", json={"id": net["id"]})
    await expect_error(attach, 404, "network not found")
    await expect_error(
        await other.post(f"/v1/sandboxes/{mine['id']}/networks", json={"id": "x"}), 404, "sandbox"
    )
    # The same name is free in another tenant.
    assert (await create_network(other))["name"] == "backend"


async def test_journaled_faulted_and_gated(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    await create_network(client)
    fake.journal.assert_requested("POST /v1/networks", times=1, tenant=fake.tenant(api_key).id)
    fake.faults.error(503, route="GET /v1/networks/{network}", times=1)
    await expect_error(await client.get("/v1/networks/backend"), 503, "injected error")
    assert (await client.get("/v1/networks/backend")).status == 200
    gate = fake.faults.gate("net", route="DELETE /v1/networks/{network}")
    deletion = asyncio.ensure_future(client.delete("/v1/networks/backend"))
    await gate.wait_held(1)
    assert (await client.get("/v1/networks/backend")).status == 200  # not deleted yet
    gate.release()
    assert (await deletion).status == 200
    await expect_error(await client.get("/v1/networks/backend"), 404)


async def test_reset_forgets_networks(fake: FakeCreateOS, client: Client) -> None:
    await create_network(client)
    fake.reset()
    fake.create_tenant("skp_test_owner")
    assert (await data_of(await client.get("/v1/networks")))["data"] == []
