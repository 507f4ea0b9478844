"""The per-test handle on a fake: one tenant, its faults, its journal, the clock.

``createos_server`` and ``createos_aiohttp_server`` both hand tests a :class:`CreateosServer`.
Every rule a test adds through it is scoped to the test's tenant, and everything the test
added is removed when the test ends.

Example::

    def test_resume_retries(createos_server):
        createos_server.faults.error(503, route="POST /v1/sandboxes/{id}/resume", times=1)
        ...  # point your client at createos_server.url with createos_server.api_key
        createos_server.journal.assert_requested("POST /v1/sandboxes/{id}/resume", times=2)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fake_server.errors import RULE_NOT_FOUND
from fake_server.fault_rules import RuleShortcuts, did_you_mean
from fake_server.gates import OUTCOMES, WAIT_HELD_S
from fake_server.journal import Entry, Journal
from fake_server.network import Responder
from fake_server.registered_commands import CommandHandler
from fake_server.routes import route_table
from pytest_createos.channel import ALIVE, ControlChannel, ControlError

__all__ = [
    "BlockingCallError",
    "CreateosServer",
    "GateHandle",
    "HeldRequestInfo",
    "TenantClock",
    "TenantFaults",
    "TenantGates",
    "TenantJournal",
    "UnknownGateError",
]

#: ``{call}`` blocks until the fake has done something; ``{instead}`` is the form to await.
BLOCKING_ON_LOOP = (
    "{call} blocks this thread, which is running an event loop (an async test, or the fake's "
    "own loop): nothing on that loop can run meanwhile, so the request it waits for would never "
    "arrive. Use `{instead}` instead."
)


class BlockingCallError(RuntimeError):
    """A blocking helper was called from a thread whose event loop is running (it would stall
    that loop until its timeout, and then fail for a reason that is not the real one)."""


def _refuse_on_running_loop(call: str, instead: str) -> None:
    __tracebackhide__ = True  # the report points at the caller's line
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread: blocking it is harmless
        return
    raise BlockingCallError(BLOCKING_ON_LOOP.format(call=call, instead=instead))


@dataclass(frozen=True)
class HeldRequestInfo:
    """One request a gate holds, as a test sees it (:attr:`GateHandle.holding`).

    ``id`` is what :meth:`GateHandle.release_request` takes; ``outcomes`` are those it may
    be released with (all of :data:`~fake_server.gates.OUTCOMES`, unless it was held after
    its effect).

    Example::

        held = gate.holding[0]        # HeldRequestInfo(id=1, method='DELETE', path=..., ...)
        gate.release_request(held, outcome="lost")
    """

    id: int
    method: str
    path: str
    since: str
    tenant: str | None = None
    sandbox: str | None = None
    outcomes: frozenset[str] = frozenset(OUTCOMES)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HeldRequestInfo:
        """From an item of a gate's ``holding``, as ``GET /_fake/gates/{name}`` lists it."""
        outcomes = data.get("outcomes")
        return cls(
            id=int(data["id"]),
            method=str(data["method"]),
            path=str(data["path"]),
            since=str(data["since"]),
            tenant=data.get("tenant"),
            sandbox=data.get("sandbox"),
            outcomes=frozenset(OUTCOMES if outcomes is None else outcomes),
        )

    def __str__(self) -> str:
        return f"#{self.id} {self.method} {self.path} (held since {self.since})"


