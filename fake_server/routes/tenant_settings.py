"""Per-tenant settings of the control API: ``/_fake/tenant/durations`` and
``/_fake/tenant/credit``.

Unlike the rest of the control API these routes name their tenant by its key, in
``X-Api-Key``: a setting is changed only by whoever holds the key (401 without one, 404 for a
key never registered), never by naming another tenant's id.
"""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    BODY_ERRORS,
    CONTROL,
    boolean,
    nullable,
    number,
    obj,
    ok_response,
    operation,
    string,
)
from fake_server.errors import ApiError
from fake_server.lifecycle import MAX_DURATION_MS, Durations, check_duration_ms
from fake_server.routes.common import Route, Routes, fake_of, ok, read_body
from fake_server.tenants import Tenant
from fake_server.validation import BodySchema

__all__ = ["CREDIT", "DURATIONS", "ROUTES"]


def _own_tenant(request: web.Request) -> Tenant:
    """The tenant whose key the caller sends in ``X-Api-Key``: per-tenant settings are changed
    only by whoever holds the key, never by naming another tenant's id."""
    api_key = request.headers.get("X-Api-Key", "")
    if not api_key.strip():
        raise ApiError(401, errors.CONTROL_TENANT_KEY)
    tenant = fake_of(request).tenants.known.get(api_key)
    if tenant is None:  # never registered here: the control API does not make tenants by use
        raise ApiError(404, errors.CONTROL_TENANT_UNKNOWN)
    return tenant


def _durations_json(tenant: Tenant, durations: Durations) -> dict[str, object]:
    return {
        "tenant": tenant.id,
        "own": tenant.durations is not None,
        # Per-tenant durations are uniform: one transition time for pause/resume/fork/delete.
        "transition_ms": round(durations.pause * 1000, 6),
        "create_ms": round(durations.create * 1000, 6),
    }


async def get_durations(request: web.Request) -> web.Response:
    tenant = _own_tenant(request)
    return ok(_durations_json(tenant, fake_of(request).durations_of(tenant)))


_DURATION = nullable(number(minimum=0, maximum=MAX_DURATION_MS))
DURATIONS = BodySchema(
    obj({}, {"transition_ms": _DURATION, "create_ms": _DURATION}),
    # The marker's and the CLI's words for a bad duration.
    checks={"transition_ms": check_duration_ms, "create_ms": check_duration_ms},
)


async def set_durations(request: web.Request) -> web.Response:
    """The caller's tenant's own durations; an absent or null field keeps the fake's."""
    tenant = _own_tenant(request)
    body = await read_body(request, DURATIONS)
    given = {name: body.number(name) for name in ("transition_ms", "create_ms")}
    api_key = request.headers["X-Api-Key"]
    durations = fake_of(request).set_durations(api_key, **given)
    return ok(_durations_json(tenant, durations))


def _credit_json(tenant: Tenant) -> dict[str, object]:
    return {"tenant": tenant.id, "has_credit": tenant.has_credit}


async def get_credit(request: web.Request) -> web.Response:
    return ok(_credit_json(_own_tenant(request)))


CREDIT = BodySchema(obj({"has_credit": boolean()}), required=True)


async def set_credit(request: web.Request) -> web.Response:
    """Whether the caller's tenant has credit (its cost-incurring calls answer 402 without)."""
    tenant = _own_tenant(request)
    has_credit = bool((await read_body(request, CREDIT)).boolean("has_credit"))
    fake_of(request).set_credit(request.headers["X-Api-Key"], has_credit=has_credit)
    return ok(_credit_json(tenant))


_DURATIONS_ANSWER = ok_response(
    "The tenant's durations in force and whether they are its own.",
    obj(
        {
            "tenant": string(),
            "own": boolean(),
            "transition_ms": number(minimum=0),
            "create_ms": number(minimum=0),
        }
    ),
)

_CREDIT_ANSWER = ok_response(
    "The tenant's credit setting.", obj({"tenant": string(), "has_credit": boolean()})
)

ROUTES: Routes = (
    # The caller's own tenant's durations: named by its key, so unlike the rest of the control
    # API these operations need ``X-Api-Key`` (401 without one, 404 for a key never registered).
    Route(
        "GET",
        "/_fake/tenant/durations",
        get_durations,
        operation(
            "fakeTenantDurations",
            "The caller's tenant's transition and create durations",
            tag=CONTROL,
            ok=_DURATIONS_ANSWER,
            errors=(403, 404),
        ),
    ),
    Route(
        "PUT",
        "/_fake/tenant/durations",
        set_durations,
        operation(
            "fakeSetTenantDurations",
            "Give the caller's tenant its own transition and create durations",
            tag=CONTROL,
            ok=_DURATIONS_ANSWER,
            description="Replaces the tenant's durations; an absent or null field keeps the "
            "fake's. Transitions started from then on take them; they go with the tenant.",
            errors=(*BODY_ERRORS, 403, 404),
            body=DURATIONS,
        ),
    ),
    # The caller's own tenant's credit, named by its key as the durations are.
    Route(
        "GET",
        "/_fake/tenant/credit",
        get_credit,
        operation(
            "fakeTenantCredit",
            "Whether the caller's tenant has credit",
            tag=CONTROL,
            ok=_CREDIT_ANSWER,
            errors=(403, 404),
        ),
    ),
    Route(
        "PUT",
        "/_fake/tenant/credit",
        set_credit,
        operation(
            "fakeSetTenantCredit",
            "Give or take the caller's tenant's credit",
            tag=CONTROL,
            ok=_CREDIT_ANSWER,
            description="Without credit, cost-incurring calls (bandwidth recharge, network "
            "and disk create) answer 402. A tenant starts with credit; it goes with the tenant.",
            errors=(*BODY_ERRORS, 403, 404),
            body=CREDIT,
        ),
    ),
)
