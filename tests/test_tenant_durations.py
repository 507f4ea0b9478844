"""Per-tenant lifecycle durations: a tenant may carry its own transition and create times, set
over the control API by whoever holds its key, and they never reach another tenant."""

from __future__ import annotations

import math
from typing import Any

import pytest

from fake_server import FakeCreateOS, ServerConfig
from fake_server.lifecycle import MAX_DURATION_MS, Durations, check_duration_ms
from tests.conftest import Client, ClientFactory, create_sandbox

DURATIONS = "/_fake/tenant/durations"


@pytest.fixture
def fake_config() -> ServerConfig:
    # Long server-wide transitions on a manual clock: a tenant's own durations show at once.
    return ServerConfig(seed=7, transition_ms=1000, create_ms=0, manual_clock=True)


async def _status(client: Client, sandbox_id: str) -> str:
    body = await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json()
    return str(body["data"]["status"])


async def test_a_tenant_with_its_own_durations_pauses_at_once_another_does_not(
    fake: FakeCreateOS, api_key: str, client: Client, aiohttp_client: ClientFactory
) -> None:
    other_key = fake.create_tenant("skp_other")
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": other_key})
    answer = await client.put(DURATIONS, json={"transition_ms": 0})
    assert (await answer.json())["data"] == {
        "tenant": fake.tenant(api_key).id,
        "own": True,
        "transition_ms": 0,
        "create_ms": 0,
    }
    mine, theirs = await create_sandbox(client), await create_sandbox(other)
    await client.post(f"/v1/sandboxes/{mine['id']}/pause")
    await other.post(f"/v1/sandboxes/{theirs['id']}/pause")
    assert await _status(client, mine["id"]) == "paused"
    assert await _status(other, theirs["id"]) == "pausing"  # the fake's 1000 ms still apply
    fake.clock.advance(1)  # type: ignore[attr-defined]
    assert await _status(other, theirs["id"]) == "paused"


async def test_create_ms_alone_keeps_the_fakes_transition_time(
    fake: FakeCreateOS, client: Client
) -> None:
    body = await (await client.put(DURATIONS, json={"create_ms": 500})).json()
    assert (body["data"]["transition_ms"], body["data"]["create_ms"]) == (1000, 500)
    sandbox = await create_sandbox(client)
    assert sandbox["status"] == "creating"
    fake.clock.advance(0.5)  # type: ignore[attr-defined]
    assert await _status(client, sandbox["id"]) == "running"


async def test_put_replaces_and_an_empty_put_falls_back_to_the_fakes(client: Client) -> None:
    await client.put(DURATIONS, json={"transition_ms": 0, "create_ms": 5})
    back = await (await client.put(DURATIONS, json={})).json()
    assert back["data"] | {"tenant": None} == {
        "tenant": None,
        "own": False,
        "transition_ms": 1000,
        "create_ms": 0,
    }
    read = await (await client.get(DURATIONS)).json()
    assert read["data"] == back["data"]


def test_the_durations_go_with_the_tenant(fake: FakeCreateOS) -> None:
    key = fake.create_tenant("skp_short_lived")
    fake.set_durations(key, transition_ms=0)
    fake.drop_tenant(key)
    again = fake.create_tenant("skp_short_lived")  # the same key, a new tenant
    assert fake.tenant(again).durations is None
    assert fake.durations_of(fake.tenant(again)) == fake.lifecycle.durations


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"transition_ms": -5}, "transition_ms: must not be negative (got -5)"),
        ({"create_ms": "10"}, "create_ms: must be a number of milliseconds (got '10')"),
        ({"transition_ms": True}, "transition_ms: must be a number of milliseconds (got True)"),
        ({"transition_ms": 1e12}, "transition_ms: must be at most 3600000, one hour"),
        ({"pause_ms": 0}, "pause_ms"),
    ],
)
async def test_bad_durations_are_400s_that_name_the_field(
    fake: FakeCreateOS, api_key: str, client: Client, body: dict[str, Any], problem: str
) -> None:
    answer = await client.put(DURATIONS, json=body)
    assert answer.status == 400
    assert problem in (await answer.json())["message"]
    assert fake.tenant(api_key).durations is None  # nothing changed


async def test_only_the_keys_holder_sets_a_tenants_durations(
    fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    anonymous = await aiohttp_client(fake.app())
    no_key = await anonymous.put(DURATIONS, json={"transition_ms": 0})
    assert no_key.status == 401
    assert "X-Api-Key" in (await no_key.json())["message"]
    # A key the fake never registered is not made a tenant by the control API.
    stranger = await anonymous.put(
        DURATIONS, json={"transition_ms": 0}, headers={"X-Api-Key": "skp_unknown"}
    )
    assert stranger.status == 404
    assert fake.tenants.known.get("skp_unknown") is None
    # The answer says how the key gets a tenant (a reader of the control API page who never
    # sent a /v1 request with the key saw a bare "tenant not found"), and that way works.
    message = (await stranger.json())["message"]
    assert message.startswith("tenant not found: no tenant has this X-Api-Key yet;")
    assert 'POST /_fake/tenants with {"api_key": <key>}' in message
    await anonymous.post("/_fake/tenants", json={"api_key": "skp_unknown"})
    registered = await anonymous.put(
        DURATIONS, json={"transition_ms": 0}, headers={"X-Api-Key": "skp_unknown"}
    )
    assert registered.status == 200


def test_the_python_api_validates_too(fake: FakeCreateOS, api_key: str) -> None:
    with pytest.raises(ValueError, match=r"^create_ms: must be finite \(got nan\)$"):
        fake.set_durations(api_key, create_ms=math.nan)
    assert fake.set_durations(api_key, transition_ms=20) == Durations.uniform(0.02)


@pytest.mark.parametrize("value", [0, 0.5, MAX_DURATION_MS])
def test_check_duration_ms_accepts_the_bounds(value: float) -> None:
    assert check_duration_ms(value) == value


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.inf, "must be finite"),
        (-math.inf, "must be finite"),
        (-0.001, "must not be negative"),
        (MAX_DURATION_MS + 1, "must be at most"),
        (None, "must be a number"),
    ],
)
def test_check_duration_ms_refuses_the_rest(value: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_duration_ms(value)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"transition_ms": math.nan}, "transition_ms must be finite"),
        ({"transition_ms": math.inf}, "transition_ms must be finite"),
        ({"create_ms": -1}, "create_ms must not be negative"),
        ({"create_ms": MAX_DURATION_MS + 1}, "create_ms must be at most"),
    ],
)
def test_the_fakes_own_durations_are_checked_when_configured(
    changes: dict[str, float], problem: str
) -> None:
    # A NaN duration never finished a transition, and the control API's info answered it as
    # NaN, which is not JSON.
    with pytest.raises(ValueError, match=problem):
        ServerConfig(**changes)  # type: ignore[arg-type]
    assert ServerConfig(transition_ms=MAX_DURATION_MS, create_ms=0).transition_ms == MAX_DURATION_MS
