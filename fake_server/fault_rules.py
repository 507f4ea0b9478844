"""The fault rule language: which requests a rule matches, what it does to them, and how
its JSON form is checked.

A rule is a :class:`Match` plus an :class:`Action`, with counters (``after``, ``times``,
``probability``). The same rules come from Python, the pytest marker, the control API and the
CLI's ``--faults`` file: all of them go through :func:`parse_rule`, so every way in refuses
the same mistakes with the same words. :mod:`fake_server.faults` applies them.

Example::

    rule = parse_rule({"match": {"route": "GET /v1/sandboxes/{id}"},
                       "action": {"type": "reset"}, "probability": 0.1})
    rule.match.as_json()   # {'method': 'GET', 'route': '/v1/sandboxes/{id}'}
"""

from __future__ import annotations

import difflib
import inspect
import math
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from fake_server.gates import Gate
from fake_server.validation import path_problem

__all__ = [
    "ACTION_TYPES",
    "DEFAULT_MARKER_PATH",
    "ENDING",
    "MARKER_MODES",
    "MAX_RULES",
    "STREAM_KINDS",
    "Action",
    "ActionSpec",
    "FaultError",
    "Match",
    "RequestInfo",
    "Rule",
    "RuleShortcuts",
    "did_you_mean",
    "parse_rule",
    "rules_in",
]

#: Lease-marker path of the reference provider: the default target of marker faults.
DEFAULT_MARKER_PATH = "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease"

#: How a ``stream`` action bends an exec or ``connect`` stream, and what each does (the docs'
#: action table shows these words).
STREAM_KINDS = {
    "gap": "the data frame after `after_frames` frames never comes (on `connect`, a seq is"
    " skipped)",
    "evict": "the stream is one eviction error frame",
    "malformed_frame": "after `after_frames` frames, a line that is not JSON, then the"
    " connection closes",
    "no_exit": "the stream ends without its exit frame",
    "disconnect": "the connection closes after `after_frames` frames",
    "missing_exit_status": "the exit frame carries no exit status",
    "duplicate": "once `after_frames` frames have gone out they go out again, as from a server"
    " answering an older cursor, and the stream goes on",
}
MARKER_MODES = ("wipe", "replace", "garble")
DISTRIBUTIONS = ("uniform", "normal", "exponential")


class ActionSpec(NamedTuple):
    """What one ``action.type`` does and takes."""

    #: What the action does, in words (the OpenAPI document and the docs' action table say it).
    effect: str
    #: Every parameter it accepts.
    params: frozenset[str] = frozenset()
    #: The parameters it needs.
    required: frozenset[str] = frozenset()


#: Every action type by name.
ACTION_TYPES: dict[str, ActionSpec] = {
    "latency": ActionSpec(
        "waits `ms` (± `jitter_ms`, drawn `uniform`, `normal` or `exponential`) on the "
        "fake's clock before the handler",
        frozenset({"ms", "jitter_ms", "distribution"}),
        frozenset({"ms"}),
    ),
    "error": ActionSpec(
        "answers `status` in the API's envelope (`message`, `body`, `Retry-After` header)",
        frozenset({"status", "message", "body", "retry_after"}),
        frozenset({"status"}),
    ),
    "reset": ActionSpec("closes the connection: no answer, no effect"),
    "hang": ActionSpec("never answers (until the client gives up)"),
    "drop_response": ActionSpec(
        "the effect happens, then the connection closes before the answer (the lost create)"
    ),
    "malformed": ActionSpec("the effect happens, then a 200 whose body is truncated JSON"),
    "gate": ActionSpec(
        "holds the request in gate `name` until released, `before` (default) or `after` its effect",
        frozenset({"name", "when"}),
        frozenset({"name"}),
    ),
    "rate_limit": ActionSpec(
        "429 with `Retry-After` past `limit` requests per `window_s` (default 60) per client",
        frozenset({"limit", "window_s"}),
        frozenset({"limit"}),
    ),
    "stream": ActionSpec(
        "bends an exec or `connect` stream (`after_frames` defaults to 1); `kind`: "
        + "; ".join(f"`{kind}`: {effect}" for kind, effect in STREAM_KINDS.items()),
        frozenset({"kind", "after_frames"}),
        frozenset({"kind"}),
    ),
    "process_survives": ActionSpec(
        "a process `DELETE` leaves the tree running and answers `tree_exited: false`"
    ),
    "stale_read": ActionSpec(
        "`GET` of a sandbox still answers the status it had before its last pause, resume or "
        "destroy was accepted (`paused` after a resume), even once that has finished"
    ),
    "stuck": ActionSpec("the sandbox's transition (current or next) never finishes until released"),
    "transition_error": ActionSpec(
        "the sandbox's transition ends in `status` (`error` or `failed`)",
        frozenset({"status"}),
    ),
    "destroy": ActionSpec("the sandbox is destroyed behind the client's back, before the handler"),
    "marker": ActionSpec(
        "the lease marker file is damaged: `mode` is "
        + ", ".join(f"`{mode}`" for mode in MARKER_MODES)
        + " (`path`: the marker file, default the reference provider's)",
        frozenset({"mode", "path"}),
        frozenset({"mode"}),
    ),
}
#: Actions after which the handler never runs.
ENDING = frozenset({"error", "reset", "hang", "rate_limit"})


