"""The HTTP control API under ``/_fake/``: reset, state, journal, tenants, clock.

It lives outside ``/v1`` so it never collides with the real API, and needs no API key: it is
for the test harness, and the server listens on loopback only.
"""

from __future__ import annotations

from aiohttp import web

from fake_server import errors
from fake_server.api_schema import (
    ABSOLUTE_PATH,
    BODY_ERRORS,
    array,
    boolean,
    const,
    control_operation,
    enum,
    flag,
    integer,
    json_content,
    links,
    nullable,
    number,
    obj,
    ok_response,
    query,
    ref,
    string,
)
from fake_server.clock import ManualClock
from fake_server.errors import ApiError
from fake_server.fault_rules import DEFAULT_MARKER_PATH, MARKER_MODES, FaultError, rules_in
from fake_server.gates import OUTCOMES, WAIT_HELD_S, Gate, GateTimeout
from fake_server.journal import JOURNAL_PAGE, JOURNAL_PAGE_MAX
from fake_server.routes.common import (
    Route,
    Routes,
    fake_of,
    ok,
    read_body,
    read_raw_body,
    unless_client_leaves,
)
from fake_server.routes.resources import DISK_STATE, NETWORK_VIEW
from fake_server.validation import BodySchema, parse_json, path_problem, query_int


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


NEW_TENANT = BodySchema(obj({}, {"api_key": nullable(string())}))


async def create_tenant(request: web.Request) -> web.Response:
    body = await read_body(request, NEW_TENANT)
    requested = body.string("api_key")
    if requested is not None and not requested.strip():
        raise ApiError.invalid("api_key", "must not be blank")
    fake = fake_of(request)
    key = fake.create_tenant(requested or None)
    return ok({"api_key": key, "tenant": fake.tenant(key).id})


ADVANCE = BodySchema(obj({"seconds": number(minimum=0)}), required=True)


async def advance_clock(request: web.Request) -> web.Response:
    seconds = (await read_body(request, ADVANCE)).number("seconds") or 0.0
    clock = fake_of(request).clock
    if not isinstance(clock, ManualClock):
        raise ApiError(409, "the clock is real time; start the fake with a manual clock")
    try:
        fired = clock.advance(seconds)
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
        raise ApiError(404, errors.RULE_NOT_FOUND)
    return ok({"deleted": True})


def _gate(request: web.Request) -> Gate:
    gate = fake_of(request).faults.gates.get(request.match_info["name"])
    if gate is None:
        raise ApiError(404, "gate not found")
    return gate


async def get_gate(request: web.Request) -> web.Response:
    gate = _gate(request)
    count = query_int(request.query, "held", 0)
    if count:
        # A long-poll: a client outside Python waits for a request to be held without polling.
        cap = fake_of(request).config.max_wait_ms
        default = round(WAIT_HELD_S * 1000)
        timeout_ms = query_int(request.query, "timeout_ms", default, high=cap) or cap
        try:
            await unless_client_leaves(request, gate.wait_held(count, timeout_ms / 1000))
        except GateTimeout as exc:
            raise ApiError(408, str(exc)) from None
    return ok(gate.as_json())


#: What ``outcome`` may say when one held request is released: ``proceed`` (or nothing) lets it
#: go on as usual, the others are :data:`~fake_server.gates.OUTCOMES`.
RELEASE_OUTCOMES = ("proceed", *OUTCOMES)
RELEASE = BodySchema(
    obj(
        {},
        {
            "count": nullable(integer(minimum=0)),
            "open": nullable(boolean()),
            "request": nullable(integer(minimum=1)),
            "outcome": nullable(enum(RELEASE_OUTCOMES)),
        },
        description="`count` (all held ones if absent) or `open`; or `request` (a held"
        " request's `id`) with an optional `outcome`.",
    )
)


async def release_gate(request: web.Request) -> web.Response:
    body = await read_body(request, RELEASE)
    number = body.integer("request")
    outcome = body.string("outcome")
    if outcome is not None and outcome not in RELEASE_OUTCOMES:
        raise ApiError.invalid("outcome", f"must be one of {', '.join(RELEASE_OUTCOMES)}")
    if number is None and outcome is not None:
        raise ApiError.invalid("outcome", errors.OUTCOME_NEEDS_REQUEST)
    if number is not None and (body.boolean("open") or body.integer("count") is not None):
        raise ApiError.invalid("request", errors.REQUEST_WITH_COUNT)
    gate = _gate(request)
    if number is None:
        released = gate.open() if body.boolean("open") else gate.release(body.integer("count"))
        return ok({**gate.as_json(), "released": released})
    held = gate.held_request(number)
    if held is None:
        raise ApiError(404, errors.HELD_REQUEST_NOT_FOUND.format(request=number))
    try:
        gate.release_request(held, None if outcome == "proceed" else outcome)
    except ValueError as exc:  # an outcome this request can no longer take
        raise ApiError.invalid("outcome", str(exc)) from None
    return ok({**gate.as_json(), "released": 1})


