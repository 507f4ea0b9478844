"""The ``createos`` marker: its arguments merged over a test's markers and checked, so that
every mistake is one short message naming the argument and what is wrong with it.

Example::

    options = MarkerOptions.of(item)     # MarkerError: "...createos(transition_ms=-5): must not
                                         # be negative (got -5)"
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from fake_server import ServerConfig
from fake_server.fault_rules import FaultError, parse_rule
from fake_server.faults import check_match
from fake_server.lifecycle import check_duration_ms
from fake_server.route_table import CONTROL_PREFIX
from fake_server.routes import route_table
from pytest_createos._settings import LEAK_MODES

__all__ = ["MARKER_ARGS", "MarkerError", "MarkerOptions"]

MARKER_ARGS = frozenset(
    {"seed", "latency_ms", "faults", "transition_ms", "create_ms", "manual_clock", "leak_check"}
)


@dataclass
class MarkerOptions:
    """What ``@pytest.mark.createos(...)`` asked for, validated."""

    seed: int | None = None
    latency_ms: float | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)
    transition_ms: float | None = None
    create_ms: float | None = None
    manual_clock: bool = False
    leak_check: str | None = None

    @classmethod
    def of(cls, item: pytest.Item) -> MarkerOptions:
        """The test's markers (module, class, test) merged and checked; :class:`MarkerError`
        names the first argument that is wrong and why.

        ``faults`` add up, farthest marker first (a module's rules, then its class's, then the
        test's, top to bottom): a rule is never dropped because a closer marker has rules of
        its own. Every other keyword is the closest marker's; ``None`` counts as not given, so
        it leaves a farther marker's value in force.
        """
        options = cls()
        # iter_markers yields the closest first: the farthest is applied first, closer ones
        # over it. Each marker's values are checked as that marker wrote them, so an error
        # quotes what the user sees (``rule 0`` is the first rule of *that* list).
        for mark in reversed(list(item.iter_markers("createos"))):
            if mark.args:
                raise MarkerError(
                    f"{item.nodeid}: @pytest.mark.createos takes keywords only, "
                    f"not {mark.args[0]!r}"
                )
            unknown = sorted(set(mark.kwargs) - MARKER_ARGS)
            if unknown:
                raise MarkerError(
                    f"{item.nodeid}: @pytest.mark.createos has no option {unknown[0]!r} "
                    f"(options: {', '.join(sorted(MARKER_ARGS))})"
                )
            for name, value in mark.kwargs.items():
                if value is None:  # as if not given (the marker's documented defaults)
                    continue
                try:
                    if name == "faults":
                        options.faults = [*options.faults, *_fault_rules(value)]
                    else:
                        setattr(options, name, _MARKER_CHECKS[name](value))
                except (TypeError, ValueError) as exc:
                    raise MarkerError(
                        f"{item.nodeid}: @pytest.mark.createos({name}={reprlib.repr(value)}): {exc}"
                    ) from None
        return options

    def server_config(self) -> ServerConfig:
        """The configuration of the fake the test needs (durations are set per tenant)."""
        return _SERVER_CONFIGS[self.manual_clock]


#: Every configuration :meth:`MarkerOptions.server_config` gives, made once: a config is
#: frozen, and making one (two dozen fields) cost each test more than reading its marker.
_SERVER_CONFIGS = {manual: ServerConfig(manual_clock=manual) for manual in (False, True)}


class MarkerError(Exception):
    """A ``createos`` marker argument is wrong (reported as the test's setup error)."""


def _seed(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"must be an integer (got {type(value).__name__})")
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"must be True or False (got {type(value).__name__})")
    return value


def _leak_mode(value: object) -> str:
    if isinstance(value, bool):  # leak_check=False reads naturally
        return "fail" if value else "off"
    if value not in LEAK_MODES:
        raise ValueError(f"must be True, False or one of {', '.join(map(repr, LEAK_MODES))}")
    return str(value)


def _fault_rules(value: object) -> list[dict[str, Any]]:
    """A list of rules, each checked by the fault engine itself (so the marker says what the
    control API would)."""
    if not isinstance(value, (list, tuple)):  # a dict (one rule) or a string is not a list
        raise TypeError(
            f"must be a list of rules (got {type(value).__name__}), "
            'e.g. [{"match": {"route": "GET /v1/whoami"}, "action": {"type": "error", '
            '"status": 503}}]'
        )
    for index, rule in enumerate(value):
        try:
            # The route too, which only the fake checked: its refusal named no rule. The routes
            # are the fake engine's (both the table and its ``without`` are built once).
            check_match(parse_rule(rule).match, route_table().without(CONTROL_PREFIX))
        except FaultError as exc:
            raise ValueError(f"rule {index}: {exc.problem}") from None
    return [dict(rule) for rule in value]


#: How each marker argument but ``faults`` (:func:`_fault_rules`, whose lists add up) is checked
#: and converted (a ``ValueError``/``TypeError`` says why).
_MARKER_CHECKS: dict[str, Callable[[Any], object]] = {
    "seed": _seed,
    "latency_ms": check_duration_ms,
    "transition_ms": check_duration_ms,
    "create_ms": check_duration_ms,
    "manual_clock": _flag,
    "leak_check": _leak_mode,
}
