"""The manual clock refuses steps that would break every date the fake shows, and a reseed never
hands out an id that a live sandbox or tenant already has."""

from __future__ import annotations

import math

import pytest

from fake_server import FakeCreateOS, ManualClock, ServerConfig
from tests.conftest import ClientFactory, create_sandbox
from tests.hostile.test_json_bodies import listed, still_readable
from tests.test_api_sandboxes import expect_error

KEY = {"X-Api-Key": "skp_hostile"}


@pytest.mark.parametrize("seconds", ["1e12", "Infinity", "NaN", "-1", "1e999", "-0.5"])
async def test_clock_steps_out_of_range_change_nothing(
    aiohttp_client: ClientFactory, seconds: str
) -> None:
    fake = FakeCreateOS(ServerConfig(seed=3, manual_clock=True, transition_ms=10))
    client = await aiohttp_client(fake.app(), headers=KEY)
    raw = f'{{"seconds": {seconds}}}'.encode()
    response = await client.post(
        "/_fake/clock/advance", data=raw, headers={"Content-Type": "application/json"}
    )
    await expect_error(response, 400)
    assert fake.clock.now() == 0.0
    # Everything that once answered 500 for good after such a step.
    sandbox = await create_sandbox(client)
    fine = await client.post("/_fake/clock/advance", json={"seconds": 1})
    assert fine.status == 200, await fine.text()
    paused = await client.post(f"/v1/sandboxes/{sandbox['id']}/pause", json={})
    assert paused.status == 200, await paused.text()
    await still_readable(client)


def test_the_python_clock_refuses_the_same_steps() -> None:
    clock = ManualClock()
    for seconds in (math.inf, math.nan, 1e12):
        with pytest.raises(ValueError, match="cannot pass"):
            clock.advance(seconds)
    assert clock.now() == 0.0
    assert clock.advance(86_400 * 365 * 100) == 0  # a century is fine
    assert clock.wall().year == 2125


async def test_a_reseed_never_reuses_a_live_sandbox_id(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(seed=5, transition_ms=0))
    fake.create_tenant(KEY["X-Api-Key"])
    client = await aiohttp_client(fake.app(), headers=KEY)
    # The same seed before each create: the second draws exactly what the first drew.
    assert (await client.post("/_fake/seed", json={"seed": 5})).status == 200
    first = await create_sandbox(client, name="first")
    assert (await client.post("/_fake/seed", json={"seed": 5})).status == 200
    second = await create_sandbox(client, name="second")
    assert second["id"] != first["id"]
    assert sorted(item["name"] for item in await listed(client)) == ["first", "second"]
    gone = await client.get(f"/v1/sandboxes/{first['id']}")
    assert (await gone.json())["data"]["name"] == "first"


def test_a_reseed_never_reuses_a_live_tenant_id() -> None:
    fake = FakeCreateOS(ServerConfig(seed=5, transition_ms=0))
    first = fake.tenant(fake.create_tenant("skp_one")).id
    fake.reseed(5)
    second = fake.tenant(fake.create_tenant("skp_two")).id
    assert second != first