STATE_FAULT = BodySchema(
    obj(
        {},
        {
            "status": nullable(ref("SandboxStatus")),
            "stuck": nullable(boolean()),
            "fail_to": nullable(enum(["error", "failed"])),
        },
        description="At least one field.",
    )
    | {"minProperties": 1},
    required=True,
)


async def sandbox_state(request: web.Request) -> web.Response:
    body = await read_body(request, STATE_FAULT)
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


async def finish_transition(request: web.Request) -> web.Response:
    fake = fake_of(request)
    sandbox = fake.find_sandbox(request.match_info["id"])
    finished = fake.state_faults.finish(sandbox)
    return ok({"finished": finished, "sandbox": sandbox.view()})


DROP_TENANT = BodySchema(obj({"api_key": string(minLength=1)}), required=True)


async def drop_tenant(request: web.Request) -> web.Response:
    api_key = (await read_body(request, DROP_TENANT)).string("api_key") or ""
    if not api_key.strip():
        raise ApiError.invalid("api_key", "must not be blank")
    fake_of(request).drop_tenant(api_key)
    return ok({"dropped": True})


SEED = BodySchema(obj({"seed": integer(minimum=0)}), required=True)


async def reseed(request: web.Request) -> web.Response:
    seed = (await read_body(request, SEED)).integer("seed") or 0
    fake_of(request).reseed(seed)
    return ok({"seed": seed})


MARKER = BodySchema(
    obj({"mode": enum(MARKER_MODES)}, {"path": nullable(ABSOLUTE_PATH)}), required=True
)


