"""The explorer's hands on the fake: every request of the test's tenant is held on arrival, and
a *step* lets one held request go on, or finishes one sandbox's transition.

Steps carry labels that stay the same from one run of a schedule to the next, although every
run works on fresh sandboxes: sandboxes are named ``L1``, ``L2``... in the order the run
created them, other ids in a path (a process id) ``P1``, ``P2``... in the order they first
appear, and a label shared by two held requests gets ``#2``, ``#3``... in arrival order.

Example:
    >>> Step("POST L1/pause", "L1", 3).independent_of(Step("GET L2", "L2", 4))
    True
"""

from __future__ import annotations

import abc
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from fake_server.fake import FakeCreateOS
from fake_server.gates import Gate, HeldRequest, outcomes_for
from fake_server.journal import Entry
from fake_server.lifecycle import TERMINAL, Status
from fake_server.sandbox import Sandbox

__all__ = ["FakeHands", "Hands", "Step"]

#: How long a transition takes while the explorer runs: the clock moves with the host's
#: sleeps, and no sleep may finish a transition; the explorer finishes each as a step.
EXPLORER_TRANSITION_MS = 3_600_000.0
_ID_SEGMENT = re.compile(r"[A-Za-z]+_[A-Za-z0-9_-]+")
_SANDBOXES = "/v1/sandboxes"


@dataclass(frozen=True)
class Step:
    """One move the explorer can make: ``label`` (what a schedule string says), the sandbox it
    concerns (its run name, ``L1``...; ``None`` for a request on no sandbox) and ``order`` (when
    it became possible: the default schedule takes the oldest first).

    Example:
        >>> Step("finish L1 pausing", "L1", 7).independent_of(Step("POST sandboxes", None, 8))
        False
    """

    label: str
    sandbox: str | None
    order: int

    def independent_of(self, other: Step) -> bool:
        """Steps on two different sandboxes commute (partial-order reduction relies on it);
        a step on no sandbox (a create) commutes with nothing."""
        return (
            self.sandbox is not None
            and other.sandbox is not None
            and (self.sandbox != other.sandbox)
        )


class Hands(abc.ABC):
    """What every way of holding a tenant's requests shares: run names for sandboxes and other
    ids, step labels, and the steps of one look at what is held (:meth:`_steps_of`).

    A subclass says what is held and pending (:meth:`enabled`), takes a step (:meth:`take`),
    reads the tenant's journal (:meth:`entries_after`, :meth:`last_seq`) and names the run's
    sandboxes (:meth:`_name_new_sandboxes`).
    """

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._other_ids: dict[str, str] = {}
        self._steps: dict[str, tuple[Step, object, str | None]] = {}

    @abc.abstractmethod
    def __enter__(self) -> Hands:
        """Start holding the tenant's requests."""

    @abc.abstractmethod
    def __exit__(self, *exc: object) -> None:
        """Stop holding (what is held goes on)."""

    def _forget_names(self) -> None:
        self._names.clear()
        self._other_ids.clear()

    # -- names ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def _name_new_sandboxes(self) -> None:
        """Name the run's sandboxes created since the last look, in creation order."""

    def name_of(self, sandbox_id: str) -> str:
        """The run name of a sandbox (``L1``...), given in creation order."""
        self._name_new_sandboxes()
        return self._names.get(sandbox_id, sandbox_id)

    @property
    def sandboxes(self) -> dict[str, str]:
        """This run's sandboxes: id -> run name."""
        self._name_new_sandboxes()
        return dict(self._names)

    def alias(self, text: str) -> str:
        """``text`` with this run's sandbox ids replaced by their run names."""
        for sandbox_id, name in self.sandboxes.items():
            text = text.replace(sandbox_id, name)
        return text

    def _path_label(self, path: str) -> str:
        if not path.startswith(_SANDBOXES):
            return path
        parts = [part for part in path[len(_SANDBOXES) :].split("/") if part]
        if not parts:
            return "sandboxes"
        names = [self.name_of(parts[0])]
        for part in parts[1:]:
            if _ID_SEGMENT.fullmatch(part):
                part = self._other_ids.setdefault(part, f"P{len(self._other_ids) + 1}")
            names.append(part)
        return "/".join(names)

    def request_label(self, method: str, path: str) -> str:
        """A held request's label: ``POST L1/pause``."""
        return f"{method} {self._path_label(path)}"

    # -- steps ----------------------------------------------------------------------------------

    def _steps_of(
        self,
        found: list[tuple[int, str, str | None, object, frozenset[str]]],
        outcomes: Sequence[str],
    ) -> list[Step]:
        """The steps of ``found`` — ``(order, label, sandbox run name, target, takes
        outcomes)`` — oldest first: a label shared by two gets ``#2``..., and a target that
        takes outcomes also goes on with each of ``outcomes``."""
        found.sort(key=lambda item: item[0])
        seen: dict[str, int] = {}
        steps: list[Step] = []
        self._steps.clear()
        for order, label, sandbox_name, target, takes_outcomes in found:
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:
                label = f"{label}#{seen[label]}"
            variants: Sequence[str | None] = [
                None,
                *(outcome for outcome in outcomes if outcome in takes_outcomes),
            ]
            for outcome in variants:
                named = label if outcome is None else f"{label} [{outcome}]"
                step = Step(named, sandbox_name, order)
                steps.append(step)
                self._steps[named] = (step, target, outcome)
        return steps

    @abc.abstractmethod
    def enabled(self, outcomes: Sequence[str] = ()) -> list[Step]:
        """Every step possible now, oldest first; with ``outcomes`` (of
        :data:`~fake_server.gates.OUTCOMES`), a held request may also go on with each of them
        that changes what it does (:func:`~fake_server.gates.outcomes_for`): ``POST L1/pause
        [lost]``, ``POST L1/pause [stuck]``, ``DELETE L1/processes/P1 [survives]``."""

    @abc.abstractmethod
    def take(self, step: Step) -> None:
        """Let the step's request go on, or finish its transition (a step of the last
        :meth:`enabled`)."""

    # -- the run --------------------------------------------------------------------------------

    @abc.abstractmethod
    def new_run(self) -> None:
        """Forget the names of the previous run: the sandboxes that exist now are not this
        run's (they are not named)."""

    @abc.abstractmethod
    def entries_after(self, seq: int) -> list[Entry]:
        """This tenant's journal entries after ``seq``, oldest first."""

    @abc.abstractmethod
    def last_seq(self) -> int:
        """The newest journal ``seq`` (entries after it are new)."""

    @abc.abstractmethod
    def destroy_run_sandboxes(self) -> None:
        """Force every sandbox of this run that is still alive to ``destroyed``: the next run
        starts clean."""


