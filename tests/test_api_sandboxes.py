"""Sandbox management over HTTP: envelopes, auth, tenants, lifecycle, validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import Client, ClientFactory, create_sandbox, data_of


async def expect_error(response: Any, status: int, fragment: str = "") -> dict[str, Any]:
    """Assert a JSend error with the given status whose message contains ``fragment``."""
    assert response.status == status, await response.text()
    assert response.headers["Content-Type"].startswith("application/json")
    body: dict[str, Any] = await response.json()
    assert body["status"] == ("fail" if status < 500 else "error")
    assert body["code"] == status
    assert fragment in body["message"]
    return body


async def test_health_and_catalog_need_no_key(
    fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    client = await aiohttp_client(fake.app())
    for path in ("/healthz", "/readyz", "/v1/shapes", "/v1/rootfs"):
        response = await client.get(path)
        assert response.status == 200, path
        assert (await response.json())["status"] == "success"
    shapes = (await (await client.get("/v1/shapes")).json())["data"]
    assert {"s-1vcpu-1gb", "s-2vcpu-4gb"} <= {s["id"] for s in shapes["data"]}
    assert shapes["pagination"]["total"] == len(shapes["data"])
    rootfs = (await (await client.get("/v1/rootfs")).json())["data"]
    assert rootfs["default"] in rootfs["rootfs"]


async def test_shapes_are_paged_like_every_list(
    fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    # Contract §3: a page of shapes; a client walking offsets until an empty page stops.
    client = await aiohttp_client(fake.app())
    everything = (await data_of(await client.get("/v1/shapes")))["data"]
    walked: list[Any] = []
    for _ in range(len(everything) + 1):
        page = await data_of(await client.get(f"/v1/shapes?limit=4&offset={len(walked)}"))
        assert page["pagination"] == {
            "total": len(everything),
            "limit": 4,
            "offset": len(walked),
            "count": len(page["data"]),
        }
        if not page["data"]:
            break
        walked += page["data"]
    assert walked == everything
    await expect_error(await client.get("/v1/shapes?limit=x"), 400, "limit: must be an integer")


@pytest.mark.parametrize("headers", [{}, {"X-Api-Key": ""}, {"X-Api-Key": "   "}])
async def test_missing_key_is_401_in_the_envelope(
    fake: FakeCreateOS, aiohttp_client: ClientFactory, headers: dict[str, str]
) -> None:
    client = await aiohttp_client(fake.app())
    await expect_error(await client.get("/v1/sandboxes", headers=headers), 401, "API key")


async def test_a_fail_carries_its_message_in_data_too_and_an_error_does_not(
    client: Client, fake: FakeCreateOS
) -> None:
    """The TypeScript SDK shows only a fail's ``data``; the other clients read ``message``
    first. A fail without field details says its message in both; one with them keeps them."""
    missing = await expect_error(await client.get("/v1/sandboxes/sb_nope"), 404, "not found")
    assert missing["data"] == missing["message"]
    invalid = await expect_error(await client.post("/v1/sandboxes", json={"shape": 7}), 400)
    assert isinstance(invalid["data"], dict)
    assert "shape" in invalid["data"]
    fake.faults.error(503, route="GET /v1/whoami", times=1)
    injected = await expect_error(await client.get("/v1/whoami"), 503)
    assert "data" not in injected


async def test_strict_mode_accepts_only_registered_keys(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(strict=True, api_keys=("skp_known",), transition_ms=0))
    client = await aiohttp_client(fake.app())
    await expect_error(await client.get("/v1/whoami", headers={"X-Api-Key": "skp_other"}), 401)
    ok = await client.get("/v1/whoami", headers={"X-Api-Key": "skp_known"})
    assert ok.status == 200


async def test_create_get_and_view_fields(client: Client) -> None:
    created = await create_sandbox(
        client, name="web-1", envs={"TOKEN": "secret"}, egress=["api.example.com:443"]
    )
    assert created["status"] == "running"
    assert created["id"].startswith("sb_")
    assert created["bandwidth_quota_bytes"] == -1
    view = (await (await client.get(f"/v1/sandboxes/{created['id']}")).json())["data"]
    assert view["name"] == "web-1"
    assert view["envs"] == ["TOKEN"]  # names only, never values
    assert "secret" not in str(view)
    assert view["egress"] == ["api.example.com:443"]
    assert view["ip"] == created["ip"]
    assert view["created_at"].endswith("Z")
    assert "ingress_url_template" not in view
    by_ip = await client.get(f"/v1/sandboxes/by-ip/{created['ip']}")
    assert (await by_ip.json())["data"]["id"] == created["id"]


async def test_tenants_never_see_each_other(
    fake: FakeCreateOS, client: Client, aiohttp_client: ClientFactory
) -> None:
    mine = await create_sandbox(client)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    await expect_error(await other.get(f"/v1/sandboxes/{mine['id']}"), 404, "sandbox not found")
    await expect_error(await other.delete(f"/v1/sandboxes/{mine['id']}"), 404)
    listing = (await (await other.get("/v1/sandboxes")).json())["data"]
    assert listing["data"] == []
    assert listing["pagination"]["total"] == 0


async def test_list_pages_and_filters(client: Client) -> None:
    ids = [(await create_sandbox(client))["id"] for _ in range(7)]
    await client.post(f"/v1/sandboxes/{ids[0]}/pause")
    page = (await (await client.get("/v1/sandboxes?limit=3&offset=3")).json())["data"]
    assert [s["id"] for s in page["data"]] == ids[3:6]
    assert page["pagination"] == {"total": 7, "limit": 3, "offset": 3, "count": 3}
    paused = (await (await client.get("/v1/sandboxes?status=paused")).json())["data"]
    assert [s["id"] for s in paused["data"]] == [ids[0]]
    await expect_error(await client.get("/v1/sandboxes?status=sleeping"), 400, "status")
    await expect_error(await client.get("/v1/sandboxes?limit=x"), 400, "limit")
    clamped = (await (await client.get("/v1/sandboxes?limit=100000")).json())["data"]
    assert clamped["pagination"]["limit"] == 500


async def test_pause_resume_delete_cycle(client: Client) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    paused = await client.post(f"/v1/sandboxes/{sandbox_id}/pause")
    assert (await paused.json())["data"]["status"] == "paused"
    await expect_error(await client.post(f"/v1/sandboxes/{sandbox_id}/pause"), 409, "paused")
    resumed = await client.post(f"/v1/sandboxes/{sandbox_id}/resume", json={})
    assert (await resumed.json())["data"]["status"] == "running"
    await expect_error(await client.post(f"/v1/sandboxes/{sandbox_id}/resume"), 409, "running")
    deleted = await client.delete(f"/v1/sandboxes/{sandbox_id}")
    assert (await deleted.json())["data"] == {"id": sandbox_id, "status": "destroyed"}
    again = await client.delete(f"/v1/sandboxes/{sandbox_id}")
    assert again.status == 200  # idempotent
    view = (await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json())["data"]
    assert view["status"] == "destroyed"
    assert "destroyed_at" in view


async def test_transitions_are_asynchronous_on_the_manual_clock(
    aiohttp_client: ClientFactory,
) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, transition_ms=500, seed=1))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    pausing = await client.post(f"/v1/sandboxes/{sandbox_id}/pause")
    assert (await pausing.json())["data"]["status"] == "pausing"
    await expect_error(
        await client.post(f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "true"}), 409, "pausing"
    )
    fake.clock.advance(0.5)  # type: ignore[attr-defined]
    view = (await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json())["data"]
    assert view["status"] == "paused"
    deleting = await client.delete(f"/v1/sandboxes/{sandbox_id}")
    assert (await deleting.json())["data"]["status"] == "destroying"


async def test_deleted_sandboxes_can_answer_404(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(deleted="404", transition_ms=0))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    sandbox_id = (await create_sandbox(client))["id"]
    kept = (await create_sandbox(client))["id"]
    await client.delete(f"/v1/sandboxes/{sandbox_id}")
    await expect_error(await client.get(f"/v1/sandboxes/{sandbox_id}"), 404)
    # Lists leave it out too (they showed it as destroyed).
    for query in ("", "?status=destroyed"):
        page = (await (await client.get(f"/v1/sandboxes{query}")).json())["data"]
        assert [s["id"] for s in page["data"]] == ([kept] if not query else [])
        assert page["pagination"]["total"] == (1 if not query else 0)


async def test_names_are_unique_among_live_sandboxes(client: Client) -> None:
    first = await create_sandbox(client, name="dup")
    await expect_error(
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "name": "dup"}), 409
    )
    await client.delete(f"/v1/sandboxes/{first['id']}")
    # A destroyed sandbox frees its name.
    await create_sandbox(client, name="dup")


async def test_fork_copies_files_and_keeps_the_parent_paused(client: Client) -> None:
    parent = (await create_sandbox(client))["id"]
    await client.put(f"/v1/sandboxes/{parent}/files?path=/data/a.txt", data=b"hello")
    await expect_error(await client.post(f"/v1/sandboxes/{parent}/fork"), 409, "running")
    await client.post(f"/v1/sandboxes/{parent}/pause")
    child = (await (await client.post(f"/v1/sandboxes/{parent}/fork", json={})).json())["data"]
    assert child["forked_from"] == parent
    assert child["status"] == "running"
    copied = await client.get(f"/v1/sandboxes/{child['id']}/files?path=/data/a.txt")
    assert await copied.read() == b"hello"
    parent_view = (await (await client.get(f"/v1/sandboxes/{parent}")).json())["data"]
    assert parent_view["status"] == "paused"


async def test_patch_egress_resize_ssh_and_bandwidth(client: Client) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    patched = await client.patch(
        f"/v1/sandboxes/{sandbox_id}",
        json={"ingress_enabled": True, "auto_pause_after_seconds": 600},
    )
    view = (await patched.json())["data"]
    assert view["ingress_enabled"] is True
    assert "<port>" in view["ingress_url_template"]
    assert view["auto_pause_after_seconds"] == 600
    cleared = await client.patch(f"/v1/sandboxes/{sandbox_id}", json={"disable_auto_pause": True})
    assert "auto_pause_after_seconds" not in (await cleared.json())["data"]
    egress = await client.put(f"/v1/sandboxes/{sandbox_id}/egress", json={"egress": ["1.2.3.4"]})
    assert (await egress.json())["data"] == {"id": sandbox_id, "egress": ["1.2.3.4"]}
    got = await client.get(f"/v1/sandboxes/{sandbox_id}/egress")
    assert (await got.json())["data"]["egress"] == ["1.2.3.4"]
    resized = await client.post(f"/v1/sandboxes/{sandbox_id}/resize", json={"disk_mib": 100_000})
    assert (await resized.json())["data"]["disk_mib"] == 100_000
    await expect_error(
        await client.post(f"/v1/sandboxes/{sandbox_id}/resize", json={"disk_mib": 1}), 400
    )
    keys = await client.post(
        f"/v1/sandboxes/{sandbox_id}/ssh-pubkeys",
        json={"keys": ["ssh-ed25519 AAAA x@y", "ssh-ed25519 AAAA other"]},
    )
    assert (await keys.json())["data"] == {"count": 1}
    view = (await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json())["data"]
    assert view["ssh_pubkeys"] == ["ssh-ed25519 AAAA"]  # the view follows in-place changes
    bandwidth = (await (await client.get(f"/v1/sandboxes/{sandbox_id}/bandwidth")).json())["data"]
    assert bandwidth["quota_bytes"] == -1


async def test_whoami_counts_live_sandboxes(client: Client) -> None:
    first = (await create_sandbox(client))["id"]
    await create_sandbox(client)
    await client.post(f"/v1/sandboxes/{first}/pause")
    data = (await (await client.get("/v1/whoami")).json())["data"]
    assert data["user_id"].startswith("usr_")
    assert data["stats"] == {"running": 1, "paused": 1, "other": 0, "total": 2}


BAD_CREATES = [
    (b"{not json", 400, "valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"shape": 5}', 400, "shape"),
    (b"{}", 400, "shape"),
    (b'{"shape": "s-huge"}', 400, "unknown shape"),
    (b'{"shape": "s-1vcpu-1gb", "rootfs": "windows:11"}', 400, "rootfs"),
    (b'{"shape": "s-1vcpu-1gb", "region": "mars"}', 400, "region"),
    (b'{"shape": "s-1vcpu-1gb", "name": "a-name-that-is-far-too-long"}', 400, "name"),
    (b'{"shape": "s-1vcpu-1gb", "name": "bad name!"}', 400, "name"),
    (b'{"shape": "s-1vcpu-1gb", "auto_pause_after_seconds": 5}', 400, "auto_pause"),
    (b'{"shape": "s-1vcpu-1gb", "envs": {"1BAD": "x"}}', 400, "envs"),
    (b'{"shape": "s-1vcpu-1gb", "envs": ["A"]}', 400, "envs"),
    (b'{"shape": "s-1vcpu-1gb", "egress": "*"}', 400, "egress"),
    (b'{"shape": "s-1vcpu-1gb", "ingress_enabled": "yes"}', 400, "ingress_enabled"),
    (b'{"shape": "s-1vcpu-1gb", "bandwidth_quota_bytes": 10}', 400, "bandwidth"),
    (b'{"shape": "s-1vcpu-1gb", "colour": "blue"}', 400, "unknown field"),
    (b'{"shape": "s-1vcpu-1\\u0000gb"}', 400, "NUL"),
]


@pytest.mark.parametrize(("body", "status", "fragment"), BAD_CREATES)
async def test_bad_creates_get_clear_4xx(
    client: Client, body: bytes, status: int, fragment: str
) -> None:
    response = await client.post(
        "/v1/sandboxes", data=body, headers={"Content-Type": "application/json"}
    )
    await expect_error(response, status, fragment)


async def test_huge_body_is_413(client: Client) -> None:
    response = await client.post(
        "/v1/sandboxes",
        data=b'{"shape": "' + b"x" * (300 << 10) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    await expect_error(response, 413, "too large")


@pytest.mark.parametrize(
    "path", ["/v1/sandboxes/nope", "/v1/sandboxes/..%2F..", "/v1/sandboxes/%00", "/v1/unknown"]
)
async def test_unknown_ids_and_routes_are_404_in_the_envelope(client: Client, path: str) -> None:
    await expect_error(await client.get(path), 404)


async def test_wrong_method_is_405_and_never_a_redirect(client: Client) -> None:
    body = await expect_error(await client.put("/v1/sandboxes"), 405)
    assert body["message"] == "method not allowed"
    response = await client.get("/v1/sandboxes/", allow_redirects=False)
    assert response.status == 404


async def test_unrouted_requests_are_enveloped_journaled_and_name_the_allowed_methods(
    fake: FakeCreateOS, client: Client
) -> None:
    # One path template with several methods, one with a single method (and its HEAD), and a
    # path no route serves at all.
    body = await expect_error(await client.post("/v1/sandboxes/sb_x"), 405)
    assert body["message"] == "method not allowed"
    response = await client.post("/v1/sandboxes/sb_x")
    assert set(response.headers["Allow"].split(",")) == {"GET", "HEAD", "PATCH", "DELETE"}
    put = await client.put("/healthz")
    assert put.status == 405
    assert set(put.headers["Allow"].split(",")) == {"GET", "HEAD"}
    await expect_error(await client.delete("/v2/anything/at/all"), 404, "route not found")
    entries = [e for e in fake.journal.requests() if e.route is None]
    assert [(e.method, e.path, e.status) for e in entries] == [
        ("POST", "/v1/sandboxes/sb_x", 405),
        ("POST", "/v1/sandboxes/sb_x", 405),
        ("PUT", "/healthz", 405),
        ("DELETE", "/v2/anything/at/all", 404),
    ]
    assert all(e.tenant is None for e in entries)  # no route, so no authentication either


async def test_routed_requests_are_journaled_with_their_method_and_decoded_path(
    fake: FakeCreateOS, client: Client
) -> None:
    for method in ("GET", "HEAD", "DELETE"):
        response = await client.request(method, "/v1/sandboxes/sb%20x")
        assert response.status == 404
    entries = fake.journal.requests(route="/v1/sandboxes/{id}")
    assert [(e.method, e.path, e.sandbox) for e in entries] == [
        (method, "/v1/sandboxes/sb x", "sb x") for method in ("GET", "HEAD", "DELETE")
    ]


async def test_head_answers_what_get_would_without_a_body(client: Client) -> None:
    for path in ("/healthz", "/v1/sandboxes", "/v1/sandboxes/nope"):
        get, head = await client.get(path), await client.head(path)
        assert head.status == get.status
        assert head.headers["Content-Type"] == get.headers["Content-Type"]
        assert head.headers["Content-Length"] == get.headers["Content-Length"]
        assert await head.read() == b""


async def test_every_response_carries_a_request_id(client: Client) -> None:
    first = await client.get("/v1/sandboxes")
    second = await client.get("/v1/nothing")
    assert first.headers["X-Request-ID"] != second.headers["X-Request-ID"]


async def test_two_apps_of_one_fake_never_repeat_a_request_id(
    aiohttp_client: ClientFactory,
) -> None:
    """Both apps write to the fake's one journal; each app once counted from 1 on its own."""
    fake = FakeCreateOS(seed=1)
    first = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_same"})
    second = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_same"})
    ids = [
        (await client.get("/v1/whoami")).headers["X-Request-ID"]
        for client in (first, second, first, second)
    ]
    assert ids == ["req_00000001", "req_00000002", "req_00000003", "req_00000004"]


