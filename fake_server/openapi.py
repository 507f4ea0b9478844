"""The OpenAPI 3.1 document of the fake: the ``/v1`` surface, health, the control API.

It is built in Python (small helpers instead of pasted schemas) and served at
``GET /openapi.json``. The test suite keeps it true in both directions: every route of the
application has an operation here and every operation a route, and Schemathesis checks the live
fake's answers (status codes, content types, bodies) against it.

What it documents is the fake as it answers **without fault rules**. Fault rules can make any
``/v1`` route answer any status (``error``), drop the connection, truncate a body or hang; those
answers are deliberately not described per operation (the ``InjectedError`` component shows
their envelope).

Example::

    from fake_server.openapi import build_document
    document = build_document()
    document["paths"]["/v1/sandboxes/{id}"]["get"]["operationId"]   # 'getSandbox'
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from fake_server.catalog import DEFAULT_REGION, ROOTFS, SHAPES
from fake_server.credentials import CREDENTIAL_HEADERS
from fake_server.faults import ACTION_TYPES
from fake_server.journal import JOURNAL_PAGE, JOURNAL_PAGE_MAX
from fake_server.lifecycle import MAX_DURATION_MS, Status
from fake_server.processes import ALLOWED_SIGNALS, ProcessState
from fake_server.sandboxes import AUTO_PAUSE_MAX, AUTO_PAUSE_MIN, LIST_DEFAULT, LIST_MAX, NAME_MAX
from fake_server.validation import ENV_NAME, PATH_FORBIDDEN

__all__ = ["JSON", "NDJSON", "OCTET_STREAM", "build_document", "document"]

Schema = dict[str, Any]

JSON = "application/json"
NDJSON = "application/x-ndjson"
OCTET_STREAM = "application/octet-stream"

#: The contract's id alphabet (clients refuse other ids, so the fake only mints these).
ID_PATTERN = "^[A-Za-z0-9_-]{1,200}$"
SECURITY_SCHEME = "ApiKeyAuth"
#: Every header a credential is read from (fake_server.credentials), as security schemes.
SECURITY_SCHEMES: dict[str, Any] = {
    (
        "BearerAuth"
        if header == "Authorization"
        else header.removeprefix("X-").replace("-", "") + "Auth"
    ): (
        {"type": "http", "scheme": "bearer"}
        if header == "Authorization"
        else {"type": "apiKey", "in": "header", "name": header}
    )
    for header in CREDENTIAL_HEADERS
}
#: Standard, padded base64 (what the fake sends, and all it accepts).
BASE64: dict[str, Any] = {
    "type": "string",
    "contentEncoding": "base64",
    "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
}
#: Paths in a sandbox are absolute (a relative one answers 400).
ABSOLUTE_PATH: dict[str, Any] = {
    "type": "string",
    "pattern": f"^/[^{PATH_FORBIDDEN}]*$",
    "description": "Absolute; no NUL, control or invisible (zero-width, bidi) characters.",
}

# -- schema helpers ----------------------------------------------------------------------------


def ref(name: str) -> Schema:
    """A reference to ``components/schemas/<name>``."""
    return {"$ref": f"#/components/schemas/{name}"}


def string(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def integer(**extra: Any) -> Schema:
    return {"type": "integer", **extra}


def number(**extra: Any) -> Schema:
    return {"type": "number", **extra}


def boolean(**extra: Any) -> Schema:
    return {"type": "boolean", **extra}


def const(value: Any) -> Schema:
    return {"const": value}


def enum(values: Iterable[str], **extra: Any) -> Schema:
    return {"type": "string", "enum": list(values), **extra}


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def nullable(schema: Schema) -> Schema:
    """``schema`` or ``null`` (JSON Schema 2020-12 style, as OpenAPI 3.1 uses)."""
    return {"anyOf": [schema, {"type": "null"}]}


def timestamp() -> Schema:
    return string(format="date-time", description="RFC 3339, UTC with a `Z` suffix.")


def obj(
    required: Mapping[str, Schema] | None = None,
    optional: Mapping[str, Schema] | None = None,
    *,
    closed: bool = True,
    ignored: Iterable[str] = (),
    description: str | None = None,
) -> Schema:
    """An object schema; ``closed`` objects list every field the fake sends or accepts, so an
    undocumented field is a failure (answers) or a documented 400 (requests).

    ``ignored`` fields (ones real clients send that the fake accepts and ignores) are matched by
    ``patternProperties`` rather than listed as properties: Schemathesis reads a listed
    ``host_id`` as a reference to a "Host" resource nobody creates and would then never start
    its chains from ``POST /v1/sandboxes``.
    """
    properties = {**(required or {}), **(optional or {})}
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    names = sorted(ignored)
    if names:
        schema["patternProperties"] = {
            f"^({'|'.join(names)})$": {"description": "Accepted and ignored."}
        }
    if closed:
        schema["additionalProperties"] = False
    if description:
        schema["description"] = description
    return schema


def success(data: Schema) -> Schema:
    """The JSend success envelope around ``data``."""
    return obj({"status": const("success"), "data": data})


def page(item: Schema) -> Schema:
    """A paginated list payload (``data`` of a list answer)."""
    return obj({"data": array(item), "pagination": ref("Pagination")})


def env_map(description: str) -> Schema:
    """Environment variables: string values under valid names."""
    return {
        "type": "object",
        "propertyNames": {"pattern": ENV_NAME.pattern},
        "additionalProperties": string(),
        "description": description,
    }


_ENV_OVERRIDE = "Overrides; only keys declared when the sandbox was created (else 400)."


def flag(name: str) -> Schema:
    """A payload that is one ``true`` flag, e.g. ``{"ok": true}``."""
    return obj({name: const(True)})


# -- operation helpers -------------------------------------------------------------------------

#: Every error status a route can answer by itself, with why. Shared response components.
ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "The body, a field or a query parameter is invalid."),
    401: (
        "Unauthorized",
        "No credential (`X-Api-Key`, or `X-Auth-Token`, `X-Access-Token` or "
        "`Authorization: Bearer`, the first present wins), or one not accepted.",
    ),
    403: (
        "Forbidden",
        "The key may not use this route (administrators only); for the control API: the"
        " request's `Host` is not loopback, its `Origin` is another site, or the control"
        " token is missing.",
    ),
    404: ("NotFound", "No such sandbox (or not this tenant's), process, file, rule or gate."),
    405: ("MethodNotAllowed", "The path exists but not with this method (`Allow` lists them)."),
    408: ("WaitTimeout", "The process did not exit before `timeout_ms`."),
    409: ("Conflict", "The operation is not allowed in the current state."),
    410: ("Gone", "The requested output was evicted (`data.oldest_available_seq`)."),
    413: ("TooLarge", "The request body is larger than the fake accepts."),
}


def json_content(schema: Schema) -> dict[str, Any]:
    return {JSON: {"schema": schema}}


def ok_response(
    description: str,
    data: Schema | None = None,
    *,
    content: dict[str, Any] | None = None,
    links: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A 200 answer: a JSend success around ``data``, or explicit ``content``."""
    response: dict[str, Any] = {
        "description": description,
        "headers": {"X-Request-ID": {"$ref": "#/components/headers/RequestId"}},
        "content": content if content is not None else json_content(success(data or {})),
    }
    if links:
        response["links"] = links
    return response


