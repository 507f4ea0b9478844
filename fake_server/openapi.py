"""The OpenAPI 3.1 document of the fake: the ``/v1`` surface, health, the control API.

Each route declares its operation beside its handler (:mod:`fake_server.routes`, in the
vocabulary of :mod:`fake_server.api_schema`); this module assembles them, with the component
schemas the answers share, into the document served at ``GET /openapi.json``. The test suite
checks the live fake's answers against it with Schemathesis.

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
import re
from collections.abc import Iterable
from typing import Any

from fake_server.access_tokens import delegable
from fake_server.api_schema import (
    BASE64,
    ERRORS,
    ID_PATTERN,
    PATH_PARAMETERS,
    SECURITY_SCHEMES,
    TAGS,
    Schema,
    array,
    boolean,
    const,
    enum,
    integer,
    json_content,
    links,
    nullable,
    number,
    obj,
    ref,
    string,
    timestamp,
)
from fake_server.desktop import SCREEN_IDS
from fake_server.fault_rules import ACTION_TYPES
from fake_server.gates import OUTCOMES
from fake_server.lifecycle import Status
from fake_server.processes import ProcessState
from fake_server.sandboxes import AUTO_PAUSE_MAX, AUTO_PAUSE_MIN

__all__ = ["build_document", "document"]


# -- schemas -------------------------------------------------------------------------------------


def _error_envelope(status_kind: str, codes: Schema, description: str) -> Schema:
    data = {
        "description": 'Field-keyed details (`{"shape": "unknown shape"}`), extra facts such as '
        "`oldest_available_seq`, or else (a `fail`) the message again, which clients that read "
        "only `data` show.",
        "anyOf": [{"type": "object"}, {"type": "string"}],
    }
    fields = {"status": const(status_kind), "message": string(), "code": codes}
    if status_kind == "fail":  # every fail carries it
        return obj({**fields, "data": data}, description=description)
    return obj(fields, {"data": data}, description=description)


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
            "kind": enum(["request", "transition", "process", "computer"]),
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
        {"id": integer(minimum=1), "method": string(), "path": string(), "since": timestamp()},
        {
            "tenant": string(),
            "sandbox": string(),
            "outcomes": array(enum(OUTCOMES)),
        },
        description="A request held at the gate right now, and since when; `id` names it to"
        " `POST /_fake/gates/{name}/release` (never reused by the gate). `outcomes`, when"
        " present, are the only ones a release may still give it: a request held after its"
        " effect (`when: after`) can lose its answer or have an error answered instead, and"
        " neither once its answer has been sent.",
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
            "A 5xx answer (JSend `error`): fault rules inject any; by itself the fake answers "
            "only a tunnel's 502 (nothing listens on the port).",
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
        "ComputerWindow": obj(
            {"id": string(pattern=ID_PATTERN), "title": string()},
            description="A desktop window.",
        ),
        "ComputerScreen": obj(
            {
                "screen_id": enum(SCREEN_IDS),
                "display": string(pattern="^:[0-7]$"),
                "width": integer(minimum=1),
                "height": integer(minimum=1),
                "vnc_port": integer(minimum=1),
                "novnc_port": integer(minimum=1),
            },
            description="A desktop screen (an X display).",
        ),
        "FaultRuleIn": _fault_rule_in(),
        "FaultRule": _fault_rule_out(),
        "Gate": gate,
        "JournalEntry": _journal_entry(),
        "SandboxState": _sandbox_state(),
    }


def _responses() -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for code, (name, description) in ERRORS.items():
        envelope = ref("FailEnvelope" if code < 500 else "InjectedError")
        schema: Schema = {"allOf": [envelope, obj({"code": const(code)}, closed=False)]}
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
        if code == 426:
            response["headers"]["Upgrade"] = {
                "schema": const("tcp-tunnel"),
                "description": "The protocol to ask for.",
            }
        responses[name] = response
    return responses


# -- paths ---------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"{([^}]+)}")

#: Where an answer's links point (see ``LinkTarget``): the operations on a path with exactly these
#: placeholders, and the runtime expression that fills each.
_LINKS_BY_PLACEHOLDERS: dict[str, dict[tuple[str, ...], dict[str, str]]] = {
    "sandbox": {
        ("id",): {"id": "$response.body#/data/id"},
        ("ip",): {"ip": "$response.body#/data/ip"},
    },
    "process": {
        ("id", "pid"): {"id": "$request.path.id", "pid": "$response.body#/data/process_id"},
    },
    "template": {("template",): {"template": "$response.body#/data/id"}},
    "network": {("network",): {"network": "$response.body#/data/id"}},
    "disk": {("disk",): {"disk": "$response.body#/data/id"}},
    "window": {("id", "wid"): {"id": "$request.path.id", "wid": "$response.body#/data/id"}},
    "screen": {
        ("id", "sid"): {"id": "$request.path.id", "sid": "$response.body#/data/screen_id"},
    },
}


def _placeholders(template: str) -> tuple[str, ...]:
    return tuple(_PLACEHOLDER.findall(template))


def _paths(routes: Iterable[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """Path items from ``(method, template, operation)``: each path's parameters from its
    placeholders, and symbolic links resolved to the operations they name."""
    paths: dict[str, Any] = {}
    for method, template, op in routes:
        item = paths.get(template)
        if item is None:
            item = paths[template] = {}
            names = _placeholders(template)
            if names:
                item["parameters"] = [PATH_PARAMETERS[name] for name in names]
        item[method.lower()] = _with_delegated_refusal(template, copy.deepcopy(op))
    for item in paths.values():
        for op in (value for key, value in item.items() if key != "parameters"):
            for response in op["responses"].values():
                if isinstance(response.get("links"), str):
                    response["links"] = _links_to(response["links"], paths)
    return paths


def _with_delegated_refusal(template: str, op: dict[str, Any]) -> dict[str, Any]:
    """``op`` with its 403 when a sandbox's delegated access token is refused on it: every
    authenticated ``/v1`` route but the sandbox's runtime (fake_server.access_tokens)."""
    responses = op["responses"]
    authenticated = template.startswith("/v1/") and op.get("security") != []
    if authenticated and not delegable(template) and "403" not in responses:
        responses["403"] = {"$ref": f"#/components/responses/{ERRORS[403][0]}"}
        op["responses"] = dict(sorted(responses.items()))
    return op


