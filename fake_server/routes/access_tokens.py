"""Access-token routes: enable, read, rotate and disable a sandbox's delegated token
(contract §4.13). Only the owner's key reaches them: a delegated token answers 403 here (the
request layer, :mod:`fake_server.app`, refuses it before any handler runs)."""

from __future__ import annotations

from aiohttp import web

from fake_server.access_tokens import TOKEN_PREFIX
from fake_server.api_schema import (
    BODY_ERRORS,
    EMPTY_BODY,
    SANDBOXES,
    Schema,
    const,
    obj,
    ok_response,
    operation,
    string,
    timestamp,
)
from fake_server.lifecycle import Lifecycle
from fake_server.routes.common import (
    SANDBOX,
    Route,
    Routes,
    fake_of,
    ok,
    read_body,
    sandbox_of,
    tenant_of,
)

ACCESS_TOKEN = SANDBOX + "/access-token"


async def enable(request: web.Request) -> web.Response:
    await read_body(request, EMPTY_BODY)
    sandbox = sandbox_of(request)
    # A sandbox on its way out takes no new credentials.
    Lifecycle.check_modifiable(sandbox)
    issued = fake_of(request).access_tokens.enable(tenant_of(request), sandbox)
    return ok(issued.issued_view())


async def get(request: web.Request) -> web.Response:
    return ok(fake_of(request).access_tokens.metadata(sandbox_of(request)))


async def rotate(request: web.Request) -> web.Response:
    await read_body(request, EMPTY_BODY)
    return ok(fake_of(request).access_tokens.rotate(sandbox_of(request)).issued_view())


async def disable(request: web.Request) -> web.Response:
    sandbox = sandbox_of(request)
    tokens = fake_of(request).access_tokens
    tokens.disable(sandbox)
    return ok(tokens.metadata(sandbox))


def _issued() -> Schema:
    return obj(
        {
            "token": string(
                pattern=f"^{TOKEN_PREFIX}[A-Za-z0-9]+$",
                description="The plaintext token, shown only here; send it as `X-Api-Key`.",
            ),
            "enabled": const(True),
            "created_at": timestamp(),
        },
        {"rotated_at": timestamp()},
    )


def _metadata() -> Schema:
    return {
        "description": "Enabled (with a hint of the token, never the token) or not.",
        "oneOf": [
            obj(
                {
                    "enabled": const(True),
                    "token_hint": string(description="e.g. `skp_sb_fi...irst`"),
                    "created_at": timestamp(),
                },
                {"rotated_at": timestamp()},
            ),
            obj({"enabled": const(False)}),
        ],
    }


_DISABLED = obj({"enabled": const(False)}, description="The token is gone (if there was one).")

ROUTES: Routes = (
    Route(
        "POST",
        ACCESS_TOKEN,
        enable,
        operation(
            "createAccessToken",
            "Enable the sandbox's delegated access token",
            tag=SANDBOXES,
            description="The owner's key only. The token may run exec, files, processes and "
            "the desktop of this sandbox (403 elsewhere, 404 on other sandboxes). 409 when one "
            "is enabled already (rotate it instead).",
            ok=ok_response("The token, shown this once.", _issued()),
            errors=(*BODY_ERRORS, 403, 404, 409),
            body=EMPTY_BODY,
        ),
    ),
    Route(
        "GET",
        ACCESS_TOKEN,
        get,
        operation(
            "getAccessToken",
            "Whether the sandbox has a token, and its hint",
            tag=SANDBOXES,
            ok=ok_response("The token's metadata.", _metadata()),
            errors=(403, 404),
        ),
    ),
    Route(
        "DELETE",
        ACCESS_TOKEN,
        disable,
        operation(
            "deleteAccessToken",
            "Revoke the token (succeeds without one)",
            tag=SANDBOXES,
            ok=ok_response("Disabled.", _DISABLED),
            errors=(403, 404),
        ),
    ),
    Route(
        "POST",
        ACCESS_TOKEN + "/rotate",
        rotate,
        operation(
            "rotateAccessToken",
            "Replace the token (the old one stops working at once)",
            tag=SANDBOXES,
            description="`created_at` stays, `rotated_at` is now; 404 when no token is enabled.",
            ok=ok_response("The new token, shown this once.", _issued()),
            errors=(*BODY_ERRORS, 403, 404),
            body=EMPTY_BODY,
        ),
    ),
)