def query(name: str, schema: Schema, description: str, *, required: bool = False) -> Schema:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": schema,
        "description": description,
    }


def path_param(name: str, description: str, schema: Schema | None = None) -> Schema:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": schema or string(minLength=1),
        "description": description,
    }


SANDBOX_ID = path_param("id", "Sandbox id.", string(pattern=ID_PATTERN))
PROCESS_ID = path_param("pid", "Managed-process id.", string(pattern=ID_PATTERN))


def json_body(schema: Schema, *, required: bool = False, description: str | None = None) -> Schema:
    body: Schema = {"required": required, "content": json_content(schema)}
    if description:
        body["description"] = description
    return body


#: An empty or ``{}`` body: what pause, resume and the like accept (TWIN sends ``{}``).
EMPTY_BODY = json_body(obj(), description="No fields; an empty body is fine.")


def operation(
    operation_id: str,
    summary: str,
    *,
    tag: str,
    ok: dict[str, Any] | None,
    errors: Iterable[int] = (),
    public: bool = False,
    parameters: Iterable[Schema] = (),
    body: Schema | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """One operation; authenticated operations answer 401 too, public ones opt out of the
    global ``X-Api-Key`` requirement. ``ok`` is ``None`` for a route the fake never answers
    with success."""
    codes = set(errors)
    if not public:
        codes.add(401)
    responses: dict[str, Any] = {"200": ok} if ok is not None else {}
    for code in sorted(codes):
        responses[str(code)] = {"$ref": f"#/components/responses/{ERRORS[code][0]}"}
    op: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": [tag],
        "responses": responses,
    }
    if description:
        op["description"] = description
    if public:
        op["security"] = []
    params = list(parameters)
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = body
    return op


