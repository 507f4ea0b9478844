"""Gates: hold chosen requests inside the server until the test lets them go.

A gate reproduces a race exactly: hold the DELETE of a release, wait until it is held, make
the racing call, then release the DELETE — every time, with no sleeps.

Example (async, on the fake's loop)::

    gate = fake.faults.gate("release", route="DELETE /v1/sandboxes/{id}")
    task = asyncio.create_task(provider.release(...))
    await gate.wait_held(1)
    ...                                  # the race: resume while the delete is held
    gate.release()
"""

from __future__ import annotations

import asyncio
import itertools
import re
from dataclasses import asdict, dataclass

__all__ = ["OUTCOMES", "WAIT_HELD_S", "Gate", "GateTimeout", "HeldRequest", "outcomes_for"]

#: What a request let go with :meth:`Gate.release_request` may be told to do besides going on,
#: and what each does (the docs' table shows these words). A request held after its effect (a
#: gate rule's ``when="after"``) takes only the first two.
OUTCOMES = {
    "lost": "the effect happens, then the connection closes before the answer (the lost answer)",
    "error": "503 in the envelope, without the effect (with it, for a request held after it)",
    "survives": "a process `DELETE` ends nothing: the tree ignores the signal, and the answer"
    " says `tree_exited: false`",
    "stuck": "the transition a pause, resume, fork or sandbox `DELETE` starts never finishes"
    " (until `POST /_fake/sandboxes/{id}/finish`)",
}

#: How long (real seconds) a wait for held requests waits unless told otherwise: the Python
#: handles' ``wait_held`` and the control API's ``GET /_fake/gates/{name}?held=N``.
WAIT_HELD_S = 5.0

_PROCESS = re.compile(r"^/v1/sandboxes/[^/]+/processes/[^/]+$")
_TRANSITION = re.compile(r"^/v1/sandboxes/[^/]+(/pause|/resume|/fork)?$")


def outcomes_for(method: str, path: str) -> frozenset[str]:
    """The :data:`OUTCOMES` that change what a request does (the others would only repeat
    going on): none for a read.

    Example:
        >>> sorted(outcomes_for("DELETE", "/v1/sandboxes/sb_1/processes/proc_1"))
        ['error', 'lost', 'survives']
        >>> sorted(outcomes_for("GET", "/v1/sandboxes/sb_1"))
        []
    """
    if method in ("GET", "HEAD"):
        return frozenset()
    found = {"lost", "error"}
    if method == "DELETE" and _PROCESS.match(path):
        found.add("survives")
    transition = _TRANSITION.match(path)
    if transition is not None and (method == "DELETE") == (transition.group(1) is None):
        found.add("stuck")
    return frozenset(found)


def _outcome_refused(outcome: str, possible: frozenset[str]) -> str:
    """Why a request held after its effect cannot be released with ``outcome``.

    Example:
        >>> _outcome_refused("stuck", frozenset({"error", "lost"})).endswith("with: error, lost")
        True
    """
    allowed = ", ".join(sorted(possible)) or "no outcome, its answer has been sent"
    return (
        f"outcome {outcome!r} cannot apply: the request was held after its effect (a gate rule"
        f' with when="after"); it may be released with: {allowed}'
    )


@dataclass(frozen=True, slots=True)
class HeldRequest:
    """A request a gate holds: what it is and since when (wall time, RFC 3339), so that a
    dashboard or a failing test's report can say which requests wait, not only how many."""

    method: str
    path: str
    since: str
    tenant: str | None = None
    sandbox: str | None = None
    #: The outcomes that can still change it, when fewer than all: a request held after its
    #: effect (a gate rule's ``when="after"``) can only lose its answer or have an error
    #: answered instead, and neither once its answer has gone out (a stream).
    outcomes: frozenset[str] | None = None


class GateTimeout(TimeoutError):
    """Fewer requests reached the gate than awaited within the timeout.

    Example:
        >>> print(GateTimeout.waited("g", held=0, count=1, timeout=5.0))
        gate 'g': 0 request(s) held after 5.0s, expected 1
    """

    @classmethod
    def waited(cls, name: str, *, held: int, count: int, timeout: float) -> GateTimeout:
        """The error of a wait for ``count`` held requests that saw ``held`` (one wording for
        a fake in this process and one over HTTP)."""
        return cls(f"gate {name!r}: {held} request(s) held after {timeout}s, expected {count}")


