"""HTTP routes, one module per API area; handlers translate between HTTP and the model.

The served routes are declared once, in each module's ``ROUTES``; :func:`served` lists them as
the application registers them and :func:`route_table` as fault rules and journal assertions
check names against.

Example::

    from fake_server.routes import route_table
    route_table().methods_of("/v1/sandboxes/{id}")   # frozenset({'GET', 'HEAD', 'PATCH', 'DELETE'})
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from fake_server.route_table import RouteTable
from fake_server.routes import control, dashboard, meta, openapi, runtime, sandboxes
from fake_server.routes.common import Handler

__all__ = ["route_table", "served"]

#: The route modules, in the order their routes are registered.
_MODULES = (meta, sandboxes, runtime, control, dashboard, openapi)


def served() -> Iterator[tuple[str, str, Handler]]:
    """Every ``(method, template, handler)`` the application serves, in order: a ``HEAD``
    beside each ``GET``, as any HTTP server does (the GET's headers, no body).

    Example::

        [f"{method} {template}" for method, template, _ in served()][:2]
        # ['GET /healthz', 'HEAD /healthz']
    """
    for module in _MODULES:
        for method, template, handler in module.ROUTES:
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