def links(targets: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """OpenAPI links to ``operationId -> {parameter: runtime expression}`` (what stateful
    testing follows: create a sandbox, then use its id)."""
    return {
        f"To_{target}": {"operationId": target, "parameters": dict(parameters)}
        for target, parameters in targets.items()
    }


# -- schemas -------------------------------------------------------------------------------------


def _error_envelope(status_kind: str, codes: Schema, description: str) -> Schema:
    return obj(
        {"status": const(status_kind), "message": string(), "code": codes},
        {
            "data": {
                "description": 'Field-keyed details (`{"shape": "unknown shape"}`), a string, '
                "or extra facts such as `oldest_available_seq`.",
                "anyOf": [{"type": "object"}, {"type": "string"}],
            }
        },
        description=description,
    )


def _sandbox_view() -> Schema:
    return obj(
        {
            "id": string(pattern=ID_PATTERN),
            "status": ref("SandboxStatus"),
            "name": string(),
            "vcpu": integer(minimum=1),
            "mem_mib": integer(minimum=1),
            "disk_mib": integer(minimum=1),
            "created_at": timestamp(),
            "ingress_enabled": boolean(),
            "spawn_ms": number(),
            "shape": string(),
            "rootfs": string(),
            "region": string(),
            "egress": array(string()),
            "envs": array(string(), description="Names only: values are never returned."),
            "ssh_pubkeys": array(string()),
            "created_by": string(),
            "bandwidth_ingress_bytes": integer(minimum=0),
        },
        {
            "ip": string(description="Omitted while `creating`."),
            "ingress_url_template": string(description="Only with ingress on; `<port>` literal."),
            "running_at": timestamp(),
            "paused_at": timestamp(),
            "last_resumed_at": timestamp(),
            "destroyed_at": timestamp(),
            "forked_from": string(pattern=ID_PATTERN),
            "auto_pause_after_seconds": integer(minimum=AUTO_PAUSE_MIN, maximum=AUTO_PAUSE_MAX),
        },
        description="A sandbox. Optional fields are omitted, never null.",
    )


def _created_sandbox() -> Schema:
    return obj(
        {
            "id": string(pattern=ID_PATTERN),
            "status": ref("SandboxStatus"),
            "name": string(),
            "ip": string(),
            "shape": string(),
            "rootfs": string(),
            "vcpu": integer(minimum=1),
            "mem_mib": integer(minimum=1),
            "disk_mib": integer(minimum=1),
            "spawn_ms": number(),
            "egress": array(string()),
            "bandwidth_quota_bytes": integer(description="-1: unmetered."),
        },
        {
            "ingress_url_template": string(),
            "auto_pause_after_seconds": integer(minimum=AUTO_PAUSE_MIN, maximum=AUTO_PAUSE_MAX),
        },
        description="The create answer (CreateSandboxResponse).",
    )


def _process_view() -> Schema:
    return obj(
        {
            "process_id": string(pattern=ID_PATTERN),
            "kind": enum(["process", "pty"]),
            "pid": integer(),
            "state": enum(state.value for state in ProcessState),
            "leader_exited": boolean(),
            "tree_exited": boolean(),
            "created_at": timestamp(),
            "exit_code": nullable(integer()),
            "cmd": string(),
            "args": array(string()),
            "cwd": string(),
            "output": obj(
                {
                    "oldest_seq": integer(minimum=0),
                    "newest_seq": integer(minimum=0),
                    "bytes": integer(minimum=0),
                }
            ),
        },
        {"finished_at": timestamp(), "signal": string(pattern="^SIG[A-Z0-9]+$")},
        description="A managed process (exited ones are retained).",
    )


def _exec_frame() -> Schema:
    one_key = [
        obj({"stdout": string(minLength=1)}),
        obj({"stderr": string(minLength=1)}),
        obj({"hb": const(True)}),
        obj({"error": string(minLength=1)}),
        obj({"exit_code": integer()}),
    ]
    return {
        "description": "One line of `exec?stream=true`: exactly one key per frame; the stream "
        'ends with `{"exit_code": N}`; `{"hb": true}` is a heartbeat on a silent command.',
        "oneOf": one_key,
    }


def _process_frame() -> Schema:
    return {
        "description": "One line of a process `connect` stream: data frames with contiguous "
        "`seq` from 1 (shared by stdout and stderr), heartbeats, then the exit frame.",
        "oneOf": [
            obj(
                {
                    "type": const("data"),
                    "seq": integer(minimum=1),
                    "stream": enum(["stdout", "stderr", "pty"]),
                    "data_base64": BASE64,
                }
            ),
            obj(
                {
                    "type": const("exit"),
                    "exit_code": nullable(integer()),
                    "signal": nullable(string(pattern="^SIG[A-Z0-9]+$")),
                }
            ),
            obj({"type": const("heartbeat")}),
            obj(
                {
                    "type": const("error"),
                    "error": string(),
                    "oldest_available_seq": integer(minimum=0),
                }
            ),
        ],
    }


def _fault_rule_in() -> Schema:
    action_types = list(ACTION_TYPES)
    return obj(
        {"action": obj({"type": enum(action_types)}, closed=False)},
        {
            "id": string(minLength=1),
            "match": obj(
                {},
                {
                    "method": string(),
                    "route": string(
                        description="A route template, optionally with its method: "
                        "`DELETE /v1/sandboxes/{id}`. It must name a route the fake serves "
                        "outside `/_fake/` (else 400, with the routes it probably meant)."
                    ),
                    "sandbox": string(),
                    "tenant": string(),
                },
            ),
            "after": integer(minimum=0, description="Skip the first N matches."),
            "times": integer(minimum=1, description="Fire at most N times."),
            "probability": number(minimum=0, maximum=1),
        },
        description="A fault rule: match + action. Per action type, its parameters and "
        "effect: "
        + "; ".join(
            f"`{kind}` ({', '.join(sorted(spec.params)) or 'no parameters'}): {spec.effect}"
            for kind, spec in ACTION_TYPES.items()
        )
        + ".",
    )


def _fault_rule_out() -> Schema:
    return obj(
        {
            "id": string(),
            "match": obj({}, {k: string() for k in ("method", "route", "sandbox", "tenant")}),
            "action": obj({"type": string()}, closed=False),
            "seen": integer(minimum=0),
            "fired": integer(minimum=0),
        },
        {
            "after": integer(minimum=0),
            "times": integer(minimum=1),
            "probability": number(minimum=0, maximum=1),
        },
    )


def _journal_entry() -> Schema:
    return obj(
        {
            "seq": integer(),
            "opened": integer(),
            "kind": enum(["request", "transition", "process"]),
            "at": number(),
            "time": timestamp(),
        },
        {
            "tenant": string(),
            "sandbox": string(),
            "method": string(),
            "route": string(),
            "path": string(),
            "status": integer(),
            "duration_ms": number(),
            "sandbox_status": ref("SandboxStatus"),
            "rules": array(string()),
            "before": ref("SandboxStatus"),
            "after": ref("SandboxStatus"),
            "cause": string(),
            "process": string(),
            "detail": string(),
        },
        description="One journal line (API keys are never recorded).",
    )


def _sandbox_state() -> Schema:
    # The control API's view of a sandbox: the public view plus its processes and pending move.
    view = _sandbox_view()
    view["properties"]["processes"] = array(ref("ManagedProcess"))
    view["properties"]["pending"] = obj(
        {"target": ref("SandboxStatus"), "stuck": boolean()},
    )
    view["required"].append("processes")
    view["description"] = "A sandbox as the control API shows it."
    return view


def _schemas() -> dict[str, Schema]:
    held = obj(
        {"method": string(), "path": string(), "since": timestamp()},
        {"tenant": string(), "sandbox": string()},
        description="A request held at the gate right now, and since when.",
    )
    gate = obj(
        {
            "name": string(),
            "held": integer(),
            "passed": integer(),
            "open": boolean(),
            "holding": array(held),
        }
    )
    return {
        "FailEnvelope": _error_envelope(
            "fail", integer(minimum=400, maximum=499), "A 4xx answer (JSend `fail`)."
        ),
        "InjectedError": _error_envelope(
            "error",
            integer(minimum=500, maximum=599),
            "A 5xx answer (JSend `error`); the fake answers these only when a fault rule "
            "injects them.",
        ),
        "SandboxStatus": enum(status.value for status in Status),
        "Pagination": obj(
            {
                "total": integer(minimum=0),
                "limit": integer(minimum=0),
                "offset": integer(minimum=0),
                "count": integer(minimum=0),
            }
        ),
        "Shape": obj(
            {
                "id": string(),
                "vcpu": integer(minimum=1),
                "mem_mib": integer(minimum=1),
                "default_disk_mib": integer(minimum=1),
                "cpu_quota_pct": integer(minimum=1),
            }
        ),
        "Sandbox": _sandbox_view(),
        "CreatedSandbox": _created_sandbox(),
        "ManagedProcess": _process_view(),
        "ExecFrame": _exec_frame(),
        "ProcessFrame": _process_frame(),
        "FaultRuleIn": _fault_rule_in(),
        "FaultRule": _fault_rule_out(),
        "Gate": gate,
        "JournalEntry": _journal_entry(),
        "SandboxState": _sandbox_state(),
    }


def _responses() -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for code, (name, description) in ERRORS.items():
        schema: Schema = {"allOf": [ref("FailEnvelope"), obj({"code": const(code)}, closed=False)]}
        response: dict[str, Any] = {
            "description": description,
            "headers": {"X-Request-ID": {"$ref": "#/components/headers/RequestId"}},
            "content": json_content(schema),
        }
        if code == 405:
            response["headers"]["Allow"] = {
                "schema": string(),
                "description": "The methods the path accepts.",
            }
        responses[name] = response
    return responses


# -- paths ---------------------------------------------------------------------------------------

_SANDBOX_LINK_TARGETS = (
    "getSandbox",
    "patchSandbox",
    "deleteSandbox",
    "pauseSandbox",
    "resumeSandbox",
    "forkSandbox",
    "getEgress",
    "putEgress",
    "resizeSandbox",
    "addSshPubkeys",
    "getBandwidth",
    "execCommand",
    "uploadFile",
    "downloadFile",
    "createProcess",
    "listProcesses",
    "fakeSandboxState",
    "fakeSandboxMarker",
)


def _sandbox_links() -> dict[str, Any]:
    """Links from an answer carrying a sandbox to every operation on that sandbox."""
    targets = {target: {"id": "$response.body#/data/id"} for target in _SANDBOX_LINK_TARGETS}
    targets["getSandboxByIp"] = {"ip": "$response.body#/data/ip"}
    return links(targets)


_PROCESS_LINK_TARGETS = (
    "getProcess",
    "deleteProcess",
    "connectProcess",
    "sendInput",
    "closeStdin",
    "signalProcess",
    "resizePty",
    "waitProcess",
)


def _process_links() -> dict[str, Any]:
    """Links from a new process to every operation on it."""
    ids = {"id": "$request.path.id", "pid": "$response.body#/data/process_id"}
    return links(dict.fromkeys(_PROCESS_LINK_TARGETS, ids))


_HEALTH = "health"
_CATALOG = "catalog"
_SANDBOXES = "sandboxes"
_RUNTIME = "runtime"
_PROCESSES = "processes"
_CONTROL = "control"

_BODY_ERRORS = (400, 413)


def _meta_paths() -> dict[str, Any]:
    shapes = enum(SHAPES)
    return {
        "/openapi.json": {
            "get": operation(
                "getOpenApi",
                "This document",
                tag=_HEALTH,
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
            )
        },
        "/healthz": {
            "get": operation(
                "healthz",
                "Liveness",
                tag=_HEALTH,
                public=True,
                ok=ok_response("Up.", obj({"up": const(True)})),
            )
        },
        "/readyz": {
            "get": operation(
                "readyz",
                "Readiness",
                tag=_HEALTH,
                public=True,
                description="The fake is always ready (the real service answers 503 when not).",
                ok=ok_response(
                    "Ready.",
                    obj(
                        {"ready": boolean(), "scheduler_last_ok_ms_ago": integer(minimum=0)},
                        {"reason": string()},
                    ),
                ),
            )
        },
        "/v1/whoami": {
            "get": operation(
                "whoami",
                "The caller's tenant and sandbox counts",
                tag=_CATALOG,
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
            )
        },
        "/v1/shapes": {
            "get": operation(
                "listShapes",
                "Sizing presets",
                tag=_CATALOG,
                public=True,
                ok=ok_response("Every shape, one page.", page(ref("Shape"))),
                description=f"Shapes: {', '.join(SHAPES)}.",
            )
        },
        "/v1/rootfs": {
            "get": operation(
                "listRootfs",
                "Root filesystems",
                tag=_CATALOG,
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
            )
        },
        "/v1/hosts": {
            "get": operation(
                "listHosts",
                "Hosts (administrators only)",
                tag=_CATALOG,
                description="Tenants of the fake are never administrators: always 403 (the "
                "real service answers a page of hosts to administrators).",
                ok=None,
                errors=(403,),
            )
        },
        "/v1/sandboxes": {
            "post": operation(
                "createSandbox",
                "Create a sandbox",
                tag=_SANDBOXES,
                description="Answers once the sandbox is running (unless the fake is configured "
                "with a `creating` delay). Names are unique among the tenant's live sandboxes "
                "(409).",
                ok=ok_response("The new sandbox.", ref("CreatedSandbox"), links=_sandbox_links()),
                errors=(*_BODY_ERRORS, 409),
                body=json_body(_create_body(shapes), required=True),
            ),
            "get": operation(
                "listSandboxes",
                "List sandboxes (destroyed ones included)",
                tag=_SANDBOXES,
                parameters=[
                    query(
                        "limit",
                        integer(minimum=0),
                        f"Page size (default {LIST_DEFAULT}, at most {LIST_MAX}; 0 = default).",
                    ),
                    query("offset", integer(minimum=0), "Rows to skip."),
                    query(
                        "status",
                        {"anyOf": [ref("SandboxStatus"), const("")]},
                        "Only sandboxes in this status.",
                    ),
                ],
                ok=ok_response("One page.", page(ref("Sandbox"))),
                errors=(400,),
            ),
        },
    }


def _create_body(shapes: Schema) -> Schema:
    return obj(
        {"shape": shapes},
        {
            "rootfs": {
                "description": "A built-in root filesystem or a template id (`tpl_...`).",
                "anyOf": [enum(ROOTFS), string(pattern="^tpl_.+")],
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
                    "anyOf": [const(0), integer(minimum=AUTO_PAUSE_MIN, maximum=AUTO_PAUSE_MAX)],
                }
            ),
            "disk_mib": nullable(integer(minimum=0, description="0: the shape's default.")),
            "bandwidth_quota_bytes": nullable(
                const(0) | {"description": "Anything but 0 is refused on create (400)."}
            ),
        },
        ignored=("networks", "disks", "host_id", "node_selector"),
    )


