"""Deleted sandboxes stay readable as destroyed, but only the newest ``destroyed_kept`` of each
tenant: a long-running fake kept every row it ever had (a soak grew by ~1 KB per sandbox)."""

from __future__ import annotations

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import ClientFactory, create_sandbox


async def test_only_the_newest_destroyed_sandboxes_stay(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0, destroyed_kept=3))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_kept"})
    live = await create_sandbox(client, name="live")
    deleted = []
    for number in range(5):
        sandbox = await create_sandbox(client, name=f"gone-{number}")
        assert (await client.delete(f"/v1/sandboxes/{sandbox['id']}")).status == 200
        deleted.append(sandbox)
    for sandbox in deleted[:2]:
        assert (await client.get(f"/v1/sandboxes/{sandbox['id']}")).status == 404
        assert (await client.get(f"/v1/sandboxes/by-ip/{sandbox['ip']}")).status == 404
    for sandbox in deleted[2:]:
        answer = await (await client.get(f"/v1/sandboxes/{sandbox['id']}")).json()
        assert answer["data"]["status"] == "destroyed"
    listed = (await (await client.get("/v1/sandboxes?limit=100")).json())["data"]["data"]
    assert {item["name"] for item in listed} == {"live", "gone-2", "gone-3", "gone-4"}
    assert (await client.get(f"/v1/sandboxes/{live['id']}")).status == 200