class FaultError(ValueError):
    """A rule that does not make sense; the message says which part and why.

    Every way in (Python, the marker, the control API, ``--faults``) shows the same text,
    ``invalid fault rule: <what is wrong>``.
    """

    def __init__(self, problem: str) -> None:
        super().__init__(f"invalid fault rule: {problem}")
        #: What is wrong, without the prefix (for messages that name the rule themselves).
        self.problem = problem


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a rule can match on."""

    method: str
    route: str | None
    sandbox: str | None
    tenant: str | None
    client: str


@dataclass(slots=True)
class Match:
    """Which requests a rule applies to; ``None`` matches anything."""

    method: str | None = None
    route: str | None = None
    sandbox: str | None = None
    tenant: str | None = None

    def __post_init__(self) -> None:
        if self.route and " " in self.route:
            method, _, template = self.route.partition(" ")
            if self.method and self.method.upper() != method.upper():
                raise FaultError(f"match.route says {method} but match.method says {self.method}")
            self.method, self.route = method, template
        if self.method:
            self.method = self.method.upper()

    def matches(self, request: RequestInfo) -> bool:
        return (
            (self.method is None or self.method == request.method)
            and (self.route is None or self.route == request.route)
            and (self.sandbox is None or self.sandbox == request.sandbox)
            and (self.tenant is None or self.tenant == request.tenant)
        )

    def as_json(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in (
                ("method", self.method),
                ("route", self.route),
                ("sandbox", self.sandbox),
                ("tenant", self.tenant),
            )
            if v
        }


@dataclass(slots=True)
class Action:
    """What a rule does; ``params`` are the type's parameters (see :data:`ACTION_TYPES`)."""

    type: str
    params: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)

    def as_json(self) -> dict[str, Any]:
        return {"type": self.type, **self.params}


@dataclass(slots=True)
class Rule:
    """A match, an action and the counters that govern them."""

    id: str
    match: Match
    action: Action
    after: int = 0
    times: int | None = None
    probability: float = 1.0
    seen: int = 0
    fired: int = 0
    #: Rate-limit window state: (window start on the clock, requests in it) per client.
    windows: dict[str, tuple[float, int]] = field(default_factory=dict)
    #: A gate rule's gate, bound when the rule is added: a request that fired the rule holds
    #: at this gate even if the rule goes meanwhile (removing it opens the gate), instead of
    #: looking the name up later and finding a fresh, closed gate that nobody will open.
    gate: Gate | None = field(default=None, compare=False, repr=False)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    @property
    def gate_name(self) -> str | None:
        """The gate this rule holds requests at, if it is a gate rule."""
        return str(self.action.params["name"]) if self.action.type == "gate" else None

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "match": self.match.as_json(),
            "action": self.action.as_json(),
            "seen": self.seen,
            "fired": self.fired,
        }
        if self.after:
            body["after"] = self.after
        if self.times is not None:
            body["times"] = self.times
        if self.probability != 1.0:
            body["probability"] = self.probability
        return body