def _sandbox_paths() -> dict[str, Any]:
    item = "/v1/sandboxes/{id}"
    view = ref("Sandbox")
    modify_errors = (*_BODY_ERRORS, 404, 409)
    return {
        "/v1/sandboxes/by-ip/{ip}": {
            "get": operation(
                "getSandboxByIp",
                "A sandbox by its IP",
                tag=_SANDBOXES,
                parameters=[path_param("ip", "The sandbox's private IP.")],
                ok=ok_response("The sandbox.", view, links=_sandbox_links()),
                errors=(404,),
            )
        },
        item: {
            "parameters": [SANDBOX_ID],
            "get": operation(
                "getSandbox",
                "A sandbox",
                tag=_SANDBOXES,
                description="Deleted sandboxes answer `destroyed` (or 404 when the fake is "
                "configured so).",
                ok=ok_response("The sandbox.", view),
                errors=(404,),
            ),
            "patch": operation(
                "patchSandbox",
                "Change ingress or auto-pause",
                tag=_SANDBOXES,
                ok=ok_response("The sandbox.", view),
                errors=modify_errors,
                body=json_body(
                    obj(
                        {},
                        {
                            "ingress_enabled": nullable(boolean()),
                            "auto_pause_after_seconds": nullable(
                                integer(minimum=AUTO_PAUSE_MIN, maximum=AUTO_PAUSE_MAX)
                            ),
                            "disable_auto_pause": nullable(boolean()),
                        },
                    )
                ),
            ),
            "delete": operation(
                "deleteSandbox",
                "Delete a sandbox (idempotent)",
                tag=_SANDBOXES,
                ok=ok_response(
                    "`destroying`, or `destroyed` when already gone.",
                    obj({"id": string(pattern=ID_PATTERN), "status": ref("SandboxStatus")}),
                ),
                errors=(404,),
            ),
        },
        item + "/pause": {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "pauseSandbox",
                "Pause (asynchronous: answers `pausing`)",
                tag=_SANDBOXES,
                ok=ok_response("The sandbox.", view),
                errors=modify_errors,
                body=EMPTY_BODY,
            ),
        },
        item + "/resume": {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "resumeSandbox",
                "Resume from paused or error (asynchronous: answers `resuming`)",
                tag=_SANDBOXES,
                ok=ok_response("The sandbox.", view),
                errors=modify_errors,
                body=EMPTY_BODY,
            ),
        },
        item + "/fork": {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "forkSandbox",
                "Fork a paused sandbox",
                tag=_SANDBOXES,
                ok=ok_response("The new sandbox.", view, links=_sandbox_links()),
                errors=modify_errors,
                body=json_body(
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
                ),
            ),
        },
        item + "/egress": {
            "parameters": [SANDBOX_ID],
            "get": operation(
                "getEgress",
                "Egress rules",
                tag=_SANDBOXES,
                ok=ok_response("The rules.", _egress()),
                errors=(404,),
            ),
            "put": operation(
                "putEgress",
                "Replace egress rules",
                tag=_SANDBOXES,
                ok=ok_response("The rules.", _egress()),
                errors=modify_errors,
                body=json_body(obj({}, {"egress": nullable(array(string()))})),
            ),
        },
        item + "/resize": {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "resizeSandbox",
                "Grow the disk",
                tag=_SANDBOXES,
                ok=ok_response(
                    "The new size.",
                    obj({"id": string(pattern=ID_PATTERN), "disk_mib": integer(minimum=1)}),
                ),
                errors=modify_errors,
                body=json_body(
                    obj({"disk_mib": integer(minimum=1, description="Larger than now.")}),
                    required=True,
                ),
            ),
        },
        item + "/ssh-pubkeys": {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "addSshPubkeys",
                "Add SSH public keys",
                tag=_SANDBOXES,
                ok=ok_response("The key count.", obj({"count": integer(minimum=0)})),
                errors=modify_errors,
                body=json_body(obj({"keys": array(string())}), required=True),
            ),
        },
        item + "/bandwidth": {
            "parameters": [SANDBOX_ID],
            "get": operation(
                "getBandwidth",
                "Bandwidth (the fake is unmetered)",
                tag=_SANDBOXES,
                ok=ok_response(
                    "The meter.",
                    obj(
                        {
                            "id": string(pattern=ID_PATTERN),
                            "quota_bytes": integer(),
                            "used_bytes": integer(),
                            "ingress_bytes": integer(),
                            "remaining_bytes": integer(),
                            "capped": boolean(),
                        }
                    ),
                ),
                errors=(404,),
            ),
        },
    }


