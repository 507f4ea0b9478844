"""Delegated sandbox access tokens over HTTP (contract §4.13, §1.2): enable, read, rotate,
disable; what a token may call (its sandbox's exec, files, processes and desktop) and what it
may not (403 on management routes, 404 on other sandboxes); that it ends when rotated, disabled,
its sandbox is destroyed or its tenant dropped; and that it never shows in the journal, the
state, the logs or an error."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest

from fake_server import FakeCreateOS, errors
from fake_server.access_tokens import AccessTokens, delegable
from fake_server.openapi import document
from fake_server.sandboxes import CreateSpec
from tests.conftest import Client, ClientFactory, create_sandbox

TOKEN = re.compile(r"^skp_sb_[A-Za-z0-9]{32}$")


async def enable(client: Client, sandbox_id: str) -> dict[str, Any]:
    response = await client.post(f"/v1/sandboxes/{sandbox_id}/access-token")
    body = await response.json()
    assert response.status == 200, body
    data: dict[str, Any] = body["data"]
    return data


async def as_token(
    client: Client, token: str, method: str, path: str, **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    """A request sent with the delegated token instead of the owner's key."""
    response = await client.request(method, path, headers={"X-Api-Key": token}, **kwargs)
    return response.status, await response.json()


async def exec_echo(client: Client, token: str, sandbox_id: str) -> tuple[int, dict[str, Any]]:
    return await as_token(
        client,
        token,
        "POST",
        f"/v1/sandboxes/{sandbox_id}/exec",
        json={"cmd": "echo", "args": ["hi"]},
    )


# -- enable, read, rotate, disable -------------------------------------------------------------


async def test_enable_shows_the_token_once_and_reading_shows_only_a_hint(client: Client) -> None:
    sandbox = await create_sandbox(client)
    issued = await enable(client, sandbox["id"])
    assert TOKEN.match(issued["token"])
    assert issued["enabled"] is True
    assert issued["created_at"].endswith("Z")
    assert "rotated_at" not in issued

    response = await client.get(f"/v1/sandboxes/{sandbox['id']}/access-token")
    metadata = (await response.json())["data"]
    token = issued["token"]
    assert metadata == {
        "enabled": True,
        "token_hint": f"{token[:9]}...{token[-4:]}",
        "created_at": issued["created_at"],
    }
    assert token not in await response.text()


async def test_enabling_twice_is_a_conflict(client: Client) -> None:
    sandbox = await create_sandbox(client)
    first = await enable(client, sandbox["id"])
    response = await client.post(f"/v1/sandboxes/{sandbox['id']}/access-token")
    body = await response.json()
    assert response.status == 409
    assert body["message"] == errors.ACCESS_TOKEN_ENABLED
    # The token that was enabled still works.
    assert (await exec_echo(client, first["token"], sandbox["id"]))[0] == 200


async def test_a_sandbox_without_a_token_reads_as_disabled(client: Client) -> None:
    sandbox = await create_sandbox(client)
    response = await client.get(f"/v1/sandboxes/{sandbox['id']}/access-token")
    assert (await response.json())["data"] == {"enabled": False}


async def test_rotating_ends_the_old_token_at_once(client: Client, fake: FakeCreateOS) -> None:
    sandbox = await create_sandbox(client)
    first = await enable(client, sandbox["id"])
    response = await client.post(f"/v1/sandboxes/{sandbox['id']}/access-token/rotate")
    rotated = (await response.json())["data"]
    assert response.status == 200
    assert TOKEN.match(rotated["token"])
    assert rotated["token"] != first["token"]
    assert rotated["created_at"] == first["created_at"]
    assert "rotated_at" in rotated

    status, body = await exec_echo(client, first["token"], sandbox["id"])
    assert (status, body["message"]) == (401, errors.INVALID_API_KEY)
    status, body = await exec_echo(client, rotated["token"], sandbox["id"])
    assert (status, body["data"]["result"]["stdout"]) == (200, "hi\n")
    metadata = await (await client.get(f"/v1/sandboxes/{sandbox['id']}/access-token")).json()
    assert metadata["data"]["rotated_at"] == rotated["rotated_at"]


async def test_rotating_without_a_token_is_not_found(client: Client) -> None:
    sandbox = await create_sandbox(client)
    response = await client.post(f"/v1/sandboxes/{sandbox['id']}/access-token/rotate")
    assert response.status == 404
    assert (await response.json())["message"] == errors.ACCESS_TOKEN_NOT_FOUND


