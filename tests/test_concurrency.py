"""Many concurrent clients against one fake; afterwards every invariant holds.

72 clients (asyncio + aiohttp, each its own session and connection) run mixed lifecycle and
runtime operations at once: 8 tenants are shared by 4 clients each (so they race on the same
sandboxes: pause against delete, fork against resume...), 40 tenants have one client each. The
server runs in the test's loop with short real transitions (2 ms), so requests interleave with
in-between statuses. None of the checks depends on how the requests happened to interleave:

* every request is journaled exactly once, with the status its client saw (per tenant, the
  multiset of ``(method, route, status)`` sent equals the one journaled);
* every transition in the journal is a legal edge of the lifecycle graph, and each sandbox's
  transitions form one unbroken chain; final statuses are legal resting statuses;
* no process is left running in a destroyed sandbox, and no work succeeded on a sandbox that
  was already going away;
* tenants never mix: journal entries carry the sender's tenant, foreign ids answer 404, each
  tenant lists exactly the sandboxes its own clients created or forked.

Bounded: a fixed number of operations per client, a timeout per request and for the whole run.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from fake_server import FakeCreateOS, ServerConfig, errors, serve
from fake_server.lifecycle import Status
from tests.conftest import eventually

SHARED_TENANTS = 8
CLIENTS_PER_SHARED_TENANT = 4
SOLO_TENANTS = 40
OPS_PER_CLIENT = 14
REQUEST_TIMEOUT_S = 10.0
RUN_TIMEOUT_S = 60.0

SB = "/v1/sandboxes/{id}"
#: Every edge the lifecycle graph has (contract §5): (before, after); ``None`` is "new".
LEGAL_EDGES = frozenset(
    {
        (None, "creating"),
        (None, "forking"),
        ("creating", "running"),
        ("forking", "running"),
        ("forking", "paused"),
        ("running", "pausing"),
        ("pausing", "paused"),
        ("paused", "resuming"),
        ("error", "resuming"),
        ("resuming", "running"),
        ("destroying", "destroyed"),
    }
    # Delete is accepted from every live status but destroying itself.
    | {
        (before, "destroying")
        for before in (
            "creating",
            "running",
            "pausing",
            "paused",
            "resuming",
            "forking",
            "error",
        )
    }
)
#: Where a sandbox may rest once nothing is in flight (no crashes are injected here).
RESTING = frozenset({"running", "paused", "destroyed"})
RUNTIME_ROUTES = frozenset(
    {
        "POST /v1/sandboxes/{id}/exec",
        "PUT /v1/sandboxes/{id}/files",
        "GET /v1/sandboxes/{id}/files",
        "POST /v1/sandboxes/{id}/processes",
    }
)


@dataclass
class Tenant:
    """One API key, the sandbox ids its clients learnt, and what they sent."""

    key: str
    id: str
    sandboxes: list[str] = field(default_factory=list)
    #: (process id, sandbox id) of processes started by this tenant's clients.
    processes: list[tuple[str, str]] = field(default_factory=list)
    sent: Counter[tuple[str, str, int]] = field(default_factory=Counter)


class Client:
    """One concurrent client: its own session, a seeded choice of operations."""

    def __init__(
        self, session: aiohttp.ClientSession, tenant: Tenant, everyone: list[Tenant], seed: int
    ) -> None:
        self.session = session
        self.tenant = tenant
        self.everyone = everyone
        self.random = random.Random(seed)

    async def call(
        self, method: str, route: str, path: str, **options: Any
    ) -> tuple[int, dict[str, Any]]:
        """Send one request, count it under its route template, return (status, JSON body)."""
        async with self.session.request(method, path, **options) as response:
            raw = await response.read()
            body: dict[str, Any] = {}
            if response.content_type == "application/json":
                body = await response.json()
        status = response.status
        self.tenant.sent[(method, route, status)] += 1
        assert status < 500, (method, path, status, raw[:200])
        if status == 200 and response.content_type == "application/json":
            assert body["status"] == "success"
        return status, body

    def _pick(self) -> str | None:
        return self.random.choice(self.tenant.sandboxes) if self.tenant.sandboxes else None

    async def run(self) -> None:
        await self.create()
        operations = [
            self.create,
            self.get,
            self.listing,
            self.pause,
            self.pause,
            self.resume,
            self.resume,
            self.delete,
            self.fork,
            self.exec,
            self.put_file,
            self.get_file,
            self.start_process,
            self.wait_process,
            self.probe_foreign,
        ]
        for _ in range(OPS_PER_CLIENT):
            await self.random.choice(operations)()

    async def create(self) -> None:
        status, body = await self.call(
            "POST", "/v1/sandboxes", "/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}
        )
        assert status == 200
        assert body["data"]["status"] == "running"
        self.tenant.sandboxes.append(body["data"]["id"])

    async def get(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, body = await self.call("GET", SB, f"/v1/sandboxes/{sandbox}")
            assert status == 200
            assert body["data"]["status"] in {s.value for s in Status}

    async def listing(self) -> None:
        status, body = await self.call("GET", "/v1/sandboxes", "/v1/sandboxes?limit=500")
        assert status == 200
        # Only this tenant's sandboxes, every one of them created by it.
        assert {view["created_by"] for view in body["data"]["data"]} <= {self.tenant.id}

    async def pause(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, body = await self.call("POST", SB + "/pause", f"/v1/sandboxes/{sandbox}/pause")
            assert status in (200, 409)
            if status == 200:
                assert body["data"]["status"] in ("pausing", "paused")

    async def resume(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, body = await self.call(
                "POST", SB + "/resume", f"/v1/sandboxes/{sandbox}/resume"
            )
            assert status in (200, 409)
            if status == 200:
                assert body["data"]["status"] in ("resuming", "running")

    async def delete(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, body = await self.call("DELETE", SB, f"/v1/sandboxes/{sandbox}")
            assert status == 200  # accepted in every state (§4.6)
            assert body["data"]["status"] in ("destroying", "destroyed")

    async def fork(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, body = await self.call(
                "POST",
                SB + "/fork",
                f"/v1/sandboxes/{sandbox}/fork",
                json={"start_paused": self.random.random() < 0.3},
            )
            assert status in (200, 409)
            if status == 200:
                assert body["data"]["forked_from"] == sandbox
                self.tenant.sandboxes.append(body["data"]["id"])

    async def exec(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, body = await self.call(
                "POST",
                SB + "/exec",
                f"/v1/sandboxes/{sandbox}/exec",
                json={"cmd": "/bin/bash", "args": ["-lc", "mkdir -p /w && echo hi > /w/x"]},
            )
            assert status in (200, 409)
            if status == 200:
                result = body["data"]["result"]
                # Another client of the tenant may delete the sandbox while the command runs.
                assert result["exit_code"] == 0 or (
                    result["exit_code"] == 137 and result["error"] == errors.EXEC_SANDBOX_GONE
                ), result

    async def put_file(self) -> None:
        sandbox = self._pick()
        if sandbox:
            status, _ = await self.call(
                "PUT",
                SB + "/files",
                f"/v1/sandboxes/{sandbox}/files?path=/w/{self.tenant.id}",
                data=self.tenant.id.encode(),
            )
            assert status in (200, 409)

    async def get_file(self) -> None:
        sandbox = self._pick()
        if sandbox:
            async with self.session.get(
                f"/v1/sandboxes/{sandbox}/files?path=/w/{self.tenant.id}"
            ) as response:
                content = await response.read()
            self.tenant.sent[("GET", SB + "/files", response.status)] += 1
            assert response.status in (200, 404, 409)
            if response.status == 200:
                # Only ever written by this tenant: another tenant's bytes never show up here.
                assert content == self.tenant.id.encode()

    async def start_process(self) -> None:
        sandbox = self._pick()
        if sandbox:
            # Half of them outlive the run unless their sandbox is deleted: those are the ones
            # that must not survive a delete.
            script = "sleep 30" if self.random.random() < 0.5 else "echo done"
            status, body = await self.call(
                "POST",
                SB + "/processes",
                f"/v1/sandboxes/{sandbox}/processes",
                json={"cmd": "/bin/bash", "args": ["-lc", script]},
            )
            assert status in (200, 409)
            if status == 200:
                self.tenant.processes.append((body["data"]["process_id"], sandbox))

    async def wait_process(self) -> None:
        if not self.tenant.processes:
            return
        process, sandbox = self.random.choice(self.tenant.processes)
        status, _ = await self.call(
            "GET",
            SB + "/processes/{pid}/wait",
            f"/v1/sandboxes/{sandbox}/processes/{process}/wait?timeout_ms=20",
        )
        # 408: still running after 20 ms; 409: the sandbox is no longer running.
        assert status in (200, 408, 409)

    async def probe_foreign(self) -> None:
        others = [t for t in self.everyone if t is not self.tenant and t.sandboxes]
        if not others:
            return
        victim = self.random.choice(self.random.choice(others).sandboxes)
        status, _ = await self.call("GET", SB, f"/v1/sandboxes/{victim}")
        assert status == 404  # another tenant's id is indistinguishable from an unknown one
        status, _ = await self.call("DELETE", SB, f"/v1/sandboxes/{victim}")
        assert status == 404


async def test_many_concurrent_clients_keep_every_invariant() -> None:
    fake = FakeCreateOS(ServerConfig(seed=64, transition_ms=2, journal_capacity=200_000))
    tenants = [
        Tenant(key, fake.tenant(key).id)
        for key in (fake.create_tenant() for _ in range(SHARED_TENANTS + SOLO_TENANTS))
    ]
    assignments = [
        tenant for tenant in tenants[:SHARED_TENANTS] for _ in range(CLIENTS_PER_SHARED_TENANT)
    ] + tenants[SHARED_TENANTS:]
    assert len(assignments) >= 64

    async with serve(fake) as url:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        sessions = [
            aiohttp.ClientSession(url, headers={"X-Api-Key": tenant.key}, timeout=timeout)
            for tenant in assignments
        ]
        try:
            clients = [
                Client(session, tenant, tenants, seed=index)
                for index, (session, tenant) in enumerate(zip(sessions, assignments, strict=True))
            ]
            await asyncio.wait_for(
                asyncio.gather(*(client.run() for client in clients)), RUN_TIMEOUT_S
            )
        finally:
            await asyncio.gather(*(session.close() for session in sessions))

        # Let every transition in flight land (condition wait, bounded).
        every = [sb for t in fake.tenants for sb in t.sandboxes.values()]
        await eventually(lambda: all(sb.pending is None for sb in every), timeout=10)

        journal = fake.journal
        assert journal.dropped == 0

        # Each request journaled exactly once, under its sender's tenant, with its status.
        for tenant in tenants:
            journaled = Counter(
                (entry.method, entry.route, entry.status)
                for entry in journal.requests(tenant=tenant.id)
            )
            assert journaled == tenant.sent, tenant.id
        sent_total = sum(sum(t.sent.values()) for t in tenants)
        assert len(journal.requests()) == sent_total

        owners = {sb.id: t.id for t in fake.tenants for sb in t.sandboxes.values()}

        # Every transition is a legal edge, each sandbox's history one unbroken chain, owned
        # by the sandbox's own tenant.
        last: dict[str, str | None] = {}
        for entry in journal.transitions():
            assert entry.sandbox is not None
            assert (entry.before, entry.after) in LEGAL_EDGES, entry.describe()
            assert last.get(entry.sandbox) == entry.before, entry.describe()
            assert entry.tenant == owners[entry.sandbox]
            last[entry.sandbox] = entry.after

        going_away = {Status.DESTROYING, Status.DESTROYED}
        for sandbox in every:
            assert sandbox.status.value in RESTING, (sandbox.id, sandbox.status)
            assert last[sandbox.id] == sandbox.status.value
            if sandbox.status in going_away and sandbox.has_processes:
                running = [p.process_id for p in sandbox.processes.values() if not p.exited]
                assert running == [], f"processes alive in destroyed {sandbox.id}: {running}"

        # No work succeeded on a sandbox that was already going away when the request came.
        for entry in journal.requests(status=200):
            if f"{entry.method} {entry.route}" in RUNTIME_ROUTES:
                assert entry.sandbox_status not in ("destroying", "destroyed"), entry.describe()

        # Each tenant holds exactly what its own clients created or forked.
        for tenant in tenants:
            assert set(fake.tenant(tenant.key).sandboxes) == set(tenant.sandboxes)
            assert {owners[sandbox_id] for sandbox_id in tenant.sandboxes} <= {tenant.id}

        # Enough happened for the checks above to mean something.
        routes = Counter((m, r, s) for t in tenants for (m, r, s) in t.sent.elements())
        assert routes[("POST", SB + "/fork", 200)] > 0
        assert routes[("POST", SB + "/pause", 409)] > 0
        assert routes[("GET", SB, 404)] > 0
        assert any(sb.status is Status.DESTROYED for sb in every)
