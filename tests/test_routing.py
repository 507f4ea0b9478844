"""Serving the hot routes first changes no answer: every route's paths (with every literal
segment of every route as a variable's value, and a few odd ones) resolve to the same handler,
with the same match, the same 405 ``Allow`` or the same 404, in the served order as in the
route modules' own order — and the fake's own application serves that order."""

from __future__ import annotations

import itertools
import re
from typing import Any, cast

import pytest
from aiohttp import web
from yarl import URL

from fake_server import FakeCreateOS
from fake_server.app import UNROUTED, register_routes
from fake_server.routes import HOT, declared, hot_first, served
from fake_server.routes.common import Routes
from tests.conftest import ClientFactory

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_VARIABLE = re.compile(r"\{[^}]+\}")


def router_of(routes: Routes) -> web.UrlDispatcher:
    router = web.UrlDispatcher()
    register_routes(router, served(routes))
    return router


class _Request:
    """What resolving reads of a request (its method and URL); aiohttp's mocked requests cost
    milliseconds each, and this test makes tens of thousands."""

    def __init__(self, method: str, path: str) -> None:
        self.method = method
        self.rel_url = URL(path, encoded=True)
        self.path = path


def request(method: str, path: str) -> web.Request:
    return cast(web.Request, _Request(method, path))


def sample_paths(routes: Routes) -> list[str]:
    """Each template with each variable set to every literal segment some template holds at
    that variable's position (the only values that could make one template match another's
    paths: two templates match one path only where, segment by segment, one has a variable or
    both the same literal), to ``by-ip``, and to a few odd values."""
    literals_at: dict[int, set[str]] = {}
    for route in routes:
        for position, part in enumerate(route.template.split("/")):
            if not _VARIABLE.fullmatch(part):
                literals_at.setdefault(position, set()).add(part)
    odd = {"by-ip", "sb_x", "p_1", "10.0.0.7", "a%2Fb", "%7Bx%7D"}
    paths = {"/", "/v1", "/v1/", "/v1/sandboxes/", "/nowhere", "/v1/sandboxes/x/nowhere"}
    for route in routes:
        choices = [
            sorted(literals_at.get(position, set()) | odd) if _VARIABLE.fullmatch(part) else [part]
            for position, part in enumerate(route.template.split("/"))
        ]
        paths.update("/".join(chosen) for chosen in itertools.product(*choices))
    return sorted(paths)


def outcome(match_info: Any) -> tuple[Any, ...]:
    """What a resolution decides: the handler and the match, or the error and its Allow."""
    error = match_info.http_exception
    if error is not None:
        return ("error", error.status, error.headers.get("Allow", ""))
    handler = match_info.route.handler
    return ("route", getattr(handler, "__wrapped__", handler), dict(match_info))


async def resolutions(router: web.UrlDispatcher, requests: list[web.Request]) -> list[Any]:
    return [outcome(await router.resolve(request)) for request in requests]


async def test_hot_routes_first_resolve_every_path_as_the_module_order_does() -> None:
    assert hot_first(declared()) != declared()
    requests = [
        request(method, path) for path in sample_paths(hot_first(declared())) for method in METHODS
    ]
    assert len(requests) > 5_000
    plain = await resolutions(router_of(declared()), requests)
    served = await resolutions(router_of(hot_first(declared())), requests)
    # Comparing item by item names the first path that differs.
    for sent, before, after in zip(requests, plain, served, strict=True):
        assert after == before, (sent.method, sent.path)
    # The sample reaches every route, and the catch-all (which answers 404 and 405) too.
    reached = {result[1].__name__ for result in served}
    assert reached >= {route.handler.__name__ for route in hot_first(declared())} | {"_unrouted"}