class FakeHands(Hands):
    """Holds every request of one tenant of a fake on the test's loop, and takes steps.

    Example::

        hands = FakeHands(fake, api_key)
        with hands:
            ...
            step = hands.enabled()[0]
            hands.take(step)
    """

    def __init__(self, fake: FakeCreateOS, api_key: str, gate_name: str) -> None:
        super().__init__()
        self.fake = fake
        self.api_key = api_key
        self.tenant = fake.tenant(api_key)
        self._gate_name = gate_name
        self._rule_id: str | None = None
        self._gate: Gate | None = None
        self._order = itertools.count()
        # What each held request or pending transition is, by identity; the object itself is
        # kept so that its id cannot be reused while it is known.
        self._orders: dict[int, tuple[object, int]] = {}
        self._newest_before: str | None = None

    # -- set-up ---------------------------------------------------------------------------------

    def __enter__(self) -> FakeHands:
        rule = self.fake.faults.add(
            {
                "match": {"tenant": self.tenant.id},
                "action": {"type": "gate", "name": self._gate_name},
            }
        )
        self._rule_id = rule.id
        self._gate = self.fake.faults.gate_named(self._gate_name)
        self.fake.set_durations(self.api_key, transition_ms=EXPLORER_TRANSITION_MS)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rule_id is not None:
            self.fake.faults.remove(self._rule_id)  # opens the gate: nothing stays held
        self.fake.set_durations(self.api_key)

    def new_run(self) -> None:
        self._forget_names()
        self._orders.clear()
        self._newest_before = next(reversed(self.tenant.sandboxes), None)

    def entries_after(self, seq: int) -> list[Entry]:
        return self.fake.journal.newer_than(seq, tenant=self.tenant.id)

    def last_seq(self) -> int:
        return self.fake.journal.last_seq

    # -- names ----------------------------------------------------------------------------------

    def _name_new_sandboxes(self) -> None:
        # New sandboxes join the end of the tenant's (creation-ordered) dict: read back from
        # the end to the first one already known, not through every sandbox of every run.
        new = []
        for sandbox_id in reversed(self.tenant.sandboxes):
            if sandbox_id in self._names or sandbox_id == self._newest_before:
                break
            new.append(sandbox_id)
        for sandbox_id in reversed(new):
            self._names[sandbox_id] = f"L{len(self._names) + 1}"

    def _order_of(self, thing: object) -> int:
        known = self._orders.get(id(thing))
        if known is None or known[0] is not thing:
            known = self._orders[id(thing)] = (thing, next(self._order))
        return known[1]

    # -- steps ----------------------------------------------------------------------------------

    def enabled(self, outcomes: Sequence[str] = ()) -> list[Step]:
        found: list[tuple[int, str, str | None, object, frozenset[str]]] = []
        assert self._gate is not None, "the hands hold nothing until entered"
        # Transitions first: one seen for the first time began during the last step, before
        # its answer reached the host, so before any request the host sent in reaction.
        self._name_new_sandboxes()
        for sandbox_id, name in self._names.items():
            record = self.tenant.sandboxes.get(sandbox_id)
            pending = record.pending if record is not None else None
            if record is not None and pending is not None and not pending.stuck:
                label = f"finish {name} {record.status.value}"
                found.append((self._order_of(pending), label, name, record, frozenset()))
        for held in self._gate.holding:
            if held.tenant != self.tenant.id:
                continue
            label = self.request_label(held.method, held.path)
            sandbox = self.name_of(held.sandbox) if held.sandbox else None
            takes = outcomes_for(held.method, held.path)
            found.append((self._order_of(held), label, sandbox, held, takes))
        return self._steps_of(found, outcomes)

    def take(self, step: Step) -> None:
        _, target, outcome = self._steps[step.label]
        if isinstance(target, HeldRequest):
            assert self._gate is not None
            self._gate.release_request(target, outcome)
        else:
            assert isinstance(target, Sandbox)
            self.fake.lifecycle.finish_now(target)

    def destroy_run_sandboxes(self) -> None:
        for sandbox_id in self.sandboxes:
            sandbox = self.tenant.sandboxes.get(sandbox_id)
            if sandbox is not None and sandbox.status not in TERMINAL:
                self.fake.state_faults.set_status(sandbox, Status.DESTROYED)