def _number(value: Any, where: str, *, low: float = 0, integer: bool = False) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FaultError(f"{where} must be a number")
    if not math.isfinite(value):
        raise FaultError(f"{where} must be a finite number (got {value!r})")
    if integer and not float(value).is_integer():
        raise FaultError(f"{where} must be an integer")
    if value < low:
        raise FaultError(f"{where} must be at least {low}")
    return int(value) if integer else float(value)


def _check_action(action: Action) -> None:
    spec = ACTION_TYPES.get(action.type)
    if spec is None:
        raise FaultError(
            f"action.type {action.type!r} is unknown; use one of {', '.join(ACTION_TYPES)}"
        )
    unknown = sorted(set(action.params) - spec.params)
    if unknown:
        raise FaultError(f"action {action.type!r} has no parameter {unknown[0]!r}")
    missing = sorted(spec.required - set(action.params))
    if missing:
        raise FaultError(f"action {action.type!r} needs {missing[0]!r}")
    p = action.params
    if action.type == "latency":
        _number(p["ms"], "action.ms")
        _number(p.get("jitter_ms", 0), "action.jitter_ms")
        if p.get("distribution", "uniform") not in DISTRIBUTIONS:
            raise FaultError(f"action.distribution must be one of {', '.join(DISTRIBUTIONS)}")
    elif action.type == "error":
        status = _number(p["status"], "action.status", low=400, integer=True)
        if status > 599:
            raise FaultError("action.status must be between 400 and 599")
        if "retry_after" in p:
            _number(p["retry_after"], "action.retry_after", integer=True)
        if "message" in p and not isinstance(p["message"], str):
            raise FaultError("action.message must be a string")
        if "body" in p and not isinstance(p["body"], (dict, str)):
            raise FaultError("action.body must be an object or a string")
    elif action.type == "gate":
        if not isinstance(p["name"], str) or not p["name"]:
            raise FaultError("action.name must be a non-empty string")
        if p.get("when", "before") not in ("before", "after"):
            raise FaultError("action.when must be 'before' or 'after'")
    elif action.type == "rate_limit":
        _number(p["limit"], "action.limit", low=1, integer=True)
        _number(p.get("window_s", 60), "action.window_s", low=0.001)
    elif action.type == "stream":
        if p["kind"] not in STREAM_KINDS:
            raise FaultError(f"action.kind must be one of {', '.join(STREAM_KINDS)}")
        _number(p.get("after_frames", 1), "action.after_frames", integer=True)
    elif action.type == "transition_error":
        if p.get("status", "error") not in ("error", "failed"):
            raise FaultError("action.status must be 'error' or 'failed'")
    elif action.type == "marker":
        if p["mode"] not in MARKER_MODES:
            raise FaultError(f"action.mode must be one of {', '.join(MARKER_MODES)}")
        if "path" in p and (not isinstance(p["path"], str) or not p["path"].startswith("/")):
            raise FaultError("action.path must be an absolute path")
        problem = path_problem(p.get("path", DEFAULT_MARKER_PATH))
        if problem is not None:
            raise FaultError(f"action.{problem}")


_RULE_KEYS = frozenset({"id", "match", "action", "after", "times", "probability"})
#: A rule id also names the rule in ``DELETE /_fake/faults/{rule}``.
RULE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
#: Rules installed at once: every request is checked against each of them.
MAX_RULES = 10_000
_MATCH_KEYS = frozenset({"method", "route", "sandbox", "tenant"})


