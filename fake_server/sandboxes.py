"""Sandbox management: create, read, list, change, pause, resume, fork and delete.

The operations take already-parsed arguments and return records; HTTP handlers only translate.

Example::

    service = SandboxService(lifecycle, ids, clock, region="us")
    sandbox = service.create(tenant, CreateSpec(shape="s-1vcpu-1gb"))
    service.pause(tenant, sandbox.id)
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from fake_server import errors
from fake_server.catalog import DEFAULT_ROOTFS, ROOTFS, SHAPES, is_known_rootfs
from fake_server.clock import Clock, TimerHandle
from fake_server.disks import MountRequest
from fake_server.errors import ApiError
from fake_server.filesystem import FileSystem
from fake_server.identifiers import Identifiers
from fake_server.image_config import STOCK_IMAGE, ImageConfig
from fake_server.lifecycle import TERMINAL, Lifecycle, Status
from fake_server.sandbox import Sandbox
from fake_server.tenants import Tenant

__all__ = ["CreateSpec", "ForkSpec", "SandboxService"]

NAME_MAX = 22
AUTO_PAUSE_MIN = 60
AUTO_PAUSE_MAX = 86_400
LIST_DEFAULT = 50
LIST_MAX = 500


@dataclass(slots=True)
class CreateSpec:
    """A create request, already type-checked."""

    shape: str
    rootfs: str | None = None
    name: str | None = None
    region: str | None = None
    egress: list[str] | None = None
    envs: dict[str, str] | None = None
    ssh_pubkeys: list[str] | None = None
    ingress_enabled: bool = False
    auto_pause_after_seconds: int | None = None
    disk_mib: int | None = None
    #: Networks to join, by id or name.
    networks: list[str] = field(default_factory=list)
    disks: list[MountRequest] = field(default_factory=list)


@dataclass(slots=True)
class ForkSpec:
    """A fork request, already type-checked."""

    start_paused: bool = False
    egress: list[str] | None = None
    envs: dict[str, str] | None = None
    ssh_pubkeys: list[str] | None = None
    ingress_enabled: bool | None = None


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= NAME_MAX and all(
        c.isascii() and (c.isalnum() or c == "-") for c in name
    )


class SandboxService:
    """Management operations on one fake's sandboxes."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        ids: Identifiers,
        clock: Clock,
        *,
        region: str,
        on_going_away: Callable[[Sandbox], None] = lambda sandbox: None,
        destroyed_kept: int = 1000,
        from_template: Callable[[Tenant, str], tuple[FileSystem, ImageConfig]] | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        #: Destroyed sandboxes each tenant keeps readable (see Tenant.keep_destroyed).
        self.destroyed_kept = destroyed_kept
        self.ids = ids
        self.clock = clock
        self.region = region
        self._tenants_by_id: dict[str, Tenant] = {}
        self._auto_pause: dict[str, TimerHandle] = {}
        self._on_going_away = on_going_away
        #: A copy of a template's files, and its image's environment and working directory,
        #: for a sandbox created from it (``rootfs: tpl_...``).
        self._from_template = from_template
        lifecycle.on_enter(self._entered)

    # -- create ------------------------------------------------------------------------------

    def create(self, tenant: Tenant, spec: CreateSpec) -> Sandbox:
        shape = SHAPES.get(spec.shape)
        if shape is None:
            raise ApiError.invalid("shape", errors.UNKNOWN_SHAPE)
        rootfs = spec.rootfs or DEFAULT_ROOTFS
        # A template is named by its id or its name (contract §3), as on the template routes.
        if not is_known_rootfs(rootfs) and tenant.template(rootfs) is None:
            raise ApiError.invalid("rootfs", errors.UNKNOWN_ROOTFS)
        if spec.region and spec.region != self.region:
            raise ApiError.invalid("region", errors.REGION_MISMATCH)
        self._check_auto_pause(spec.auto_pause_after_seconds)
        if spec.disk_mib is not None and spec.disk_mib < 0:
            raise ApiError.invalid("disk_mib", "must not be negative")
        name = spec.name if spec.name is not None else self._fresh_name(tenant)
        if not _valid_name(name):
            raise ApiError.invalid("name", errors.NAME_INVALID)
        if name in tenant.names:
            raise ApiError(409, errors.NAME_TAKEN)
        # Every network and disk named is checked before anything is made.
        networks = tenant.networks.resolve(spec.networks)
        mounts = tenant.disks.plan(spec.disks)
        tenant.check_credit()  # a sandbox costs: 402 once the request is known to be good
        files, image = None, STOCK_IMAGE
        if rootfs not in ROOTFS:
            if self._from_template is None:
                raise ApiError(404, errors.TEMPLATE_NOT_FOUND)
            files, image = self._from_template(tenant, rootfs)
        sandbox = Sandbox(
            id=self.ids.sandbox_id(self._ids_in_use),
            tenant=tenant.id,
            name=name,
            shape=shape,
            rootfs=rootfs,
            region=self.region,
            ip=self.ids.ip(tenant.by_ip),
            created_at=self.clock.wall(),
            spawn_ms=self.ids.spawn_ms(),
            disk_mib=spec.disk_mib or shape.default_disk_mib,
            egress=list(spec.egress or []),
            envs=dict(spec.envs or {}),
            ssh_pubkeys=list(spec.ssh_pubkeys or []),
            ingress_enabled=spec.ingress_enabled,
            auto_pause_after_seconds=spec.auto_pause_after_seconds,
            image=image,
            last_activity=self.clock.now(),
        )
        if files is not None:
            sandbox.fs = files
        tenant.disks.mount(sandbox, mounts)
        for network in networks:
            network.join(sandbox)
        self._adopt(tenant, sandbox)
        self.lifecycle.create(sandbox)
        return sandbox

    def _fresh_name(self, tenant: Tenant) -> str:
        name = self.ids.name()
        while name in tenant.names:
            name = self.ids.name()
        return name

    @property
    def _ids_in_use(self) -> Container[str]:
        """Every sandbox id a tenant holds now (a reseed must not hand one out again)."""
        return _SandboxIds(self._tenants_by_id.values())

    def _adopt(self, tenant: Tenant, sandbox: Sandbox) -> None:
        tenant.add(sandbox)
        self._tenants_by_id[tenant.id] = tenant

    @staticmethod
    def _check_auto_pause(seconds: int | None) -> None:
        if seconds is not None and not AUTO_PAUSE_MIN <= seconds <= AUTO_PAUSE_MAX:
            raise ApiError.invalid("auto_pause_after_seconds", errors.AUTO_PAUSE_RANGE)

    # -- read ---------------------------------------------------------------------------------

    def page(
        self, tenant: Tenant, *, status: Status | None, limit: int, offset: int
    ) -> tuple[list[Sandbox], int]:
        """One page (in creation order) and the total matching the filter, in O(page) time
        whatever the offset and the tenant's size (see :mod:`fake_server.listing`).

        Example::

            page, total = service.page(tenant, status=Status.PAUSED, limit=100, offset=200)
        """
        return tenant.listing.page(status, offset=offset, limit=limit)

    def by_ip(self, tenant: Tenant, ip: str) -> Sandbox:
        sandbox_id = tenant.by_ip.get(ip)
        if sandbox_id is None:
            raise ApiError(404, errors.SANDBOX_NOT_FOUND)
        return tenant.get(sandbox_id)

    # -- change ---------------------------------------------------------------------------------

    def patch(
        self,
        sandbox: Sandbox,
        *,
        ingress_enabled: bool | None,
        auto_pause_after_seconds: int | None,
        disable_auto_pause: bool,
    ) -> Sandbox:
        self.lifecycle.check_modifiable(sandbox)
        self._check_auto_pause(auto_pause_after_seconds)
        if ingress_enabled is not None:
            sandbox.ingress_enabled = ingress_enabled
        if disable_auto_pause:
            sandbox.auto_pause_after_seconds = None
        elif auto_pause_after_seconds is not None:
            sandbox.auto_pause_after_seconds = auto_pause_after_seconds
        self._schedule_auto_pause(sandbox)
        return sandbox

    def set_egress(self, sandbox: Sandbox, egress: list[str] | None) -> Sandbox:
        self.lifecycle.check_modifiable(sandbox)
        sandbox.egress = list(egress or [])
        return sandbox

    def add_ssh_keys(self, sandbox: Sandbox, keys: list[str]) -> int:
        self.lifecycle.check_modifiable(sandbox)
        for key in keys:
            canonical = " ".join(key.split()[:2])
            if not canonical.startswith(("ssh-", "ecdsa-")) or len(canonical.split()) != 2:
                raise ApiError.invalid("keys", "invalid ssh public key")
            if canonical not in sandbox.ssh_pubkeys:
                sandbox.ssh_pubkeys.append(canonical)
                sandbox.changed()
        return len(sandbox.ssh_pubkeys)

    def resize(self, sandbox: Sandbox, disk_mib: int) -> Sandbox:
        self.lifecycle.check_modifiable(sandbox)
        if disk_mib <= sandbox.disk_mib:
            raise ApiError.invalid("disk_mib", errors.RESIZE_NOT_LARGER)
        sandbox.disk_mib = disk_mib
        return sandbox

    # -- lifecycle --------------------------------------------------------------------------------

    def pause(self, sandbox: Sandbox) -> Sandbox:
        self.lifecycle.pause(sandbox)
        return sandbox

    def resume(self, tenant: Tenant, sandbox: Sandbox) -> Sandbox:
        tenant.check_credit()  # a resume costs: after the owner's 404, before the state's 409
        self.lifecycle.resume(sandbox)
        return sandbox

    def delete(self, sandbox: Sandbox) -> Sandbox:
        self.lifecycle.destroy(sandbox)
        return sandbox

    def fork(self, tenant: Tenant, source: Sandbox, spec: ForkSpec) -> Sandbox:
        tenant.check_credit()  # as a resume: the owner's 404 first, then 402, then 409
        self.lifecycle.check_fork_source(source)
        child = Sandbox(
            id=self.ids.sandbox_id(self._ids_in_use),
            tenant=tenant.id,
            name=self._fresh_name(tenant),
            shape=source.shape,
            rootfs=source.rootfs,
            region=source.region,
            ip=self.ids.ip(tenant.by_ip),
            created_at=self.clock.wall(),
            spawn_ms=self.ids.spawn_ms(),
            disk_mib=source.disk_mib,
            # Omitted or empty egress inherits the source's list.
            egress=list(spec.egress or source.egress),
            envs=dict(spec.envs) if spec.envs is not None else dict(source.envs),
            ssh_pubkeys=list(spec.ssh_pubkeys or source.ssh_pubkeys),
            ingress_enabled=(
                source.ingress_enabled if spec.ingress_enabled is None else spec.ingress_enabled
            ),
            auto_pause_after_seconds=source.auto_pause_after_seconds,
            forked_from=source.id,
            image=source.image,
            last_activity=self.clock.now(),
        )
        child.fs = source.fs.clone()
        self._adopt(tenant, child)
        self.lifecycle.fork(child, start_paused=spec.start_paused)
        return child

    def touch(self, sandbox: Sandbox) -> None:
        """Record activity (an accepted exec), which postpones auto-pause."""
        sandbox.last_activity = self.clock.now()

    # -- reactions to status changes -----------------------------------------------------------

    def _entered(self, sandbox: Sandbox, status: Status) -> None:
        if status in TERMINAL:
            tenant = self._tenants_by_id.get(sandbox.tenant)
            if tenant is not None:
                tenant.release_name(sandbox)
            self._cancel_auto_pause(sandbox)
        if status in TERMINAL or status is Status.DESTROYING:
            self._on_going_away(sandbox)
        if status is Status.DESTROYED:
            sandbox.release_runtime()
            tenant = self._tenants_by_id.get(sandbox.tenant)
            if tenant is not None:
                tenant.keep_destroyed(sandbox, self.destroyed_kept)
        if status is Status.RUNNING:
            sandbox.last_activity = self.clock.now()
            self._schedule_auto_pause(sandbox)

    def _cancel_auto_pause(self, sandbox: Sandbox) -> None:
        timer = self._auto_pause.pop(sandbox.id, None)
        if timer is not None:
            timer.cancel()

    def _schedule_auto_pause(self, sandbox: Sandbox) -> None:
        self._cancel_auto_pause(sandbox)
        seconds = sandbox.auto_pause_after_seconds
        if seconds is None or sandbox.status is not Status.RUNNING:
            return
        due = sandbox.last_activity + seconds - self.clock.now()
        self._auto_pause[sandbox.id] = self.clock.call_later(due, self._auto_pause_due, sandbox)

    def _auto_pause_due(self, sandbox: Sandbox) -> None:
        self._auto_pause.pop(sandbox.id, None)
        seconds = sandbox.auto_pause_after_seconds
        if seconds is None or sandbox.status is not Status.RUNNING:
            return
        if self.clock.now() - sandbox.last_activity >= seconds:
            self.lifecycle.pause(sandbox, cause="auto-pause")
        else:
            self._schedule_auto_pause(sandbox)

    def forget_tenant(self, tenant: Tenant) -> None:
        """Stop everything a dropped tenant's sandboxes were doing: processes, timers."""
        for sandbox in tenant.sandboxes.values():
            self._on_going_away(sandbox)
            sandbox.release_runtime()
            self._cancel_auto_pause(sandbox)
            self.lifecycle.abandon(sandbox)
        self._tenants_by_id.pop(tenant.id, None)


class _SandboxIds:
    """The sandbox ids of some tenants, as a container (looked up, never copied)."""

    def __init__(self, tenants: Iterable[Tenant]) -> None:
        self._tenants = tenants

    def __contains__(self, sandbox_id: object) -> bool:
        return any(sandbox_id in tenant.sandboxes for tenant in self._tenants)