async def test_the_fake_serves_the_hot_routes_first() -> None:
    """The hot routes are the app's own first resources; all the others (and the catch-all)
    are one resource after them, and the app resolves every path and method as a router of all
    the routes in the served order does."""
    app = FakeCreateOS(seed=1).app()
    resources = list(app.router.resources())
    assert [resource.canonical for resource in resources[: len(HOT)]] == list(HOT)
    assert len(resources) == len(HOT) + 1
    # Every route is still there for whoever lists them (the OpenAPI test, tooling).
    assert len(app.router.routes()) == len(list(served())) + 1  # and the catch-all
    requests = [
        request(method, path) for path in sample_paths(hot_first(declared())) for method in METHODS
    ]
    expected = await resolutions(router_of(hot_first(declared())), requests)
    for sent, want, got in zip(
        requests, expected, await resolutions(app.router, requests), strict=True
    ):
        assert got == want, (sent.method, sent.path)


async def test_routes_that_share_a_path_keep_their_order() -> None:
    """Why the served order gives the same answers on every aiohttp: older ones try every
    route in registration order, newer ones those under the path's longest indexed prefix. So
    any two routes that match one path (``/v1/sandboxes/by-ip/files`` matches both
    ``by-ip/{ip}`` and ``{id}/files``) must keep their order; the others may move."""
    plain = router_of(declared())
    served = router_of(hot_first(declared()))
    position = {resource.canonical: n for n, resource in enumerate(served.resources())}
    overlaps = 0
    for path in sample_paths(hot_first(declared())):
        probe = request("OPTIONS", path)  # no route has OPTIONS: every match shows
        matching = [
            resource.canonical
            for resource in plain.resources()
            if resource.name != UNROUTED and (await resource.resolve(probe))[1]
        ]
        overlaps += len(matching) > 1
        assert sorted(matching, key=position.__getitem__) == matching, path
    assert overlaps  # the sample does hold paths two routes match


async def test_fakes_share_their_routes_and_nothing_else(aiohttp_client: ClientFactory) -> None:
    one, two = FakeCreateOS(seed=1, transition_ms=0), FakeCreateOS(seed=2, transition_ms=0)
    first, second = one.app(), two.app()
    # Built once per process: a fresh app costs no route building.
    assert list(first.router.resources()) == list(second.router.resources())
    a = await aiohttp_client(first, headers={"X-Api-Key": "skp_same"})
    b = await aiohttp_client(second, headers={"X-Api-Key": "skp_same"})
    created = await a.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"})
    sandbox_id = (await created.json())["data"]["id"]
    assert (await a.get(f"/v1/sandboxes/{sandbox_id}")).status == 200
    assert (await b.get(f"/v1/sandboxes/{sandbox_id}")).status == 404
    assert [e.status for e in one.journal.requests(route="POST /v1/sandboxes")] == [200]
    assert two.journal.requests(route="POST /v1/sandboxes") == []
    # Each fake numbers its own requests.
    assert (await b.get("/v1/whoami")).headers["X-Request-ID"] == "req_00000002"
    await a.delete(f"/v1/sandboxes/{sandbox_id}")


async def test_a_fakes_app_cannot_be_mounted_under_a_prefix(aiohttp_client: ClientFactory) -> None:
    """aiohttp's add_subapp prefixes the mounted app's resources in place, and a fake's are
    every fake's: once, one mount moved all of them. It is refused before anything moves."""
    with pytest.raises(RuntimeError, match="cannot be mounted under a prefix"):
        web.Application().add_subapp("/createos", FakeCreateOS(seed=1).app())
    app = FakeCreateOS(seed=2).app()
    # Each resource refuses (the hot routes' own and the one holding all the others).
    for resource in app.router.resources():
        with pytest.raises(RuntimeError, match="cannot be mounted under a prefix"):
            resource.add_prefix("/createos")
    assert next(iter(app.router.resources())).canonical == HOT[0]
    client = await aiohttp_client(app, headers={"X-Api-Key": "skp_after"})
    assert (await client.get("/v1/whoami")).status == 200
