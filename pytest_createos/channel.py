"""How the plugin talks to a fake: in process (same loop or a background thread) or over the
HTTP control API of an already running ``fake-createos serve``.

Everything goes through JSON-shaped calls, so one per-test handle
(:class:`~pytest_createos.server.CreateosServer`) works the same on every channel.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fake_server import ApiError, BackgroundServer, FakeCreateOS
from fake_server.control_access import CONTROL_TOKEN_HEADER
from fake_server.errors import RULE_NOT_FOUND
from fake_server.fault_rules import FaultError
from fake_server.gates import GateTimeout
from fake_server.network import Responder
from fake_server.registered_commands import CommandHandler

__all__ = [
    "ALIVE",
    "IN_PROCESS_ONLY",
    "ControlChannel",
    "ControlError",
    "HttpChannel",
    "Leftovers",
    "LocalChannel",
    "TestTenant",
]

#: What registering Python code (a command, a responder) on a fake in another process says.
IN_PROCESS_ONLY = (
    "{what} needs the fake in this process: the fake at {url} (--createos-url) runs in "
    "another one, and its control API cannot take Python code. Run the tests that register "
    "commands or responders without --createos-url (the in-process fake)"
)

_T = TypeVar("_T")
_V = TypeVar("_V")


class ControlError(RuntimeError):
    """A control call the fake refused (bad rule, unknown gate...), or that reached no fake.

    ``status`` is the HTTP status of a refusal over HTTP; ``None`` when nothing answered, or
    when the fake is in this process.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ControlChannel(Protocol):
    """The control operations a test needs, in JSON terms."""

    url: str
    #: Other processes may use the same fake (``--createos-url`` with xdist, say): a test then
    #: owns only what it added under its own tenant.
    shared: bool

    def new_tenant(self) -> tuple[str, str]:
        """A fresh ``(api_key, tenant_id)``."""
        ...

    def drop_tenant(self, api_key: str) -> None:
        """Forget a tenant, if the fake still has it."""
        ...

    def reseed(self, seed: int) -> None: ...

    def add_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def rules(self) -> list[dict[str, Any]]: ...

    def remove_rule(self, rule_id: str) -> None:
        """Remove one rule (its gate opens once no rule uses it); :class:`ControlError` saying
        ``fault rule not found``, as the control API answers, for an id the fake has not."""
        ...

    def gate(self, name: str) -> dict[str, Any]: ...

    def release_gate(self, name: str, count: int | None, *, open_gate: bool = False) -> int: ...

    def release_held(self, name: str, request: int, outcome: str | None = None) -> None:
        """Let the held request numbered ``request`` (its ``id`` in :meth:`gate`'s
        ``holding``) go on, with an ``outcome`` of :data:`~fake_server.gates.OUTCOMES`."""
        ...

    def wait_gate(self, name: str, count: int, timeout: float) -> None: ...

    async def async_wait_gate(self, name: str, count: int, timeout: float) -> None: ...

    def journal(self, since: int = 0, tenant: str | None = None) -> list[dict[str, Any]]:
        """Entries after ``since`` (of one tenant, if given), as JSON."""
        ...

    def advance(self, seconds: float) -> None: ...

    def info(self) -> dict[str, Any]:
        """Who answers and how it runs (:meth:`fake_server.FakeCreateOS.info`)."""
        ...

    def set_durations(
        self, api_key: str, *, transition_ms: float | None, create_ms: float | None
    ) -> None:
        """Give one tenant its own durations (``None``: the fake's)."""
        ...

    def state(self, tenant_id: str | None = None) -> dict[str, Any]: ...

    def sandboxes(self, tenant_id: str) -> list[dict[str, Any]]:
        """The sandboxes of one tenant (views with their processes), as :meth:`state` lists
        them; none for a tenant the fake does not have."""
        ...

    def sandbox_state(self, sandbox_id: str, **change: Any) -> dict[str, Any]: ...

    def finish_transition(self, sandbox_id: str) -> bool:
        """End the sandbox's transition in flight now; whether one ended."""
        ...

    def marker(self, sandbox_id: str, mode: str, path: str | None) -> None: ...

    def register_command(self, name: str, handler: CommandHandler) -> Callable[[], None]:
        """Add a command to every sandbox's shell (replacing one of that name); returns what
        undoes it (the command it replaced comes back). :class:`ControlError` on a fake in
        another process: a Python handler cannot go there."""
        ...

    def register_responder(self, host: str, responder: Responder) -> Callable[[], None]:
        """Answer ``curl``/``wget`` in sandboxes for ``host``; returns what undoes it, as
        :meth:`register_command`."""
        ...

    def open_test(self, seed: int) -> TestTenant:
        """Reseed and create the test's tenant (see :func:`open_test`)."""
        ...

    def close_test(self, tenant: TestTenant, *, leak_check: bool) -> Leftovers:
        """Undo the test's additions (see :func:`close_test`)."""
        ...


