"""``FakeCreateOS``: the one object that owns a fake's state.

Everything a fake knows — tenants and their sandboxes, the clock, the journal, fault rules,
registered commands — hangs off one instance; two instances never share anything, and
:meth:`FakeCreateOS.reset` is a composition of named steps.

Example::

    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    async with serve(fake) as url:
        key = fake.create_tenant()
        ...  # talk to f"{url}/v1/sandboxes" with X-Api-Key: key
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from aiohttp import web

from fake_server import errors
from fake_server.access_tokens import AccessTokens
from fake_server.clock import Clock, ManualClock, RealClock, isoformat
from fake_server.config import ServerConfig
from fake_server.errors import ApiError
from fake_server.faults import FaultEngine
from fake_server.filesystem import Mount
from fake_server.identifiers import Identifiers
from fake_server.journal import Entry, Journal
from fake_server.lifecycle import (
    TERMINAL,
    Durations,
    Lifecycle,
    Status,
    TransitionEvent,
    check_duration_ms,
)
from fake_server.network import Responder
from fake_server.processes import ManagedProcess
from fake_server.registered_commands import CommandHandler, CommandRegistry
from fake_server.routes import route_table
from fake_server.runtime import Runtime
from fake_server.sandbox import Sandbox
from fake_server.sandboxes import SandboxService
from fake_server.state_faults import StateFaults
from fake_server.templates import TemplateService
from fake_server.tenants import Tenant, Tenants
from fake_server.tunnels import Tunnels

__all__ = ["SERVER_NAME", "FakeCreateOS"]

#: What :meth:`FakeCreateOS.info` (``GET /_fake/info``) answers as ``server``: how a client
#: tells this fake from any other server at the same address.
SERVER_NAME = "fake-createos"


class FakeCreateOS:
    """An in-memory CreateOS sandbox API.

    Attributes: ``config``, ``clock``, ``journal``, ``tenants``, ``sandboxes`` (management
    operations), ``templates`` (template builds), ``runtime`` (exec/files/processes),
    ``tunnels`` (what listens on sandbox ports), ``access_tokens`` (sandboxes' delegated
    tokens), ``commands`` (the sandbox shell's command registry), ``seed``.
    """

    def __init__(self, config: ServerConfig | None = None, **overrides: Any) -> None:
        config = config or ServerConfig()
        if overrides:
            config = config.with_changes(**overrides)
        self.config = config
        self.clock: Clock = ManualClock() if config.manual_clock else RealClock()
        self.ids = Identifiers(config.seed)
        #: Numbers the requests this fake answers (``X-Request-ID``), across all its apps.
        self.request_ids = itertools.count(1)
        self.journal = Journal(
            config.journal_capacity, wall_at=self.clock.wall_at, routes=route_table()
        )
        self.commands = CommandRegistry()
        self.tenants = Tenants(self.ids, strict=config.strict)
        self.access_tokens = AccessTokens(self.ids, self.clock.wall)
        self.lifecycle = Lifecycle(
            self.clock,
            config.durations(),
            on_event=self._journal_transition,
            tenant_durations=self._durations_of_tenant,
        )
        self.runtime = Runtime(
            self.clock,
            self.ids,
            self.commands,
            config,
            on_process_event=self._journal_process,
            on_activity=lambda sandbox: self.sandboxes.touch(sandbox),
            mounts_of=self._mounts_of,
        )
        self.templates = TemplateService(
            self.clock, self.ids, self.runtime.shell, durations_of=self.durations_of
        )
        self.sandboxes = SandboxService(
            self.lifecycle,
            self.ids,
            self.clock,
            region=config.region,
            on_going_away=self._going_away,
            # "404": a destroyed sandbox is forgotten at once, by GET and by lists alike.
            destroyed_kept=0 if config.deleted == "404" else config.destroyed_kept,
            from_template=self.templates.start_from,
        )
        #: What listens on sandbox ports for tunnels (fake_server.tunnels).
        self.tunnels = Tunnels()
        self.lifecycle.on_enter(self._resources_follow)
        self.faults = FaultEngine(self.ids.seed, route_table())
        self.state_faults = StateFaults(self.lifecycle, self.faults)
        for key in config.api_keys:
            self.tenants.register(key)
        self.tenants.on_implicit = self._tenant_made
        self._swept_at = self.clock.now()

    def reseed(self, seed: int) -> None:
        """Restart ids, names and fault draws from ``seed``."""
        self.ids.reseed(seed)
        self.faults.reseed(seed)

    @property
    def seed(self) -> int:
        """The seed in use (drawn at random when the config gave none)."""
        return self.ids.seed

    # -- tenants ----------------------------------------------------------------------------

    def create_tenant(self, api_key: str | None = None) -> str:
        """Register ``api_key`` (or mint a fresh one) as its own tenant; returns the key.

        Example::

            key = fake.create_tenant()      # 'skp_...'
        """
        if api_key is None:
            return self.tenants.create()
        self.tenants.register(api_key)
        return api_key

    def tenant(self, api_key: str) -> Tenant:
        """The tenant behind a key (registering it unless the fake is strict)."""
        return self.tenants.resolve(api_key)

    def _tenant_made(self, tenant: Tenant) -> None:
        """A new key made a tenant: now and then, drop the idle ones (a server that any key
        reaches would otherwise keep every key it ever saw)."""
        tenant.last_seen = now = self.clock.now()
        idle_s = self.config.idle_tenant_s
        if idle_s is None or now - self._swept_at < idle_s / 10:
            return
        self._swept_at = now
        ruled = {rule.match.tenant for rule in self.faults.rules}
        for key in self.tenants.keys_of(
            lambda old: (
                old.implicit
                and now - old.last_seen >= idle_s
                and old.id not in ruled
                and not old.has_live_sandboxes()
            )
        ):
            self.drop_tenant(key)

    def drop_tenant(self, api_key: str) -> None:
        """Forget a tenant and stop everything its sandboxes were doing; 404 for a key the
        fake does not know (it is not made a tenant first)."""
        tenant = self.tenants.known.get(api_key)
        if tenant is None:
            raise ApiError(404, errors.TENANT_NOT_FOUND)
        self.sandboxes.forget_tenant(tenant)
        self.templates.forget_tenant(tenant)
        self.access_tokens.forget_tenant(tenant.id)
        self.tenants.forget(api_key)

    def _going_away(self, sandbox: Sandbox) -> None:
        """A sandbox is being destroyed (or failed): its commands stop, nothing listens in it
        any more and its token ends."""
        self.runtime.stop_all(sandbox)
        self.tunnels.forget(sandbox.id)
        self.access_tokens.disable(sandbox)

    def set_durations(
        self,
        api_key: str,
        *,
        transition_ms: float | None = None,
        create_ms: float | None = None,
    ) -> Durations:
        """Give one tenant its own transition (pause, resume, fork, delete) and create durations;
        ``None`` keeps the fake's. Replaces what the tenant had; transitions its sandboxes start
        from now on take them. Returns the tenant's durations now in force.

        ``ValueError`` for a value :func:`~fake_server.lifecycle.check_duration_ms` refuses,
        ``ApiError(404)`` for a key no tenant has.

        Example::

            key = fake.create_tenant()
            fake.set_durations(key, transition_ms=0)  # this tenant's pauses finish at once
        """
        changes: dict[str, float] = {}
        for name, ms in (("transition_ms", transition_ms), ("create_ms", create_ms)):
            if ms is not None:
                try:
                    changes[name] = check_duration_ms(ms)
                except ValueError as exc:
                    raise ValueError(f"{name}: {exc}") from None
        tenant = self.tenants.known.get(api_key)
        if tenant is None:
            raise ApiError(404, errors.TENANT_NOT_FOUND)
        tenant.durations = self.config.with_changes(**changes).durations() if changes else None
        return self.durations_of(tenant)

    def durations_of(self, tenant: Tenant) -> Durations:
        """The durations a tenant's sandboxes take: its own, or the fake's."""
        return tenant.durations or self.lifecycle.durations

    def _durations_of_tenant(self, tenant_id: str) -> Durations | None:
        tenant = self.tenants.by_id(tenant_id)
        return None if tenant is None else tenant.durations

    def set_credit(self, api_key: str, *, has_credit: bool) -> bool:
        """Say whether a tenant has credit: without it, its cost-incurring calls (bandwidth
        recharge, network and disk create) answer 402. Returns the setting now in force;
        ``ApiError(404)`` for a key no tenant has.

        Example::

            key = fake.create_tenant()
            fake.set_credit(key, has_credit=False)   # its recharges now answer 402
        """
        tenant = self.tenants.known.get(api_key)
        if tenant is None:
            raise ApiError(404, errors.TENANT_NOT_FOUND)
        tenant.has_credit = has_credit
        return tenant.has_credit

    # -- networks and disks -------------------------------------------------------------------

    def _mounts_of(self, sandbox: Sandbox) -> list[Mount]:
        """The disks mounted in a sandbox (its commands and files API see them)."""
        tenant = self.tenants.by_id(sandbox.tenant)
        return [] if tenant is None else tenant.disks.mounts(sandbox)

    def _resources_follow(self, sandbox: Sandbox, status: Status) -> None:
        """A sandbox that ended leaves its networks and unmounts its disks."""
        if status not in TERMINAL:
            return
        tenant = self.tenants.by_id(sandbox.tenant)
        if tenant is not None:
            tenant.networks.leave_all(sandbox)
            tenant.disks.leave_all(sandbox)

    def register_command(self, name: str, handler: CommandHandler) -> None:
        """Add a command to every sandbox's shell, e.g. a fake ``python3`` that streams output.

        Example::

            async def python3(ctx, args):
                ctx.stdout.write(b"ok\\n")
                return 0
            fake.register_command("python3", python3)
        """
        self.commands.register(name, handler)

    def register_responder(self, host: str, responder: Responder) -> None:
        """Answer ``curl``/``wget`` inside sandboxes for ``host`` (``"api.example.com"``,
        ``"api.example.com:8443"`` or ``"*.example.com"``); the sandbox's egress rules still
        decide whether a request may leave. Nothing ever reaches the real network.

        Example::

            fake.register_responder(
                "api.example.com", lambda request: SimulatedResponse(200, b'{"ok": true}')
            )
        """
        self.runtime.network.register(host, responder)

    # -- reset --------------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to a fresh fake: no tenants but the configured keys, no rules (gates opened),
        empty journal."""
        self._stop_everything()
        self.faults.clear()
        self.tunnels.clear()
        self.tenants.clear()
        self.access_tokens.clear()
        self.journal.clear()
        for key in self.config.api_keys:
            self.tenants.register(key)

    def _stop_everything(self) -> None:
        for tenant in self.tenants:
            self.sandboxes.forget_tenant(tenant)
            self.templates.forget_tenant(tenant)

    async def stop_commands(self) -> None:
        """End every command running in any sandbox and wait until each has stopped (an
        application serving the fake does this when it closes; sandboxes and files stay).

        Example::

            await fake.stop_commands()  # before closing an event loop the fake ran on
        """
        for tenant in self.tenants:
            for sandbox in tenant.sandboxes.values():
                self.runtime.stop_all(sandbox)
        await self.runtime.wait_stopped()
        await self.templates.wait_stopped()

    def find_sandbox(self, sandbox_id: str) -> Sandbox:
        """A sandbox by id in any tenant (for the control API); 404 when there is none."""
        for tenant in self.tenants:
            sandbox = tenant.sandboxes.get(sandbox_id)
            if sandbox is not None:
                return sandbox
        raise ApiError(404, errors.SANDBOX_NOT_FOUND)

    # -- state ---------------------------------------------------------------------------------

    def state(self, tenant_id: str | None = None) -> dict[str, Any]:
        """A JSON snapshot of tenants (one, if ``tenant_id`` is given) with their sandboxes and
        processes, networks, disks (never their credentials) and credit (for the control API
        and the dashboard)."""
        return {
            "seed": self.seed,
            "clock": {
                "manual": self.clock_is_manual,
                "now": self.clock.now(),
                "wall": isoformat(self.clock.wall()),
            },
            "tenants": [
                {
                    "id": tenant.id,
                    "sandboxes": _sandbox_states(tenant),
                    "networks": [network.view(members=True) for network in tenant.networks],
                    "disks": tenant.disks.state(),
                    "has_credit": tenant.has_credit,
                }
                for tenant in self.tenants
                if tenant_id is None or tenant.id == tenant_id
            ],
            "rules": [rule.as_json() for rule in self.faults],
            "gates": [gate.as_json() for gate in self.faults.gates.values()],
            "journal": {
                "size": len(self.journal),
                "capacity": self.journal.capacity,
                "dropped": self.journal.dropped,
            },
        }

    def tenant_sandboxes(self, tenant_id: str) -> list[dict[str, Any]]:
        """One tenant's sandboxes as :meth:`state` lists them (views with their processes);
        none for a tenant the fake does not have.

        Example::

            fake.tenant_sandboxes(fake.tenant(key).id)  # [{'id': 'sb_...', 'processes': [...]...}]
        """
        tenant = self.tenants.by_id(tenant_id)
        return [] if tenant is None else _sandbox_states(tenant)

    def info(self) -> dict[str, Any]:
        """Who this is, and the settings a client must know before relying on them: the seed,
        whether the clock is manual (one clock for every tenant), the fake's own durations.

        Example::

            fake.info()["clock"]["manual"]   # False unless ServerConfig(manual_clock=True)
        """
        return {
            "server": SERVER_NAME,
            "seed": self.seed,
            "clock": {"manual": self.clock_is_manual},
            "transition_ms": self.config.transition_ms,
            "create_ms": self.config.create_ms,
        }

    @property
    def clock_is_manual(self) -> bool:
        return isinstance(self.clock, ManualClock)

    # -- HTTP -----------------------------------------------------------------------------------

    def app(self) -> web.Application:
        """A fresh aiohttp application serving this fake."""
        from fake_server.app import build_app

        return build_app(self)

    # -- journal hooks --------------------------------------------------------------------------

    def _event_entry(self, **fields: Any) -> Entry:
        ticket = self.journal.ticket()
        return Entry(
            seq=ticket,
            opened=ticket,
            at=self.clock.now(),
            time=self.clock.wall(),
            **fields,
        )

    def _journal_transition(self, event: TransitionEvent) -> None:
        self.journal.record(
            self._event_entry(
                kind="transition",
                tenant=event.tenant,
                sandbox=event.sandbox_id,
                before=event.before.value if event.before else None,
                after=event.after.value,
                cause=event.cause,
            )
        )

    def journal_computer(self, sandbox: Sandbox, action: str, arguments: dict[str, Any]) -> None:
        """Record what an agent did on a sandbox's desktop: ``action`` (the route under
        ``…/computer``, e.g. ``mouse/click``) and its arguments as JSON, in the entry's
        ``detail``.

        Example::

            fake.journal_computer(sandbox, "keyboard/type", {"text": "hi", "screen_id": "screen-0"})
            fake.journal.entries(kind="computer")[-1].detail
            # 'keyboard/type {"screen_id":"screen-0","text":"hi"}'
        """
        self.journal.record(
            self._event_entry(
                kind="computer",
                tenant=sandbox.tenant,
                sandbox=sandbox.id,
                detail=f"{action} {json.dumps(arguments, sort_keys=True, separators=(',', ':'))}",
            )
        )

    def _journal_process(self, process: ManagedProcess, sandbox: Sandbox, what: str) -> None:
        detail = (
            what if what == "start" else f"exit code={process.exit_code} signal={process.signal}"
        )
        self.journal.record(
            self._event_entry(
                kind="process",
                tenant=sandbox.tenant,
                sandbox=sandbox.id,
                process=process.process_id,
                detail=detail,
            )
        )


def _sandbox_states(tenant: Tenant) -> list[dict[str, Any]]:
    return [_sandbox_state(sandbox) for sandbox in tenant.sandboxes.values()]


def _sandbox_state(sandbox: Sandbox) -> dict[str, Any]:
    view = sandbox.view()
    view["processes"] = (
        [process.view() for process in sandbox.processes.values()] if sandbox.has_processes else []
    )
    if sandbox.pending is not None:
        view["pending"] = {"target": sandbox.pending.target.value, "stuck": sandbox.pending.stuck}
    return view