async def test_hosts_need_administrator_credentials(client: Client) -> None:
    await expect_error(await client.get("/v1/hosts"), 403, "administrator")


async def seeded_session(aiohttp_client: ClientFactory, seed: int) -> list[bytes]:
    """The raw bodies of a fixed sequence of requests against a fresh seeded fake."""
    fake = FakeCreateOS(ServerConfig(seed=seed, manual_clock=True, transition_ms=100))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_replay"})
    bodies = []
    for _ in range(3):
        created = await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"})
        bodies.append(await created.read())
    first = (await (await client.get("/v1/sandboxes")).json())["data"]["data"][0]["id"]
    bodies.append(await (await client.post(f"/v1/sandboxes/{first}/pause")).read())
    fake.clock.advance(0.1)  # type: ignore[attr-defined]
    bodies.append(await (await client.get(f"/v1/sandboxes/{first}")).read())
    bodies.append(await (await client.get("/v1/sandboxes?limit=10")).read())
    return bodies


async def test_a_seeded_run_is_reproducible_byte_for_byte(aiohttp_client: ClientFactory) -> None:
    first = await seeded_session(aiohttp_client, 11)
    again = await seeded_session(aiohttp_client, 11)
    other = await seeded_session(aiohttp_client, 12)
    assert first == again
    assert first != other
    names = [json.loads(body)["data"]["name"] for body in first[:3]]
    assert all(0 < len(name) <= 22 for name in names)
    assert len(set(names)) == 3


async def test_guards_on_changes_and_queries(client: Client) -> None:
    sandbox_id = (await create_sandbox(client))["id"]
    await expect_error(await client.get("/v1/sandboxes?offset=-1"), 400, "offset")
    bad_key = await client.post(f"/v1/sandboxes/{sandbox_id}/ssh-pubkeys", json={"keys": ["nope"]})
    await expect_error(bad_key, 400, "ssh public key")
    await client.delete(f"/v1/sandboxes/{sandbox_id}")
    patched = await client.patch(f"/v1/sandboxes/{sandbox_id}", json={"ingress_enabled": True})
    await expect_error(patched, 409, "destroyed")
    egress = await client.put(f"/v1/sandboxes/{sandbox_id}/egress", json={"egress": []})
    await expect_error(egress, 409, "no longer be modified")
    blank = await client.post("/_fake/tenants", json={"api_key": "  "})
    await expect_error(blank, 400, "blank")
