"""The routes the fake serves, as methods and path templates, and what a misspelt one meant.

Fault rules and journal assertions name routes (``"DELETE /v1/sandboxes/{id}"``). A name that
no route has would be accepted and never match: a rule that never fires, an assertion that
never fails. So names are checked against the table the application itself registers (see
:func:`fake_server.routes.route_table`), and a wrong one gets a "did you mean".

Example::

    table = RouteTable([("GET", "/v1/sandboxes/{id}"), ("DELETE", "/v1/sandboxes/{id}")])
    table.problem("GET", "/v1/sandbox/{id}")
    # 'no route GET /v1/sandbox/{id}; did you mean GET /v1/sandboxes/{id}?'
    table.template_of("/v1/sandboxes/sb_1", "DELETE")    # '/v1/sandboxes/{id}'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["CONTROL_PREFIX", "RouteTable"]

#: Where the control API lives; fault rules never apply to it (it is how a test recovers).
CONTROL_PREFIX = "/_fake/"

#: A template's parameter, ``{id}``; aiohttp's ``{name:regex}`` form is not used by the fake.
_PARAM = re.compile(r"\{[^}/]*\}")
#: The ``:id`` spelling other frameworks use for a parameter.
_COLON_PARAM = re.compile(r"(?<=/):[A-Za-z_][A-Za-z0-9_]*")
#: How many suggestions a "did you mean" offers at most.
_SUGGESTIONS = 3


def _shape(template: str) -> str:
    """A template with every parameter, however spelt (``{sandbox_id}``, ``:id``), as ``{}``."""
    return _PARAM.sub("{}", _COLON_PARAM.sub("{}", template.rstrip("/") or "/"))


class RouteTable:
    """Which methods serve which path templates.

    Example::

        table = RouteTable([("GET", "/v1/sandboxes/{id}")])
        table.methods                       # ('GET',)
        table.problem("GIT", None)          # "no method 'GIT'; use GET (did you mean GET?)"
    """

    def __init__(self, routes: Iterable[tuple[str, str]]) -> None:
        by_template: dict[str, set[str]] = {}
        for method, template in routes:
            by_template.setdefault(template, set()).add(method)
        self._by_template = {template: frozenset(m) for template, m in by_template.items()}
        self.methods = tuple(sorted(set().union(*self._by_template.values())))
        # [^/]+: a parameter is one path segment, as aiohttp matches it.
        self._patterns = [
            (template, re.compile("".join(_pieces(template))))
            for template in self._by_template
            if _PARAM.search(template)
        ]
        #: :meth:`without`'s answers: a table never changes, and every fake asks for the same.
        self._without: dict[str, RouteTable] = {}

    @property
    def templates(self) -> list[str]:
        """Every path template, in the order they were declared."""
        return list(self._by_template)

    def methods_of(self, template: str) -> frozenset[str]:
        """The methods that serve ``template`` (none if no route has it)."""
        return self._by_template.get(template, frozenset())

    def without(self, prefix: str) -> RouteTable:
        """The table less the templates under ``prefix``.

        Example::

            faultable = table.without(CONTROL_PREFIX)
        """
        table = self._without.get(prefix)
        if table is None:
            table = self._without[prefix] = RouteTable(
                (method, template)
                for template, methods in self._by_template.items()
                if not template.startswith(prefix)
                for method in methods
            )
        return table

    def template_of(self, path: str, method: str | None = None) -> str | None:
        """The template that serves a concrete ``path`` (with ``method``, if given), if any.

        Example::

            table.template_of("/v1/sandboxes/sb_1")   # '/v1/sandboxes/{id}'
        """
        for template, pattern in self._patterns:
            if pattern.fullmatch(path) and (method is None or method in self.methods_of(template)):
                return template
        return None

    def problem(self, method: str | None, route: str | None, *, paths: bool = False) -> str | None:
        """Why ``method`` and ``route`` (a path template, or with ``paths`` also a concrete
        path) name no served route, with what was probably meant; ``None`` when they do
        (either may be ``None``: any method, any route).

        Example::

            table.problem("DELETE", "/v1/sandboxes/:id")
            # 'no route DELETE /v1/sandboxes/:id; did you mean DELETE /v1/sandboxes/{id}?
            #  (a template writes a parameter as {name})'
        """
        if method is not None and method not in self.methods:
            close = difflib.get_close_matches(method, self.methods, n=1, cutoff=0.3)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"no method {method!r}; use {', '.join(self.methods)}{hint}"
        if route is None:
            return None
        named = f"{method} {route}" if method else route
        if not route.startswith("/"):
            return f"{named!r} is not a route: a route is a path template such as {self._example}"
        methods = self.methods_of(route)
        if methods:
            if method is None or method in methods:
                return None
            return f"no route {named}; {route} is served with {', '.join(sorted(methods))}"
        spelt_as_template = _PARAM.search(route) or _COLON_PARAM.search(route)
        concrete = None if spelt_as_template else self.template_of(route, method)
        if concrete is not None and paths:
            return None
        if concrete is not None:
            # Rules and assertions pick a sandbox by its own field, not by its path.
            hint = " with sandbox=<its id>" if "{id}" in concrete else ""
            return f"{named} is a path, not a route template: use {_named(method, concrete)}{hint}"
        suggestions = self._close(method, route)
        if not suggestions:
            return f"no route {named}; GET /openapi.json lists the routes"
        colon = _COLON_PARAM.search(route)
        hint = " (a template writes a parameter as {id}, not :id)" if colon else ""
        return f"no route {named}; did you mean {' or '.join(suggestions)}?{hint}"

    @property
    def _example(self) -> str:
        """The template most methods serve (``/v1/sandboxes/{id}``), to show what one is."""
        return max(self._by_template, key=lambda t: len(self._by_template[t]), default="/")

    def _close(self, method: str | None, route: str) -> list[str]:
        """The routes ``route`` was probably meant to be: the same shape with its parameters
        spelt otherwise, else the closest spellings (with ``method`` if it serves them)."""
        candidates = [
            template
            for template in self._by_template
            if method is None or method in self._by_template[template]
        ]
        same_shape = [t for t in candidates if _shape(t) == _shape(route)]
        close = same_shape or difflib.get_close_matches(route, candidates, n=_SUGGESTIONS)
        return [_named(method, template) for template in close]


def _named(method: str | None, template: str) -> str:
    return f"{method} {template}" if method else template


def _pieces(template: str) -> Iterable[str]:
    """The regular expression of a template, piece by piece: literal text escaped, each
    parameter one path segment."""
    position = 0
    for param in _PARAM.finditer(template):
        yield re.escape(template[position : param.start()])
        yield "[^/]+"
        position = param.end()
    yield re.escape(template[position:])
