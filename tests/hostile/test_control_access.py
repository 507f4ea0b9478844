"""The control API and the dashboard answer local tools, not web pages: a foreign ``Host`` (DNS
rebinding) or ``Origin`` (a page posting to ``/_fake/reset``) gets a 403 in the envelope and
changes nothing, unless the fake allows remote use; a control token, when set, is required."""

from __future__ import annotations

import pytest

from fake_server import FakeCreateOS, ServerConfig
from fake_server.cli import build_parser, config_from_args
from tests.conftest import Client, ClientFactory, create_sandbox
from tests.test_api_sandboxes import expect_error

RULE = {"match": {"route": "GET /v1/whoami"}, "action": {"type": "error", "status": 503}}


async def fake_client(aiohttp_client: ClientFactory, **config: object) -> Client:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0, **config))  # type: ignore[arg-type]
    return await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_local"})


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "10.0.0.5", "[2001:db8::1]"])
async def test_a_foreign_host_cannot_reset_or_read(client: Client, host: str) -> None:
    sandbox = await create_sandbox(client)
    refused = await client.post("/_fake/reset", headers={"Host": host})
    await expect_error(refused, 403, "loopback host")
    await expect_error(await client.get("/_fake/state", headers={"Host": host}), 403)
    await expect_error(await client.get("/_fake/", headers={"Host": host}), 403)
    still = await client.get(f"/v1/sandboxes/{sandbox['id']}")
    assert still.status == 200  # the reset did not happen


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:80"])
async def test_loopback_hosts_are_served(client: Client, host: str) -> None:
    response = await client.get("/_fake/state", headers={"Host": host})
    assert response.status == 200, await response.text()


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://127.0.0.1.evil.example",
        "http://[evil",  # unreadable: a 500 from urlsplit once
    ],
)
async def test_a_page_from_another_origin_cannot_add_rules(
    client: Client, fake: FakeCreateOS, origin: str
) -> None:
    # What a form or a no-cors fetch on any web page can send without a preflight.
    headers = {"Origin": origin, "Content-Type": "text/plain"}
    refused = await client.post("/_fake/faults", json=RULE, headers=headers)
    await expect_error(refused, 403, "other origins")
    assert list(fake.faults) == []


async def test_the_dashboard_own_origin_is_served(client: Client, fake: FakeCreateOS) -> None:
    for origin in ("http://127.0.0.1:8080", "http://localhost:3000", "http://[::1]:8080"):
        added = await client.post("/_fake/faults", json=RULE, headers={"Origin": origin})
        assert added.status == 200, await added.text()
    assert len(fake.faults.rules) == 3


async def test_the_api_itself_is_not_restricted(client: Client) -> None:
    response = await client.get("/v1/shapes", headers={"Host": "api.example", "Origin": "null"})
    assert response.status == 200


async def test_allow_remote_serves_any_host_and_origin(aiohttp_client: ClientFactory) -> None:
    client = await fake_client(aiohttp_client, allow_remote=True)
    headers = {"Host": "fake.internal:8080", "Origin": "https://tools.internal"}
    assert (await client.get("/_fake/state", headers=headers)).status == 200


async def test_a_control_token_is_required_when_set(aiohttp_client: ClientFactory) -> None:
    client = await fake_client(aiohttp_client, control_token="s3cret")
    await expect_error(await client.get("/_fake/state"), 403, "control token")
    wrong = await client.get("/_fake/state", headers={"X-Control-Token": "guess"})
    await expect_error(wrong, 403, "control token")
    right = await client.get("/_fake/state", headers={"X-Control-Token": "s3cret"})
    assert right.status == 200
    # The page itself loads without it (a navigation sends no header) and holds no data.
    page = await client.get("/_fake/")
    assert page.status == 200
    assert "s3cret" not in await page.text()


def test_the_cli_passes_both_settings_on() -> None:
    args = build_parser().parse_args(["serve", "--allow-remote", "--control-token", "t0k"])
    config = config_from_args(args)
    assert (config.allow_remote, config.control_token) == (True, "t0k")
    defaults = config_from_args(build_parser().parse_args(["serve"]))
    assert (defaults.allow_remote, defaults.control_token) == (False, None)