def _egress() -> Schema:
    return obj({"id": string(pattern=ID_PATTERN), "egress": array(string())})


def _runtime_paths() -> dict[str, Any]:
    item = "/v1/sandboxes/{id}"
    runtime_errors = (404, 409)
    file_path = query("path", ABSOLUTE_PATH, "Absolute path in the sandbox.", required=True)
    return {
        item + "/exec": {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "execCommand",
                "Run a command (buffered, or streamed as NDJSON)",
                tag=_RUNTIME,
                description="Streaming when `?stream=true` or the body says `stream: true`.",
                parameters=[
                    query("stream", boolean(), "Stream NDJSON frames instead of one answer.")
                ],
                ok=ok_response(
                    "The result, or NDJSON frames (`ExecFrame`, one per line).",
                    content={
                        JSON: {
                            "schema": success(
                                obj(
                                    {
                                        "result": obj(
                                            {
                                                "stdout": string(),
                                                "stderr": string(),
                                                "exit_code": integer(),
                                            },
                                            {"error": string()},
                                        ),
                                        "exec_ms": number(minimum=0),
                                    }
                                )
                            )
                        },
                        NDJSON: {"schema": ref("ExecFrame")},
                    },
                ),
                errors=(*_BODY_ERRORS, *runtime_errors),
                body=json_body(
                    obj(
                        {"cmd": string(minLength=1)},
                        {
                            "args": nullable(array(string())),
                            "stdin": nullable(string()),
                            "env": nullable(env_map(_ENV_OVERRIDE)),
                            "stream": nullable(boolean()),
                        },
                        ignored=("timeout_ms", "timeout", "cwd"),
                    ),
                    required=True,
                ),
            ),
        },
        item + "/files": {
            "parameters": [SANDBOX_ID],
            "put": operation(
                "uploadFile",
                "Upload a file (parents are created)",
                tag=_RUNTIME,
                parameters=[file_path],
                ok=ok_response(
                    "Written.",
                    obj({"path": string(), "bytes": integer(minimum=0)}),
                    links=links(
                        {"downloadFile": {"id": "$request.path.id", "path": "$request.query.path"}}
                    ),
                ),
                errors=(*_BODY_ERRORS, *runtime_errors),
                body={
                    "required": False,
                    "content": {OCTET_STREAM: {"schema": string(format="binary")}},
                },
            ),
            "get": operation(
                "downloadFile",
                "Download a file (raw bytes, not enveloped)",
                tag=_RUNTIME,
                parameters=[file_path],
                ok=ok_response(
                    "The bytes.",
                    content={OCTET_STREAM: {"schema": string(format="binary")}},
                ),
                errors=(400, *runtime_errors),
            ),
        },
    }