def _links_to(target: str, paths: dict[str, Any]) -> dict[str, Any]:
    """Links to every operation on the sandbox, process or template an answer carries."""
    expressions = _LINKS_BY_PLACEHOLDERS[target]
    found: dict[str, dict[str, str]] = {}
    for template, item in paths.items():
        parameters = expressions.get(_placeholders(template))
        if parameters is not None:
            for key, op in item.items():
                if key != "parameters":
                    found[op["operationId"]] = parameters
    return links(found)


# -- the document ----------------------------------------------------------------------------------


def build_document() -> dict[str, Any]:
    """A fresh OpenAPI 3.1 document (a plain dict) describing every route of the fake."""
    # Imported here: route modules import this one (GET /openapi.json serves the document).
    from fake_server.routes import declared, schemas

    paths = _paths((route.method, route.template, route.operation.document) for route in declared())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fake-createos",
            "version": "1",
            "description": "The in-memory fake of the CreateOS sandbox API (pytest-createos). "
            'JSON answers are JSend envelopes: `{"status":"success","data":...}`, errors '
            '`{"status":"fail","message":...,"code":<http status>,"data":...}` (`data`: field '
            "details, or the message again) and "
            '`{"status":"error","message":...,"code":<http status>}`. '
            "Fault rules (`/_fake/faults`) can make any `/v1` route answer any status, drop "
            "the connection, truncate a body or hang; those answers are not listed per "
            "operation. The control API under `/_fake/` needs no key.",
        },
        "tags": [{"name": name} for name in TAGS],
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
            "schemas": {**_schemas(), **schemas()},
            "responses": _responses(),
        },
    }


@functools.lru_cache(maxsize=1)
def _cached() -> dict[str, Any]:
    return build_document()


def document() -> dict[str, Any]:
    """The document, built once per process (a deep copy, so callers may change it)."""
    return copy.deepcopy(_cached())