@dataclass(frozen=True)
class TestTenant:
    """What one test was given: its key and tenant, and the rules that existed before it."""

    __test__ = False  # not a pytest test class, whatever its name says

    api_key: str
    tenant_id: str
    baseline_rules: frozenset[str]

    @property
    def gate_prefix(self) -> str:
        """What the test's gate names start with on the fake, so two tests' gates of one name
        never meet (the handle adds it, the leak report takes it off again)."""
        return f"{self.tenant_id}."


@dataclass(frozen=True)
class Leftovers:
    """What a test left when it ended, for its leak report: its sandboxes still alive, and
    (only when some are) its gates that still held requests then, each as
    ``GET /_fake/gates/{name}`` answers (``holding`` lists the requests)."""

    sandboxes: list[dict[str, Any]]
    held_gates: list[dict[str, Any]]


#: Statuses that count as "left alive" for the leak check.
ALIVE = frozenset({"creating", "running", "pausing", "paused", "resuming", "forking"})


def open_test(channel: ControlChannel, seed: int) -> TestTenant:
    """Set a fake up for one test: give it a fresh tenant, then reseed the fake.

    The tenant comes first, from the sequence as it stands, so two tests with the same seed (or
    a test run again) never get the same tenant id and never read each other's journal; what
    the test creates after the reseed (sandbox ids, names) replays with its seed.
    """
    baseline = frozenset(rule["id"] for rule in channel.rules())
    api_key, tenant_id = channel.new_tenant()
    channel.reseed(seed)
    return TestTenant(api_key, tenant_id, baseline)


def close_test(channel: ControlChannel, tenant: TestTenant, *, leak_check: bool) -> Leftovers:
    """Undo everything a test added (its rules, their gates opened, its tenant); returns what
    it left alive when ``leak_check`` is on, with the gates that held requests then: a
    sandbox a test left running is often one whose ``DELETE`` waits at a gate never opened.

    Its rules are those scoped to its tenant, and on a fake no one else uses also any rule that
    appeared during the test (added some other way); on a shared fake, rules that other tests
    added meanwhile are theirs.
    """
    leaked = (
        [s for s in channel.sandboxes(tenant.tenant_id) if s["status"] in ALIVE]
        if leak_check
        else []
    )
    owned = [
        rule
        for rule in channel.rules()
        if rule["match"].get("tenant") == tenant.tenant_id
        or (not channel.shared and rule["id"] not in tenant.baseline_rules)
    ]
    held: list[dict[str, Any]] = []
    if leaked:  # read before the rules go: removing them opens their gates
        gates = dict.fromkeys(r["action"]["name"] for r in owned if r["action"]["type"] == "gate")
        held = [gate for gate in map(channel.gate, gates) if gate["held"]]
    for rule in owned:
        channel.remove_rule(rule["id"])  # the fake opens and forgets its gate
    channel.drop_tenant(tenant.api_key)
    return Leftovers(leaked, held)


