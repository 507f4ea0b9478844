"""The OpenAPI document: valid OpenAPI 3.1, served at ``/openapi.json``, and true to the app.

"True" is checked both ways against the aiohttp router: a route without an operation fails, and
so does an operation without a route. The live answers are checked against the document by
``test_schemathesis.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from openapi_spec_validator import validate

from fake_server import FakeCreateOS
from fake_server.api_schema import JSON, NDJSON, OCTET_STREAM, SECURITY_SCHEME
from fake_server.app import PUBLIC_PATHS, UNROUTED
from fake_server.credentials import CREDENTIAL_HEADERS
from fake_server.openapi import document

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
#: Routes that need no key: health, the catalog, this document and the control API.
PUBLIC_ROUTES = {"/healthz", "/readyz", "/openapi.json", *PUBLIC_PATHS}
#: Control routes about the caller's own tenant, which it names by its key.
KEYED_CONTROL_ROUTES = {"/_fake/tenant/durations", "/_fake/tenant/credit"}


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(METHOD, path template, operation)`` for every operation in ``doc``."""
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def router_routes(fake: FakeCreateOS) -> set[tuple[str, str]]:
    routes = set()
    for route in fake.app().router.routes():
        resource = route.resource
        assert resource is not None
        if resource.name == UNROUTED:  # the catch-all that answers 404/405
            continue
        routes.add((route.method, resource.canonical))
    # HEAD mirrors every GET (an OpenAPI document does not list it apart), and nothing else.
    heads = {path for method, path in routes if method == "HEAD"}
    assert heads == {path for method, path in routes if method == "GET"}
    return {(method, path) for method, path in routes if method != "HEAD"}


def test_document_is_valid_openapi_31() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_every_route_has_an_operation_and_every_operation_a_route(fake: FakeCreateOS) -> None:
    documented = {(method, path) for method, path, _ in operations(document())}
    served = router_routes(fake)
    assert sorted(served - documented) == [], "routes without an operation"
    assert sorted(documented - served) == [], "schemas without a route"


def test_operation_ids_are_unique_and_links_resolve() -> None:
    doc = document()
    by_id: dict[str, tuple[str, dict[str, Any]]] = {}
    for _, path, op in operations(doc):
        assert op["operationId"] not in by_id, op["operationId"]
        by_id[op["operationId"]] = (path, op)
    for _, path, op in operations(doc):
        for response in op["responses"].values():
            for name, link in response.get("links", {}).items():
                assert link["operationId"] in by_id, f"{path}: link {name}"
                target_path, target = by_id[link["operationId"]]
                declared = (
                    *doc["paths"][target_path].get("parameters", ()),
                    *target.get("parameters", ()),
                )
                names = {parameter["name"] for parameter in declared}
                assert set(link["parameters"]) <= names, f"{path}: link {name}"


def test_security_matches_the_middleware() -> None:
    doc = document()
    schemes = doc["components"]["securitySchemes"]
    # Any one credential header will do (fake_server.credentials reads them in this order).
    assert doc["security"] == [{name: []} for name in schemes]
    headers = [scheme.get("name", "Authorization") for scheme in schemes.values()]
    assert headers == list(CREDENTIAL_HEADERS)
    assert schemes[SECURITY_SCHEME] == {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
    assert schemes["BearerAuth"] == {"type": "http", "scheme": "bearer"}
    for method, path, op in operations(doc):
        control = path.startswith("/_fake/") and path not in KEYED_CONTROL_ROUTES
        public = path in PUBLIC_ROUTES or control
        assert (op.get("security") == []) is public, f"{method} {path}"
        # Authenticated operations document their 401; public ones cannot answer it.
        assert ("401" in op["responses"]) is not public, f"{method} {path}"


def _media_types(op: dict[str, Any]) -> set[str]:
    return set(op["responses"]["200"]["content"])


def test_streams_and_downloads_have_their_media_types() -> None:
    ops = {(method, path): op for method, path, op in operations(document())}
    assert _media_types(ops["POST", "/v1/sandboxes/{id}/exec"]) == {JSON, NDJSON}
    assert _media_types(ops["GET", "/v1/sandboxes/{id}/processes/{pid}/connect"]) == {NDJSON}
    assert _media_types(ops["GET", "/v1/sandboxes/{id}/files"]) == {OCTET_STREAM}
    upload = ops["PUT", "/v1/sandboxes/{id}/files"]["requestBody"]["content"]
    assert set(upload) == {OCTET_STREAM}


def test_errors_are_jsend_fail_envelopes_with_their_status_as_code() -> None:
    doc = document()
    responses = doc["components"]["responses"]
    for method, path, op in operations(doc):
        for status, response in op["responses"].items():
            if status in ("101", "200"):
                continue
            # A 5xx the fake answers by itself: only a tunnel's 502 (nothing listens there).
            assert re.fullmatch(r"4\d\d|502", status), f"{method} {path}: {status}"
            envelope = "FailEnvelope" if status.startswith("4") else "InjectedError"
            name = response["$ref"].rsplit("/", 1)[1]
            schema = responses[name]["content"][JSON]["schema"]
            assert schema["allOf"][0] == {"$ref": f"#/components/schemas/{envelope}"}
            assert schema["allOf"][1]["properties"]["code"] == {"const": int(status)}


def test_json_successes_are_jsend_envelopes() -> None:
    not_enveloped = {("GET", "/openapi.json")}
    for method, path, op in operations(document()):
        if "200" not in op["responses"]:
            # Administrators only (always 403), and the tunnel (101, then raw bytes).
            assert (method, path) in {
                ("GET", "/v1/hosts"),
                ("POST", "/v1/sandboxes/{id}/tunnel/{port}"),
            }
            continue
        content = op["responses"]["200"]["content"]
        if JSON not in content or (method, path) in not_enveloped:
            continue
        schema = content[JSON]["schema"]
        assert schema["properties"]["status"] == {"const": "success"}, f"{method} {path}"
        assert schema["required"] == ["status", "data"], f"{method} {path}"


@pytest.mark.parametrize("api_key", [None, "skp_whoever"])
async def test_served_at_openapi_json_without_a_key(
    fake: FakeCreateOS, aiohttp_client: Any, api_key: str | None
) -> None:
    headers = {"X-Api-Key": api_key} if api_key else {}
    client: TestClient[Any, Any] = await aiohttp_client(fake.app(), headers=headers)
    response = await client.get("/openapi.json")
    assert response.status == 200
    assert response.content_type == JSON
    assert await response.json() == document()
