"""Sandbox management routes: create, list, get, patch, delete, pause, resume, fork, egress,
resize, ssh keys, bandwidth and its recharge."""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    BODY_ERRORS,
    EMPTY_BODY,
    ID_PATTERN,
    SANDBOXES,
    Schema,
    array,
    boolean,
    const,
    enum,
    env_map,
    integer,
    nullable,
    obj,
    ok_response,
    operation,
    page,
    query,
    ref,
    string,
)
from fake_server.bandwidth import bandwidth_view, recharge
from fake_server.catalog import DEFAULT_REGION, ROOTFS, SHAPES
from fake_server.disks import MountRequest
from fake_server.errors import ApiError
from fake_server.json_body import encode
from fake_server.lifecycle import Status
from fake_server.networks import parse_refs
from fake_server.routes.common import (
    PAGE_PARAMETERS,
    SANDBOX,
    Route,
    Routes,
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
from fake_server.routes.resources import MOUNT, NETWORK_REF
from fake_server.sandbox import encoded_views
from fake_server.sandboxes import (
    AUTO_PAUSE_MAX,
    AUTO_PAUSE_MIN,
    NAME_MAX,
    CreateSpec,
    ForkSpec,
)
from fake_server.templates import TEMPLATE_NAME
from fake_server.validation import BodySchema

#: A sandbox's auto-pause delay, as PATCH takes it.
_AUTO_PAUSE = integer(minimum=AUTO_PAUSE_MIN, maximum=AUTO_PAUSE_MAX)

CREATE = BodySchema(
    obj(
        {"shape": enum(SHAPES)},
        {
            "rootfs": {
                "description": "A built-in root filesystem, or a template's id (`tpl_...`)"
                " or name.",
                "anyOf": [
                    enum(ROOTFS),
                    string(pattern="^tpl_.+"),
                    string(pattern=TEMPLATE_NAME.pattern),
                ],
            },
            "name": string(pattern=f"^[A-Za-z0-9-]{{1,{NAME_MAX}}}$"),
            "region": enum([DEFAULT_REGION]),
            "egress": nullable(array(string())),
            "envs": nullable(env_map("Declared variables (names must be valid).")),
            "ssh_pubkeys": nullable(array(string())),
            "ingress_enabled": nullable(boolean()),
            "auto_pause_after_seconds": nullable(
                {
                    "type": "integer",
                    "description": f"{AUTO_PAUSE_MIN}-{AUTO_PAUSE_MAX}; 0 means unset.",
                    "anyOf": [const(0), _AUTO_PAUSE],
                }
            ),
            "disk_mib": nullable(integer(minimum=0, description="0: the shape's default.")),
            "bandwidth_quota_bytes": nullable(
                const(0) | {"description": "Anything but 0 is refused on create (400)."}
            ),
            "networks": nullable(
                array(
                    NETWORK_REF,
                    description="Networks the sandbox joins (each by id or name; 404 for an "
                    "unknown one).",
                )
            ),
            "disks": nullable(
                array(
                    MOUNT,
                    description="Disks mounted while the sandbox is created (404 for an "
                    "unknown one).",
                )
            ),
        },
        # Accepted and ignored, as the real service does (placement is not modeled).
        ignored=("host_id", "node_selector"),
    ),
    required=True,
    # The items' own rules, with the field's name in each message.
    checks={"networks": parse_refs, "disks": MountRequest.parse_list},
)


async def create(request: web.Request) -> web.Response:
    body = await read_body(request, CREATE)
    if body.integer("bandwidth_quota_bytes"):
        raise ApiError.invalid("bandwidth_quota_bytes", errors.BANDWIDTH_QUOTA)
    auto_pause = body.integer("auto_pause_after_seconds")
    spec = CreateSpec(
        shape=body.string("shape") or "",
        rootfs=body.string("rootfs") or None,
        name=body.string("name") or None,
        region=body.string("region") or None,
        egress=body.string_list("egress"),
        envs=body.string_map("envs"),
        ssh_pubkeys=body.string_list("ssh_pubkeys"),
        ingress_enabled=bool(body.boolean("ingress_enabled")),
        # The SDK sends 0 for "unset".
        auto_pause_after_seconds=auto_pause or None,
        disk_mib=body.integer("disk_mib"),
        networks=parse_refs(body.data.get("networks") or []),
        disks=MountRequest.parse_list(body.data.get("disks") or []),
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
    # A sandbox that never changed status has nothing stale to show: the scope goes unread.
    if sandbox.previous_status is not None and "stale_read" in scope().directives:
        view = sandbox.view()
        view["status"] = sandbox.previous_status.value
        return ok(view)
    # The hottest route of every poller: its body is encoded once per change of the sandbox.
    return json_response(sandbox.view_body(encode))


async def get_by_ip(request: web.Request) -> web.Response:
    sandbox = fake_of(request).sandboxes.by_ip(tenant_of(request), request.match_info["ip"])
    return ok(sandbox.view())


PATCH = BodySchema(
    obj(
        {},
        {
            "ingress_enabled": nullable(boolean()),
            "auto_pause_after_seconds": nullable(_AUTO_PAUSE),
            "disable_auto_pause": nullable(boolean()),
        },
    )
)


async def patch(request: web.Request) -> web.Response:
    body = await read_body(request, PATCH)
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
    await read_body(request, EMPTY_BODY)
    return ok(fake_of(request).sandboxes.pause(sandbox_of(request)).view())


async def resume(request: web.Request) -> web.Response:
    await read_body(request, EMPTY_BODY)
    return ok(fake_of(request).sandboxes.resume(tenant_of(request), sandbox_of(request)).view())


FORK = BodySchema(
    obj(
        {},
        {
            "start_paused": nullable(boolean()),
            "egress": nullable(array(string())),
            "envs": nullable(env_map("Replaces the source's variables.")),
            "ssh_pubkeys": nullable(array(string())),
            "ingress_enabled": nullable(boolean()),
        },
        ignored=("bandwidth_quota_bytes",),
    )
)


async def fork(request: web.Request) -> web.Response:
    body = await read_body(request, FORK)
    spec = ForkSpec(
        start_paused=bool(body.boolean("start_paused")),
        egress=body.string_list("egress"),
        envs=body.string_map("envs"),
        ssh_pubkeys=body.string_list("ssh_pubkeys"),
        ingress_enabled=body.boolean("ingress_enabled"),
    )
    fake = fake_of(request)
    child = fake.sandboxes.fork(tenant_of(request), sandbox_of(request), spec)
    return ok(child.view())


async def get_egress(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    return ok({"id": sandbox.id, "egress": list(sandbox.egress)})


EGRESS = BodySchema(obj({}, {"egress": nullable(array(string()))}))


async def put_egress(request: web.Request) -> web.Response:
    body = await read_body(request, EGRESS)
    sandbox = fake_of(request).sandboxes.set_egress(sandbox_of(request), body.string_list("egress"))
    return ok({"id": sandbox.id, "egress": list(sandbox.egress)})


RESIZE = BodySchema(
    obj({"disk_mib": integer(minimum=1, description="Larger than now.")}), required=True
)


async def resize(request: web.Request) -> web.Response:
    body = await read_body(request, RESIZE)
    sandbox = fake_of(request).sandboxes.resize(sandbox_of(request), body.integer("disk_mib") or 0)
    return ok({"id": sandbox.id, "disk_mib": sandbox.disk_mib})


SSH_PUBKEYS = BodySchema(obj({"keys": array(string())}), required=True)


async def ssh_pubkeys(request: web.Request) -> web.Response:
    keys = (await read_body(request, SSH_PUBKEYS)).string_list("keys") or []
    return ok({"count": fake_of(request).sandboxes.add_ssh_keys(sandbox_of(request), keys)})


async def bandwidth(request: web.Request) -> web.Response:
    return ok(bandwidth_view(sandbox_of(request)))


RECHARGE = BodySchema(obj({"add_bytes": integer(minimum=1)}), required=True)


async def recharge_bandwidth(request: web.Request) -> web.Response:
    body = await read_body(request, RECHARGE)
    # The owner check (404 for another tenant's sandbox) comes before the credit check.
    sandbox = sandbox_of(request)
    return ok(recharge(tenant_of(request), sandbox, body.integer("add_bytes")))


_BANDWIDTH = obj(
    {
        "id": string(pattern=ID_PATTERN),
        "quota_bytes": integer(description="-1: unmetered (every sandbox of the fake)."),
        "used_bytes": integer(),
        "ingress_bytes": integer(),
        "remaining_bytes": integer(),
        "capped": boolean(),
    }
)


def _egress() -> Schema:
    return obj({"id": string(pattern=ID_PATTERN), "egress": array(string())})


_VIEW = ref("Sandbox")
#: What a change of a sandbox may answer besides success.
_MODIFY_ERRORS = (*BODY_ERRORS, 404, 409)

#: What the cost-incurring lifecycle calls say of credit.
_COSTS = (
    "A cost-incurring call: 402 when the tenant has no credit (see `PUT /_fake/tenant/credit`), "
    "after the sandbox is found (404) and before its state is checked (409)."
)

ROUTES: Routes = (
    Route(
        "POST",
        "/v1/sandboxes",
        create,
        operation(
            "createSandbox",
            "Create a sandbox",
            tag=SANDBOXES,
            description="Answers once the sandbox is running (unless the fake is configured "
            "with a `creating` delay). Names are unique among the tenant's live sandboxes "
            "(409). Networks and disks it names must exist (404). A cost-incurring call: 402 "
            "when the tenant has no credit (see `PUT /_fake/tenant/credit`), once the request "
            "is otherwise good.",
            ok=ok_response("The new sandbox.", ref("CreatedSandbox"), links="sandbox"),
            errors=(*BODY_ERRORS, 402, 404, 409),
            body=CREATE,
        ),
    ),
    Route(
        "GET",
        "/v1/sandboxes",
        list_sandboxes,
        operation(
            "listSandboxes",
            "List sandboxes (destroyed ones included)",
            tag=SANDBOXES,
            parameters=[
                *PAGE_PARAMETERS,
                query(
                    "status",
                    {"anyOf": [ref("SandboxStatus"), const("")]},
                    "Only sandboxes in this status.",
                ),
            ],
            ok=ok_response("One page.", page(_VIEW)),
            errors=(400,),
        ),
    ),
    Route(
        "GET",
        "/v1/sandboxes/by-ip/{ip}",
        get_by_ip,
        operation(
            "getSandboxByIp",
            "A sandbox by its IP",
            tag=SANDBOXES,
            ok=ok_response("The sandbox.", _VIEW, links="sandbox"),
            errors=(404,),
        ),
    ),
    Route(
        "GET",
        SANDBOX,
        get,
        operation(
            "getSandbox",
            "A sandbox",
            tag=SANDBOXES,
            description="Deleted sandboxes answer `destroyed` (or 404 when the fake is "
            "configured so).",
            ok=ok_response("The sandbox.", _VIEW),
            errors=(404,),
        ),
    ),
    Route(
        "PATCH",
        SANDBOX,
        patch,
        operation(
            "patchSandbox",
            "Change ingress or auto-pause",
            tag=SANDBOXES,
            ok=ok_response("The sandbox.", _VIEW),
            errors=_MODIFY_ERRORS,
            body=PATCH,
        ),
    ),
    Route(
        "DELETE",
        SANDBOX,
        delete,
        operation(
            "deleteSandbox",
            "Delete a sandbox (idempotent)",
            tag=SANDBOXES,
            ok=ok_response(
                "`destroying`, or `destroyed` when already gone.",
                obj({"id": string(pattern=ID_PATTERN), "status": ref("SandboxStatus")}),
            ),
            errors=(404,),
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/pause",
        pause,
        operation(
            "pauseSandbox",
            "Pause (asynchronous: answers `pausing`)",
            tag=SANDBOXES,
            ok=ok_response("The sandbox.", _VIEW),
            errors=_MODIFY_ERRORS,
            body=EMPTY_BODY,
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/resume",
        resume,
        operation(
            "resumeSandbox",
            "Resume from paused or error (asynchronous: answers `resuming`)",
            tag=SANDBOXES,
            description=_COSTS,
            ok=ok_response("The sandbox.", _VIEW),
            errors=(*_MODIFY_ERRORS, 402),
            body=EMPTY_BODY,
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/fork",
        fork,
        operation(
            "forkSandbox",
            "Fork a paused sandbox",
            tag=SANDBOXES,
            description=_COSTS,
            ok=ok_response("The new sandbox.", _VIEW, links="sandbox"),
            errors=(*_MODIFY_ERRORS, 402),
            body=FORK,
        ),
    ),
    Route(
        "GET",
        SANDBOX + "/egress",
        get_egress,
        operation(
            "getEgress",
            "Egress rules",
            tag=SANDBOXES,
            ok=ok_response("The rules.", _egress()),
            errors=(404,),
        ),
    ),
    Route(
        "PUT",
        SANDBOX + "/egress",
        put_egress,
        operation(
            "putEgress",
            "Replace egress rules",
            tag=SANDBOXES,
            ok=ok_response("The rules.", _egress()),
            errors=_MODIFY_ERRORS,
            body=EGRESS,
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/resize",
        resize,
        operation(
            "resizeSandbox",
            "Grow the disk",
            tag=SANDBOXES,
            ok=ok_response(
                "The new size.",
                obj({"id": string(pattern=ID_PATTERN), "disk_mib": integer(minimum=1)}),
            ),
            errors=_MODIFY_ERRORS,
            body=RESIZE,
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/ssh-pubkeys",
        ssh_pubkeys,
        operation(
            "addSshPubkeys",
            "Add SSH public keys",
            tag=SANDBOXES,
            ok=ok_response("The key count.", obj({"count": integer(minimum=0)})),
            errors=_MODIFY_ERRORS,
            body=SSH_PUBKEYS,
        ),
    ),
    Route(
        "GET",
        SANDBOX + "/bandwidth",
        bandwidth,
        operation(
            "getBandwidth",
            "Bandwidth (the fake is unmetered)",
            tag=SANDBOXES,
            ok=ok_response("The meter.", _BANDWIDTH),
            errors=(404,),
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/bandwidth/recharge",
        recharge_bandwidth,
        operation(
            "rechargeBandwidth",
            "Add bytes to the bandwidth quota (a no-op when unmetered)",
            tag=SANDBOXES,
            description="A cost-incurring call: 402 when the tenant has no credit (see "
            "`PUT /_fake/tenant/credit`), checked after the sandbox is found. The fake's "
            "sandboxes are all unmetered, so the meter comes back unchanged.",
            ok=ok_response("The meter.", _BANDWIDTH),
            errors=(*BODY_ERRORS, 402, 404),
            body=RECHARGE,
        ),
    ),
)
