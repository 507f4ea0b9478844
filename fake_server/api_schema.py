"""The vocabulary routes declare their OpenAPI operations in: schema constructors, the shared
error answers and :func:`operation`.

Each route module declares its operations beside its handlers with these (one source of truth);
:mod:`fake_server.openapi` only assembles them, with the shared component schemas, into the
document. Request bodies are declared as :class:`~fake_server.validation.BodySchema` objects,
which both validate the request and document it.

Example::

    from fake_server.api_schema import integer, obj, ok_response, operation
    operation(
        "resizeSandbox", "Grow the disk", tag=SANDBOXES,
        ok=ok_response("The new size.", obj({"disk_mib": integer(minimum=1)})),
    )
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from fake_server.credentials import CREDENTIAL_HEADERS
from fake_server.validation import ENV_NAME, PATH_FORBIDDEN, BodySchema

__all__ = [
    "ABSOLUTE_PATH",
    "BASE64",
    "BODY_ERRORS",
    "CATALOG",
    "COMPUTER",
    "CONTROL",
    "DISKS",
    "EMPTY_BODY",
    "ENV_OVERRIDE",
    "ERRORS",
    "HEALTH",
    "ID_PATTERN",
    "JSON",
    "NDJSON",
    "NETWORKS",
    "OCTET_STREAM",
    "PATH_PARAMETERS",
    "PNG",
    "PROCESSES",
    "PROCESS_ID",
    "RUNTIME",
    "SANDBOXES",
    "SANDBOX_ID",
    "SECURITY_SCHEME",
    "SECURITY_SCHEMES",
    "TAGS",
    "TEMPLATES",
    "LinkTarget",
    "Operation",
    "Schema",
    "array",
    "boolean",
    "const",
    "control_operation",
    "enum",
    "env_map",
    "flag",
    "integer",
    "json_content",
    "links",
    "nullable",
    "number",
    "obj",
    "ok_response",
    "operation",
    "page",
    "path_param",
    "query",
    "ref",
    "request_body",
    "string",
    "success",
    "timestamp",
]

Schema = dict[str, Any]

JSON = "application/json"
NDJSON = "application/x-ndjson"
OCTET_STREAM = "application/octet-stream"
PNG = "image/png"

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


ENV_OVERRIDE = "Overrides, only of keys declared when the sandbox was created (another: 400)."


def flag(name: str) -> Schema:
    """A payload that is one ``true`` flag, e.g. ``{"ok": true}``."""
    return obj({name: const(True)})


# -- operation helpers -------------------------------------------------------------------------

#: Every error status a route can answer by itself, with why. Shared response components.
ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "The body, a field or a query parameter is invalid."),
    402: (
        "PaymentRequired",
        "A cost-incurring call by a tenant without credit (`PUT /_fake/tenant/credit`).",
    ),
    401: (
        "Unauthorized",
        "No credential (`X-Api-Key`, or `X-Auth-Token`, `X-Access-Token` or "
        "`Authorization: Bearer`, the first present wins), or one not accepted.",
    ),
    403: (
        "Forbidden",
        "The key may not use this route (administrators only, or a sandbox's delegated access"
        " token outside that sandbox's exec, files, processes and desktop); an upload into"
        " the image's read-only programs (`/bin`, `/usr/bin`); for the control API: the"
        " request's `Host` is not loopback, its `Origin` is another site, or the control"
        " token is missing.",
    ),
    404: (
        "NotFound",
        "No such sandbox (or not this tenant's), process, file, network, disk, rule or gate.",
    ),
    405: ("MethodNotAllowed", "The path exists but not with this method (`Allow` lists them)."),
    408: (
        "Timeout",
        "The process did not exit before `timeout_ms`; or none of the request's body arrived"
        " for `body_timeout_s` (the connection is closed).",
    ),
    409: ("Conflict", "The operation is not allowed in the current state."),
    410: ("Gone", "The requested output was evicted (`data.oldest_available_seq`)."),
    413: ("TooLarge", "The request body is larger than the fake accepts."),
    426: ("UpgradeRequired", "A tunnel needs `Upgrade: tcp-tunnel` (the answer names it)."),
    502: ("BadGateway", "Nothing listens on the tunnel's port in the sandbox."),
}


def json_content(schema: Schema) -> dict[str, Any]:
    return {JSON: {"schema": schema}}


#: What a response may link to, for stateful testing: every operation on the sandbox, process,
#: template, network, disk, desktop window or desktop screen it carries (``fake_server.openapi``
#: resolves them from the declared routes).
LinkTarget = Literal["sandbox", "process", "template", "network", "disk", "window", "screen"]


def ok_response(
    description: str,
    data: Schema | None = None,
    *,
    content: dict[str, Any] | None = None,
    links: dict[str, Any] | LinkTarget | None = None,
) -> dict[str, Any]:
    """A 200 answer: a JSend success around ``data``, or explicit ``content``; ``links`` are
    explicit (:func:`links`) or every operation on the sandbox or process it carries."""
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


#: Path parameters by placeholder name: the document declares them on each path item whose
#: template holds them (a template with another placeholder is an error when it is built).
PATH_PARAMETERS: dict[str, Schema] = {
    "id": SANDBOX_ID,
    "pid": PROCESS_ID,
    "ip": path_param("ip", "The sandbox's private IP."),
    "network": path_param("network", "Network id or name."),
    "disk": path_param("disk", "Disk id or name."),
    "rule": path_param("rule", "Rule id."),
    "name": path_param("name", "Gate name."),
    "template": path_param("template", "Template id (`tpl_...`) or name."),
    "port": path_param("port", "A TCP port in the sandbox.", integer(minimum=1, maximum=65535)),
    "wid": path_param("wid", "Desktop window id (e.g. `0x0400001`).", string(pattern=ID_PATTERN)),
    "sid": path_param("sid", "Desktop screen id.", string(pattern="^screen-[0-7]$")),
}


def request_body(body: BodySchema | Schema) -> Schema:
    """The OpenAPI ``requestBody`` of a declared JSON body, or ``body`` itself when it is one
    already (a raw upload)."""
    if not isinstance(body, BodySchema):
        return body
    document: Schema = {"required": body.required, "content": json_content(dict(body.schema))}
    if body.description:
        document["description"] = body.description
    return document


#: An empty or ``{}`` body: what pause, resume and the like accept (TWIN sends ``{}``).
EMPTY_BODY = BodySchema(obj(), description="No fields; an empty body is fine.")

#: The document's tags, in its order.
HEALTH = "health"
CATALOG = "catalog"
SANDBOXES = "sandboxes"
RUNTIME = "runtime"
PROCESSES = "processes"
TEMPLATES = "templates"
NETWORKS = "networks"
DISKS = "disks"
COMPUTER = "computer"
CONTROL = "control"
TAGS = (
    HEALTH,
    CATALOG,
    SANDBOXES,
    RUNTIME,
    PROCESSES,
    COMPUTER,
    TEMPLATES,
    NETWORKS,
    DISKS,
    CONTROL,
)

#: What every operation that reads a body may answer about it.
BODY_ERRORS = (400, 408, 413)


class Operation(NamedTuple):
    """A route's OpenAPI operation and the JSON body it reads (validated by that schema)."""

    document: dict[str, Any]
    body: BodySchema | None


