"""Health, readiness, identity and the catalog."""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    CATALOG,
    HEALTH,
    array,
    boolean,
    const,
    integer,
    obj,
    ok_response,
    operation,
    page,
    ref,
    string,
)
from fake_server.catalog import SHAPES, rootfs_catalog
from fake_server.errors import ApiError
from fake_server.routes.common import (
    PAGE_PARAMETERS,
    Route,
    Routes,
    ok,
    page_bounds,
    paginated,
    tenant_of,
)


async def healthz(request: web.Request) -> web.Response:
    return ok({"up": True})


async def readyz(request: web.Request) -> web.Response:
    return ok({"ready": True, "scheduler_last_ok_ms_ago": 0})


async def whoami(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    return ok({"user_id": tenant.id, "stats": tenant.stats()})


async def shapes(request: web.Request) -> web.Response:
    # A page like every list: a client walking offsets until an empty page must reach one.
    limit, offset = page_bounds(request)
    items = [shape.as_json() for shape in SHAPES.values()]
    return ok(
        paginated(items[offset : offset + limit], total=len(items), limit=limit, offset=offset)
    )


async def rootfs(request: web.Request) -> web.Response:
    return ok(rootfs_catalog())


async def hosts(request: web.Request) -> web.Response:
    # Tenants of the fake are never administrators.
    tenant_of(request)
    raise ApiError(403, errors.ADMIN_ONLY)


ROUTES: Routes = (
    Route(
        "GET",
        "/healthz",
        healthz,
        operation(
            "healthz",
            "Liveness",
            tag=HEALTH,
            public=True,
            ok=ok_response("Up.", obj({"up": const(True)})),
        ),
    ),
    Route(
        "GET",
        "/readyz",
        readyz,
        operation(
            "readyz",
            "Readiness",
            tag=HEALTH,
            public=True,
            description="The fake is always ready (the real service answers 503 when not).",
            ok=ok_response(
                "Ready.",
                obj(
                    {"ready": boolean(), "scheduler_last_ok_ms_ago": integer(minimum=0)},
                    {"reason": string()},
                ),
            ),
        ),
    ),
    Route(
        "GET",
        "/v1/whoami",
        whoami,
        operation(
            "whoami",
            "The caller's tenant and sandbox counts",
            tag=CATALOG,
            ok=ok_response(
                "The tenant.",
                obj(
                    {
                        "user_id": string(),
                        "stats": obj(
                            {
                                key: integer(minimum=0)
                                for key in ("running", "paused", "other", "total")
                            }
                        ),
                    }
                ),
            ),
        ),
    ),
    Route(
        "GET",
        "/v1/shapes",
        shapes,
        operation(
            "listShapes",
            "Sizing presets",
            tag=CATALOG,
            public=True,
            parameters=PAGE_PARAMETERS,
            ok=ok_response("One page of shapes.", page(ref("Shape"))),
            description=f"Shapes: {', '.join(SHAPES)}.",
            errors=(400,),
        ),
    ),
    Route(
        "GET",
        "/v1/rootfs",
        rootfs,
        operation(
            "listRootfs",
            "Root filesystems",
            tag=CATALOG,
            public=True,
            ok=ok_response(
                "Not paginated.",
                obj(
                    {
                        "rootfs": array(string()),
                        "default": string(minLength=1),
                        "entries": array(
                            obj(
                                {"name": string()},
                                {
                                    "description": string(),
                                    "deprecated": boolean(),
                                    "successor": string(),
                                },
                            )
                        ),
                    }
                ),
            ),
        ),
    ),
    Route(
        "GET",
        "/v1/hosts",
        hosts,
        operation(
            "listHosts",
            "Hosts (administrators only)",
            tag=CATALOG,
            description="Tenants of the fake are never administrators: always 403 (the "
            "real service answers a page of hosts to administrators).",
            ok=None,
            errors=(403,),
        ),
    ),
)