class GateHandle:
    """A gate seen from a test: wait until requests are held, see which, then release them
    (all, the oldest few, or one by one with an outcome).

    ``name`` is the name the test gave the gate; ``full_name`` is the fake's (prefixed with the
    test's tenant, so two tests' gates of one name never meet): what the control API
    (``/_fake/gates/{full_name}``) and the dashboard show.

    Example::

        gate = createos_server.faults.gate("delete", route="DELETE /v1/sandboxes/{id}")
        gate.wait_held(1)            # sync tests (blocks until held, 5 s timeout)
        await gate.async_wait_held() # async tests
        gate.holding                 # [HeldRequestInfo(id=1, method='DELETE', ...)]
        gate.release(1, outcome="lost")  # the oldest held DELETE happens, its answer is lost
        gate.release()               # let every held request through
    """

    def __init__(self, channel: ControlChannel, name: str, *, prefix: str = "") -> None:
        self._channel = channel
        self.name = name
        self.full_name = prefix + name

    @property
    def held(self) -> int:
        """Requests held right now."""
        return int(self._channel.gate(self.full_name)["held"])

    @property
    def passed(self) -> int:
        """Requests that went through the gate so far."""
        return int(self._channel.gate(self.full_name)["passed"])

    @property
    def holding(self) -> list[HeldRequestInfo]:
        """The requests held right now, oldest first."""
        return [HeldRequestInfo.from_json(h) for h in self._channel.gate(self.full_name)["holding"]]

    def wait_held(self, count: int = 1, timeout: float = WAIT_HELD_S) -> None:
        """Block until at least ``count`` requests are held (``TimeoutError`` otherwise).

        For sync code only: in a thread that runs an event loop it raises
        :class:`BlockingCallError` at once (use :meth:`async_wait_held` there).
        """
        __tracebackhide__ = True
        _refuse_on_running_loop(
            "gate.wait_held()", f"await gate.async_wait_held({count}, timeout={timeout})"
        )
        self._channel.wait_gate(self.full_name, count, timeout)

    async def async_wait_held(self, count: int = 1, timeout: float = WAIT_HELD_S) -> None:
        """Wait until at least ``count`` requests are held (``TimeoutError`` otherwise)."""
        await self._channel.async_wait_gate(self.full_name, count, timeout)

    def release(self, count: int | None = None, *, outcome: str | None = None) -> int:
        """Let the ``count`` oldest held requests through (all of them if ``None``); returns
        how many. The gate keeps holding later requests (:meth:`open` stops it).

        With an ``outcome`` (one of :data:`~fake_server.gates.OUTCOMES`: ``lost``, ``error``,
        ``stuck``, ``survives``), each goes on with it, as :meth:`release_request` says.

        Example::

            gate.release(1, outcome="lost")   # the oldest: its effect happens, its answer is lost
        """
        if outcome is None:
            return self._channel.release_gate(self.full_name, count)
        _check_outcome(outcome)
        if count is not None and count < 0:  # as the gate itself refuses it without an outcome
            raise ValueError("count must not be negative")
        released = 0
        for held in self.holding:
            if count is not None and released >= count:
                break
            released += self._release_one(held.id, outcome)
        return released

    def release_request(self, request: int | HeldRequestInfo, outcome: str | None = None) -> None:
        """Let one held request (an item of :attr:`holding`, or its ``id``) go on, whatever
        its place in the queue, optionally with an ``outcome``:

        - ``lost``: the effect happens, then the connection closes before the answer;
        - ``error``: a 503 in the envelope, without the effect (with it, for a request held
          after it);
        - ``stuck``: the transition a pause, resume, fork or sandbox ``DELETE`` starts never
          finishes;
        - ``survives``: a process ``DELETE`` ends nothing (``tree_exited: false``).

        :class:`~pytest_createos.channel.ControlError` if it is not held (any more), or
        cannot take that outcome.

        Example::

            delete = next(r for r in gate.holding if r.method == "DELETE")
            gate.release_request(delete, outcome="lost")
        """
        number = request.id if isinstance(request, HeldRequestInfo) else request
        if outcome is not None:
            _check_outcome(outcome)
        self._channel.release_held(self.full_name, number, outcome)

    def _release_one(self, number: int, outcome: str) -> bool:
        """Release one held request; ``False`` if it left meanwhile (its client gave up)."""
        try:
            self._channel.release_held(self.full_name, number, outcome)
        except ControlError:
            if any(held.id == number for held in self.holding):
                raise  # still held: refused for a reason of its own (the outcome)
            return False
        return True

    def open(self) -> int:
        """Release everything held and stop holding."""
        return self._channel.release_gate(self.full_name, None, open_gate=True)

    def __repr__(self) -> str:
        return f"GateHandle({self.name!r})"


def _check_outcome(outcome: str) -> None:
    if outcome not in OUTCOMES:
        raise ValueError(
            f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}"
            f"{did_you_mean(outcome, OUTCOMES)} (None: the request goes on as usual)"
        )


class UnknownGateError(KeyError):
    """``faults.gates[name]`` for a name none of the test's rules gave a gate."""

    def __str__(self) -> str:  # KeyError's own would show the message quoted, as a key
        return str(self.args[0])


