"""Request bodies: declared once per route (a ``BodySchema`` beside the handler), enforced by
that declaration, shown by the OpenAPI document from it."""

from __future__ import annotations

from typing import Any

import pytest

from fake_server import errors
from fake_server.api_schema import array, env_map, integer, nullable, number, obj, string
from fake_server.errors import ApiError
from fake_server.openapi import document
from fake_server.routes import declared
from fake_server.routes.common import Route
from fake_server.validation import BodySchema
from tests.conftest import Client, create_sandbox

SCHEMA = BodySchema(
    obj(
        {"shape": string()},
        {
            "count": nullable(integer(minimum=1, maximum=5)),
            "low": nullable(integer(minimum=0)),
            "ratio": number(maximum=1),
            "tags": nullable(array(string())),
            "env": nullable(env_map("Variables.")),
        },
        ignored=("host_id",),
    ),
    required=True,
)


def refusal(raw: bytes, schema: BodySchema = SCHEMA) -> Any:
    with pytest.raises(ApiError) as refused:
        schema.parse(raw)
    assert refused.value.status == 400
    return refused.value.data


def test_a_body_that_keeps_the_schema_reads_by_type() -> None:
    body = SCHEMA.parse(
        b'{"shape": "s", "count": 5, "ratio": 1, "tags": ["a"], "env": {"A_1": "x"}, '
        b'"host_id": "h"}'
    )
    assert (body.string("shape"), body.integer("count"), body.number("ratio")) == ("s", 5, 1.0)
    assert (body.string_list("tags"), body.string_map("env")) == (["a"], {"A_1": "x"})


@pytest.mark.parametrize(
    "encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
)
def test_a_body_reads_in_every_encoding_json_detects(encoding: str) -> None:
    # Plain ASCII text in UTF-16 or UTF-32 is all ASCII bytes too, with NULs between them.
    text = '{"shape": "s", "tags": ["a", "b"]}'
    body = SCHEMA.parse(text.encode(encoding))
    assert (body.string("shape"), body.string_list("tags")) == ("s", ["a", "b"])


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_a_lone_surrogate_escape_is_refused_in_every_encoding(encoding: str) -> None:
    # In UTF-16 and UTF-32 the bytes of "\u" have NULs between them: a search for b"\\u"
    # finds nothing, and the body must still be walked (regression: it was taken as plain).
    with pytest.raises(ApiError) as refused:
        SCHEMA.parse('{"shape": "\\ud800"}'.encode(encoding))
    assert (refused.value.status, refused.value.message) == (400, errors.JSON_NOT_TEXT)


@pytest.mark.parametrize(
    ("raw", "shape"),
    [
        (b' \t\r\n{"shape": "s"}\n ', "s"),  # JSON's four whitespace characters
        (b'{"shape": "a\\\\b\\n"}', "a\\b\n"),  # escapes, none of them \u
        (b'{"shape": "caf\\u00e9"}', "caf\u00e9"),
    ],
)
def test_json_around_and_inside_the_document(raw: bytes, shape: str) -> None:
    assert SCHEMA.parse(raw).string("shape") == shape


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"shape": "s"} x', errors.INVALID_JSON),
        (b'{"shape": "s"} {}', errors.INVALID_JSON),
        (b'\x0c{"shape": "s"}', errors.INVALID_JSON),  # a form feed is not JSON whitespace
        (b'{"shape": "s"}\xc2\xa0', errors.INVALID_JSON),
        (b'{"shape": "\\ud800"}', errors.JSON_NOT_TEXT),
    ],
)
def test_what_is_not_one_json_text_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ApiError) as refused:
        SCHEMA.parse(raw)
    assert (refused.value.status, refused.value.message) == (400, message)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"count": 1}', {"shape": "is required"}),
        (b'{"shape": null}', {"shape": "is required"}),
        (b'{"shape": 1}', {"shape": "must be a string"}),
        (b'{"shape": "a\\u0000b"}', {"shape": "must not contain NUL bytes"}),
        (b'{"shape": "s", "count": 6}', {"count": "must be between 1 and 5"}),
        (b'{"shape": "s", "count": true}', {"count": "must be an integer"}),
        (b'{"shape": "s", "count": 1.5}', {"count": "must be an integer"}),
        (b'{"shape": "s", "low": -1}', {"low": "must be at least 0"}),
        (b'{"shape": "s", "ratio": 2}', {"ratio": "must be at most 1"}),
        (b'{"shape": "s", "ratio": "1"}', {"ratio": "must be a number"}),
        (b'{"shape": "s", "tags": ["a", 1]}', {"tags": "must be a list of strings"}),
        (b'{"shape": "s", "tags": ["a", "b\\u0000"]}', {"tags": "must be a list of strings"}),
        (b'{"shape": "s", "tags": [["a"]]}', {"tags": "must be a list of strings"}),
        (b'{"shape": "s", "env": {"A": 1}}', {"env": "must be an object of strings"}),
        (b'{"shape": "s", "env": {"A": "\\u0000"}}', {"env": "must be an object of strings"}),
        (b'{"shape": "s", "env": {"1A": "x"}}', {"env": errors.ENV_NAME_INVALID}),
        (b'{"shape": "s", "hostid": "h"}', {"hostid": "unknown field"}),
    ],
)
def test_what_the_schema_refuses_is_named(raw: bytes, problem: dict[str, str]) -> None:
    data = refusal(raw)
    (field,) = problem
    assert data[field].startswith(problem[field])


