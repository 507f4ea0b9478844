"""One sandbox's record and its JSON views.

A record is deliberately small (slots, lazily created filesystem and process table) so a tenant
can hold a hundred thousand idle sandboxes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fake_server.catalog import Shape
from fake_server.filesystem import FileSystem
from fake_server.lifecycle import PendingTransition, Status

if TYPE_CHECKING:
    from fake_server.processes import ManagedProcess

__all__ = ["Sandbox", "isoformat"]


def isoformat(moment: datetime) -> str:
    """RFC 3339 with a ``Z`` suffix, the form every client parses."""
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(slots=True, eq=False)
class Sandbox:
    """A sandbox as the fake holds it."""

    id: str
    tenant: str
    name: str
    shape: Shape
    rootfs: str
    region: str
    ip: str
    created_at: datetime
    spawn_ms: float
    disk_mib: int
    egress: list[str] = field(default_factory=list)
    envs: dict[str, str] = field(default_factory=dict)
    ssh_pubkeys: list[str] = field(default_factory=list)
    ingress_enabled: bool = False
    auto_pause_after_seconds: int | None = None
    forked_from: str | None = None
    status: Status = Status.CREATING
    #: The status before the last transition (what a stale read answers).
    previous_status: Status | None = None
    pending: PendingTransition | None = None
    running_at: datetime | None = None
    paused_at: datetime | None = None
    last_resumed_at: datetime | None = None
    destroyed_at: datetime | None = None
    last_activity: float = 0.0
    _fs: FileSystem | None = None
    _processes: dict[str, ManagedProcess] | None = None

    @property
    def fs(self) -> FileSystem:
        """The sandbox's in-memory filesystem (created on first use)."""
        if self._fs is None:
            self._fs = FileSystem()
        return self._fs

    @fs.setter
    def fs(self, value: FileSystem) -> None:
        self._fs = value

    @property
    def processes(self) -> dict[str, ManagedProcess]:
        """Managed processes by id, exited ones included (created on first use)."""
        if self._processes is None:
            self._processes = {}
        return self._processes

    @property
    def has_processes(self) -> bool:
        return bool(self._processes)

    def ingress_url_template(self) -> str:
        return f"https://<port>-{self.id}.sb.createos.test"

    def view(self) -> dict[str, Any]:
        """The SandboxView: optional fields are omitted rather than null, as on the real API."""
        view: dict[str, Any] = {
            "id": self.id,
            "status": self.status.value,
            "name": self.name,
            "vcpu": self.shape.vcpu,
            "mem_mib": self.shape.mem_mib,
            "disk_mib": self.disk_mib,
            "created_at": isoformat(self.created_at),
            "ingress_enabled": self.ingress_enabled,
            "spawn_ms": self.spawn_ms,
            "shape": self.shape.id,
            "rootfs": self.rootfs,
            "region": self.region,
            "egress": list(self.egress),
            "envs": sorted(self.envs),
            "ssh_pubkeys": list(self.ssh_pubkeys),
            "created_by": self.tenant,
            "bandwidth_ingress_bytes": 0,
        }
        if self.status is not Status.CREATING:
            view["ip"] = self.ip
        if self.ingress_enabled:
            view["ingress_url_template"] = self.ingress_url_template()
        for key in ("running_at", "paused_at", "last_resumed_at", "destroyed_at"):
            moment = getattr(self, key)
            if moment is not None:
                view[key] = isoformat(moment)
        if self.forked_from is not None:
            view["forked_from"] = self.forked_from
        if self.auto_pause_after_seconds is not None:
            view["auto_pause_after_seconds"] = self.auto_pause_after_seconds
        return view

    def created_view(self) -> dict[str, Any]:
        """The create response (CreateSandboxResponse)."""
        view: dict[str, Any] = {
            "id": self.id,
            "status": self.status.value,
            "name": self.name,
            "ip": self.ip,
            "shape": self.shape.id,
            "rootfs": self.rootfs,
            "vcpu": self.shape.vcpu,
            "mem_mib": self.shape.mem_mib,
            "disk_mib": self.disk_mib,
            "spawn_ms": self.spawn_ms,
            "egress": list(self.egress),
            "bandwidth_quota_bytes": -1,
        }
        if self.ingress_enabled:
            view["ingress_url_template"] = self.ingress_url_template()
        if self.auto_pause_after_seconds is not None:
            view["auto_pause_after_seconds"] = self.auto_pause_after_seconds
        return view
