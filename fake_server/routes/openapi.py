"""``GET /openapi.json``: the fake's OpenAPI 3.1 document (see :mod:`fake_server.openapi`)."""

from __future__ import annotations

import functools
import json

from aiohttp import web

from fake_server.openapi import document
from fake_server.routes.common import Routes


@functools.lru_cache(maxsize=1)
def _encoded() -> bytes:
    # The document is static: encode it once per process, not per request.
    return json.dumps(document(), separators=(",", ":")).encode()


async def openapi_json(request: web.Request) -> web.Response:
    """The document itself, not enveloped (OpenAPI tooling reads it as is)."""
    return web.Response(body=_encoded(), content_type="application/json")


ROUTES: Routes = (("GET", "/openapi.json", openapi_json),)
