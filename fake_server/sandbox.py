"""One sandbox's record and its JSON views.

A record is deliberately small (slots, lazily created filesystem and process table) so a tenant
can hold a hundred thousand idle sandboxes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fake_server.catalog import Shape
from fake_server.clock import isoformat
from fake_server.desktop import Desktop
from fake_server.filesystem import FileSystem
from fake_server.image_config import STOCK_IMAGE, ImageConfig
from fake_server.lifecycle import PendingTransition, Status

if TYPE_CHECKING:
    from fake_server.listing import SandboxListing
    from fake_server.processes import ManagedProcess

__all__ = ["Sandbox", "encoded_views"]

#: Fields that never show in a view, so changing them keeps the cached view.
_OUTSIDE_THE_VIEW = frozenset(
    {
        "_view",
        "_view_json",
        "_view_body",
        "last_activity",
        "pending",
        "_fs",
        "_processes",
        "_desktop",
        "_order",
        "_listing",
        "image",
    }
)
_BODY_HEAD = b'{"status":"success","data":'


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
    #: The environment and working directory of its image (a template's ENV and WORKDIR).
    image: ImageConfig = STOCK_IMAGE
    status: Status = Status.CREATING
    #: The status before the last pause, resume, destroy or forced status (what a stale read
    #: answers, even once that action has settled).
    previous_status: Status | None = None
    pending: PendingTransition | None = None
    running_at: datetime | None = None
    paused_at: datetime | None = None
    last_resumed_at: datetime | None = None
    destroyed_at: datetime | None = None
    last_activity: float = 0.0
    _fs: FileSystem | None = None
    _processes: dict[str, ManagedProcess] | None = None
    _desktop: Desktop | None = None
    #: Creation order in its tenant, and the tenant's listing that follows its status (both
    #: set by the listing when the tenant adopts the sandbox).
    _order: int = 0
    _listing: SandboxListing | None = None
    _view: dict[str, Any] | None = None
    #: :meth:`view` encoded, and the GET body around it: both once per change.
    _view_json: bytes | None = None
    _view_body: bytes | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "status":
            # Every status change passes here, whoever makes it (a lifecycle timer, a state
            # fault, a test): the tenant's listing by status follows it. ``getattr``: the
            # dataclass sets ``status`` before ``_listing`` exists.
            listing = getattr(self, "_listing", None)
            if listing is not None:
                listing.restatus(self, value)
        object.__setattr__(self, name, value)
        # GETs and list pages of a sandbox far outnumber changes to it: its view is built (and
        # encoded) once per change.
        if name not in _OUTSIDE_THE_VIEW:
            object.__setattr__(self, "_view", None)
            object.__setattr__(self, "_view_json", None)
            object.__setattr__(self, "_view_body", None)

    def changed(self) -> None:
        """Say that a mutable field (a list or dict) was changed in place."""
        self._view = None
        self._view_json = None
        self._view_body = None

    @property
    def fs(self) -> FileSystem:
        """The sandbox's in-memory filesystem (created on first use)."""
        if self._fs is None:
            self._fs = FileSystem()
        return self._fs

    @fs.setter
    def fs(self, value: FileSystem) -> None:
        self._fs = value

    def release_runtime(self) -> None:
        """Drop the filesystem and processes (a destroyed sandbox holds no memory)."""
        self._fs = None
        self._processes = None
        self._desktop = None

    @property
    def processes(self) -> dict[str, ManagedProcess]:
        """Managed processes by id, exited ones included (created on first use)."""
        if self._processes is None:
            self._processes = {}
        return self._processes

    @property
    def desktop(self) -> Desktop:
        """The simulated desktop (created on first use; only desktop rootfs sandboxes reach
        it, through the computer routes)."""
        if self._desktop is None:
            self._desktop = Desktop()
        return self._desktop

    @property
    def has_processes(self) -> bool:
        return bool(self._processes)

    def ingress_url_template(self) -> str:
        return f"https://<port>-{self.id}.sb.createos.test"

    def view(self) -> dict[str, Any]:
        """The SandboxView: optional fields are omitted rather than null, as on the real API.

        Returns a fresh dict each time (callers may add to it); nested lists are shared."""
        if self._view is None:
            self._view = self._build_view()
        return dict(self._view)

    def view_json(self, encode: Callable[[Any], bytes]) -> bytes:
        """:meth:`view` encoded by ``encode``, once per change (list pages join these).

        Example::

            sandbox.view_json(encode)   # b'{"id":"sb_...","status":"running",...}'
        """
        if self._view_json is None:
            self._view_json = encode(self.view())
        return self._view_json

    def view_body(self, encode: Callable[[Any], bytes]) -> bytes:
        """The JSend success body of :meth:`view` (``GET /v1/sandboxes/{id}``), built around
        :meth:`view_json` once per change: the same bytes as ``encode`` gives for the whole
        envelope, because a compact encoding of an object does not depend on what holds it.

        Example::

            sandbox.view_body(encode)   # b'{"status":"success","data":{"id":"sb_...",...}}'
        """
        if self._view_body is None:
            self._view_body = _BODY_HEAD + self.view_json(encode) + b"}"
        return self._view_body

    def _build_view(self) -> dict[str, Any]:
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


def encoded_views(sandboxes: Iterable[Sandbox], encode: Callable[[Any], bytes]) -> list[bytes]:
    """:meth:`Sandbox.view_json` of each sandbox (the cached bytes read directly: a page holds
    up to 500, and a method call each would cost more than the join).

    Example::

        b",".join(encoded_views(page, encode))   # the items of a list page
    """
    return [sandbox._view_json or sandbox.view_json(encode) for sandbox in sandboxes]