def _cmd_or_pty(
    required: Mapping[str, Schema], optional: Mapping[str, Schema], **options: Any
) -> Schema:
    """The process-create body: a non-empty ``cmd``, or a ``pty`` (which starts a shell)."""
    schema = obj(required, optional, **options)
    schema["anyOf"] = [
        {"required": ["cmd"], "properties": {"cmd": string(minLength=1)}},
        {"required": ["pty"], "properties": {"pty": {"type": "object"}}},
    ]
    return schema


def _process_paths() -> dict[str, Any]:
    base = "/v1/sandboxes/{id}/processes"
    proc = base + "/{pid}"
    errors = (404, 409)
    process = ref("ManagedProcess")
    return {
        base: {
            "parameters": [SANDBOX_ID],
            "post": operation(
                "createProcess",
                "Start a managed process",
                tag=_PROCESSES,
                ok=ok_response("The process.", process, links=_process_links()),
                errors=(*_BODY_ERRORS, *errors),
                body=json_body(
                    _cmd_or_pty(
                        {},
                        {
                            "cmd": nullable(string(description="Required unless `pty` is set.")),
                            "args": nullable(array(string())),
                            "cwd": nullable(string(description="An existing directory.")),
                            "env": nullable(env_map(_ENV_OVERRIDE)),
                            "pty": nullable(
                                obj(
                                    {},
                                    {"rows": integer(), "cols": integer()},
                                    closed=False,
                                )
                            ),
                        },
                        ignored=("timeout_ms",),
                    ),
                    required=True,
                ),
            ),
            "get": operation(
                "listProcesses",
                "Managed processes (exited ones included)",
                tag=_PROCESSES,
                ok=ok_response("The processes.", obj({"processes": array(process)})),
                errors=errors,
            ),
        },
        proc: {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "get": operation(
                "getProcess",
                "A managed process",
                tag=_PROCESSES,
                ok=ok_response("The process.", process),
                errors=errors,
            ),
            "delete": operation(
                "deleteProcess",
                "Terminate the process tree",
                tag=_PROCESSES,
                parameters=[query("grace_ms", integer(minimum=0), "Grace before the kill.")],
                ok=ok_response("The process, `tree_exited: true`.", process),
                errors=(400, *errors),
            ),
        },
        proc + "/connect": {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "get": operation(
                "connectProcess",
                "Replay then follow output (NDJSON)",
                tag=_PROCESSES,
                description="Frames with `seq > after`, then live output with heartbeats, then "
                "the exit frame. A cursor older than the retained output answers 410 (or an "
                "in-stream `output_offset_expired` frame, as configured).",
                parameters=[query("after", integer(minimum=0), "Last `seq` already seen.")],
                ok=ok_response(
                    "NDJSON frames (`ProcessFrame`, one per line).",
                    content={NDJSON: {"schema": ref("ProcessFrame")}},
                ),
                errors=(400, *errors, 410),
            ),
        },
        proc + "/input": {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "post": operation(
                "sendInput",
                "Write to the process's stdin",
                tag=_PROCESSES,
                ok=ok_response("The input's sequence number.", obj({"input_seq": integer()})),
                errors=(*_BODY_ERRORS, *errors),
                body=json_body(obj({"data_base64": BASE64}), required=True),
            ),
        },
        proc + "/stdin/close": {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "post": operation(
                "closeStdin",
                "Close stdin (pipe processes only)",
                tag=_PROCESSES,
                ok=ok_response("Closed.", flag("ok")),
                errors=errors,
            ),
        },
        proc + "/signal": {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "post": operation(
                "signalProcess",
                "Send a signal to the process group",
                tag=_PROCESSES,
                ok=ok_response("Delivered.", flag("ok")),
                errors=(*_BODY_ERRORS, *errors),
                body=json_body(obj({"signal": enum(ALLOWED_SIGNALS)}), required=True),
            ),
        },
        proc + "/resize": {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "post": operation(
                "resizePty",
                "Resize the terminal (pty processes only)",
                tag=_PROCESSES,
                ok=ok_response("Resized.", flag("ok")),
                errors=(*_BODY_ERRORS, *errors),
                body=json_body(
                    obj(
                        {},
                        {
                            "rows": nullable(integer(minimum=1, maximum=1000)),
                            "cols": nullable(integer(minimum=1, maximum=1000)),
                        },
                    ),
                    required=True,
                ),
            ),
        },
        proc + "/wait": {
            "parameters": [SANDBOX_ID, PROCESS_ID],
            "get": operation(
                "waitProcess",
                "Long-poll until the process exits",
                tag=_PROCESSES,
                parameters=[
                    query(
                        "scope",
                        {"anyOf": [enum(["leader", "tree"]), const("")]},
                        "What must have exited (empty: leader).",
                    ),
                    query(
                        "timeout_ms",
                        integer(minimum=0),
                        "How long to wait (capped by the fake's maximum, which is also the "
                        "default and what 0 means).",
                    ),
                ],
                ok=ok_response("The exited process.", process),
                errors=(400, *errors, 408),
            ),
        },
    }


