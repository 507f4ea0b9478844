"""The explorer against a fake it reaches over its control API (``fake-createos serve``,
``--createos-url``, or the plugin's server in a background thread): it cannot look at that
fake's event loop, so it waits for the fake to *settle* instead.

The host still runs on the test's own loop, so its sleeps still jump (virtual time, with the
fake's manual clock moved along over the control API). What the loop cannot show is a request
on its way to the other fake, or being answered there: the explorer looks at the gate's held
requests and the tenant's journal until neither has changed for ``settle_s`` real seconds
(:class:`Settle`). Steps are taken over the control API: a held request goes on by its id
(``POST /_fake/gates/{name}/release`` with ``request`` and ``outcome``), a transition ends
when the explorer says (``POST /_fake/sandboxes/{id}/finish``).

Example::

    hands = RemoteHands(channel, api_key, tenant_id, "explore-1")
    settle = Settle(Quiescence(loop, time, 5.0), hands, settle_s=0.05)
    with hands:
        await settle()
        hands.take(hands.enabled()[0])
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

from fake_server.gates import outcomes_for
from fake_server.journal import Entry
from pytest_createos._explore.quiescence import ExploreError, Quiescence
from pytest_createos._explore.steps import EXPLORER_TRANSITION_MS, Hands, Step
from pytest_createos.channel import ALIVE, ControlChannel, ControlError

__all__ = [
    "DEFAULT_EXPLORE_SETTLE_S",
    "MAX_SETTLE_S",
    "RemoteHands",
    "Settle",
]

#: How long (real seconds) nothing may change at the gate or in the journal before the host
#: counts as having sent all it will send, against a fake the explorer cannot look into. Every
#: step costs at least this much; a loaded machine may need more (a request that reaches the
#: fake later than this makes the run diverge, and the explorer says the host is not
#: deterministic).
DEFAULT_EXPLORE_SETTLE_S = 0.05
#: How long one settling may take at most (real seconds) before the explorer gives up.
MAX_SETTLE_S = 10.0
#: How often the gate and the journal are looked at while settling (real seconds).
SETTLE_POLL_S = 0.005
#: Before a host timeout is let fire (the host waits for nothing the explorer can see), how
#: long (real seconds) the explorer waits for a request still on its way: a settle time too
#: short for a loaded machine must not turn into a timeout of the host.
TIMEOUT_PATIENCE_S = 1.0

NEVER_SETTLED = (
    "the fake never settled: its gate or the tenant's journal still changed after {seconds:g} s "
    "(does another client use this test's tenant?)"
)
NOT_MANUAL = (
    "the explorer moves the fake's clock with the host's sleeps: start the fake with a manual "
    "clock (`fake-createos serve --manual-clock`, or mark the test "
    "@pytest.mark.createos(manual_clock=True))"
)


class RemoteHands(Hands):
    """Holds every request of one tenant of a fake reached over its control API, and takes
    steps there.

    Example::

        with RemoteHands(channel, api_key, tenant_id, "explore-1") as hands:
            hands.look()
            hands.take(hands.enabled()[0])
    """

    def __init__(
        self, channel: ControlChannel, api_key: str, tenant_id: str, gate_name: str
    ) -> None:
        super().__init__()
        self.channel = channel
        self.api_key = api_key
        self.tenant_id = tenant_id
        self._gate_name = gate_name
        self._rule_id: str | None = None
        self._order = itertools.count()
        # Orders by what a thing is: ("request", its gate id) or ("finish", sandbox id).
        self._orders: dict[tuple[str, object], int] = {}
        self._before: set[str] = set()
        self._views: list[dict[str, Any]] = []
        self._held: list[dict[str, Any]] = []
        self._entries: list[Entry] = []
        self._newest = 0

    # -- set-up ---------------------------------------------------------------------------------

    def __enter__(self) -> RemoteHands:
        if not self.channel.info().get("clock", {}).get("manual"):
            raise ExploreError(NOT_MANUAL)
        rule = {
            "match": {"tenant": self.tenant_id},
            "action": {"type": "gate", "name": self._gate_name},
        }
        self._rule_id = str(self.channel.add_rules([rule])[0]["id"])
        self.channel.set_durations(
            self.api_key, transition_ms=EXPLORER_TRANSITION_MS, create_ms=None
        )
        self._newest = self._read_journal(0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rule_id is not None:
            self.channel.remove_rule(self._rule_id)  # opens the gate: nothing stays held
        self.channel.set_durations(self.api_key, transition_ms=None, create_ms=None)

    def new_run(self) -> None:
        self._forget_names()
        self._orders.clear()
        self._entries.clear()
        self._read_views()
        self._before = {view["id"] for view in self._views}

    # -- what the fake shows --------------------------------------------------------------------

    def _read_journal(self, since: int) -> int:
        entries = [Entry.from_json(data) for data in self.channel.journal(since, self.tenant_id)]
        self._entries += entries
        return entries[-1].seq if entries else since

    def _read_views(self) -> None:
        self._views = self.channel.sandboxes(self.tenant_id)

    def poll(self) -> tuple[object, ...]:
        """Read what is held and what the journal gained; returns what settling compares."""
        gate = self.channel.gate(self._gate_name)
        self._held = [held for held in gate["holding"] if held.get("tenant") == self.tenant_id]
        self._newest = self._read_journal(self._newest)
        return (tuple(held["id"] for held in self._held), self._newest)

    def look(self) -> None:
        """Read the sandboxes' statuses once the fake has settled (what :meth:`enabled`
        shows)."""
        self._read_views()

    def entries_after(self, seq: int) -> list[Entry]:
        return [entry for entry in self._entries if entry.seq > seq]

    def last_seq(self) -> int:
        self._newest = self._read_journal(self._newest)
        return self._newest

    # -- names and steps ------------------------------------------------------------------------

    def _name_new_sandboxes(self) -> None:
        for view in self._views:
            if view["id"] not in self._before and view["id"] not in self._names:
                self._names[view["id"]] = f"L{len(self._names) + 1}"

    def _order_of(self, key: tuple[str, object]) -> int:
        order = self._orders.get(key)
        if order is None:
            order = self._orders[key] = next(self._order)
        return order

    def enabled(self, outcomes: Sequence[str] = ()) -> list[Step]:
        self._name_new_sandboxes()
        finishes: list[tuple[tuple[str, object], str, str, object, frozenset[str]]] = []
        for view in self._views:
            name = self._names.get(view["id"])
            pending = view.get("pending")
            if name is not None and pending is not None and not pending["stuck"]:
                key = ("finish", view["id"])
                label = f"finish {name} {view['status']}"
                finishes.append((key, label, name, key, frozenset()))
        requests = []
        for held in self._held:
            label = self.request_label(held["method"], held["path"])
            sandbox = self.name_of(held["sandbox"]) if held.get("sandbox") else None
            key = ("request", held["id"])
            takes = outcomes_for(held["method"], held["path"])
            requests.append((key, label, sandbox, key, takes))
        # What appeared since the last step gets its order now, in an order that does not
        # depend on which of the host's connections the other fake served first: transitions
        # (which began in the last step) before requests, each sorted by label.
        new = [item for item in finishes + requests if item[0] not in self._orders]
        for item in sorted(new, key=lambda item: (item[0][0] == "request", item[1])):
            self._order_of(item[0])
        found: list[tuple[int, str, str | None, object, frozenset[str]]] = [
            (self._order_of(key), label, sandbox, target, takes)
            for key, label, sandbox, target, takes in finishes + requests
        ]
        return self._steps_of(found, outcomes)

    def take(self, step: Step) -> None:
        _, target, outcome = self._steps[step.label]
        assert isinstance(target, tuple)
        kind, what = target
        if kind == "request":
            assert isinstance(what, int)
            self.channel.release_held(self._gate_name, what, outcome)
        else:
            assert isinstance(what, str)
            del self._orders[target]  # its next transition is a new step
            self.channel.finish_transition(what)

    def destroy_run_sandboxes(self) -> None:
        self._read_views()
        for view in self._views:
            if view["id"] in self._names and view["status"] in ALIVE:
                try:
                    self.channel.sandbox_state(view["id"], status="destroyed")
                except ControlError:  # gone meanwhile: nothing to clean
                    continue


class Settle:
    """Waits until the host has settled against a fake over HTTP: the test's loop is quiet
    (:class:`Quiescence`, host sleeps jumped) and the fake's gate and journal, and the loop's
    tasks, have not changed for ``settle_s`` real seconds; at most ``max_settle_s`` in all.
    Before a host timeout fires, it waits up to ``patience_s`` for something still on its way.

    Example::

        settle = Settle(Quiescence(loop, time, 5.0), hands, settle_s=0.05)
        await settle()
    """

    def __init__(
        self,
        loop_quiet: Quiescence,
        hands: RemoteHands,
        *,
        settle_s: float = DEFAULT_EXPLORE_SETTLE_S,
        max_settle_s: float = MAX_SETTLE_S,
        patience_s: float = TIMEOUT_PATIENCE_S,
    ) -> None:
        if settle_s <= 0:
            raise ValueError("settle_s must be more than 0")
        self._loop_quiet = loop_quiet
        self._hands = hands
        self.settle_s = settle_s
        self.max_settle_s = max_settle_s
        self.patience_s = patience_s
        # Several looks within the settle time, so that it is not overshot by much.
        self._poll_s = min(SETTLE_POLL_S, settle_s / 4)
        self._settled: tuple[object, ...] | None = None

    def jump_to_next_timer(self) -> bool:
        """Move virtual time to the host's next timer (see :class:`Quiescence`; the sleepers
        of a fake over HTTP are not seen)."""
        return self._loop_quiet.jump_to_next_timer()

    async def something_arrives(self) -> bool:
        """Whether anything changes at the fake or on the loop within ``patience_s`` (default
        :data:`TIMEOUT_PATIENCE_S`) of the last settling (then settle again).

        Example::

            if not await settle.something_arrives():
                settle.jump_to_next_timer()
        """
        deadline = time.monotonic() + max(self.patience_s, self.settle_s)
        while time.monotonic() < deadline:  # bounded: a real-time deadline
            await asyncio.sleep(self._poll_s)
            if self._snapshot() != self._settled:
                return True
        return False

    def _snapshot(self) -> tuple[object, ...]:
        return (*self._hands.poll(), len(asyncio.all_tasks()))

    async def __call__(self) -> None:
        """Return once nothing changed for ``settle_s``; :class:`ExploreError` after
        ``max_settle_s``."""
        start = time.monotonic()
        last: tuple[object, ...] | None = None
        since = start
        # Bounded twice: by the deadline, and by the polls that fit in it.
        for _ in range(int(self.max_settle_s / self._poll_s) + 1):
            await self._loop_quiet()
            seen = self._snapshot()
            now = time.monotonic()
            if seen != last:
                last, since = seen, now
            elif now - since >= self.settle_s:
                self._settled = seen
                self._hands.look()
                return
            if now - start > self.max_settle_s:
                break
            await asyncio.sleep(self._poll_s)
        raise ExploreError(NEVER_SETTLED.format(seconds=self.max_settle_s))
