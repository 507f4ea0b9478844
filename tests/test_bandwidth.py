"""Bandwidth recharges (§4.11): a no-op on the fake's unmetered sandboxes, 402 for a tenant
without credit (set through the control API, by whoever holds the tenant's key), 404 for
another tenant's sandbox before any credit check."""

from __future__ import annotations

import pytest

from fake_server import FakeCreateOS
from fake_server.errors import ApiError
from tests.conftest import Client, ClientFactory, create_sandbox, data_of
from tests.test_api_sandboxes import expect_error

CREDIT = "/_fake/tenant/credit"


def _recharge(sandbox_id: str) -> str:
    return f"/v1/sandboxes/{sandbox_id}/bandwidth/recharge"


async def test_recharge_is_a_no_op_on_an_unmetered_sandbox(client: Client) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    before = await data_of(await client.get(f"/v1/sandboxes/{sandbox_id}/bandwidth"))
    assert before["quota_bytes"] == -1
    after = await data_of(await client.post(_recharge(sandbox_id), json={"add_bytes": 1 << 30}))
    assert after == before
    for bad in ({}, {"add_bytes": 0}, {"add_bytes": -5}, {"add_bytes": "1"}, {"bytes": 1}):
        await expect_error(await client.post(_recharge(sandbox_id), json=bad), 400)


async def test_no_credit_answers_402_and_credit_restores_it(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    assert await data_of(await client.get(CREDIT)) == {
        "tenant": fake.tenant(api_key).id,
        "has_credit": True,
    }
    off = await data_of(await client.put(CREDIT, json={"has_credit": False}))
    assert off["has_credit"] is False
    await expect_error(
        await client.post(_recharge(sandbox_id), json={"add_bytes": 10}), 402, "credit"
    )
    # Network and disk creates cost money too.
    await expect_error(await client.post("/v1/networks", json={"name": "n"}), 402, "credit")
    disk = {
        "name": "d",
        "kind": "s3",
        "config": {"bucket": "b", "endpoint": "https://s3.example.test"},
        "credentials": {"access_key": "a", "secret_key": "s"},
    }
    await expect_error(await client.post("/v1/disks", json=disk), 402, "credit")
    await client.put(CREDIT, json={"has_credit": True})
    assert (await client.post(_recharge(sandbox_id), json={"add_bytes": 10})).status == 200
    assert (await client.post("/v1/networks", json={"name": "n"})).status == 200


@pytest.mark.parametrize(
    ("action", "body"),
    [("bandwidth/recharge", {"add_bytes": 10}), ("resume", None), ("fork", None)],
)
async def test_the_owner_check_comes_before_the_credit_check(
    fake: FakeCreateOS,
    client: Client,
    aiohttp_client: ClientFactory,
    action: str,
    body: dict[str, int] | None,
) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    other_key = fake.create_tenant("skp_poor")
    fake.set_credit(other_key, has_credit=False)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": other_key})
    response = await other.post(f"/v1/sandboxes/{sandbox_id}/{action}", json=body)
    await expect_error(response, 404, "sandbox not found")
    # The other tenant's setting never reached this one.
    assert (await client.post(_recharge(sandbox_id), json={"add_bytes": 10})).status == 200


async def test_the_credit_knob_needs_the_tenants_own_key(
    fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    anonymous = await aiohttp_client(fake.app())
    await expect_error(await anonymous.put(CREDIT, json={"has_credit": False}), 401, "X-Api-Key")
    stranger = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_never_registered"})
    await expect_error(await stranger.get(CREDIT), 404, "tenant not found")
    assert fake.tenants.known.get("skp_never_registered") is None
    owner = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    await expect_error(await owner.put(CREDIT, json={}), 400, "has_credit")
    await expect_error(await owner.put(CREDIT, json={"has_credit": "no"}), 400, "has_credit")


def test_set_credit_in_python(fake: FakeCreateOS) -> None:
    key = fake.create_tenant()
    assert fake.set_credit(key, has_credit=False) is False
    assert fake.tenant(key).has_credit is False
    fake.drop_tenant(key)
    again = fake.create_tenant(key)  # a new tenant under the same key starts with credit
    assert fake.tenant(again).has_credit is True
    with pytest.raises(ApiError) as caught:
        fake.set_credit("skp_unknown", has_credit=True)
    assert caught.value.status == 404


async def test_create_resume_and_fork_cost_credit(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    # The contract (§1.5, after the TypeScript SDK's COMPATIBILITY notes): sandbox create,
    # resume and fork are credit-gated like recharge and the resource creates.
    running = (await create_sandbox(client))["id"]
    paused = (await create_sandbox(client))["id"]
    await data_of(await client.post(f"/v1/sandboxes/{paused}/pause"))
    await client.put(CREDIT, json={"has_credit": False})
    before = {sandbox.id: sandbox.status for sandbox in fake.tenant(api_key).sandboxes.values()}

    body = {"shape": "s-1vcpu-1gb", "name": "poor"}
    await expect_error(await client.post("/v1/sandboxes", json=body), 402, "credit")
    await expect_error(await client.post(f"/v1/sandboxes/{paused}/resume"), 402, "credit")
    await expect_error(await client.post(f"/v1/sandboxes/{paused}/fork"), 402, "credit")
    # The gate comes after the request's own checks and before the sandbox's state is read.
    await expect_error(await client.post("/v1/sandboxes", json={"shape": "nope"}), 400)
    await expect_error(await client.post(f"/v1/sandboxes/{running}/resume"), 402, "credit")
    # Nothing was made or changed.
    after = {sandbox.id: sandbox.status for sandbox in fake.tenant(api_key).sandboxes.values()}
    assert after == before

    await client.put(CREDIT, json={"has_credit": True})
    await data_of(await client.post(f"/v1/sandboxes/{paused}/fork"))
    await data_of(await client.post(f"/v1/sandboxes/{paused}/resume"))
    await data_of(await client.post("/v1/sandboxes", json=body))
