"""Account-level resource routes: networks and disks, and their attachments to sandboxes."""

from __future__ import annotations

from aiohttp import web

from fake_server.api_schema import (
    ABSOLUTE_PATH,
    BODY_ERRORS,
    DISKS,
    ID_PATTERN,
    NETWORKS,
    Schema,
    array,
    boolean,
    const,
    enum,
    flag,
    integer,
    nullable,
    obj,
    ok_response,
    operation,
    page,
    query,
    ref,
    string,
    timestamp,
)
from fake_server.disks import KIND_S3, DiskCredentials, DiskSpec, MountRequest
from fake_server.registry import NAME_PATTERN
from fake_server.routes.common import (
    PAGE_PARAMETERS,
    SANDBOX,
    Route,
    Routes,
    fake_of,
    ok,
    page_bounds,
    paginated,
    read_body,
    sandbox_of,
    tenant_of,
)
from fake_server.validation import BodySchema

__all__ = [
    "DISK",
    "DISK_STATE",
    "MOUNT",
    "NETWORK",
    "NETWORK_REF",
    "NETWORK_VIEW",
    "ROUTES",
]

#: The path templates of one network and one disk, each named by id or name.
NETWORK = "/v1/networks/{network}"
DISK = "/v1/disks/{disk}"

#: A network as a create request names it.
NETWORK_REF = obj({"id": string(minLength=1, description="Network id or name.")})
#: A disk mount as a create request or ``POST …/disks`` names it.
MOUNT = obj(
    {"disk_id": string(minLength=1, description="Disk id or name."), "mount_path": ABSOLUTE_PATH},
    {
        "sub_path": nullable(
            string(description="Only empty (the whole bucket): a part cannot be mounted (400).")
        )
    },
)

_NAME = string(pattern=NAME_PATTERN.pattern)
_OK = flag("ok")


def _network_view(*, members: bool) -> Schema:
    """A network's view: its members listed only where the network itself is read."""
    optional: dict[str, Schema] = {}
    if members:
        member = obj(
            {
                "sandbox_id": string(pattern=ID_PATTERN),
                "status": ref("SandboxStatus"),
                "name": string(),
            },
            {"ip": string()},
        )
        optional["members"] = array(member)
    return obj(
        {
            "id": string(pattern=ID_PATTERN),
            "name": string(),
            "created_at": timestamp(),
            "member_count": integer(minimum=0),
        },
        optional,
    )


#: A network with its members (create, get, and the control API's snapshot).
NETWORK_VIEW = _network_view(members=True)


# -- networks -------------------------------------------------------------------------------


async def list_networks(request: web.Request) -> web.Response:
    limit, offset = page_bounds(request)
    networks, total = tenant_of(request).networks.page(limit=limit, offset=offset)
    views = [network.view(members=False) for network in networks]
    return ok(paginated(views, total=total, limit=limit, offset=offset))


CREATE_NETWORK = BodySchema(obj({"name": _NAME}), required=True)


async def create_network(request: web.Request) -> web.Response:
    body = await read_body(request, CREATE_NETWORK)
    tenant = tenant_of(request)
    tenant.check_credit()
    fake = fake_of(request)
    network = tenant.networks.create(fake.ids, fake.clock.wall(), body.string("name"))
    return ok(network.view(members=True))


async def get_network(request: web.Request) -> web.Response:
    network = tenant_of(request).networks.get(request.match_info["network"])
    return ok(network.view(members=True))


async def delete_network(request: web.Request) -> web.Response:
    tenant_of(request).networks.delete(request.match_info["network"])
    return ok({"ok": True})


ATTACH_NETWORK = BodySchema(NETWORK_REF, required=True)


async def attach_network(request: web.Request) -> web.Response:
    body = await read_body(request, ATTACH_NETWORK)
    sandbox = sandbox_of(request)
    tenant_of(request).networks.attach(body.string("id") or "", sandbox)
    return ok({"ok": True})