def test_null_reads_as_absent_and_an_empty_body_as_an_empty_object() -> None:
    schema = BodySchema(obj({}, {"count": nullable(integer(minimum=1))}))
    assert schema.parse(b'{"count": null}').integer("count") is None
    assert schema.parse(b"  ").data == {}


def test_a_null_body_is_no_body() -> None:
    # As Go's decoder reads `null` into the server's struct: the Rust SDK sends it for the
    # actions that take no body.
    assert BodySchema(obj({}, {"count": integer()})).parse(b" null ").data == {}
    assert refusal(b"null") == {"shape": "is required"}


def test_a_field_may_take_the_models_own_check() -> None:
    def even(value: object) -> None:
        if not isinstance(value, int) or value % 2:
            raise ValueError("must be even, as the model words it")

    schema = BodySchema(obj({}, {"n": integer(minimum=0)}), checks={"n": even})
    assert schema.parse(b'{"n": 4}').integer("n") == 4
    assert refusal(b'{"n": 3}', schema) == {"n": "must be even, as the model words it"}


def test_a_handler_reading_a_field_as_another_type_is_a_bug_not_a_bad_request() -> None:
    body = SCHEMA.parse(b'{"shape": "s"}')
    with pytest.raises(TypeError):
        body.integer("shape")


# -- every route enforces the body its operation documents -------------------------------------

#: A value of the wrong JSON type for each type the schemas declare.
WRONG = {"string": 7, "integer": "7", "number": "7", "boolean": "yes", "array": "x", "object": 7}


def _body_routes() -> list[Route]:
    return [route for route in declared() if route.operation.body is not None]


def _declared_type(field: dict[str, Any]) -> str | None:
    branches = [branch for branch in field.get("anyOf", ()) if branch.get("type") != "null"]
    if "type" not in field and len(branches) == 1:
        field = branches[0]
    kind = field.get("type")
    return kind if isinstance(kind, str) else None


def test_the_document_shows_each_routes_declared_body() -> None:
    paths = document()["paths"]
    for route in _body_routes():
        assert route.operation.body is not None
        shown = paths[route.template][route.method.lower()]["requestBody"]
        assert shown["content"]["application/json"]["schema"] == route.operation.body.schema
        assert shown["required"] is route.operation.body.required


@pytest.mark.parametrize("route", _body_routes(), ids=lambda route: f"{route[0]} {route[1]}")
async def test_each_route_refuses_what_its_declared_body_refuses(
    client: Client, route: Route
) -> None:
    sandbox = await create_sandbox(client)
    process = await client.post(f"/v1/sandboxes/{sandbox['id']}/processes", json={"cmd": "cat"})
    path = route.template.format(
        id=sandbox["id"],
        pid=(await process.json())["data"]["process_id"],
        name="a-gate",
        ip=sandbox["ip"],
        rule="r",
        port="7",
        network="no-such-network",
        disk="no-such-disk",
        wid="0x0400001",
        sid="screen-0",
    )
    assert route.operation.body is not None
    schema = route.operation.body.schema
    probes = {"zz_not_a_field": 1} | {
        name: WRONG[kind]
        for name, field in schema.get("properties", {}).items()
        if (kind := _declared_type(field)) in WRONG
    }
    for name, value in probes.items():
        response = await client.request(route.method, path, json={name: value})
        body = await response.json()
        assert response.status == 400, (name, body)
        # A documented field is refused for its type, never as unknown: the handler reads the
        # body its operation shows.
        unknown = body["data"][name] == errors.UNKNOWN_FIELD
        assert unknown == (name == "zz_not_a_field"), (name, body)