def parse_rule(data: Mapping[str, Any], *, rule_id: str | None = None) -> Rule:
    """A :class:`Rule` from its JSON form; :class:`FaultError` says what is wrong.

    Example::

        parse_rule({"match": {"route": "DELETE /v1/sandboxes/{id}"},
                    "action": {"type": "error", "status": 503, "retry_after": 1},
                    "times": 1})
    """
    if not isinstance(data, Mapping):
        raise FaultError("a rule must be an object with 'match' and 'action'")
    unknown = sorted(set(data) - _RULE_KEYS)
    if unknown:
        raise FaultError(
            f"a rule has no field {unknown[0]!r}{did_you_mean(unknown[0], _RULE_KEYS)}; "
            f"its fields: {', '.join(sorted(_RULE_KEYS))}"
        )
    raw_match = data.get("match", {})
    if not isinstance(raw_match, Mapping):  # `[]` once matched every request
        raise FaultError("match must be an object (use {} to match every request)")
    given_id = data.get("id")
    if given_id is not None and (not isinstance(given_id, str) or not RULE_ID.fullmatch(given_id)):
        raise FaultError("id must be 1-64 letters, digits, '_', '-', '.' or ':'")
    bad = sorted(set(raw_match) - _MATCH_KEYS)
    if bad:
        raise FaultError(
            f"match has no field {bad[0]!r}{did_you_mean(bad[0], _MATCH_KEYS)}; "
            f"use {', '.join(sorted(_MATCH_KEYS))}"
        )
    for key, value in raw_match.items():
        if value is not None and not isinstance(value, str):
            raise FaultError(f"match.{key} must be a string")
    raw_action = data.get("action")
    if not isinstance(raw_action, Mapping) or not isinstance(raw_action.get("type"), str):
        raise FaultError("action must be an object with a 'type'")
    action = Action(raw_action["type"], {k: v for k, v in raw_action.items() if k != "type"})
    _check_action(action)
    times = data.get("times")
    probability = data.get("probability", 1.0)
    rule = Rule(
        id=given_id or rule_id or "rule_" + uuid.uuid4().hex[:8],
        match=Match(**raw_match),
        action=action,
        after=_number(data.get("after", 0), "after", integer=True),
        times=None if times is None else _number(times, "times", low=1, integer=True),
        probability=_number(probability, "probability"),
    )
    if rule.probability > 1:
        raise FaultError("probability must be between 0 and 1")
    return rule


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``word``; empty when none
    is close.

    Example:
        >>> did_you_mean("time", ["after", "times"])
        " (did you mean 'times'?)"
        >>> did_you_mean("zzz", ["after", "times"])
        ''
    """
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


RuleT = TypeVar("RuleT")
GateT = TypeVar("GateT")


class RuleShortcuts(Generic[RuleT, GateT]):
    """One-line constructors for common rules, over an ``add`` that takes a rule's JSON form.

    Shared by :class:`FaultEngine` and the plugin's per-test fault handle, so both offer the
    same vocabulary. Keyword arguments other than the action's parameters are the match
    (``method``, ``route``, ``sandbox``, ``tenant``) and the counters (``after``, ``times``,
    ``probability``, ``id``).
    """

    def add(self, rule: Mapping[str, Any]) -> RuleT:  # pragma: no cover - abstract
        raise NotImplementedError

    def _gate_for(self, name: str) -> GateT:  # pragma: no cover - abstract
        raise NotImplementedError

    def _shortcut(self, action: Action, match: dict[str, Any]) -> RuleT:
        _check_shortcut_keywords(type(self), action.type, match)
        options: dict[str, Any] = {key: match.pop(key) for key in _COUNTERS if key in match}
        return self.add({"match": match, "action": action.as_json(), **options})

    def latency(
        self, ms: float, *, jitter_ms: float = 0, distribution: str = "uniform", **match: Any
    ) -> RuleT:
        """Delay matching requests by ``ms`` (± ``jitter_ms``) of clock time."""
        return self._shortcut(
            Action("latency", {"ms": ms, "jitter_ms": jitter_ms, "distribution": distribution}),
            match,
        )

    def error(
        self,
        status: int,
        *,
        message: str | None = None,
        retry_after: int | None = None,
        **match: Any,
    ) -> RuleT:
        """Answer matching requests with ``status`` in the API's envelope."""
        params: dict[str, Any] = {"status": status}
        if message is not None:
            params["message"] = message
        if retry_after is not None:
            params["retry_after"] = retry_after
        return self._shortcut(Action("error", params), match)

    def reset(self, **match: Any) -> RuleT:
        """Close the connection without an answer."""
        return self._shortcut(Action("reset"), match)

    def hang(self, **match: Any) -> RuleT:
        """Never answer (until the client gives up)."""
        return self._shortcut(Action("hang"), match)

    def drop_response(self, **match: Any) -> RuleT:
        """Do the work, then close the connection before the answer (the "lost create")."""
        return self._shortcut(Action("drop_response"), match)

    def malformed(self, **match: Any) -> RuleT:
        """Do the work, then answer 200 with a body that is not valid JSON."""
        return self._shortcut(Action("malformed"), match)

    def rate_limit(self, limit: int, *, window_s: float = 60.0, **match: Any) -> RuleT:
        """429 with ``Retry-After`` past ``limit`` requests per ``window_s`` per client."""
        return self._shortcut(Action("rate_limit", {"limit": limit, "window_s": window_s}), match)

    def stream(self, kind: str, *, after_frames: int = 1, **match: Any) -> RuleT:
        """A stream fault on process ``connect`` or exec streams (see :data:`STREAM_KINDS`)."""
        return self._shortcut(Action("stream", {"kind": kind, "after_frames": after_frames}), match)

    def gate(self, name: str, *, when: str = "before", **match: Any) -> GateT:
        """Hold matching requests in gate ``name`` (before or after their effect)."""
        self._shortcut(Action("gate", {"name": name, "when": when}), match)
        return self._gate_for(name)

    def process_survives(self, **match: Any) -> RuleT:
        """``DELETE`` of a process leaves it running and answers ``tree_exited: false``."""
        return self._shortcut(Action("process_survives"), match)

    def stale_read(self, **match: Any) -> RuleT:
        """``GET`` of a sandbox still answers the status it had before its last pause, resume or
        destroy was accepted (the old status lingering right after it, even once it finished)."""
        return self._shortcut(Action("stale_read"), match)


