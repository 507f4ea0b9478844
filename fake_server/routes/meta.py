"""Health, readiness, identity and the catalog."""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.catalog import SHAPES, rootfs_catalog
from fake_server.errors import ApiError
from fake_server.routes.common import Routes, ok, paginated, tenant_of


async def healthz(request: web.Request) -> web.Response:
    return ok({"up": True})


async def readyz(request: web.Request) -> web.Response:
    return ok({"ready": True, "scheduler_last_ok_ms_ago": 0})


async def whoami(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    return ok({"user_id": tenant.id, "stats": tenant.stats()})


async def shapes(request: web.Request) -> web.Response:
    items = [shape.as_json() for shape in SHAPES.values()]
    return ok(paginated(items, total=len(items), limit=len(items), offset=0))


async def rootfs(request: web.Request) -> web.Response:
    return ok(rootfs_catalog())


async def hosts(request: web.Request) -> web.Response:
    # Tenants of the fake are never administrators.
    tenant_of(request)
    raise ApiError(403, errors.ADMIN_ONLY)


ROUTES: Routes = (
    ("GET", "/healthz", healthz),
    ("GET", "/readyz", readyz),
    ("GET", "/v1/whoami", whoami),
    ("GET", "/v1/shapes", shapes),
    ("GET", "/v1/rootfs", rootfs),
    ("GET", "/v1/hosts", hosts),
)
