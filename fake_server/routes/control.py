"""The HTTP control API under ``/_fake/``: reset, state, journal, tenants, clock.

It lives outside ``/v1`` so it never collides with the real API, and needs no API key: it is
for the test harness, and the server listens on loopback only.
"""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.clock import ManualClock
from fake_server.errors import ApiError
from fake_server.faults import DEFAULT_MARKER_PATH, MARKER_MODES, FaultError, rules_in
from fake_server.gates import Gate
from fake_server.journal import JOURNAL_PAGE, JOURNAL_PAGE_MAX
from fake_server.lifecycle import Durations, check_duration_ms
from fake_server.routes.common import Routes, fake_of, ok, read_body, read_raw_body
from fake_server.tenants import Tenant
from fake_server.validation import parse_json, path_problem, query_int


async def info(request: web.Request) -> web.Response:
    return ok(fake_of(request).info())


async def reset(request: web.Request) -> web.Response:
    fake_of(request).reset()
    return ok({"reset": True})


async def state(request: web.Request) -> web.Response:
    return ok(fake_of(request).state(request.query.get("tenant") or None))


async def journal(request: web.Request) -> web.Response:
    """A page of entries after ``since`` (oldest first); ``next`` is the ``since`` of the
    next page and ``more`` whether there is one."""
    fake = fake_of(request)
    since = query_int(request.query, "since", 0)
    limit = query_int(request.query, "limit", JOURNAL_PAGE, low=1, high=JOURNAL_PAGE_MAX)
    tenant = request.query.get("tenant") or None
    # One more than the page tells whether another page follows.
    found = fake.journal.entries(since=since, tenant=tenant, limit=limit + 1)
    page = found[:limit]
    return ok(
        {
            "entries": [entry.as_json() for entry in page],
            "next": page[-1].seq if page else since,
            "more": len(found) > limit,
            "dropped": fake.journal.dropped,
        }
    )


async def create_tenant(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"api_key"})
    requested = body.string("api_key")
    if requested is not None and not requested.strip():
        raise ApiError.invalid("api_key", "must not be blank")
    fake = fake_of(request)
    key = fake.create_tenant(requested or None)
    return ok({"api_key": key, "tenant": fake.tenant(key).id})


async def advance_clock(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"seconds"})
    seconds = body.data.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ApiError.invalid("seconds", "must be a non-negative number")
    clock = fake_of(request).clock
    if not isinstance(clock, ManualClock):
        raise ApiError(409, "the clock is real time; start the fake with a manual clock")
    try:
        fired = clock.advance(float(seconds))
    except ValueError as exc:
        raise ApiError.invalid("seconds", str(exc)) from None
    return ok({"now": clock.now(), "fired": fired})


async def list_faults(request: web.Request) -> web.Response:
    fake = fake_of(request)
    return ok(
        {
            "rules": [rule.as_json() for rule in fake.faults],
            "gates": [gate.as_json() for gate in fake.faults.gates.values()],
        }
    )


async def add_faults(request: web.Request) -> web.Response:
    """One rule, a list of rules or ``{"rules": [...]}``; all are checked before any is added."""
    payload = parse_json(await read_raw_body(request) or b"null")
    faults = fake_of(request).faults
    try:
        ids = [rule.id for rule in faults.add_all(rules_in(payload))]
    except FaultError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"ids": ids})


async def clear_faults(request: web.Request) -> web.Response:
    fake_of(request).faults.clear()
    return ok({"cleared": True})


async def delete_fault(request: web.Request) -> web.Response:
    if not fake_of(request).faults.remove(request.match_info["rule"]):
        raise ApiError(404, "fault rule not found")
    return ok({"deleted": True})


def _gate(request: web.Request) -> Gate:
    gate = fake_of(request).faults.gates.get(request.match_info["name"])
    if gate is None:
        raise ApiError(404, "gate not found")
    return gate


async def get_gate(request: web.Request) -> web.Response:
    return ok(_gate(request).as_json())


async def release_gate(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"count", "open"})
    gate = _gate(request)
    released = gate.open() if body.boolean("open") else gate.release(body.integer("count", low=0))
    return ok({**gate.as_json(), "released": released})


async def sandbox_state(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"status", "stuck", "fail_to"})
    fake = fake_of(request)
    sandbox = fake.find_sandbox(request.match_info["id"])
    try:
        fake.state_faults.change(
            sandbox,
            status=body.string("status"),
            fail_to=body.string("fail_to"),
            stuck=body.boolean("stuck"),
        )
    except ValueError as exc:
        raise ApiError.invalid("status", str(exc)) from None
    return ok(sandbox.view())


