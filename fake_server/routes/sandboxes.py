"""Sandbox management routes: create, list, get, patch, delete, pause, resume, fork, egress,
resize, ssh keys and bandwidth."""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.bandwidth import bandwidth_view
from fake_server.disks import MountRequest
from fake_server.errors import ApiError
from fake_server.lifecycle import Status
from fake_server.networks import parse_refs
from fake_server.routes.common import (
    SANDBOX,
    Routes,
    encode,
    fake_of,
    json_response,
    ok,
    page_bounds,
    paginated_body,
    read_body,
    sandbox_of,
    scope,
    tenant_of,
)
from fake_server.sandbox import encoded_views
from fake_server.sandboxes import CreateSpec, ForkSpec

_CREATE_FIELDS = {
    "shape",
    "rootfs",
    "name",
    "region",
    "egress",
    "envs",
    "ssh_pubkeys",
    "ingress_enabled",
    "auto_pause_after_seconds",
    "disk_mib",
    "bandwidth_quota_bytes",
    "networks",
    "disks",
}
# Accepted and ignored, as the real service does (placement is not modeled).
_CREATE_TOLERATED = {"host_id", "node_selector"}


async def create(request: web.Request) -> web.Response:
    body = await read_body(request, allowed=_CREATE_FIELDS, tolerated=_CREATE_TOLERATED)
    if body.integer("bandwidth_quota_bytes"):
        raise ApiError.invalid("bandwidth_quota_bytes", errors.BANDWIDTH_QUOTA)
    auto_pause = body.integer("auto_pause_after_seconds")
    spec = CreateSpec(
        shape=body.string("shape", required=True) or "",
        rootfs=body.string("rootfs") or None,
        name=body.string("name") or None,
        region=body.string("region") or None,
        egress=body.string_list("egress"),
        envs=body.env_map("envs"),
        ssh_pubkeys=body.string_list("ssh_pubkeys"),
        ingress_enabled=bool(body.boolean("ingress_enabled")),
        # The SDK sends 0 for "unset".
        auto_pause_after_seconds=auto_pause or None,
        disk_mib=body.integer("disk_mib", low=0),
        networks=[] if body.data.get("networks") is None else parse_refs(body.data["networks"]),
        disks=[] if body.data.get("disks") is None else MountRequest.parse_list(body.data["disks"]),
    )
    sandbox = fake_of(request).sandboxes.create(tenant_of(request), spec)
    return ok(sandbox.created_view())


async def list_sandboxes(request: web.Request) -> web.Response:
    limit, offset = page_bounds(request)
    raw_status = request.query.get("status") or None
    try:
        status = Status(raw_status) if raw_status else None
    except ValueError:
        raise ApiError.invalid("status", "unknown status") from None
    page, total = fake_of(request).sandboxes.page(
        tenant_of(request), status=status, limit=limit, offset=offset
    )
    # Each sandbox's view is encoded once per change of it; a page only joins them.
    body = paginated_body(encoded_views(page, encode), total=total, limit=limit, offset=offset)
    return json_response(body)


async def get(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    if "stale_read" in scope().directives and sandbox.previous_status is not None:
        view = sandbox.view()
        view["status"] = sandbox.previous_status.value
        return ok(view)
    # The hottest route of every poller: its body is encoded once per change of the sandbox.
    return json_response(sandbox.view_body(encode))


async def get_by_ip(request: web.Request) -> web.Response:
    sandbox = fake_of(request).sandboxes.by_ip(tenant_of(request), request.match_info["ip"])
    return ok(sandbox.view())


async def patch(request: web.Request) -> web.Response:
    body = await read_body(
        request, allowed={"ingress_enabled", "auto_pause_after_seconds", "disable_auto_pause"}
    )
    sandbox = fake_of(request).sandboxes.patch(
        sandbox_of(request),
        ingress_enabled=body.boolean("ingress_enabled"),
        auto_pause_after_seconds=body.integer("auto_pause_after_seconds"),
        disable_auto_pause=bool(body.boolean("disable_auto_pause")),
    )
    return ok(sandbox.view())


async def delete(request: web.Request) -> web.Response:
    sandbox = fake_of(request).sandboxes.delete(sandbox_of(request))
    return ok({"id": sandbox.id, "status": sandbox.status.value})


async def pause(request: web.Request) -> web.Response:
    await read_body(request, allowed=())
    return ok(fake_of(request).sandboxes.pause(sandbox_of(request)).view())


async def resume(request: web.Request) -> web.Response:
    await read_body(request, allowed=())
    return ok(fake_of(request).sandboxes.resume(sandbox_of(request)).view())


async def fork(request: web.Request) -> web.Response:
    body = await read_body(
        request,
        allowed={"start_paused", "egress", "envs", "ssh_pubkeys", "ingress_enabled"},
        tolerated={"bandwidth_quota_bytes"},
    )
    spec = ForkSpec(
        start_paused=bool(body.boolean("start_paused")),
        egress=body.string_list("egress"),
        envs=body.env_map("envs"),
        ssh_pubkeys=body.string_list("ssh_pubkeys"),
        ingress_enabled=body.boolean("ingress_enabled"),
    )
    fake = fake_of(request)
    child = fake.sandboxes.fork(tenant_of(request), sandbox_of(request), spec)
    return ok(child.view())


async def get_egress(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    return ok({"id": sandbox.id, "egress": list(sandbox.egress)})


async def put_egress(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"egress"})
    sandbox = fake_of(request).sandboxes.set_egress(sandbox_of(request), body.string_list("egress"))
    return ok({"id": sandbox.id, "egress": list(sandbox.egress)})


async def resize(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"disk_mib"})
    disk_mib = body.integer("disk_mib", low=1)
    if disk_mib is None:
        raise ApiError.invalid("disk_mib", "is required")
    sandbox = fake_of(request).sandboxes.resize(sandbox_of(request), disk_mib)
    return ok({"id": sandbox.id, "disk_mib": sandbox.disk_mib})


async def ssh_pubkeys(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"keys"})
    keys = body.string_list("keys")
    if keys is None:
        raise ApiError.invalid("keys", "is required")
    return ok({"count": fake_of(request).sandboxes.add_ssh_keys(sandbox_of(request), keys)})


async def bandwidth(request: web.Request) -> web.Response:
    return ok(bandwidth_view(sandbox_of(request)))


ROUTES: Routes = (
    ("POST", "/v1/sandboxes", create),
    ("GET", "/v1/sandboxes", list_sandboxes),
    ("GET", "/v1/sandboxes/by-ip/{ip}", get_by_ip),
    ("GET", SANDBOX, get),
    ("PATCH", SANDBOX, patch),
    ("DELETE", SANDBOX, delete),
    ("POST", SANDBOX + "/pause", pause),
    ("POST", SANDBOX + "/resume", resume),
    ("POST", SANDBOX + "/fork", fork),
    ("GET", SANDBOX + "/egress", get_egress),
    ("PUT", SANDBOX + "/egress", put_egress),
    ("POST", SANDBOX + "/resize", resize),
    ("POST", SANDBOX + "/ssh-pubkeys", ssh_pubkeys),
    ("GET", SANDBOX + "/bandwidth", bandwidth),
)
