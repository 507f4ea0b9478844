"""Template routes: create (the build starts on its own), list, read, logs (plain or followed
as NDJSON) and delete, each by id or name."""

from __future__ import annotations

from aiohttp import web

from fake_server.api_schema import (
    BODY_ERRORS,
    NDJSON,
    TEMPLATES,
    boolean,
    const,
    enum,
    flag,
    integer,
    obj,
    ok_response,
    operation,
    page,
    query,
    ref,
    string,
    timestamp,
)
from fake_server.catalog import ROOTFS
from fake_server.errors import ApiError
from fake_server.routes.common import (
    PAGE_PARAMETERS,
    Route,
    Routes,
    fake_of,
    ok,
    page_bounds,
    paginated,
    read_body,
    tenant_of,
)
from fake_server.routes.ndjson import stream_ndjson
from fake_server.templates import (
    MAX_DOCKERFILE_BYTES,
    TEMPLATE_NAME,
    Template,
    TemplateSpec,
    TemplateStatus,
)
from fake_server.validation import BodySchema, query_int

TEMPLATE = "/v1/templates/{template}"

CREATE = BodySchema(
    obj(
        {
            "name": string(pattern=TEMPLATE_NAME.pattern),
            "dockerfile": string(
                minLength=1,
                maxLength=MAX_DOCKERFILE_BYTES,
                description="Built for real: RUN, ENV, ARG and WORKDIR run in the sandbox "
                "shell; COPY/ADD fail the build (no build context is uploaded); CMD, "
                "ENTRYPOINT, EXPOSE and the like are ignored.",
            ),
        },
        {"base": enum(ROOTFS, description="The rootfs it builds on (default: the default).")},
    ),
    required=True,
)


async def create(request: web.Request) -> web.Response:
    body = await read_body(request, CREATE)
    spec = TemplateSpec(
        name=body.string("name") or "",
        dockerfile=body.string("dockerfile") or "",
        base=body.string("base"),
    )
    return ok(fake_of(request).templates.create(tenant_of(request), spec).view())


async def list_templates(request: web.Request) -> web.Response:
    limit, offset = page_bounds(request)
    templates, total = fake_of(request).templates.page(
        tenant_of(request), limit=limit, offset=offset
    )
    views = [template.view() for template in templates]
    return ok(paginated(views, total=total, limit=limit, offset=offset))


def _template(request: web.Request) -> Template:
    return fake_of(request).templates.get(tenant_of(request), request.match_info["template"])


async def get(request: web.Request) -> web.Response:
    include = request.query.get("include", "")
    return ok(_template(request).view(dockerfile="dockerfile" in include.split(",")))


async def delete(request: web.Request) -> web.Response:
    fake_of(request).templates.delete(tenant_of(request), request.match_info["template"])
    return ok({"ok": True})


async def logs(request: web.Request) -> web.StreamResponse:
    template = _template(request)
    # Templates build once here: attempt 1 is the only one there is.
    if query_int(request.query, "attempt", 1, low=1) != 1:
        raise ApiError(404, "no such build attempt")
    if request.query.get("follow", "").lower() in ("true", "1"):
        return await stream_ndjson(request, template.follow())
    return web.Response(text=template.text(), content_type="text/plain")


_VIEW = ref("Template")

ROUTES: Routes = (
    Route(
        "POST",
        "/v1/templates",
        create,
        operation(
            "createTemplate",
            "Build a template from a Dockerfile",
            tag=TEMPLATES,
            description="Answers `pending`; the build waits as long as a sandbox create takes "
            "on the fake's clock, then runs (`building`) and ends `ready` or `failed`. Names "
            "are unique per tenant (409). Credit-gated (402 when the tenant has none).",
            ok=ok_response("The new template.", _VIEW, links="template"),
            errors=(*BODY_ERRORS, 402, 409),
            body=CREATE,
        ),
    ),
    Route(
        "GET",
        "/v1/templates",
        list_templates,
        operation(
            "listTemplates",
            "List templates",
            tag=TEMPLATES,
            parameters=PAGE_PARAMETERS,
            ok=ok_response("One page, oldest first.", page(_VIEW)),
            errors=(400,),
        ),
    ),
    Route(
        "GET",
        TEMPLATE,
        get,
        operation(
            "getTemplate",
            "A template",
            tag=TEMPLATES,
            parameters=[
                query("include", string(), "`dockerfile` adds the Dockerfile to the answer.")
            ],
            ok=ok_response("The template.", _VIEW),
            errors=(404,),
        ),
    ),
    Route(
        "DELETE",
        TEMPLATE,
        delete,
        operation(
            "deleteTemplate",
            "Delete a template",
            tag=TEMPLATES,
            description="A build in flight stops. Sandboxes created from it keep their files; "
            "later creates naming it answer 404.",
            ok=ok_response("Deleted.", flag("ok")),
            errors=(404,),
        ),
    ),
    Route(
        "GET",
        TEMPLATE + "/logs",
        logs,
        operation(
            "getTemplateLogs",
            "The build log (plain text, or followed as NDJSON)",
            tag=TEMPLATES,
            parameters=[
                query("attempt", integer(minimum=1), "The build attempt (only 1 here)."),
                query("follow", boolean(), "Stream NDJSON frames until the build ends."),
            ],
            ok=ok_response(
                "The log so far, or NDJSON frames (`TemplateLogFrame`, one per line).",
                content={
                    "text/plain": {"schema": string()},
                    NDJSON: {"schema": ref("TemplateLogFrame")},
                },
            ),
            errors=(400, 404),
        ),
    ),
)

#: The component schemas these answers use (fake_server.openapi adds them).
SCHEMAS = {
    "Template": obj(
        {
            "id": string(pattern="^tpl_[A-Za-z0-9_-]+$"),
            "name": string(),
            "base": string(),
            "status": enum(status.value for status in TemplateStatus),
            "ext4_size_bytes": integer(minimum=0),
            "created_at": timestamp(),
        },
        {"built_at": timestamp(), "dockerfile": string()},
        description="A template (`built_at` once ready, `dockerfile` when asked for).",
    ),
    "TemplateLogFrame": {
        "description": "One line of a followed build log; the last frame is `final: true` with "
        "the build's end (`ready`, `failed`, or `cancelled` when the template was deleted).",
        "oneOf": [
            obj(
                {
                    "ts": timestamp(),
                    "level": enum(["info", "warn", "error"]),
                    "line": string(),
                    "attempt": integer(minimum=1),
                    "final": const(False),
                }
            ),
            obj(
                {
                    "final": const(True),
                    "status": enum(["ready", "failed", "cancelled"]),
                    "attempt": integer(minimum=1),
                }
            ),
        ],
    },
}
