"""``GET /openapi.json``: the fake's OpenAPI 3.1 document (see :mod:`fake_server.openapi`)."""

from __future__ import annotations

import functools
import json

from aiohttp import web

from fake_server.api_schema import HEALTH, json_content, obj, ok_response, operation, string
from fake_server.openapi import document
from fake_server.routes.common import Route, Routes


@functools.lru_cache(maxsize=1)
def _encoded() -> bytes:
    # The document is static: encode it once per process, not per request.
    return json.dumps(document(), separators=(",", ":")).encode()


async def openapi_json(request: web.Request) -> web.Response:
    """The document itself, not enveloped (OpenAPI tooling reads it as is)."""
    return web.Response(body=_encoded(), content_type="application/json")


ROUTES: Routes = (
    Route(
        "GET",
        "/openapi.json",
        openapi_json,
        operation(
            "getOpenApi",
            "This document",
            tag=HEALTH,
            public=True,
            ok=ok_response(
                "The OpenAPI document (not enveloped).",
                content=json_content(
                    obj(
                        {"openapi": string(), "info": {"type": "object"}, "paths": {}},
                        closed=False,
                    )
                ),
            ),
        ),
    ),
)