async def test_disabling_ends_the_token_and_succeeds_without_one(client: Client) -> None:
    sandbox = await create_sandbox(client)
    issued = await enable(client, sandbox["id"])
    for _ in range(2):  # the second time there is no token: still a success
        response = await client.delete(f"/v1/sandboxes/{sandbox['id']}/access-token")
        assert response.status == 200
        assert (await response.json())["data"] == {"enabled": False}
    assert (await exec_echo(client, issued["token"], sandbox["id"]))[0] == 401
    # Enabling again issues a new token.
    again = await enable(client, sandbox["id"])
    assert again["token"] != issued["token"]


async def test_a_destroyed_sandbox_takes_no_token_and_its_token_ends(client: Client) -> None:
    sandbox = await create_sandbox(client)
    issued = await enable(client, sandbox["id"])
    await client.delete(f"/v1/sandboxes/{sandbox['id']}")
    assert (await exec_echo(client, issued["token"], sandbox["id"]))[0] == 401
    response = await client.post(f"/v1/sandboxes/{sandbox['id']}/access-token")
    assert response.status == 409


async def test_another_tenant_cannot_manage_the_token(
    client: Client, fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    sandbox = await create_sandbox(client)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    for method, suffix in (
        ("POST", ""),
        ("GET", ""),
        ("POST", "/rotate"),
        ("DELETE", ""),
    ):
        response = await other.request(
            method, f"/v1/sandboxes/{sandbox['id']}/access-token{suffix}"
        )
        assert response.status == 404, (method, suffix)
    assert len(fake.access_tokens) == 0


# -- what a delegated token may call --------------------------------------------------------------


async def test_a_token_runs_exec_files_and_processes_on_its_sandbox(client: Client) -> None:
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    base = f"/v1/sandboxes/{sandbox['id']}"

    status, body = await exec_echo(client, token, sandbox["id"])
    assert (status, body["data"]["result"]["stdout"]) == (200, "hi\n")
    status, _ = await as_token(client, token, "PUT", f"{base}/files?path=/tmp/a", data=b"bytes")
    assert status == 200
    response = await client.get(f"{base}/files?path=/tmp/a", headers={"X-Api-Key": token})
    assert (response.status, await response.read()) == (200, b"bytes")
    status, body = await as_token(
        client, token, "POST", f"{base}/processes", json={"cmd": "echo", "args": ["p"]}
    )
    assert status == 200
    process_id = body["data"]["process_id"]
    status, body = await as_token(
        client, token, "GET", f"{base}/processes/{process_id}/wait?timeout_ms=5000"
    )
    assert (status, body["data"]["exit_code"]) == (200, 0)


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("PATCH", ""),
        ("DELETE", ""),
        ("POST", "/pause"),
        ("GET", "/egress"),
        ("POST", "/access-token"),
        ("GET", "/access-token"),
        ("POST", "/access-token/rotate"),
        ("DELETE", "/access-token"),
    ],
)
async def test_a_token_is_refused_on_its_sandboxs_management_routes(
    client: Client, fake: FakeCreateOS, method: str, suffix: str
) -> None:
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    status, body = await as_token(client, token, method, f"/v1/sandboxes/{sandbox['id']}{suffix}")
    assert (status, body["message"]) == (403, errors.DELEGATED_FORBIDDEN)
    # Nothing changed: the sandbox still runs and its token still works.
    assert fake.find_sandbox(sandbox["id"]).status.value == "running"
    assert (await exec_echo(client, token, sandbox["id"]))[0] == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/sandboxes"), ("POST", "/v1/sandboxes"), ("GET", "/v1/whoami")],
)
async def test_a_token_is_refused_on_account_routes(
    client: Client, fake: FakeCreateOS, method: str, path: str
) -> None:
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    status, body = await as_token(client, token, method, path, json={"shape": "s-1vcpu-1gb"})
    assert (status, body["message"]) == (403, errors.DELEGATED_FORBIDDEN)
    assert len(fake.tenant("skp_test_owner").sandboxes) == 1


