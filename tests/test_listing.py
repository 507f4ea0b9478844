"""List pages: the per-tenant listing against the naive computation after random operations
(seeded, so a failure names its seed and step),
and the joined page body against the plain JSON encoding of the same payload, byte for byte."""

from __future__ import annotations

import json
import random
from typing import Any
from unittest import mock

import pytest

from fake_server import FakeCreateOS, ServerConfig, listing
from fake_server.errors import ApiError
from fake_server.json_body import encode
from fake_server.lifecycle import Status
from fake_server.routes.common import ok, paginated
from fake_server.sandbox import Sandbox
from fake_server.sandboxes import CreateSpec, ForkSpec
from fake_server.tenants import Tenant
from tests.conftest import Client, create_sandbox

KEY = "skp_listing"
STATUSES: list[Status | None] = [None, *Status]
#: Weighted by repetition: the tenant must grow past a few blocks between the rare wipes.
OPERATIONS = (
    *["create"] * 8,
    *["advance"] * 3,
    *["fork", "pause", "resume", "delete", "fault", "assign"] * 2,
    "drop_tenant",
    "reset",
)
#: The sandboxes each operation picks from (any, when none is in these).
WANTS = {
    "fork": {Status.PAUSED},
    "pause": {Status.RUNNING},
    "resume": {Status.PAUSED, Status.ERROR},
}


def naive_page(
    tenant: Tenant, status: Status | None, offset: int, limit: int
) -> tuple[list[Sandbox], int]:
    """What a page is by definition: the tenant's sandboxes in creation order, filtered."""
    matching = [s for s in tenant.sandboxes.values() if status is None or s.status is status]
    return matching[offset : offset + limit], len(matching)