class TenantGates(dict[str, GateHandle]):
    """A test's gates by name (:attr:`TenantFaults.gates`); an unknown name says which gates
    exist."""

    def __missing__(self, name: str) -> GateHandle:
        known = ", ".join(map(repr, self)) or "none (add one with faults.gate(...))"
        raise UnknownGateError(
            f"this test has no gate {name!r}{did_you_mean(name, self)}; its gates: {known}"
        )


class TenantFaults(RuleShortcuts[dict[str, Any], GateHandle]):
    """Fault rules scoped to one test's tenant, plus state faults on its sandboxes.

    Rules use the control API's schema; the shortcuts (``error``, ``latency``, ``reset``,
    ``hang``, ``drop_response``, ``malformed``, ``rate_limit``, ``stream``, ``gate``,
    ``process_survives``) are those of :class:`fake_server.faults.FaultEngine`.

    Example::

        createos_server.faults.error(503, route="DELETE /v1/sandboxes/{id}", times=1)
        createos_server.faults.add({"match": {"route": "/v1/sandboxes/{id}/exec"},
                                    "action": {"type": "latency", "ms": 50}})
        createos_server.faults.marker(sandbox_id, "garble")
    """

    def __init__(self, channel: ControlChannel, tenant_id: str, prefix: str) -> None:
        self._channel = channel
        self.tenant_id = tenant_id
        self._prefix = prefix

    def add(self, rule: Mapping[str, Any]) -> dict[str, Any]:
        """Add one rule (JSON form); its match is narrowed to this test's tenant."""
        return self.add_all([rule])[0]

    def add_all(self, rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Add several rules at once (all or none); a gate a rule names is this test's own
        (see :attr:`gates`)."""
        scoped = []
        for rule in rules:
            match = dict(rule.get("match") or {})
            match.setdefault("tenant", self.tenant_id)
            scoped.append({**rule, "match": match, **self._own_gate(rule.get("action"))})
        return self._channel.add_rules(scoped)

    def _own_gate(self, action: Any) -> dict[str, Any]:
        """The rule's ``action`` naming this test's gate, when it is a gate: on a fake that
        other tests share, a gate named ``release`` in two tests' markers would hold both
        tests' requests in one gate. Anything else is left to the fake to check."""
        if not isinstance(action, Mapping) or action.get("type") != "gate":
            return {}
        name = action.get("name")
        if not isinstance(name, str):
            return {}
        return {"action": {**action, "name": self._prefix + name}}

    def _gate_for(self, name: str) -> GateHandle:
        return GateHandle(self._channel, name, prefix=self._prefix)

    @property
    def gates(self) -> TenantGates:
        """This test's gates by the names its rules gave them, however they were added: by
        :meth:`gate`, :meth:`add` or the marker's ``faults``. A name none of them gave raises
        :class:`UnknownGateError` (a ``KeyError``) listing the gates there are.

        Example::

            @pytest.mark.createos(faults=[{"match": {"route": "DELETE /v1/sandboxes/{id}"},
                                           "action": {"type": "gate", "name": "release"}}])
            def test_release(createos_server):
                gate = createos_server.faults.gates["release"]
                ...
                gate.wait_held(1)
        """
        names = {rule["action"]["name"] for rule in self.rules if rule["action"]["type"] == "gate"}
        gates = TenantGates()
        for full in sorted(names, key=lambda name: name.removeprefix(self._prefix)):
            name = full.removeprefix(self._prefix)
            # A rule of this tenant's added without the handle (the control API) may name a
            # gate without the prefix: its handle must still reach that very gate.
            gates[name] = GateHandle(self._channel, name, prefix=full[: len(full) - len(name)])
        return gates

    @property
    def rules(self) -> list[dict[str, Any]]:
        """This tenant's rules with their ``seen``/``fired`` counters."""
        return [r for r in self._channel.rules() if r["match"].get("tenant") == self.tenant_id]

    def remove(self, rule_id: str) -> None:
        """Remove one of this test's rules (its gate opens once no rule uses it).

        :class:`~pytest_createos.channel.ControlError` saying ``fault rule not found`` (as the
        control API answers) for an id none of this test's rules has.

        Example::

            rule = createos_server.faults.error(503, route="GET /v1/whoami")
            createos_server.faults.remove(rule["id"])
        """
        ids = [rule["id"] for rule in self.rules]
        if rule_id not in ids:
            raise ControlError(
                f"{RULE_NOT_FOUND}: {rule_id!r}; this test's rules: "
                + (", ".join(map(repr, ids)) or "none")
            )
        self._channel.remove_rule(rule_id)

    # -- state faults --------------------------------------------------------------------------

    def stick(self, sandbox_id: str) -> None:
        """Hold the sandbox's transition in flight (or its next one) until :meth:`unstick`."""
        self._channel.sandbox_state(sandbox_id, stuck=True)

    def unstick(self, sandbox_id: str) -> None:
        self._channel.sandbox_state(sandbox_id, stuck=False)

    def fail_transition(self, sandbox_id: str, status: str = "error") -> None:
        """Make the sandbox's transition (current or next) end in ``error`` or ``failed``."""
        self._channel.sandbox_state(sandbox_id, fail_to=status)

    def set_status(self, sandbox_id: str, status: str) -> None:
        """Force a status now, e.g. ``"destroyed"`` behind the client's back."""
        self._channel.sandbox_state(sandbox_id, status=status)

    def marker(self, sandbox_id: str, mode: str, path: str | None = None) -> None:
        """Wipe, replace or garble the lease marker file (default: the reference provider's)."""
        self._channel.marker(sandbox_id, mode, path)


class TenantJournal:
    """The journal of one test's tenant.

    Each call reads the current journal; :meth:`snapshot` gives a
    :class:`fake_server.journal.Journal` for several queries over one consistent view.

    Example::

        createos_server.journal.assert_requested("DELETE /v1/sandboxes/{id}", times=1)
        createos_server.journal.history(sandbox_id)   # requests and transitions, in order
    """

    def __init__(self, channel: ControlChannel, tenant_id: str) -> None:
        self._channel = channel
        self.tenant_id = tenant_id

    def snapshot(self) -> Journal:
        """This tenant's entries so far, as a journal to query."""
        return Journal.of(
            (Entry.from_json(data) for data in self._channel.journal(tenant=self.tenant_id)),
            routes=route_table(),
        )

    def entries(self, **filters: Any) -> list[Entry]:
        return self.snapshot().entries(**filters)

    def requests(self, **filters: Any) -> list[Entry]:
        return self.snapshot().requests(**filters)

    def history(self, sandbox: str) -> list[Entry]:
        return self.snapshot().history(sandbox)

    def transitions(self, sandbox: str | None = None) -> list[Entry]:
        return self.snapshot().transitions(sandbox)

    def computer_actions(self, sandbox: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """What was done on this tenant's desktops: ``(action, arguments)``, oldest first."""
        return self.snapshot().computer_actions(sandbox)

    def assert_requested(self, route: str, *, times: int | None = None, **filters: Any) -> None:
        self.snapshot().assert_requested(route, times=times, **filters)

    def assert_not_requested(self, route: str, **filters: Any) -> None:
        self.snapshot().assert_not_requested(route, **filters)

    def format(self, last: int = 30) -> str:
        """The last entries, one readable line each."""
        snapshot = self.snapshot()
        return snapshot.format(snapshot.tail(last))


class TenantClock:
    """The fake's clock as a test sees it: the fake has one clock for all its tenants, so on a
    shared ``--manual-clock`` fake, :meth:`advance` moves every test's timers.

    Example::

        @pytest.mark.createos(manual_clock=True, transition_ms=1000)
        def test_waits(createos_server):
            ...
            createos_server.clock.advance(1)   # pausing -> paused, without waiting
    """

    def __init__(self, channel: ControlChannel) -> None:
        self._channel = channel

    def advance(self, seconds: float) -> None:
        """Move the manual clock forward (only with ``manual_clock=True``)."""
        self._channel.advance(seconds)

    @property
    def manual(self) -> bool:
        return bool(self._channel.state()["clock"]["manual"])

    @property
    def now(self) -> float:
        return float(self._channel.state()["clock"]["now"])


class CreateosServer:
    """A running fake as one test sees it.

    Attributes: ``url`` (base URL for clients), ``api_key`` (the test's own tenant), ``tenant_id``,
    ``seed`` (this test's seed), ``faults``, ``journal``, ``clock``; :attr:`state` lists the
    tenant's sandboxes. :meth:`register_command` and :meth:`register_responder` give the
    sandboxes' shell commands and outside hosts for this test.
    """

    def __init__(
        self,
        channel: ControlChannel,
        *,
        api_key: str,
        tenant_id: str,
        seed: int,
        gate_prefix: str = "",
    ) -> None:
        self.url = channel.url
        self.api_key = api_key
        self.tenant_id = tenant_id
        self.seed = seed
        self.channel = channel
        self.faults = TenantFaults(channel, tenant_id, gate_prefix)
        self.journal = TenantJournal(channel, tenant_id)
        self.clock = TenantClock(channel)
        #: What undoes each registration, in the order they were made.
        self._registrations: list[Callable[[], None]] = []

    @property
    def state(self) -> list[dict[str, Any]]:
        """This tenant's sandboxes (views with their processes)."""
        return self.channel.sandboxes(self.tenant_id)

    def live_sandboxes(self) -> list[dict[str, Any]]:
        """Sandboxes still alive (what the leak check reports)."""
        return [s for s in self.state if s["status"] in ALIVE]

    def register_command(self, name: str, handler: CommandHandler) -> None:
        """Add a command to the shell of every sandbox, for this test: ``handler(ctx, args)``,
        sync or async, gets a :class:`~fake_server.registered_commands.CommandContext`
        (``ctx.fs``, ``ctx.cwd``, ``ctx.env``, ``ctx.stdin``, ``ctx.stdout.write(bytes)``,
        ``ctx.sleep``) and returns the exit status. It shadows a command or builtin of that
        name (not a keyword, nor ``bash``, ``eval``...: see
        :data:`~fake_server.registered_commands.UNSHADOWED`).

        Gone when the test ends: a command the fake had under that name before (registered by
        a session fixture, say) comes back. The fake serves one test at a time (one per xdist
        worker), so no other test ever sees it. Needs the fake in this process: with
        ``--createos-url`` it raises :class:`~pytest_createos.channel.ControlError` (the
        control API cannot take Python code).

        Example::

            async def python3(ctx, args):
                ctx.stdout.write(b"Python 3.12.0\n")
                return 0

            createos_server.register_command("python3", python3)
            # exec `python3 --version` in a sandbox: exit 0, "Python 3.12.0"
        """
        self._registrations.append(self.channel.register_command(name, handler))

    def register_responder(self, host: str, responder: Responder) -> None:
        """Answer ``curl`` and ``wget`` in this test's sandboxes for ``host``
        (``"api.example.com"``, ``"api.example.com:8443"`` or ``"*.example.com"``): the
        ``responder`` gets a :class:`~fake_server.network.SimulatedRequest` and returns a
        :class:`~fake_server.network.SimulatedResponse` (sync or async). The sandbox's egress
        rules still decide whether a request may leave; nothing reaches the real network.

        Gone when the test ends, as :meth:`register_command` is (and needs the fake in this
        process, as it does).

        Example::

            from fake_server import SimulatedResponse

            createos_server.register_responder(
                "api.example.com", lambda request: SimulatedResponse(200, '{"ok": true}')
            )
            # exec `curl -s https://api.example.com/health` in a sandbox: {"ok": true}
        """
        self._registrations.append(self.channel.register_responder(host, responder))

    def unregister_all(self) -> None:
        """Undo this test's :meth:`register_command` and :meth:`register_responder` calls,
        latest first (what each replaced comes back). The fixtures call it when the test
        ends."""
        while self._registrations:
            self._registrations.pop()()

    def report(self, last: int = 30) -> str:
        """What a failing test's report shows: seed, rules, gates, last journal entries."""
        rules = self.faults.rules
        lines = [f"seed: {self.seed}    tenant: {self.tenant_id}    url: {self.url}"]
        lines.append("rules:" if rules else "rules: none")
        lines += [
            f"  {r['id']}: {r['match']} -> {r['action']} (fired {r['fired']}/{r['seen']})"
            for r in rules
        ]
        for name, gate in self.faults.gates.items():
            state = self.channel.gate(gate.full_name)
            lines.append(f"gate {name}: held {state['held']}, passed {state['passed']}")
            lines += [f"  {HeldRequestInfo.from_json(held)}" for held in state["holding"]]
        lines.append(f"last {last} journal entries:")
        lines.append(self.journal.format(last) or "  (none)")
        return "\n".join(lines)