def operation(
    operation_id: str,
    summary: str,
    *,
    tag: str,
    ok: dict[str, Any] | None,
    errors: Iterable[int] = (),
    public: bool = False,
    parameters: Iterable[Schema] = (),
    body: BodySchema | Schema | None = None,
    description: str | None = None,
    switching: str | None = None,
) -> Operation:
    """One operation; authenticated operations answer 401 too, public ones opt out of the
    global ``X-Api-Key`` requirement. ``ok`` is ``None`` for a route the fake never answers
    with success. ``body`` is the :class:`BodySchema` its handler reads, or a raw
    ``requestBody``; ``switching`` describes a 101 answer (a protocol upgrade)."""
    codes = set(errors)
    if not public:
        codes.add(401)
    responses: dict[str, Any] = {"200": ok} if ok is not None else {}
    if switching is not None:
        responses["101"] = {"description": switching}
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
        op["requestBody"] = request_body(body)
    return Operation(op, body if isinstance(body, BodySchema) else None)


def control_operation(
    operation_id: str,
    summary: str,
    ok: dict[str, Any],
    *,
    errors: Iterable[int] = (),
    **options: Any,
) -> Operation:
    """An operation of the control API: public (it needs no key) and refused (403) to what may
    come from a web page (:mod:`fake_server.control_access`).

    Example::

        control_operation("fakeReset", "Forget everything", ok_response("Reset.", flag("reset")))
    """
    return operation(
        operation_id, summary, tag=CONTROL, public=True, ok=ok, errors=(403, *errors), **options
    )


def links(targets: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """OpenAPI links to ``operationId -> {parameter: runtime expression}`` (what stateful
    testing follows: create a sandbox, then use its id)."""
    return {
        f"To_{target}": {"operationId": target, "parameters": dict(parameters)}
        for target, parameters in targets.items()
    }