async def drop_tenant(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"api_key"})
    api_key = body.string("api_key", required=True) or ""
    if not api_key.strip():
        raise ApiError.invalid("api_key", "must not be blank")
    try:
        fake_of(request).drop_tenant(api_key)
    except ApiError as exc:
        # The control API authenticates nobody: a key a strict fake does not know is a missing
        # tenant, not a failed login.
        if exc.status == 401:
            raise ApiError(404, errors.TENANT_NOT_FOUND) from None
        raise
    return ok({"dropped": True})


def _own_tenant(request: web.Request) -> Tenant:
    """The tenant whose key the caller sends in ``X-Api-Key``: per-tenant settings are changed
    only by whoever holds the key, never by naming another tenant's id."""
    api_key = request.headers.get("X-Api-Key", "")
    if not api_key.strip():
        raise ApiError(401, errors.CONTROL_TENANT_KEY)
    tenant = fake_of(request).tenants.get(api_key)
    if tenant is None:  # never registered here: the control API does not make tenants by use
        raise ApiError(404, errors.TENANT_NOT_FOUND)
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


async def set_durations(request: web.Request) -> web.Response:
    """The caller's tenant's own durations; an absent or null field keeps the fake's."""
    tenant = _own_tenant(request)
    body = await read_body(request, allowed={"transition_ms", "create_ms"})
    given: dict[str, float | None] = {}
    for name in ("transition_ms", "create_ms"):
        value = body.data.get(name)
        try:
            given[name] = None if value is None else check_duration_ms(value)
        except ValueError as exc:
            raise ApiError.invalid(name, str(exc)) from None
    api_key = request.headers["X-Api-Key"]
    durations = fake_of(request).set_durations(api_key, **given)
    return ok(_durations_json(tenant, durations))


def _credit_json(tenant: Tenant) -> dict[str, object]:
    return {"tenant": tenant.id, "has_credit": tenant.has_credit}


async def get_credit(request: web.Request) -> web.Response:
    return ok(_credit_json(_own_tenant(request)))


async def set_credit(request: web.Request) -> web.Response:
    """Whether the caller's tenant has credit (its cost-incurring calls answer 402 without)."""
    tenant = _own_tenant(request)
    body = await read_body(request, allowed={"has_credit"})
    has_credit = body.boolean("has_credit")
    if has_credit is None:
        raise ApiError.invalid("has_credit", "is required")
    fake_of(request).set_credit(request.headers["X-Api-Key"], has_credit=has_credit)
    return ok(_credit_json(tenant))


async def reseed(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"seed"})
    seed = body.integer("seed", low=0)
    if seed is None:
        raise ApiError.invalid("seed", "is required")
    fake_of(request).reseed(seed)
    return ok({"seed": seed})


async def sandbox_marker(request: web.Request) -> web.Response:
    body = await read_body(request, allowed={"mode", "path"})
    fake = fake_of(request)
    sandbox = fake.find_sandbox(request.match_info["id"])
    mode = body.string("mode", required=True) or ""
    path = body.string("path") or DEFAULT_MARKER_PATH
    if not path.startswith("/"):
        raise ApiError.invalid("path", errors.PATH_NOT_ABSOLUTE)
    problem = path_problem(path)
    if problem is not None:
        raise ApiError.invalid("path", problem)
    if mode not in MARKER_MODES:
        raise ApiError.invalid("mode", f"must be one of {', '.join(MARKER_MODES)}")
    try:
        fake.state_faults.marker(sandbox, mode, path)
    except ValueError as exc:
        raise ApiError.invalid("path", str(exc)) from None
    return ok({"id": sandbox.id, "mode": mode, "path": path})


ROUTES: Routes = (
    ("GET", "/_fake/info", info),
    ("POST", "/_fake/reset", reset),
    ("GET", "/_fake/state", state),
    ("GET", "/_fake/journal", journal),
    ("POST", "/_fake/tenants", create_tenant),
    ("DELETE", "/_fake/tenants", drop_tenant),
    ("POST", "/_fake/seed", reseed),
    ("GET", "/_fake/tenant/durations", get_durations),
    ("PUT", "/_fake/tenant/durations", set_durations),
    ("GET", "/_fake/tenant/credit", get_credit),
    ("PUT", "/_fake/tenant/credit", set_credit),
    ("POST", "/_fake/clock/advance", advance_clock),
    ("GET", "/_fake/faults", list_faults),
    ("POST", "/_fake/faults", add_faults),
    ("DELETE", "/_fake/faults", clear_faults),
    ("DELETE", "/_fake/faults/{rule}", delete_fault),
    ("GET", "/_fake/gates/{name}", get_gate),
    ("POST", "/_fake/gates/{name}/release", release_gate),
    ("POST", "/_fake/sandboxes/{id}/state", sandbox_state),
    ("POST", "/_fake/sandboxes/{id}/marker", sandbox_marker),
)