class Gate:
    """A named holding pen for requests."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.held = 0
        self.passed = 0
        self.opened = False
        self._watchers: list[tuple[int, asyncio.Future[None]]] = []
        #: The requests held right now, oldest first.
        self.holding: list[HeldRequest] = []
        # Each held request's waiter by identity: two held requests may be equal as values.
        self._by_request: dict[int, asyncio.Future[str | None]] = {}
        # Each held request's number (its ``id`` in :meth:`as_json`), by identity, and the
        # request each number names: a client over HTTP picks a request by it.
        self._numbers = itertools.count(1)
        self._number_of: dict[int, int] = {}
        self._by_number: dict[int, HeldRequest] = {}

    async def hold(self, request: HeldRequest) -> str | None:
        """Called by the fault engine for a matching request: wait until released. Returns the
        outcome it was released with (one of :data:`OUTCOMES`), ``None`` for none.

        Example::

            await gate.hold(HeldRequest("DELETE", "/v1/sandboxes/sb_1", since=isoformat(now)))
        """
        if self.opened:
            self.passed += 1
            return None
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.holding.append(request)
        self._by_request[id(request)] = future
        number = next(self._numbers)
        self._number_of[id(request)] = number
        self._by_number[number] = request
        self.held += 1
        self._notify()
        try:
            return await future
        finally:
            self._let_go(request)  # the client went away while held (a release already did)

    def _let_go(self, request: HeldRequest) -> asyncio.Future[str | None] | None:
        """Stop counting ``request`` as held; returns its waiter, ``None`` if it was not held.

        A release forgets its requests at once, before they run again: the release's own
        answer (and anything asked before they resume) must not show them still held."""
        future = self._by_request.pop(id(request), None)
        if future is None:
            return None
        self.held -= 1
        # By identity: two held requests may be equal (same path, same manual-clock time).
        index = next(i for i, held in enumerate(self.holding) if held is request)
        del self.holding[index]
        del self._by_number[self._number_of.pop(id(request))]
        return future

    def _pass(self, request: HeldRequest, outcome: str | None) -> bool:
        """Let one held request go on with ``outcome``; returns whether it was still held."""
        future = self._let_go(request)
        if future is None or future.done():
            return False
        future.set_result(outcome)
        self.passed += 1
        return True

    def release(self, count: int | None = None) -> int:
        """Let ``count`` held requests through (all held ones if ``None``); returns how many.

        The gate keeps holding later requests; :meth:`open` stops it holding at all."""
        if count is not None and count < 0:
            raise ValueError("count must not be negative")
        released = 0
        for request in list(self.holding):  # oldest first
            if count is not None and released >= count:
                break
            # A request whose client has just left is skipped: the next one is released.
            released += self._pass(request, None)
        return released

    def release_request(self, request: HeldRequest, outcome: str | None = None) -> bool:
        """Let one particular held request (an item of :attr:`holding`, by identity) through,
        whatever its place in the queue, optionally with an ``outcome`` (one of
        :data:`OUTCOMES`); returns whether it was still held.

        What a schedule explorer needs: it decides which held request goes on next, and how.

        Example::

            oldest_resume = next(r for r in gate.holding if r.path.endswith("/resume"))
            gate.release_request(oldest_resume, outcome="lost")
        """
        if outcome is not None and outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
        if outcome is not None and request.outcomes is not None and outcome not in request.outcomes:
            # Refused rather than ignored: released as it asked, the request would go on
            # unchanged and the test would believe it had made the case it meant.
            raise ValueError(_outcome_refused(outcome, request.outcomes))
        return self._pass(request, outcome)

    def held_request(self, number: int) -> HeldRequest | None:
        """The request held now under ``number`` (its ``id`` in :meth:`as_json`; numbers are
        never reused by one gate), or ``None``.

        Example::

            held = gate.held_request(gate.as_json()["holding"][0]["id"])
        """
        return self._by_number.get(number)

    def open(self) -> int:
        """Release everything held and stop holding; returns how many were released."""
        self.opened = True
        return self.release()

    async def wait_held(self, count: int = 1, timeout: float = WAIT_HELD_S) -> None:
        """Wait until at least ``count`` requests are held (real seconds of timeout, so a test
        that never makes the request fails fast instead of hanging)."""
        if self.held >= count:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watcher = (count, future)
        self._watchers.append(watcher)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            raise GateTimeout.waited(
                self.name, held=self.held, count=count, timeout=timeout
            ) from None
        finally:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

    def _notify(self) -> None:
        for count, future in list(self._watchers):
            if self.held >= count and not future.done():
                future.set_result(None)

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "held": self.held,
            "passed": self.passed,
            "open": self.opened,
            "holding": [
                {
                    "id": self._number_of[id(held)],
                    **{
                        key: sorted(value) if isinstance(value, frozenset) else value
                        for key, value in asdict(held).items()
                        if value is not None
                    },
                }
                for held in self.holding
            ],
        }