async def test_a_token_cannot_reach_another_sandbox(
    client: Client, fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    mine = await create_sandbox(client)
    sibling = await create_sandbox(client)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    foreign = await create_sandbox(other)
    token = (await enable(client, mine["id"]))["token"]
    for target in (sibling["id"], foreign["id"], "sb_nonexistent"):
        status, body = await exec_echo(client, token, target)
        assert (status, body["message"]) == (404, errors.SANDBOX_NOT_FOUND), target


async def test_the_journal_attributes_a_token_request_to_its_owner(
    client: Client, fake: FakeCreateOS
) -> None:
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    await exec_echo(client, token, sandbox["id"])
    (entry,) = fake.journal.requests(route="POST /v1/sandboxes/{id}/exec")
    assert (entry.tenant, entry.sandbox, entry.status) == (
        fake.tenant("skp_test_owner").id,
        sandbox["id"],
        200,
    )


async def test_fault_rules_for_the_owners_tenant_apply_to_token_requests(
    client: Client, fake: FakeCreateOS
) -> None:
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    fake.faults.add(
        {
            "match": {"route": "POST /v1/sandboxes/{id}/exec"},
            "action": {"type": "error", "status": 503},
            "times": 1,
        }
    )
    assert (await exec_echo(client, token, sandbox["id"]))[0] == 503
    assert (await exec_echo(client, token, sandbox["id"]))[0] == 200


# -- what is never a tenant --------------------------------------------------------------------


async def test_a_token_shaped_key_never_makes_a_tenant(
    fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    assert not fake.tenants.strict  # open mode: any other unknown key makes a tenant
    made_up = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_sb_" + "x" * 32})
    response = await made_up.get("/v1/whoami")
    assert response.status == 401
    stranger = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_stranger"})
    assert (await stranger.get("/v1/whoami")).status == 200


async def test_dropping_the_tenant_or_resetting_ends_its_tokens(
    client: Client, fake: FakeCreateOS, api_key: str
) -> None:
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    fake.drop_tenant(api_key)
    assert fake.access_tokens.live.get(token) is None
    assert (await exec_echo(client, token, sandbox["id"]))[0] == 401

    fake.create_tenant(api_key)
    sandbox = await create_sandbox(client)
    token = (await enable(client, sandbox["id"]))["token"]
    fake.reset()
    assert len(fake.access_tokens) == 0
    assert (await exec_echo(client, token, sandbox["id"]))[0] == 401


# -- never recorded --------------------------------------------------------------------------------


async def test_tokens_never_show_in_the_journal_the_state_the_logs_or_errors(
    client: Client, fake: FakeCreateOS, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sandbox = await create_sandbox(client)
    other = await create_sandbox(client)
    first = (await enable(client, sandbox["id"]))["token"]
    rotated = await (await client.post(f"/v1/sandboxes/{sandbox['id']}/access-token/rotate")).json()
    second = rotated["data"]["token"]
    answers = [
        await exec_echo(client, first, sandbox["id"]),  # 401: rotated away
        await exec_echo(client, second, sandbox["id"]),
        await exec_echo(client, second, other["id"]),  # 404
        await as_token(client, second, "GET", f"/v1/sandboxes/{sandbox['id']}"),  # 403
    ]
    assert [status for status, _ in answers] == [401, 200, 404, 403]
    issued = fake.access_tokens.live.get(second)
    assert issued is not None

    recorded = "\n".join(
        [
            json.dumps([entry.as_json() for entry in fake.journal], default=str),
            fake.journal.format(),
            json.dumps(fake.state(), default=str),
            caplog.text,
            json.dumps([body for status, body in answers if status != 200]),
            repr(issued),
        ]
    )
    for token in (first, second):
        assert token not in recorded
        assert token[-12:] not in recorded  # not even most of it


# -- the route table and the document --------------------------------------------------------------


def test_a_token_may_call_exactly_the_runtime_routes() -> None:
    assert delegable("/v1/sandboxes/{id}/exec")
    assert delegable("/v1/sandboxes/{id}/files")
    assert delegable("/v1/sandboxes/{id}/processes/{pid}/connect")
    assert delegable("/v1/sandboxes/{id}/computer/mouse/click")
    assert not delegable("/v1/sandboxes/{id}")
    assert not delegable("/v1/sandboxes/{id}/access-token")
    assert not delegable("/v1/sandboxes/{id}/executor")  # a prefix of a name is not the name
    assert not delegable("/v1/whoami")
    assert not delegable(None)


#: Delegable operations that answer 403 for a reason of their own: an upload into the image's
#: read-only programs, whoever sends it.
FORBIDDEN_OTHERWISE = {("put", "/v1/sandboxes/{id}/files")}


def test_the_document_shows_403_where_a_token_is_refused() -> None:
    paths = document()["paths"]
    for path, item in paths.items():
        for method, op in item.items():
            if method == "parameters" or not path.startswith("/v1/") or op.get("security") == []:
                continue
            refused = "403" in op["responses"]
            expected = not delegable(path) or (method, path) in FORBIDDEN_OTHERWISE
            assert refused is expected, f"{method} {path}"


def test_access_tokens_repr_hides_the_token(fake: FakeCreateOS) -> None:
    tokens = AccessTokens(fake.ids, fake.clock.wall)
    tenant = fake.tenant(fake.create_tenant())
    sandbox = fake.sandboxes.create(tenant, CreateSpec(shape="s-1vcpu-1gb"))
    issued = tokens.enable(tenant, sandbox)
    assert issued.token not in repr(issued)
    assert tokens.live.get(issued.token) is issued