async def sandbox_marker(request: web.Request) -> web.Response:
    body = await read_body(request, MARKER)
    fake = fake_of(request)
    sandbox = fake.find_sandbox(request.match_info["id"])
    mode = body.string("mode") or ""
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
    Route(
        "GET",
        "/_fake/info",
        info,
        control_operation(
            "fakeInfo",
            "Which server answers, and its clock and durations",
            ok_response(
                "Always `server: fake-createos`; the seed, whether the clock is manual, the"
                " fake's own transition and create durations.",
                obj(
                    {
                        "server": const("fake-createos"),
                        "seed": integer(),
                        "clock": obj({"manual": boolean()}),
                        "transition_ms": number(minimum=0),
                        "create_ms": number(minimum=0),
                    }
                ),
            ),
        ),
    ),
    Route(
        "POST",
        "/_fake/reset",
        reset,
        control_operation(
            "fakeReset",
            "Forget every tenant, rule and journal entry",
            ok_response("Reset.", flag("reset")),
        ),
    ),
    Route(
        "GET",
        "/_fake/state",
        state,
        control_operation(
            "fakeState",
            "Snapshot of tenants, sandboxes, rules, gates",
            ok_response(
                "The snapshot.",
                obj(
                    {
                        "seed": integer(),
                        "clock": obj({"manual": boolean(), "now": number(), "wall": string()}),
                        "tenants": array(
                            obj(
                                {
                                    "id": string(),
                                    "sandboxes": array(ref("SandboxState")),
                                    "networks": array(NETWORK_VIEW),
                                    "disks": array(DISK_STATE),
                                    "has_credit": boolean(),
                                }
                            )
                        ),
                        "rules": array(ref("FaultRule")),
                        "gates": array(ref("Gate")),
                        "journal": obj(
                            {
                                "size": integer(minimum=0),
                                "capacity": integer(minimum=0),
                                "dropped": integer(minimum=0),
                            }
                        ),
                    }
                ),
            ),
        ),
    ),
    Route(
        "GET",
        "/_fake/journal",
        journal,
        control_operation(
            "fakeJournal",
            "Journal entries",
            ok_response(
                "A page of entries in order, the `since` of the next page, whether there"
                " is one, and how many the ring dropped.",
                obj(
                    {
                        "entries": array(ref("JournalEntry")),
                        "next": integer(minimum=0),
                        "more": boolean(),
                        "dropped": integer(minimum=0),
                    }
                ),
            ),
            parameters=[
                query("since", integer(minimum=0), "Only entries after this seq."),
                query(
                    "limit",
                    integer(minimum=1),
                    f"Entries per page (default {JOURNAL_PAGE}, at most {JOURNAL_PAGE_MAX}).",
                ),
                query("tenant", string(), "Only this tenant's entries."),
            ],
            errors=(400,),
        ),
    ),
    Route(
        "POST",
        "/_fake/tenants",
        create_tenant,
        control_operation(
            "fakeCreateTenant",
            "Register a key as a tenant (a key it knows keeps its tenant), or mint a fresh one",
            ok_response("The key and tenant id.", obj({"api_key": string(), "tenant": string()})),
            errors=BODY_ERRORS,
            body=NEW_TENANT,
        ),
    ),
    Route(
        "DELETE",
        "/_fake/tenants",
        drop_tenant,
        control_operation(
            "fakeDropTenant",
            "Forget a tenant and stop its sandboxes",
            ok_response("Dropped.", flag("dropped")),
            description="Any key is a tenant unless the fake is strict; a strict fake "
            "answers 404 for a key it does not know.",
            errors=(*BODY_ERRORS, 404),
            body=DROP_TENANT,
        ),
    ),
    Route(
        "POST",
        "/_fake/seed",
        reseed,
        control_operation(
            "fakeReseed",
            "Restart ids and fault draws from a seed",
            ok_response("The seed.", obj({"seed": integer(minimum=0)})),
            errors=BODY_ERRORS,
            body=SEED,
        ),
    ),
    Route(
        "POST",
        "/_fake/clock/advance",
        advance_clock,
        control_operation(
            "fakeAdvanceClock",
            "Move a manual clock forward",
            ok_response(
                "The clock's time and how many timers fired.",
                obj({"now": number(), "fired": integer(minimum=0)}),
            ),
            description="409 when the fake runs on the real clock.",
            errors=(*BODY_ERRORS, 409),
            body=ADVANCE,
        ),
    ),
    Route(
        "GET",
        "/_fake/faults",
        list_faults,
        control_operation(
            "fakeListFaults",
            "Fault rules and gates",
            ok_response(
                "Rules and gates.",
                obj({"rules": array(ref("FaultRule")), "gates": array(ref("Gate"))}),
            ),
        ),
    ),
    Route(
        "POST",
        "/_fake/faults",
        add_faults,
        control_operation(
            "fakeAddFaults",
            'Add one rule, a list of rules or `{"rules": [...]}` (all or none)',
            ok_response(
                "The new rules' ids.",
                obj({"ids": array(string())}),
                links=links({"fakeDeleteFault": {"rule": "$response.body#/data/ids/0"}}),
            ),
            errors=BODY_ERRORS,
            # Read by fake_server.fault_rules.rules_in, which names the rule and field at fault.
            body={
                "required": True,
                "content": json_content(
                    {
                        "anyOf": [
                            ref("FaultRuleIn"),
                            array(ref("FaultRuleIn"), minItems=1),
                            obj({"rules": array(ref("FaultRuleIn"), minItems=1)}),
                        ]
                    }
                ),
            },
        ),
    ),
    Route(
        "DELETE",
        "/_fake/faults",
        clear_faults,
        control_operation(
            "fakeClearFaults",
            "Remove every rule (opening their gates)",
            ok_response("Cleared.", flag("cleared")),
        ),
    ),
    Route(
        "DELETE",
        "/_fake/faults/{rule}",
        delete_fault,
        control_operation(
            "fakeDeleteFault",
            "Remove one rule",
            ok_response("Removed.", flag("deleted")),
            errors=(404,),
        ),
    ),
    Route(
        "GET",
        "/_fake/gates/{name}",
        get_gate,
        control_operation(
            "fakeGetGate",
            "A gate's counters; with `held`, once it holds that many requests",
            ok_response("The gate.", ref("Gate")),
            errors=(400, 404, 408),
            parameters=[
                query(
                    "held",
                    integer(minimum=0),
                    "Answer once the gate holds at least this many requests (0: at once).",
                ),
                query(
                    "timeout_ms",
                    integer(minimum=0),
                    f"How long `held` waits, in real time (default {WAIT_HELD_S * 1000:.0f}; capped"
                    " by the fake's maximum wait, which is also what 0 means); 408 then.",
                ),
            ],
        ),
    ),
    Route(
        "POST",
        "/_fake/gates/{name}/release",
        release_gate,
        control_operation(
            "fakeReleaseGate",
            "Let held requests through, or one chosen request, or open the gate",
            ok_response(
                "The gate and how many were released.",
                {"allOf": [ref("Gate"), obj({"released": integer(minimum=0)}, closed=False)]},
            ),
            description="404 for an unknown gate, or a `request` id the gate does not hold"
            " (never held, or gone on already).",
            errors=(*BODY_ERRORS, 404),
            body=RELEASE,
        ),
    ),
    Route(
        "POST",
        "/_fake/sandboxes/{id}/state",
        sandbox_state,
        control_operation(
            "fakeSandboxState",
            "State faults: force a status, stick or fail the transition",
            ok_response("The sandbox.", ref("Sandbox")),
            errors=(*BODY_ERRORS, 404),
            body=STATE_FAULT,
        ),
    ),
    Route(
        "POST",
        "/_fake/sandboxes/{id}/finish",
        finish_transition,
        control_operation(
            "fakeFinishTransition",
            "End the sandbox's transition in flight now",
            ok_response(
                "Whether a transition ended, and the sandbox.",
                obj({"finished": boolean(), "sandbox": ref("Sandbox")}),
            ),
            description="Ends it as its clock would have (journaled with its own cause),"
            " whatever the clock says; a stuck transition, or none, is left as it is"
            " (`finished: false`).",
            errors=(404,),
        ),
    ),
    Route(
        "POST",
        "/_fake/sandboxes/{id}/marker",
        sandbox_marker,
        control_operation(
            "fakeSandboxMarker",
            "Wipe, replace or garble the lease marker file",
            ok_response(
                "What was done.", obj({"id": string(), "mode": string(), "path": string()})
            ),
            errors=(*BODY_ERRORS, 404),
            body=MARKER,
        ),
    ),
)
