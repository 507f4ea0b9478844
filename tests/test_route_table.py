"""The served route table: what fault rules and journal assertions are checked against."""

from __future__ import annotations

import pytest

from fake_server import FakeCreateOS
from fake_server.app import UNROUTED
from fake_server.route_table import RouteTable
from fake_server.routes import route_table

TABLE = RouteTable(
    [
        ("GET", "/v1/sandboxes/{id}"),
        ("DELETE", "/v1/sandboxes/{id}"),
        ("POST", "/v1/sandboxes/{id}/resume"),
        ("GET", "/v1/sandboxes/by-ip/{ip}"),
        ("GET", "/v1/whoami"),
    ]
)


def test_the_table_is_what_the_application_registers(fake: FakeCreateOS) -> None:
    registered = {
        (route.method, route.resource.canonical)
        for route in fake.app().router.routes()
        if route.resource is not None and route.resource.name != UNROUTED
    }
    table = route_table()
    assert registered == {(m, t) for t in table.templates for m in table.methods_of(t)}
    assert table.methods_of("/v1/sandboxes/{id}") == {"GET", "HEAD", "PATCH", "DELETE"}


@pytest.mark.parametrize(
    ("method", "route"),
    [
        (None, None),
        ("GET", None),
        (None, "/v1/sandboxes/{id}"),
        ("DELETE", "/v1/sandboxes/{id}"),
        ("GET", "/v1/whoami"),
    ],
)
def test_served_routes_and_any_route_have_no_problem(method: str | None, route: str | None) -> None:
    assert TABLE.problem(method, route) is None


@pytest.mark.parametrize(
    ("method", "route", "message"),
    [
        (
            "GET",
            "/v1/sandbox/{id}",
            "no route GET /v1/sandbox/{id}; did you mean GET /v1/sandboxes/{id}",
        ),
        ("GIT", "/v1/whoami", "no method 'GIT'; use DELETE, GET, POST (did you mean GET?)"),
        (
            "DELETE",
            "/v1/sandboxes/:id",
            "no route DELETE /v1/sandboxes/:id; did you mean DELETE /v1/sandboxes/{id}?"
            " (a template writes a parameter as {id}, not :id)",
        ),
        (
            None,
            "/v1/sandboxes/{sandbox_id}/resume",
            "did you mean /v1/sandboxes/{id}/resume?",
        ),
        (
            "DELETE",
            "/v1/sandboxes/sb_X",
            "DELETE /v1/sandboxes/sb_X is a path, not a route template:"
            " use DELETE /v1/sandboxes/{id} with sandbox=<its id>",
        ),
        (
            "GET",
            "/v1/sandboxes/by-ip/10.0.0.1",
            "is a path, not a route template: use GET /v1/sandboxes/by-ip/{ip}",
        ),
        (
            "POST",
            "/v1/sandboxes/{id}",
            "no route POST /v1/sandboxes/{id}; /v1/sandboxes/{id} is served with DELETE, GET",
        ),
        ("GET", "v1/whoami", "is not a route: a route is a path template such as"),
        ("GET", "/nothing/like/it/at/all", "GET /openapi.json lists the routes"),
    ],
)
def test_a_misspelt_route_is_explained(method: str | None, route: str, message: str) -> None:
    problem = TABLE.problem(method, route)
    assert problem is not None
    assert message in problem


def test_concrete_paths_resolve_to_their_template() -> None:
    assert TABLE.template_of("/v1/sandboxes/sb_1") == "/v1/sandboxes/{id}"
    assert TABLE.template_of("/v1/sandboxes/sb_1/resume", "POST") == "/v1/sandboxes/{id}/resume"
    assert TABLE.template_of("/v1/sandboxes/sb_1/resume", "GET") is None
    assert TABLE.template_of("/v1/sandboxes/sb_1/nothing") is None
    assert TABLE.problem("DELETE", "/v1/sandboxes/sb_1", paths=True) is None
    assert "did you mean DELETE /v1/sandboxes/{id}?" in str(
        TABLE.problem("DELETE", "/v1/sandboxes/:id", paths=True)
    )


def test_a_table_less_a_prefix_is_built_once() -> None:
    # Every fake (one per createos_aiohttp_server test) asks for the same faultable table.
    table = route_table()
    assert table.without("/_fake/") is table.without("/_fake/")
    assert not any(t.startswith("/_fake/") for t in table.without("/_fake/").templates)