async def detach_network(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    tenant_of(request).networks.detach(request.match_info["network"], sandbox)
    return ok({"ok": True})


# -- disks ------------------------------------------------------------------------------------

_CONFIG = obj(
    {"bucket": string(minLength=1), "endpoint": string(minLength=1)},
    {"region": nullable(string()), "use_path_style": nullable(boolean())},
)
_CREDENTIALS = obj(
    {"access_key": string(minLength=1), "secret_key": string(minLength=1)},
    description="Kept to reach the bucket; never answered, journaled or shown.",
)
_DISK_VIEW = obj(
    {
        "id": string(pattern=ID_PATTERN),
        "name": string(),
        "kind": const(KIND_S3),
        "config": _CONFIG,
        "created_at": timestamp(),
    }
)
#: A disk as the control API's snapshot shows it: where it is mounted now.
DISK_STATE = obj(
    {
        **_DISK_VIEW["properties"],
        "mounts": array(obj({"sandbox_id": string(pattern=ID_PATTERN), "mount_path": string()})),
    }
)
_SANDBOX_DISK_VIEW = obj(
    {
        "disk_id": string(pattern=ID_PATTERN),
        "name": string(),
        "kind": const(KIND_S3),
        "config": _CONFIG,
        "mount_path": string(),
        "mount_status": enum(["pending", "mounted", "error", "unmounting"]),
    },
    {"sub_path": string(), "mount_error": string()},
)


async def list_disks(request: web.Request) -> web.Response:
    limit, offset = page_bounds(request)
    disks, total = tenant_of(request).disks.page(limit=limit, offset=offset)
    views = [disk.view() for disk in disks]
    return ok(paginated(views, total=total, limit=limit, offset=offset))


CREATE_DISK = BodySchema(
    obj(
        {"name": _NAME, "config": _CONFIG, "credentials": _CREDENTIALS},
        {"kind": nullable(const(KIND_S3))},
    ),
    required=True,
)


async def create_disk(request: web.Request) -> web.Response:
    body = await read_body(request, CREATE_DISK)
    spec = DiskSpec.parse(
        name=body.string("name"),
        kind=body.data.get("kind"),
        config=body.data.get("config"),
        credentials=body.data.get("credentials"),
    )
    tenant = tenant_of(request)
    tenant.check_credit()
    fake = fake_of(request)
    return ok(tenant.disks.create(fake.ids, fake.clock.wall(), spec).view())


async def get_disk(request: web.Request) -> web.Response:
    return ok(tenant_of(request).disks.get(request.match_info["disk"]).view())


PATCH_DISK = BodySchema(obj({"credentials": _CREDENTIALS}), required=True)


async def patch_disk(request: web.Request) -> web.Response:
    body = await read_body(request, PATCH_DISK)
    credentials = DiskCredentials.parse(body.data.get("credentials"))
    disk = tenant_of(request).disks.rotate_credentials(request.match_info["disk"], credentials)
    return ok(disk.view())


async def delete_disk(request: web.Request) -> web.Response:
    tenant_of(request).disks.delete(request.match_info["disk"])
    return ok({"deleted": True})


async def list_sandbox_disks(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    limit, offset = page_bounds(request)
    attachments = tenant_of(request).disks.attached_to(sandbox)
    views = [attachment.view() for attachment in attachments[offset : offset + limit]]
    return ok(paginated(views, total=len(attachments), limit=limit, offset=offset))


ATTACH_DISK = BodySchema(MOUNT, required=True)


async def attach_disk(request: web.Request) -> web.Response:
    body = await read_body(request, ATTACH_DISK)
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


ROUTES: Routes = (
    Route(
        "GET",
        "/v1/networks",
        list_networks,
        operation(
            "listNetworks",
            "List networks",
            tag=NETWORKS,
            parameters=PAGE_PARAMETERS,
            ok=ok_response(
                "One page (members are counted, not listed).",
                page(_network_view(members=False)),
            ),
            errors=(400,),
        ),
    ),
    Route(
        "POST",
        "/v1/networks",
        create_network,
        operation(
            "createNetwork",
            "Create a network",
            tag=NETWORKS,
            description="Names are unique per tenant (409). A cost-incurring call (402 "
            "without credit).",
            ok=ok_response("The network.", NETWORK_VIEW, links="network"),
            errors=(*BODY_ERRORS, 402, 409),
            body=CREATE_NETWORK,
        ),
    ),
    Route(
        "GET",
        NETWORK,
        get_network,
        operation(
            "getNetwork",
            "A network and its members",
            tag=NETWORKS,
            ok=ok_response("The network.", NETWORK_VIEW),
            errors=(404,),
        ),
    ),
    Route(
        "DELETE",
        NETWORK,
        delete_network,
        operation(
            "deleteNetwork",
            "Delete a network (409 while it has members)",
            tag=NETWORKS,
            ok=ok_response("Deleted.", _OK),
            errors=(404, 409),
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/networks",
        attach_network,
        operation(
            "attachNetwork",
            "Make the sandbox a member of a network",
            tag=NETWORKS,
            description="Joining twice is harmless; 409 once the sandbox is going away. A "
            "sandbox that ends leaves its networks.",
            ok=ok_response("Attached.", _OK),
            errors=(*BODY_ERRORS, 404, 409),
            body=ATTACH_NETWORK,
        ),
    ),
    Route(
        "DELETE",
        SANDBOX + "/networks/{network}",
        detach_network,
        operation(
            "detachNetwork",
            "Take the sandbox out of a network (404 when it is not a member)",
            tag=NETWORKS,
            ok=ok_response("Detached.", _OK),
            errors=(404,),
        ),
    ),
    Route(
        "GET",
        "/v1/disks",
        list_disks,
        operation(
            "listDisks",
            "List disks",
            tag=DISKS,
            parameters=PAGE_PARAMETERS,
            ok=ok_response("One page.", page(_DISK_VIEW)),
            errors=(400,),
        ),
    ),
    Route(
        "POST",
        "/v1/disks",
        create_disk,
        operation(
            "createDisk",
            "Register an S3 disk",
            tag=DISKS,
            description="Names are unique per tenant (409). The bucket is never contacted; "
            "two registrations of one bucket (endpoint and name) share its files, which "
            "outlive every registration. A cost-incurring call (402 without credit).",
            ok=ok_response("The disk (never its credentials).", _DISK_VIEW, links="disk"),
            errors=(*BODY_ERRORS, 402, 409),
            body=CREATE_DISK,
        ),
    ),
    Route(
        "GET",
        DISK,
        get_disk,
        operation(
            "getDisk",
            "A disk",
            tag=DISKS,
            ok=ok_response("The disk.", _DISK_VIEW),
            errors=(404,),
        ),
    ),
    Route(
        "PATCH",
        DISK,
        patch_disk,
        operation(
            "patchDisk",
            "Replace a disk's credentials",
            tag=DISKS,
            ok=ok_response("The disk.", _DISK_VIEW),
            errors=(*BODY_ERRORS, 404),
            body=PATCH_DISK,
        ),
    ),
    Route(
        "DELETE",
        DISK,
        delete_disk,
        operation(
            "deleteDisk",
            "Forget a registration (the bucket's files stay)",
            tag=DISKS,
            ok=ok_response("Deleted.", flag("deleted")),
            errors=(404, 409),
        ),
    ),
    Route(
        "GET",
        SANDBOX + "/disks",
        list_sandbox_disks,
        operation(
            "listSandboxDisks",
            "The disks mounted in a sandbox",
            tag=DISKS,
            parameters=PAGE_PARAMETERS,
            ok=ok_response("One page.", page(_SANDBOX_DISK_VIEW)),
            errors=(400, 404),
        ),
    ),
    Route(
        "POST",
        SANDBOX + "/disks",
        attach_disk,
        operation(
            "attachDisk",
            "Mount a disk in a running sandbox",
            tag=DISKS,
            description="409 unless the sandbox is running, or when the path is taken by "
            "(or nests with) another mount; 400 for `/`, `/bin`, `/usr/bin`, `/dev` or a "
            "file in the way. Commands and the files API see the bucket below the path.",
            ok=ok_response("The sandbox's id.", obj({"id": string(pattern=ID_PATTERN)})),
            errors=(*BODY_ERRORS, 404, 409),
            body=ATTACH_DISK,
        ),
    ),
    Route(
        "DELETE",
        SANDBOX + "/disks/{disk}",
        detach_disk,
        operation(
            "detachDisk",
            "Unmount a disk from a sandbox",
            tag=DISKS,
            parameters=[
                query(
                    "mount_path",
                    string(),
                    "Only the mount at this path (default: every mount of the disk).",
                )
            ],
            ok=ok_response("Whether anything was mounted there.", obj({"detached": boolean()})),
            errors=(400, 404),
        ),
    ),
)