class LocalChannel:
    """A fake in this process, either on this thread's running loop or behind a
    :class:`~fake_server.runner.BackgroundServer` (calls are handed to its loop)."""

    shared = False  # this worker's own fake

    def __init__(self, fake: FakeCreateOS, url: str, server: BackgroundServer | None = None):
        self.fake = fake
        self.url = url
        self._server = server

    @property
    def same_loop_fake(self) -> FakeCreateOS | None:
        """The fake itself when it runs on the test's own event loop (what a tool that must
        see the fake's loop, the schedule explorer, needs); ``None`` behind a thread."""
        return self.fake if self._server is None else None

    def _call(self, function: Callable[..., _T], *args: Any) -> _T:
        try:
            if self._server is None:
                return function(*args)
            return self._server.call(function, *args)
        except (ApiError, FaultError, ValueError) as exc:
            raise ControlError(str(exc)) from None

    def new_tenant(self) -> tuple[str, str]:
        def create() -> tuple[str, str]:
            key = self.fake.create_tenant()
            return key, self.fake.tenant(key).id

        return self._call(create)  # one hop to the server's loop, not two

    def drop_tenant(self, api_key: str) -> None:
        def drop() -> None:
            if api_key in self.fake.tenants.known:  # a reset in the test dropped it already
                self.fake.drop_tenant(api_key)

        self._call(drop)

    def reseed(self, seed: int) -> None:
        self._call(self.fake.reseed, seed)

    def add_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._call(lambda: [rule.as_json() for rule in self.fake.faults.add_all(rules)])

    def rules(self) -> list[dict[str, Any]]:
        return self._call(lambda: [rule.as_json() for rule in self.fake.faults])

    def remove_rule(self, rule_id: str) -> None:
        def remove() -> None:
            if not self.fake.faults.remove(rule_id):
                raise ValueError(RULE_NOT_FOUND)

        self._call(remove)

    def gate(self, name: str) -> dict[str, Any]:
        return self._call(lambda: self.fake.faults.gate_named(name).as_json())

    def release_gate(self, name: str, count: int | None, *, open_gate: bool = False) -> int:
        def release() -> int:
            gate = self.fake.faults.gates.get(name)
            if gate is None:  # as the control API answers: releasing must not create a gate
                raise ValueError(f"gate {name!r} not found")
            return gate.open() if open_gate else gate.release(count)

        return self._call(release)

    def release_held(self, name: str, request: int, outcome: str | None = None) -> None:
        def release() -> None:
            gate = self.fake.faults.gates.get(name)
            held = None if gate is None else gate.held_request(request)
            if gate is None or held is None:
                raise ValueError(f"gate {name!r} holds no request {request}")
            gate.release_request(held, outcome)

        self._call(release)

    def _wait(self, name: str, count: int, timeout: float) -> Awaitable[None]:
        return self.fake.faults.gate_named(name).wait_held(count, timeout)

    def wait_gate(self, name: str, count: int, timeout: float) -> None:
        if self._server is None:
            raise RuntimeError(
                "this fake runs on the test's own event loop: use `await gate.async_wait_held()`"
            )
        self._server.run(self._wait_coroutine(name, count, timeout))

    async def _wait_coroutine(self, name: str, count: int, timeout: float) -> None:
        await self._wait(name, count, timeout)

    async def async_wait_gate(self, name: str, count: int, timeout: float) -> None:
        if self._server is None:
            await self._wait(name, count, timeout)
            return
        future = asyncio.run_coroutine_threadsafe(
            self._wait_coroutine(name, count, timeout), self._server.loop
        )
        await asyncio.wrap_future(future)

    def journal(self, since: int = 0, tenant: str | None = None) -> list[dict[str, Any]]:
        def read() -> list[dict[str, Any]]:
            entries = self.fake.journal.entries(since=since, tenant=tenant)
            return [entry.as_json() for entry in entries]

        return self._call(read)

    def advance(self, seconds: float) -> None:
        def step() -> None:
            clock = self.fake.clock
            if not hasattr(clock, "advance"):
                raise ValueError("the fake's clock is real time: mark the test manual_clock=True")
            clock.advance(seconds)

        self._call(step)

    def state(self, tenant_id: str | None = None) -> dict[str, Any]:
        return self._call(self.fake.state, tenant_id)

    def sandboxes(self, tenant_id: str) -> list[dict[str, Any]]:
        # Not state()'s: the leak check asks on every test, and the whole state (clock, rules,
        # gates, the tenant's networks and disks) is several times the work.
        return self._call(self.fake.tenant_sandboxes, tenant_id)

    def info(self) -> dict[str, Any]:
        return self._call(self.fake.info)

    def set_durations(
        self, api_key: str, *, transition_ms: float | None, create_ms: float | None
    ) -> None:
        self._call(
            lambda: self.fake.set_durations(
                api_key, transition_ms=transition_ms, create_ms=create_ms
            )
        )

    def open_test(self, seed: int) -> TestTenant:
        # One hop to the server's loop for the whole set-up: it is on every test's path.
        return self._call(open_test, self._direct(), seed)

    def close_test(self, tenant: TestTenant, *, leak_check: bool) -> Leftovers:
        return self._call(lambda: close_test(self._direct(), tenant, leak_check=leak_check))

    def register_command(self, name: str, handler: CommandHandler) -> Callable[[], None]:
        commands = self.fake.commands
        return self._swap_in(commands.get, commands.register, commands.unregister, name, handler)

    def register_responder(self, host: str, responder: Responder) -> Callable[[], None]:
        network = self.fake.runtime.network
        return self._swap_in(
            network.registered, network.register, network.unregister, host, responder
        )

    def _swap_in(
        self,
        lookup: Callable[[str], _V | None],
        register: Callable[[str, _V], None],
        unregister: Callable[[str], None],
        key: str,
        value: _V,
    ) -> Callable[[], None]:
        """Register ``value`` under ``key`` in one of the fake's registries; returns what puts
        back what it replaced (or removes it, if it replaced nothing)."""

        def swap() -> _V | None:
            replaced = lookup(key)
            register(key, value)
            return replaced

        replaced = self._call(swap)  # one hop: the look-up and the change see the same registry
        if replaced is None:
            return lambda: self._call(unregister, key)
        return lambda: self._call(register, key, replaced)

    def _direct(self) -> LocalChannel:
        """This channel without the thread hand-off, for use on the server's own loop."""
        return self if self._server is None else LocalChannel(self.fake, self.url)

    def sandbox_state(self, sandbox_id: str, **change: Any) -> dict[str, Any]:
        def apply() -> dict[str, Any]:
            sandbox = self.fake.find_sandbox(sandbox_id)
            self.fake.state_faults.change(sandbox, **change)
            return sandbox.view()

        return self._call(apply)

    def finish_transition(self, sandbox_id: str) -> bool:
        return self._call(lambda: self.fake.state_faults.finish(self.fake.find_sandbox(sandbox_id)))

    def marker(self, sandbox_id: str, mode: str, path: str | None) -> None:
        def apply() -> None:
            sandbox = self.fake.find_sandbox(sandbox_id)
            if path is None:
                self.fake.state_faults.marker(sandbox, mode)
            else:
                self.fake.state_faults.marker(sandbox, mode, path)

        self._call(apply)