def check_pages(fake: FakeCreateOS, tenant: Tenant) -> None:
    total = len(tenant.sandboxes)
    windows = [(0, 1), (0, 500), (1, 2), (total // 2, 3), (max(total - 2, 0), 5), (total, 5)]
    for status in STATUSES:
        for offset, limit in windows:
            got = fake.sandboxes.page(tenant, status=status, limit=limit, offset=offset)
            assert got == naive_page(tenant, status, offset, limit), (status, offset, limit)
    assert len(tenant.listing) == total
    check_counts(tenant)


def check_counts(tenant: Tenant) -> None:
    """``whoami``'s stats and the idle sweep's question, as counting every sandbox answers
    them (the tenant reads them off its listing)."""
    alive = [s for s in tenant.sandboxes.values() if s.status is not Status.DESTROYED]
    running = sum(s.status is Status.RUNNING for s in alive)
    paused = sum(s.status is Status.PAUSED for s in alive)
    assert tenant.stats() == {
        "running": running,
        "paused": paused,
        "other": len(alive) - running - paused,
        "total": len(alive),
    }
    assert tenant.has_live_sandboxes() == bool(alive)


def apply(fake: FakeCreateOS, operation: str, pick: int) -> None:
    """One operation on the tenant of ``KEY``; refusals (409s) are part of the game."""
    tenant = fake.tenant(KEY)
    sandboxes = list(tenant.sandboxes.values())
    fitting = [s for s in sandboxes if s.status in WANTS.get(operation, ())]
    sandboxes = fitting or sandboxes
    some = sandboxes[pick % len(sandboxes)] if sandboxes else None
    try:
        if operation == "create":
            fake.sandboxes.create(tenant, CreateSpec(shape="s-1vcpu-1gb"))
        elif operation == "fork" and some is not None:
            fake.sandboxes.fork(tenant, some, ForkSpec(start_paused=pick % 2 == 0))
        elif operation == "pause" and some is not None:
            fake.sandboxes.pause(some)
        elif operation == "resume" and some is not None:
            fake.sandboxes.resume(tenant, some)
        elif operation == "delete" and some is not None:
            fake.sandboxes.delete(some)
        elif operation == "advance":
            # Transitions finish on their timers (10 ms each): some now, some later.
            fake.clock.advance((pick % 4) * 0.005)
        elif operation == "fault" and some is not None:
            fake.state_faults.set_status(some, list(Status)[pick % len(Status)])
        elif operation == "assign" and some is not None:
            some.status = list(Status)[pick % len(Status)]  # a test may set it directly
        elif operation == "drop_tenant":
            fake.drop_tenant(KEY)  # what the idle-tenant sweep does
        elif operation == "reset":
            fake.reset()
    except ApiError as exc:
        if exc.status != 409:
            raise


@pytest.mark.parametrize("seed", range(16))
def test_pages_and_counts_match_the_naive_computation_after_random_operations(seed: int) -> None:
    rng = random.Random(seed)
    # Tiny blocks and a short destroyed history, so that splits, emptied blocks and pruning
    # all happen within a few dozen sandboxes.
    with mock.patch.object(listing, "BLOCK", 2):
        fake = FakeCreateOS(
            ServerConfig(seed=seed, transition_ms=10, manual_clock=True, destroyed_kept=3)
        )
        for step in range(600):
            operation, pick = rng.choice(OPERATIONS), rng.randrange(1_000)
            apply(fake, operation, pick)
            try:
                check_pages(fake, fake.tenant(KEY))
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}, step {step} ({operation}): {exc}") from exc


def test_a_dropped_tenants_sandboxes_leave_the_new_tenants_pages_alone() -> None:
    fake = FakeCreateOS(ServerConfig(seed=5, transition_ms=10, manual_clock=True))
    old = fake.tenant(KEY)
    doomed = fake.sandboxes.create(old, CreateSpec(shape="s-1vcpu-1gb"))
    fake.drop_tenant(KEY)
    fresh = fake.tenant(KEY)
    doomed.status = Status.PAUSED  # whatever still holds it
    assert fake.sandboxes.page(fresh, status=None, limit=10, offset=0) == ([], 0)
    assert fake.sandboxes.page(fresh, status=Status.PAUSED, limit=10, offset=0) == ([], 0)


def test_pruned_destroyed_sandboxes_leave_every_page() -> None:
    fake = FakeCreateOS(ServerConfig(seed=5, transition_ms=0, destroyed_kept=1))
    tenant = fake.tenant(KEY)
    first, second, kept = (
        fake.sandboxes.create(tenant, CreateSpec(shape="s-1vcpu-1gb")) for _ in range(3)
    )
    fake.sandboxes.delete(first)
    fake.sandboxes.delete(second)  # first is forgotten now
    assert fake.sandboxes.page(tenant, status=Status.DESTROYED, limit=10, offset=0) == (
        [second],
        1,
    )
    assert fake.sandboxes.page(tenant, status=None, limit=10, offset=0) == ([second, kept], 2)
    first.status = Status.RUNNING  # a forgotten sandbox no longer reaches the listing
    assert fake.sandboxes.page(tenant, status=Status.RUNNING, limit=10, offset=0) == ([kept], 1)


# -- byte for byte -------------------------------------------------------------------------------


def plain_page(sandboxes: list[Sandbox], total: int, limit: int, offset: int) -> bytes:
    """The straightforward encoding: build the whole payload, encode it once."""
    views = [sandbox.view() for sandbox in sandboxes]
    response = ok(paginated(views, total=total, limit=limit, offset=offset))
    assert isinstance(response.body, bytes)
    return response.body


async def varied_sandboxes(client: Client) -> list[dict[str, Any]]:
    """Sandboxes whose views differ in every optional field, with non-ASCII and escapes."""
    made = [
        await create_sandbox(client),
        await create_sandbox(
            client,
            name="web-1",
            envs={"TOKEN": "x", "_B2": "y"},
            egress=["api.example.com:443", "*.example.org", "bücher.example", 'a"b\\c'],
            ingress_enabled=True,
            auto_pause_after_seconds=300,
        ),
        await create_sandbox(client, ssh_pubkeys=["ssh-ed25519 AAAAC3Nza key"], disk_mib=4096),
    ]
    await client.post(f"/v1/sandboxes/{made[1]['id']}/pause")
    fork = await client.post(f"/v1/sandboxes/{made[1]['id']}/fork", json={})
    made.append((await fork.json())["data"])
    await client.delete(f"/v1/sandboxes/{made[0]['id']}")
    return made


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?limit=2",
        "?limit=2&offset=1",
        "?offset=3",
        "?offset=99",
        "?status=running",
        "?status=paused&limit=1",
        "?status=destroyed",
        "?status=error",
        "?limit=500",
    ],
)
async def test_list_page_is_byte_identical_to_the_plain_encoding(
    fake: FakeCreateOS, api_key: str, client: Client, query: str
) -> None:
    await varied_sandboxes(client)
    response = await client.get("/v1/sandboxes" + query)
    assert response.status == 200
    served = await response.read()
    body = json.loads(served)["data"]
    tenant = fake.tenant(api_key)
    status = Status(query.split("status=")[1].split("&")[0]) if "status=" in query else None
    limit, offset = body["pagination"]["limit"], body["pagination"]["offset"]
    page, total = naive_page(tenant, status, offset, limit)
    assert served == plain_page(page, total, limit, offset)


async def test_get_body_is_byte_identical_to_the_plain_encoding(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    for made in await varied_sandboxes(client):
        served = await (await client.get(f"/v1/sandboxes/{made['id']}")).read()
        sandbox = fake.tenant(api_key).get(made["id"])
        assert served == encode({"status": "success", "data": sandbox.view()})


async def test_a_page_shows_each_change_of_a_sandbox(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    made = await create_sandbox(client)
    await client.get("/v1/sandboxes")  # encodes (and caches) the view
    await client.patch(f"/v1/sandboxes/{made['id']}", json={"ingress_enabled": True})
    await client.post(f"/v1/sandboxes/{made['id']}/ssh-pubkeys", json={"keys": ["ssh-rsa AAA"]})
    item = (await (await client.get("/v1/sandboxes")).json())["data"]["data"][0]
    assert item["ingress_enabled"] is True
    assert item["ssh_pubkeys"] == ["ssh-rsa AAA"]
    assert item == fake.tenant(api_key).get(made["id"]).view()
