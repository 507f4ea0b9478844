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
from collections.abc import Mapping, Sequence
from typing import Any

from fake_server.fault_rules import RuleShortcuts
from fake_server.gates import WAIT_HELD_S
from fake_server.journal import Entry, Journal
from fake_server.routes import route_table
from pytest_createos.channel import ALIVE, ControlChannel

__all__ = [
    "BlockingCallError",
    "CreateosServer",
    "GateHandle",
    "TenantClock",
    "TenantFaults",
    "TenantJournal",
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


class GateHandle:
    """A gate seen from a test: wait until requests are held, then release them.

    Example::

        gate = createos_server.faults.gate("delete", route="DELETE /v1/sandboxes/{id}")
        gate.wait_held(1)            # sync tests (blocks until held, 5 s timeout)
        await gate.async_wait_held() # async tests
        gate.release()               # let every held request through
    """

    def __init__(self, channel: ControlChannel, name: str) -> None:
        self._channel = channel
        self.name = name

    @property
    def held(self) -> int:
        """Requests held right now."""
        return int(self._channel.gate(self.name)["held"])

    @property
    def passed(self) -> int:
        """Requests that went through the gate so far."""
        return int(self._channel.gate(self.name)["passed"])

    def wait_held(self, count: int = 1, timeout: float = WAIT_HELD_S) -> None:
        """Block until at least ``count`` requests are held (``TimeoutError`` otherwise).

        For sync code only: in a thread that runs an event loop it raises
        :class:`BlockingCallError` at once (use :meth:`async_wait_held` there).
        """
        __tracebackhide__ = True
        _refuse_on_running_loop(
            "gate.wait_held()", f"await gate.async_wait_held({count}, timeout={timeout})"
        )
        self._channel.wait_gate(self.name, count, timeout)

    async def async_wait_held(self, count: int = 1, timeout: float = WAIT_HELD_S) -> None:
        """Wait until at least ``count`` requests are held (``TimeoutError`` otherwise)."""
        await self._channel.async_wait_gate(self.name, count, timeout)

    def release(self, count: int | None = None) -> int:
        """Let ``count`` held requests through (all of them if ``None``); returns how many."""
        return self._channel.release_gate(self.name, count)

    def open(self) -> int:
        """Release everything held and stop holding."""
        return self._channel.release_gate(self.name, None, open_gate=True)

    def __repr__(self) -> str:
        return f"GateHandle({self.name!r})"


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
        return GateHandle(self._channel, self._prefix + name)

    @property
    def gates(self) -> dict[str, GateHandle]:
        """This test's gates by the names its rules gave them, however they were added: by
        :meth:`gate`, :meth:`add` or the marker's ``faults``.

        Example::

            @pytest.mark.createos(faults=[{"match": {"route": "DELETE /v1/sandboxes/{id}"},
                                           "action": {"type": "gate", "name": "release"}}])
            def test_release(createos_server):
                gate = createos_server.faults.gates["release"]
                ...
                gate.wait_held(1)
        """
        names = (rule["action"]["name"] for rule in self.rules if rule["action"]["type"] == "gate")
        return {
            name.removeprefix(self._prefix): GateHandle(self._channel, name)
            for name in sorted(names)
        }

    @property
    def rules(self) -> list[dict[str, Any]]:
        """This tenant's rules with their ``seen``/``fired`` counters."""
        return [r for r in self._channel.rules() if r["match"].get("tenant") == self.tenant_id]

    def remove(self, rule_id: str) -> None:
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
    tenant's sandboxes.
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

    @property
    def state(self) -> list[dict[str, Any]]:
        """This tenant's sandboxes (views with their processes)."""
        return self.channel.sandboxes(self.tenant_id)

    def live_sandboxes(self) -> list[dict[str, Any]]:
        """Sandboxes still alive (what the leak check reports)."""
        return [s for s in self.state if s["status"] in ALIVE]

    def report(self, last: int = 30) -> str:
        """What a failing test's report shows: seed, rules, gates, last journal entries."""
        rules = self.faults.rules
        lines = [f"seed: {self.seed}    tenant: {self.tenant_id}    url: {self.url}"]
        lines.append("rules:" if rules else "rules: none")
        lines += [
            f"  {r['id']}: {r['match']} -> {r['action']} (fired {r['fired']}/{r['seen']})"
            for r in rules
        ]
        gates = [r["action"]["name"] for r in rules if r["action"]["type"] == "gate"]
        for name in gates:
            gate = self.channel.gate(name)
            lines.append(f"gate {name}: held {gate['held']}, passed {gate['passed']}")
        lines.append(f"last {last} journal entries:")
        lines.append(self.journal.format(last) or "  (none)")
        return "\n".join(lines)
