"""The journal is a bounded ring, so a soak cannot eat memory: past ``journal_capacity`` the
oldest entries are dropped and counted, and the control API shows size, capacity and the count
of dropped entries."""

from __future__ import annotations

from typing import Any

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import ClientFactory

CAPACITY = 50


async def control(client: Any, path: str) -> dict[str, Any]:
    response = await client.get(path)
    assert response.status == 200
    data: dict[str, Any] = (await response.json())["data"]
    return data


async def test_past_capacity_the_oldest_entries_are_dropped_and_counted(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0, journal_capacity=CAPACITY))
    client = await aiohttp_client(fake.app())
    sent = CAPACITY + 30
    for index in range(sent):
        # Unknown routes are journaled too (as 404s), each with its own path to tell them apart.
        assert (await client.get(f"/nowhere/{index}")).status == 404
    assert len(fake.journal) == CAPACITY
    assert fake.journal.dropped == sent - CAPACITY

    state = await control(client, "/_fake/state")
    assert state["journal"] == {"size": CAPACITY, "capacity": CAPACITY, "dropped": sent - CAPACITY}
    journal = await control(client, "/_fake/journal")
    # Reads of the control API are not journaled, so they push nothing out.
    assert journal["dropped"] == sent - CAPACITY
    entries = journal["entries"]
    assert len(entries) == CAPACITY
    # What is kept is the newest, in order.
    assert [e["path"] for e in entries] == [f"/nowhere/{i}" for i in range(sent - CAPACITY, sent)]
    assert [e["seq"] for e in entries] == sorted(e["seq"] for e in entries)

    # A reset empties the ring and its count.
    assert (await client.post("/_fake/reset")).status == 200
    state = await control(client, "/_fake/state")
    assert state["journal"]["dropped"] == 0
    assert state["journal"]["size"] <= 1  # at most the reset itself


async def test_a_soak_of_requests_and_transitions_stays_within_capacity(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(seed=2, transition_ms=0, journal_capacity=CAPACITY))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_soak"})
    cycles = 60
    largest = 0
    for _ in range(cycles):
        created = await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"})
        sandbox = (await created.json())["data"]["id"]
        for action in ("pause", "resume"):
            assert (await client.post(f"/v1/sandboxes/{sandbox}/{action}")).status == 200
        assert (await client.delete(f"/v1/sandboxes/{sandbox}")).status == 200
        largest = max(largest, len(fake.journal))
    assert largest == CAPACITY
    # Per cycle: 4 requests and 8 transitions (creating, running, pausing, paused, resuming,
    # running, destroying, destroyed). Nothing else was journaled and nothing was lost
    # uncounted.
    total = cycles * (4 + 8)
    assert len(fake.journal) == CAPACITY
    assert fake.journal.dropped == total - CAPACITY
    state = await control(client, "/_fake/state")
    assert state["journal"]["dropped"] == total - CAPACITY
