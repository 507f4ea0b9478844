"""HTTP routes, one module per API area; handlers translate between HTTP and the model.

The served routes are declared once, in each module's ``ROUTES``; :func:`served` lists them as
the application registers them (the :data:`HOT` ones first) and :func:`route_table` as fault
rules and journal assertions check names against.

Example::

    from fake_server.routes import route_table
    route_table().methods_of("/v1/sandboxes/{id}")   # frozenset({'GET', 'HEAD', 'PATCH', 'DELETE'})
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from fake_server.api_schema import Schema
from fake_server.route_table import RouteTable
from fake_server.routes import (
    access_tokens,
    computer,
    computer_windows,
    control,
    dashboard,
    meta,
    openapi,
    processes,
    resources,
    runtime,
    sandboxes,
    templates,
    tenant_settings,
    tunnels,
)
from fake_server.routes.common import SANDBOX, Handler, Routes

__all__ = ["HOT", "declared", "hot_first", "route_table", "schemas", "served"]

#: The route modules, in the order their routes are declared.
_MODULES = (
    meta,
    sandboxes,
    access_tokens,
    runtime,
    processes,
    computer,
    computer_windows,
    tunnels,
    templates,
    resources,
    control,
    tenant_settings,
    dashboard,
    openapi,
)

#: The path templates clients hammer (list pages, pollers, exec, process I/O), served first in
#: this order. aiohttp tries every route under one path prefix (all of ``/v1/sandboxes/...``)
#: in registration order, a regex match each: in module order, exec came after nine misses and
#: a process's ``/wait`` after seventeen. Moving them changes no answer (tests/test_routing.py
#: resolves every route's paths both ways).
#: Two routes that match one path keep their order, whatever aiohttp's version (older ones try
#: every route in registration order): ``by-ip/{ip}`` stays before ``{id}/exec``, ``{id}/files``
#: and ``{id}/processes``, which all match a path like ``/v1/sandboxes/by-ip/files``; the
#: sandbox itself (``{id}``, the pollers' route) goes before it, as no path matches both.
#: The list page (``/v1/sandboxes``, a plain string) comes after the sandbox and exec: a poller's
#: ``GET`` of one sandbox is the request every client repeats most, and each route tried before
#: it costs a call even when it is only a string comparison.
HOT = (
    SANDBOX,  # one segment after /v1/sandboxes: no other route matches its paths
    "/v1/sandboxes/by-ip/{ip}",
    SANDBOX + "/exec",
    "/v1/sandboxes",
    processes.PROCESS + "/wait",
    processes.PROCESS + "/connect",
    processes.PROCESS,
    processes.PROCESS + "/input",
    processes.PROCESSES_OF,
    SANDBOX + "/files",
)


def declared() -> Routes:
    """Every module's ``ROUTES``, in the modules' own order.

    Example::

        declared()[0].template   # '/healthz'
    """
    return tuple(route for module in _MODULES for route in module.ROUTES)


def schemas() -> dict[str, Schema]:
    """The component schemas route modules declare beside their routes (``SCHEMAS``), for the
    OpenAPI document; a name declared twice is an error.

    Example::

        schemas()["Template"]["properties"]["status"]   # {'type': 'string', 'enum': [...]}
    """
    found: dict[str, Schema] = {}
    for module in _MODULES:
        for name, schema in getattr(module, "SCHEMAS", {}).items():
            if name in found:
                raise ValueError(f"component schema {name!r} is declared twice")
            found[name] = schema
    return found


def hot_first(routes: Routes) -> Routes:
    """``routes`` with the :data:`HOT` templates first (a stable sort: each template's
    methods stay together, and so does the order of all the others).

    Example::

        hot_first(declared())[0][1]   # '/v1/sandboxes/{id}'
    """
    rank = {template: position for position, template in enumerate(HOT)}
    return tuple(sorted(routes, key=lambda route: rank.get(route[1], len(HOT))))


def served(routes: Routes | None = None) -> Iterator[tuple[str, str, Handler]]:
    """Every ``(method, template, handler)`` the application serves, in the order it registers
    them (``routes``, by default ``hot_first(declared())``): a ``HEAD`` beside each ``GET``, as
    any HTTP server does (the GET's headers, no body).

    Example::

        [f"{method} {template}" for method, template, _ in served()][:2]
        # ['GET /v1/sandboxes/{id}', 'HEAD /v1/sandboxes/{id}']
    """
    for method, template, handler, _ in hot_first(declared()) if routes is None else routes:
        yield method, template, handler
        if method == "GET":
            yield "HEAD", template, handler


@functools.cache
def route_table() -> RouteTable:
    """The served routes as a :class:`~fake_server.route_table.RouteTable` (built once).

    Example::

        route_table().problem("GET", "/v1/sandbox/{id}")   # '... did you mean ...'
    """
    return RouteTable((method, template) for method, template, _ in served())