#: The keywords every shortcut takes besides its own: the rule's counters.
_COUNTERS = ("after", "times", "probability", "id")


def _check_shortcut_keywords(owner: type, shortcut: str, given: Mapping[str, Any]) -> None:
    """Refuse a keyword no shortcut takes as a wrong keyword of the call the user wrote (a
    ``TypeError``, as Python says it), naming that shortcut's keywords: the user wrote no
    ``match``, so "match has no field 'time'" would send them looking for one.

    Each shortcut is named after its action type, so ``shortcut`` is also the method's name.
    """
    unknown = sorted(set(given) - _MATCH_KEYS - set(_COUNTERS))
    if not unknown:
        return
    own = [
        name
        for name, parameter in inspect.signature(getattr(owner, shortcut)).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    known = [*own, *sorted(_MATCH_KEYS), *_COUNTERS]
    raise TypeError(
        f"{shortcut}() got an unexpected keyword argument {unknown[0]!r}"
        f"{did_you_mean(unknown[0], known)}; it takes "
        + (f"{', '.join(own)}, " if own else "")
        + f"the match's {', '.join(sorted(_MATCH_KEYS))} and the counters {', '.join(_COUNTERS)}"
    )


def rules_in(payload: Any) -> list[Any]:
    """The rules a JSON document holds: a list of rules, ``{"rules": [...]}`` or one rule
    (the control API's body and a ``--faults`` file alike); each is checked when added.

    Example::

        rules_in([{"action": {"type": "reset"}}])            # the list itself
        rules_in({"rules": [{"action": {"type": "reset"}}]}) # the same
    """
    if isinstance(payload, Mapping):
        # Anything else than {"rules": ...} is one rule, checked (and explained) as such.
        payload = payload.get("rules", [payload])
    if not isinstance(payload, list) or not payload:
        raise FaultError('expected a rule, a non-empty list of rules or {"rules": [...]}')
    return payload