def _tenant_durations_path() -> dict[str, Any]:
    """The caller's own tenant's durations: named by its key, so unlike the rest of the control
    API these operations need ``X-Api-Key`` (401 without one, 404 for a key never registered)."""
    answer = ok_response(
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
    duration = nullable(number(minimum=0, maximum=MAX_DURATION_MS))
    return {
        "get": operation(
            "fakeTenantDurations",
            "The caller's tenant's transition and create durations",
            tag=_CONTROL,
            ok=answer,
            errors=(403, 404),
        ),
        "put": operation(
            "fakeSetTenantDurations",
            "Give the caller's tenant its own transition and create durations",
            tag=_CONTROL,
            ok=answer,
            description="Replaces the tenant's durations; an absent or null field keeps the "
            "fake's. Transitions started from then on take them; they go with the tenant.",
            errors=(*_BODY_ERRORS, 403, 404),
            body=json_body(obj({}, {"transition_ms": duration, "create_ms": duration})),
        ),
    }


def _control_paths() -> dict[str, Any]:
    def control(
        operation_id: str,
        summary: str,
        ok: dict[str, Any],
        *,
        errors: Iterable[int] = (),
        **options: Any,
    ) -> dict[str, Any]:
        # Every control route refuses what may come from a web page (control_access).
        return operation(
            operation_id,
            summary,
            tag=_CONTROL,
            public=True,
            ok=ok,
            errors=(403, *errors),
            **options,
        )

    gate_name = path_param("name", "Gate name.")
    return {
        "/_fake/": {
            "get": control(
                "fakeDashboard",
                "The dashboard page",
                ok_response(
                    "One self-contained HTML page over the control API.",
                    content={"text/html": {"schema": string()}},
                ),
            )
        },
        "/_fake/info": {
            "get": control(
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
            )
        },
        "/_fake/reset": {
            "post": control(
                "fakeReset",
                "Forget every tenant, rule and journal entry",
                ok_response("Reset.", flag("reset")),
            )
        },
        "/_fake/state": {
            "get": control(
                "fakeState",
                "Snapshot of tenants, sandboxes, rules, gates",
                ok_response(
                    "The snapshot.",
                    obj(
                        {
                            "seed": integer(),
                            "clock": obj({"manual": boolean(), "now": number(), "wall": string()}),
                            "tenants": array(
                                obj({"id": string(), "sandboxes": array(ref("SandboxState"))})
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
            )
        },
        "/_fake/journal": {
            "get": control(
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
            )
        },
        "/_fake/tenants": {
            "post": control(
                "fakeCreateTenant",
                "Register a key (or mint one) as a fresh tenant",
                ok_response(
                    "The key and tenant id.", obj({"api_key": string(), "tenant": string()})
                ),
                errors=_BODY_ERRORS,
                body=json_body(obj({}, {"api_key": nullable(string())})),
            ),
            "delete": control(
                "fakeDropTenant",
                "Forget a tenant and stop its sandboxes",
                ok_response("Dropped.", flag("dropped")),
                description="Any key is a tenant unless the fake is strict; a strict fake "
                "answers 404 for a key it does not know.",
                errors=(*_BODY_ERRORS, 404),
                body=json_body(obj({"api_key": string(minLength=1)}), required=True),
            ),
        },
        "/_fake/seed": {
            "post": control(
                "fakeReseed",
                "Restart ids and fault draws from a seed",
                ok_response("The seed.", obj({"seed": integer(minimum=0)})),
                errors=_BODY_ERRORS,
                body=json_body(obj({"seed": integer(minimum=0)}), required=True),
            )
        },
        "/_fake/tenant/durations": _tenant_durations_path(),
        "/_fake/clock/advance": {
            "post": control(
                "fakeAdvanceClock",
                "Move a manual clock forward",
                ok_response(
                    "The clock's time and how many timers fired.",
                    obj({"now": number(), "fired": integer(minimum=0)}),
                ),
                description="409 when the fake runs on the real clock.",
                errors=(*_BODY_ERRORS, 409),
                body=json_body(obj({"seconds": number(minimum=0)}), required=True),
            )
        },
        "/_fake/faults": {
            "get": control(
                "fakeListFaults",
                "Fault rules and gates",
                ok_response(
                    "Rules and gates.",
                    obj({"rules": array(ref("FaultRule")), "gates": array(ref("Gate"))}),
                ),
            ),
            "post": control(
                "fakeAddFaults",
                'Add one rule, a list of rules or `{"rules": [...]}` (all or none)',
                ok_response(
                    "The new rules' ids.",
                    obj({"ids": array(string())}),
                    links=links({"fakeDeleteFault": {"rule": "$response.body#/data/ids/0"}}),
                ),
                errors=_BODY_ERRORS,
                body=json_body(
                    {
                        "anyOf": [
                            ref("FaultRuleIn"),
                            array(ref("FaultRuleIn"), minItems=1),
                            obj({"rules": array(ref("FaultRuleIn"), minItems=1)}),
                        ]
                    },
                    required=True,
                ),
            ),
            "delete": control(
                "fakeClearFaults",
                "Remove every rule (opening their gates)",
                ok_response("Cleared.", flag("cleared")),
            ),
        },
        "/_fake/faults/{rule}": {
            "parameters": [path_param("rule", "Rule id.")],
            "delete": control(
                "fakeDeleteFault",
                "Remove one rule",
                ok_response("Removed.", flag("deleted")),
                errors=(404,),
            ),
        },
        "/_fake/gates/{name}": {
            "parameters": [gate_name],
            "get": control(
                "fakeGetGate",
                "A gate's counters",
                ok_response("The gate.", ref("Gate")),
                errors=(404,),
            ),
        },
        "/_fake/gates/{name}/release": {
            "parameters": [gate_name],
            "post": control(
                "fakeReleaseGate",
                "Let held requests through (or open the gate)",
                ok_response(
                    "The gate and how many were released.",
                    {"allOf": [ref("Gate"), obj({"released": integer(minimum=0)}, closed=False)]},
                ),
                errors=(*_BODY_ERRORS, 404),
                body=json_body(
                    obj({}, {"count": nullable(integer(minimum=0)), "open": nullable(boolean())})
                ),
            ),
        },
        "/_fake/sandboxes/{id}/state": {
            "parameters": [SANDBOX_ID],
            "post": control(
                "fakeSandboxState",
                "State faults: force a status, stick or fail the transition",
                ok_response("The sandbox.", ref("Sandbox")),
                errors=(*_BODY_ERRORS, 404),
                body=json_body(
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
                ),
            ),
        },
        "/_fake/sandboxes/{id}/marker": {
            "parameters": [SANDBOX_ID],
            "post": control(
                "fakeSandboxMarker",
                "Wipe, replace or garble the lease marker file",
                ok_response(
                    "What was done.",
                    obj({"id": string(), "mode": string(), "path": string()}),
                ),
                errors=(*_BODY_ERRORS, 404),
                body=json_body(
                    obj(
                        {"mode": enum(["wipe", "replace", "garble"])},
                        {"path": nullable(ABSOLUTE_PATH)},
                    ),
                    required=True,
                ),
            ),
        },
    }


# -- the document ----------------------------------------------------------------------------------


def build_document() -> dict[str, Any]:
    """A fresh OpenAPI 3.1 document (a plain dict) describing every route of the fake."""
    paths: dict[str, Any] = {}
    for part in (_meta_paths(), _sandbox_paths(), _runtime_paths(), _process_paths()):
        paths.update(part)
    paths.update(_control_paths())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fake-createos",
            "version": "1",
            "description": "The in-memory fake of the CreateOS sandbox API (pytest-createos). "
            'JSON answers are JSend envelopes: `{"status":"success","data":...}`, errors '
            '`{"status":"fail"|"error","message":...,"code":<http status>,"data"?}`. '
            "Fault rules (`/_fake/faults`) can make any `/v1` route answer any status, drop "
            "the connection, truncate a body or hang; those answers are not listed per "
            "operation. The control API under `/_fake/` needs no key.",
        },
        "tags": [
            {"name": name}
            for name in (_HEALTH, _CATALOG, _SANDBOXES, _RUNTIME, _PROCESSES, _CONTROL)
        ],
        # Any one of them (fake_server.credentials: the first present wins).
        "security": [{scheme: []} for scheme in SECURITY_SCHEMES],
        "paths": paths,
        "components": {
            "securitySchemes": SECURITY_SCHEMES,
            "headers": {
                "RequestId": {
                    "description": "The fake's id for the request (absent on NDJSON streams, "
                    "whose headers are sent before the request finishes).",
                    "schema": string(pattern="^req_[0-9]+$"),
                }
            },
            "schemas": _schemas(),
            "responses": _responses(),
        },
    }


@functools.lru_cache(maxsize=1)
def _cached() -> dict[str, Any]:
    return build_document()


def document() -> dict[str, Any]:
    """The document, built once per process (a deep copy, so callers may change it)."""
    return copy.deepcopy(_cached())
