"""Every distinct key once stayed a tenant forever: tenants that unknown keys made are dropped
after an idle time, never while they have a live sandbox or a rule, never when registered."""

from __future__ import annotations

from typing import Any

from fake_server import FakeCreateOS, ManualClock, ServerConfig
from tests.conftest import ClientFactory

SHAPE = {"shape": "s-1vcpu-1gb"}


async def served(aiohttp_client: ClientFactory, **config: Any) -> tuple[FakeCreateOS, Any]:
    fake = FakeCreateOS(ServerConfig(seed=2, manual_clock=True, transition_ms=0, **config))
    return fake, await aiohttp_client(fake.app())


def clock_of(fake: FakeCreateOS) -> ManualClock:
    assert isinstance(fake.clock, ManualClock)
    return fake.clock


async def call(client: Any, key: str, method: str, path: str, **body: Any) -> Any:
    response = await client.request(method, path, headers={"X-Api-Key": key}, **body)
    data = await response.json()
    assert response.status == 200, data
    return data["data"]


def tenant_ids(fake: FakeCreateOS) -> set[str]:
    return {tenant.id for tenant in fake.tenants}


async def test_idle_tenants_go_unless_something_of_theirs_is_alive(
    aiohttp_client: ClientFactory,
) -> None:
    fake, client = await served(aiohttp_client, idle_tenant_s=60)
    ids = {}
    for key in ("gone", "running", "ruled", "registered", "recent"):
        if key == "registered":
            fake.create_tenant("registered")
        await call(client, key, "GET", "/v1/sandboxes")
        ids[key] = fake.tenant(key).id
    destroyed = await call(client, "gone", "POST", "/v1/sandboxes", json=SHAPE)
    await call(client, "gone", "DELETE", f"/v1/sandboxes/{destroyed['id']}")
    await call(client, "running", "POST", "/v1/sandboxes", json=SHAPE)
    fake.faults.add({"match": {"tenant": ids["ruled"]}, "action": {"type": "latency", "ms": 1}})
    clock_of(fake).advance(50)
    await call(client, "recent", "GET", "/v1/sandboxes")  # seen 50 s in: not idle at 61
    clock_of(fake).advance(11)
    await call(client, "newcomer", "GET", "/v1/sandboxes")  # a new key: the sweep runs
    left = tenant_ids(fake)
    assert ids["gone"] not in left
    assert {ids[key] for key in ("running", "ruled", "registered", "recent")} <= left
    # The dropped key simply starts afresh, as any new key does.
    again = await client.get(f"/v1/sandboxes/{destroyed['id']}", headers={"X-Api-Key": "gone"})
    assert again.status == 404
    assert fake.tenant("gone").id not in ids.values()


async def test_sweeps_are_rare_and_can_be_off(aiohttp_client: ClientFactory) -> None:
    fake, client = await served(aiohttp_client, idle_tenant_s=100)
    await call(client, "a", "GET", "/v1/sandboxes")
    clock_of(fake).advance(100)
    await call(client, "b", "GET", "/v1/sandboxes")  # sweeps: a goes
    assert len(fake.tenants) == 1
    clock_of(fake).advance(100)
    await call(client, "c", "GET", "/v1/sandboxes")  # sweeps: b goes
    clock_of(fake).advance(5)  # less than a tenth of the idle time since the last sweep
    await call(client, "d", "GET", "/v1/sandboxes")
    assert len(fake.tenants) == 2  # c and d: no sweep for d
    off, client = await served(aiohttp_client)
    for key in ("x", "y"):
        await call(client, key, "GET", "/v1/sandboxes")
        clock_of(off).advance(10_000)
    assert len(off.tenants) == 2
