"""The fault engine: one fake's rules and gates, applied per request, drawing from one seeded
generator.

Every matching rule fires, in the order the rules were added; an action that ends the request
(an error, a reset, a hang...) stops the evaluation. Rules are written in the language of
:mod:`fake_server.fault_rules`; :meth:`FaultEngine.add_all` also refuses a route the fake does
not serve (it would never fire) with the routes it probably meant.

Example::

    fake.faults.error(503, route="POST /v1/sandboxes/{id}/resume", times=1, retry_after=1)
    fake.faults.latency(200, jitter_ms=20, route="/v1/sandboxes/{id}/exec")
    gate = fake.faults.gate("release", route="DELETE /v1/sandboxes/{id}")
    fake.faults.add({"match": {"route": "GET /v1/sandboxes/{id}"},
                     "action": {"type": "reset"}, "probability": 0.1})
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fake_server.fault_rules import (
    ENDING,
    MAX_RULES,
    Action,
    FaultError,
    Match,
    RequestInfo,
    Rule,
    RuleShortcuts,
    parse_rule,
)
from fake_server.gates import Gate
from fake_server.route_table import CONTROL_PREFIX, RouteTable

__all__ = ["FaultEngine", "check_match"]


def check_match(match: Match, routes: RouteTable) -> None:
    """Refuse a match no request to ``routes`` can meet (:class:`FaultError` says why): a
    misspelt route would never fire, and rules never apply to the control API.

    What :meth:`FaultEngine.add_all` checks beyond :func:`~fake_server.fault_rules.parse_rule`;
    the pytest marker checks it too, to name the rule at fault before any fake is involved.

    Example::

        check_match(Match(route="GET /v1/sandbox/{id}"), route_table())
        # FaultError: invalid fault rule: match: no route GET /v1/sandbox/{id}; did you mean ...
    """
    if match.route is not None and match.route.startswith(CONTROL_PREFIX):
        raise FaultError(f"match.route {match.route}: fault rules never apply to the control API")
    problem = routes.problem(match.method, match.route)
    if problem is not None:
        raise FaultError(f"match: {problem}")


class FaultEngine(RuleShortcuts[Rule, Gate]):
    """The rules and gates of one fake, and the one seeded generator they draw from.

    ``routes`` are the routes the fake serves: a rule's ``method`` and ``route`` must name
    one of them (the control API's excepted: rules never apply to it).
    """

    def __init__(self, seed: int, routes: RouteTable) -> None:
        #: What :attr:`random` starts from. Seeding a generator costs more than the rest of
        #: the engine, and most fakes never draw (or are reseeded for a test before they do):
        #: it is made on the first draw.
        self._seed = seed
        self._random: random.Random | None = None
        self._routes = routes.without(CONTROL_PREFIX)
        #: By id, in the order they were added (first match wins): add and remove are O(1).
        self._rules: dict[str, Rule] = {}
        #: The same rules, read-only: whether any is installed is asked on every request,
        #: and an attribute answers that without the Python call a property costs.
        self.installed: Mapping[str, Rule] = self._rules
        #: How many rules use each gate, so removing a rule knows at once whether its gate
        #: is still in use.
        self._gate_users: Counter[str] = Counter()
        self.gates: dict[str, Gate] = {}
        self._ids = itertools.count(1)

    @property
    def random(self) -> random.Random:
        """The one seeded generator every draw of these faults comes from (made on first use,
        from the latest seed: the same sequence as a generator seeded when the engine was made
        and reseeded since)."""
        if self._random is None:
            self._random = random.Random(self._seed)
        return self._random

    def reseed(self, seed: int) -> None:
        """Start the draws again from ``seed``.

        Example::

            engine.reseed(7)   # the next probability or jitter draw replays seed 7
        """
        if self._random is None:
            self._seed = seed
        else:
            self._random.seed(seed)

    # -- managing rules -----------------------------------------------------------------------

    def add(self, rule: Rule | Mapping[str, Any]) -> Rule:
        """Add a rule (a :class:`Rule` or its JSON form); returns it with its id."""
        return self.add_all([rule])[0]

    def _gate_for(self, name: str) -> Gate:
        return self.gates[name]

    def add_all(self, items: Sequence[Rule | Mapping[str, Any]]) -> list[Rule]:
        """Add several rules, all or none: each is checked before any is added."""
        if len(self._rules) + len(items) > MAX_RULES:
            raise FaultError(
                f"at most {MAX_RULES} rules can be installed ({len(self._rules)} are);"
                " remove some first"
            )
        rules = [
            item if isinstance(item, Rule) else parse_rule(item, rule_id=f"rule_{next(self._ids)}")
            for item in items
        ]
        new: set[str] = set()
        for rule in rules:
            if rule.id in self._rules or rule.id in new:
                raise FaultError(f"a rule with id {rule.id!r} exists already")
            new.add(rule.id)
            check_match(rule.match, self._routes)
        for rule in rules:
            gate = rule.gate_name
            if gate is not None:
                rule.gate = self.gate_named(gate)
                self._gate_users[gate] += 1
            self._rules[rule.id] = rule
        return rules

    def remove(self, rule_id: str) -> bool:
        """Remove one rule; a gate no remaining rule uses is opened and forgotten, so a later
        gate of the same name starts closed."""
        rule = self._rules.pop(rule_id, None)
        if rule is None:
            return False
        self._release_gate(rule)
        return True

    def clear(self, *, tenant: str | None = None) -> None:
        """Remove every rule (of one tenant, if given) and open every gate they used."""
        removed = [r for r in self._rules.values() if tenant is None or r.match.tenant == tenant]
        for rule in removed:
            del self._rules[rule.id]
            self._release_gate(rule)

    def _release_gate(self, rule: Rule) -> None:
        name = rule.gate_name
        if name is None:
            return
        self._gate_users[name] -= 1
        if self._gate_users[name] <= 0:
            del self._gate_users[name]
            gate = self.gates.pop(name, None)
            if gate is not None:
                gate.open()

    @property
    def rules(self) -> list[Rule]:
        return list(self._rules.values())

    def __iter__(self) -> Iterator[Rule]:
        return iter(list(self._rules.values()))

    def gate_named(self, name: str) -> Gate:
        gate = self.gates.get(name)
        if gate is None:
            gate = self.gates[name] = Gate(name)
        return gate

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self, request: RequestInfo, now: float) -> list[Rule]:
        """The rules that fire for ``request``, in order, counting and drawing as they go."""
        fired: list[Rule] = []
        for rule in self._rules.values():
            if not rule.match.matches(request):
                continue
            rule.seen += 1
            if rule.exhausted or rule.seen <= rule.after:
                continue
            if rule.probability < 1.0 and self.random.random() >= rule.probability:
                continue
            if rule.action.type == "rate_limit" and not self._over_limit(rule, request, now):
                continue
            rule.fired += 1
            fired.append(rule)
            if rule.action.type in ENDING:
                break
        return fired

    @staticmethod
    def _over_limit(rule: Rule, request: RequestInfo, now: float) -> bool:
        window = float(rule.action.get("window_s", 60.0))
        start, count = rule.windows.get(request.client, (now, 0))
        if now - start >= window:
            start, count = now, 0
        count += 1
        rule.windows[request.client] = (start, count)
        return count > int(rule.action.params["limit"])

    def latency_seconds(self, action: Action) -> float:
        """Draw one delay for a latency action."""
        base = float(action.params["ms"])
        jitter = float(action.get("jitter_ms", 0))
        distribution = action.get("distribution", "uniform")
        if jitter <= 0:
            delay = base
        elif distribution == "normal":
            delay = self.random.gauss(base, jitter)
        elif distribution == "exponential":
            delay = base + self.random.expovariate(1 / jitter)
        else:
            delay = base + self.random.uniform(-jitter, jitter)
        return max(0.0, delay) / 1000

    @staticmethod
    def retry_after_seconds(rule: Rule, client: str, now: float) -> int:
        """Whole seconds until a rate-limit window ends (at least 1)."""
        start, _ = rule.windows.get(client, (now, 0))
        window = float(rule.action.get("window_s", 60.0))
        return max(1, math.ceil(start + window - now))