class HttpChannel:
    """A ``fake-createos serve`` reached over its ``/_fake`` control API."""

    shared = True  # other workers, other runs, people with curl may use it too

    def __init__(
        self, url: str, *, timeout: float = 10.0, control_token: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if control_token is not None:
            self._headers[CONTROL_TOKEN_HEADER] = control_token

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        api_key: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers if api_key is None else {**self._headers, "X-Api-Key": api_key}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return json.loads(response.read())["data"]
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("message", exc.reason)
            except (ValueError, AttributeError):  # not JSON, or JSON but not the envelope
                message = exc.reason
            raise ControlError(
                f"{method} {path}: HTTP {exc.code}: {message}", status=exc.code
            ) from None
        except urllib.error.URLError as exc:
            raise ControlError(f"cannot reach the fake at {self.url}: {exc.reason}") from None
        except OSError as exc:  # a timeout or a reset while reading the answer
            raise ControlError(f"cannot reach the fake at {self.url}: {exc}") from None
        except (ValueError, KeyError, TypeError):  # answered, but not with the fake's envelope
            raise ControlError(
                f"{method} {path}: the answer is not the fake's JSON envelope", status=200
            ) from None

    def new_tenant(self) -> tuple[str, str]:
        data = self._request("POST", "/_fake/tenants", {})
        return data["api_key"], data["tenant"]

    def drop_tenant(self, api_key: str) -> None:
        try:
            self._request("DELETE", "/_fake/tenants", {"api_key": api_key})
        except ControlError as exc:
            if exc.status != 404:  # 404: a reset in the test dropped it already
                raise

    def reseed(self, seed: int) -> None:
        self._request("POST", "/_fake/seed", {"seed": seed})

    def add_rules(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ids = self._request("POST", "/_fake/faults", {"rules": rules})["ids"]
        by_id = {rule["id"]: rule for rule in self.rules()}
        return [by_id[rule_id] for rule_id in ids]

    def rules(self) -> list[dict[str, Any]]:
        return list(self._request("GET", "/_fake/faults")["rules"])

    def remove_rule(self, rule_id: str) -> None:
        self._request("DELETE", f"/_fake/faults/{rule_id}")

    def gate(self, name: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/_fake/gates/{name}"))

    def release_gate(self, name: str, count: int | None, *, open_gate: bool = False) -> int:
        body: dict[str, Any] = {"open": True} if open_gate else {}
        if count is not None:
            body["count"] = count
        return int(self._request("POST", f"/_fake/gates/{name}/release", body)["released"])

    def release_held(self, name: str, request: int, outcome: str | None = None) -> None:
        body = {"request": request, "outcome": outcome or "proceed"}
        self._request("POST", f"/_fake/gates/{name}/release", body)

    def wait_gate(self, name: str, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.001, deadline - time.monotonic())
            # The fake answers once the gate holds `count` (a long-poll), or 408 at the end.
            path = f"/_fake/gates/{name}?held={count}&timeout_ms={math.ceil(left * 1000)}"
            try:
                held = int(self._request("GET", path, timeout=left + self.timeout)["held"])
            except ControlError as exc:
                if exc.status != 408:
                    raise
                held = int(self.gate(name)["held"])
            if held >= count:
                return
            if time.monotonic() > deadline:
                raise GateTimeout.waited(name, held=held, count=count, timeout=timeout)
            time.sleep(0.002)  # a fake older than the long-poll answered at once: poll it

    async def async_wait_gate(self, name: str, count: int, timeout: float) -> None:
        await asyncio.to_thread(self.wait_gate, name, count, timeout)

    def journal(self, since: int = 0, tenant: str | None = None) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        more = True
        while more:  # bounded: each page moves ``since`` past what the journal holds
            query = f"?since={since}" + (f"&tenant={tenant}" if tenant else "")
            page = self._request("GET", "/_fake/journal" + query)
            entries += page["entries"]
            more = page.get("more", False) and page["next"] > since
            since = page["next"]
        return entries

    def advance(self, seconds: float) -> None:
        self._request("POST", "/_fake/clock/advance", {"seconds": seconds})

    def info(self) -> dict[str, Any]:
        data = self._request("GET", "/_fake/info")
        if not isinstance(data, dict):  # some other server's envelope
            raise ControlError("GET /_fake/info: the answer is not the fake's", status=200)
        return data

    def set_durations(
        self, api_key: str, *, transition_ms: float | None, create_ms: float | None
    ) -> None:
        body = {"transition_ms": transition_ms, "create_ms": create_ms}
        self._request("PUT", "/_fake/tenant/durations", body, api_key=api_key)

    def state(self, tenant_id: str | None = None) -> dict[str, Any]:
        query = f"?tenant={tenant_id}" if tenant_id else ""
        return dict(self._request("GET", "/_fake/state" + query))

    def sandboxes(self, tenant_id: str) -> list[dict[str, Any]]:
        tenants = self.state(tenant_id)["tenants"]
        return list(tenants[0]["sandboxes"]) if tenants else []

    def open_test(self, seed: int) -> TestTenant:
        return open_test(self, seed)

    def close_test(self, tenant: TestTenant, *, leak_check: bool) -> Leftovers:
        return close_test(self, tenant, leak_check=leak_check)

    def register_command(self, name: str, handler: CommandHandler) -> Callable[[], None]:
        raise ControlError(IN_PROCESS_ONLY.format(what=f"register_command({name!r})", url=self.url))

    def register_responder(self, host: str, responder: Responder) -> Callable[[], None]:
        raise ControlError(
            IN_PROCESS_ONLY.format(what=f"register_responder({host!r})", url=self.url)
        )

    def sandbox_state(self, sandbox_id: str, **change: Any) -> dict[str, Any]:
        return dict(self._request("POST", f"/_fake/sandboxes/{sandbox_id}/state", change))

    def finish_transition(self, sandbox_id: str) -> bool:
        answer = self._request("POST", f"/_fake/sandboxes/{sandbox_id}/finish")
        return bool(answer["finished"])

    def marker(self, sandbox_id: str, mode: str, path: str | None) -> None:
        body = {"mode": mode} if path is None else {"mode": mode, "path": path}
        self._request("POST", f"/_fake/sandboxes/{sandbox_id}/marker", body)
