"""What holds for every route the fake serves under ``/v1``, whichever module declared it: fault
rules fire on it and the journal records it under its template, and another tenant never
reaches what the route names (404, or 400 for a body it refuses before looking)."""

from __future__ import annotations

from typing import Any

import pytest

from fake_server import FakeCreateOS
from fake_server.routes import declared
from fake_server.routes.common import Route
from fake_server.tunnels import echo
from tests.conftest import Client, ClientFactory, create_sandbox
from tests.test_computer import launch
from tests.test_disks import create_disk

#: Routes any client may call without a key (nothing of a tenant's to reach).
PUBLIC = {"/healthz", "/readyz", "/openapi.json", "/v1/shapes", "/v1/rootfs"}


def _v1_routes() -> list[Route]:
    return [
        route
        for route in declared()
        if route.template.startswith("/v1/") and route.template not in PUBLIC
    ]


def _ids(route: Route) -> str:
    return f"{route.method} {route.template}"


async def _resources(client: Client, fake: FakeCreateOS) -> dict[str, str]:
    """One of everything a route can name, all the tenant's own: a running desktop sandbox
    with a process, a window and a service on port 7, a template, a network and a disk."""
    sandbox = await create_sandbox(client, rootfs="desktop:1")
    process = await client.post(f"/v1/sandboxes/{sandbox['id']}/processes", json={"cmd": "cat"})
    template = await client.post(
        "/v1/templates", json={"name": "every-route", "dockerfile": "FROM devbox:1"}
    )
    network = await client.post("/v1/networks", json={"name": "every-route"})
    fake.tunnels.listen(sandbox["id"], 7, echo)
    return {
        "id": sandbox["id"],
        "ip": sandbox["ip"],
        "pid": (await process.json())["data"]["process_id"],
        "template": (await template.json())["data"]["id"],
        "network": (await network.json())["data"]["id"],
        "disk": (await create_disk(client, "every-route"))["id"],
        "wid": await launch(client, sandbox["id"], "xterm"),
        "sid": "screen-0",
        "port": "7",
    }


@pytest.mark.parametrize("route", _v1_routes(), ids=_ids)
async def test_a_fault_rule_fires_on_the_route_and_the_journal_names_it(
    client: Client, fake: FakeCreateOS, route: Route
) -> None:
    rule = {
        "match": {"route": f"{route.method} {route.template}"},
        "action": {"type": "error", "status": 503, "message": "injected here"},
    }
    assert (await client.post("/_fake/faults", json=rule)).status == 200
    path = route.template.format_map(_Placeholders())
    response = await client.request(route.method, path)
    body = await response.json()
    assert response.status == 503, body
    assert body == {"status": "error", "message": "injected here", "code": 503}
    (entry,) = fake.journal.requests(route=f"{route.method} {route.template}")
    assert entry.status == 503
    assert entry.rules


@pytest.mark.parametrize("route", _v1_routes(), ids=_ids)
async def test_another_tenant_never_reaches_what_the_route_names(
    client: Client, fake: FakeCreateOS, aiohttp_client: ClientFactory, route: Route
) -> None:
    if "{" not in route.template:
        pytest.skip("names nothing: lists and creates are per tenant by construction")
    ours = await _resources(client, fake)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    response = await other.request(route.method, route.template.format(**ours))
    body: Any = await response.json()
    allowed = {404, 400} if route.operation.body is not None else {404}
    assert response.status in allowed, body
    # Still ours, untouched: the sandbox is running and its process is there.
    mine = await client.get(f"/v1/sandboxes/{ours['id']}/processes/{ours['pid']}")
    assert mine.status == 200


class _Placeholders(dict[str, str]):
    """Any value for every placeholder: a fault answers before anything is looked up."""

    def __missing__(self, key: str) -> str:
        return "7" if key == "port" else f"x_{key}"
