"""Account-level resource routes: networks and disks, their attachments to sandboxes, and
bandwidth recharges."""

from __future__ import annotations

from aiohttp import web

from fake_server.bandwidth import recharge
from fake_server.disks import DiskCredentials, DiskSpec, MountRequest
from fake_server.routes.common import (
    SANDBOX,
    Routes,
    fake_of,
    ok,
    page_bounds,
    paginated,
    read_body,
    sandbox_of,
    tenant_of,
)

__all__ = ["DISK", "NETWORK", "ROUTES"]

#: The path templates of one network and one disk: ``ref`` is an id or a name (never ``id``,
#: which the request layer reads as a sandbox's).
NETWORK = "/v1/networks/{ref}"
DISK = "/v1/disks/{ref}"


# -- networks -------------------------------------------------------------------------------


async def list_networks(request: web.Request) -> web.Response:
    limit, offset = page_bounds(request)
    networks, total = tenant_of(request).networks.page(limit=limit, offset=offset)
    views = [network.view(members=False) for network in networks]
    return ok(paginated(views, total=total, limit=limit, offset=offset))


async def create_network(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"name"})
    tenant = tenant_of(request)
    tenant.check_credit()
    fake = fake_of(request)
    network = tenant.networks.create(fake.ids, fake.clock.wall(), body.string("name"))
    return ok(network.view(members=True))


async def get_network(request: web.Request) -> web.Response:
    network = tenant_of(request).networks.get(request.match_info["ref"])
    return ok(network.view(members=True))


async def delete_network(request: web.Request) -> web.Response:
    tenant_of(request).networks.delete(request.match_info["ref"])
    return ok({"ok": True})


async def attach_network(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"id"})
    sandbox = sandbox_of(request)
    ref = body.string("id", required=True) or ""
    tenant_of(request).networks.attach(ref, sandbox)
    return ok({"ok": True})


async def detach_network(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    tenant_of(request).networks.detach(request.match_info["net"], sandbox)
    return ok({"ok": True})


# -- disks ------------------------------------------------------------------------------------


async def list_disks(request: web.Request) -> web.Response:
    limit, offset = page_bounds(request)
    disks, total = tenant_of(request).disks.page(limit=limit, offset=offset)
    views = [disk.view() for disk in disks]
    return ok(paginated(views, total=total, limit=limit, offset=offset))


async def create_disk(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"name", "kind", "config", "credentials"})
    spec = DiskSpec.parse(
        name=body.string("name"),
        kind=body.string("kind"),
        config=body.data.get("config"),
        credentials=body.data.get("credentials"),
    )
    tenant = tenant_of(request)
    tenant.check_credit()
    fake = fake_of(request)
    return ok(tenant.disks.create(fake.ids, fake.clock.wall(), spec).view())


async def get_disk(request: web.Request) -> web.Response:
    return ok(tenant_of(request).disks.get(request.match_info["ref"]).view())


async def patch_disk(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"credentials"})
    credentials = DiskCredentials.parse(body.data.get("credentials"))
    disk = tenant_of(request).disks.rotate_credentials(request.match_info["ref"], credentials)
    return ok(disk.view())


async def delete_disk(request: web.Request) -> web.Response:
    tenant_of(request).disks.delete(request.match_info["ref"])
    return ok({"deleted": True})


async def list_sandbox_disks(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    limit, offset = page_bounds(request)
    attachments = tenant_of(request).disks.attached_to(sandbox)
    views = [attachment.view() for attachment in attachments[offset : offset + limit]]
    return ok(paginated(views, total=len(attachments), limit=limit, offset=offset))


async def attach_disk(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"disk_id", "mount_path", "sub_path"})
    sandbox = sandbox_of(request)
    tenant_of(request).disks.attach(sandbox, MountRequest.parse(body.data))
    # The SDKs check that the answer names the sandbox they asked about.
    return ok({"id": sandbox.id})


async def detach_disk(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    detached = tenant_of(request).disks.detach(
        sandbox, request.match_info["disk"], request.query.get("mount_path") or None
    )
    return ok({"detached": detached})


# -- bandwidth ---------------------------------------------------------------------------------


async def recharge_bandwidth(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"add_bytes"})
    # The owner check (404 for another tenant's sandbox) comes before the credit check.
    sandbox = sandbox_of(request)
    return ok(recharge(tenant_of(request), sandbox, body.integer("add_bytes")))


ROUTES: Routes = (
    ("GET", "/v1/networks", list_networks),
    ("POST", "/v1/networks", create_network),
    ("GET", NETWORK, get_network),
    ("DELETE", NETWORK, delete_network),
    ("POST", SANDBOX + "/networks", attach_network),
    ("DELETE", SANDBOX + "/networks/{net}", detach_network),
    ("GET", "/v1/disks", list_disks),
    ("POST", "/v1/disks", create_disk),
    ("GET", DISK, get_disk),
    ("PATCH", DISK, patch_disk),
    ("DELETE", DISK, delete_disk),
    ("GET", SANDBOX + "/disks", list_sandbox_disks),
    ("POST", SANDBOX + "/disks", attach_disk),
    ("DELETE", SANDBOX + "/disks/{disk}", detach_disk),
    ("POST", SANDBOX + "/bandwidth/recharge", recharge_bandwidth),
)
