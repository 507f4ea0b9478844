"""Persistent disks: a tenant's S3-backed disk registrations, their mounts in sandboxes, and the
files kept in their buckets.

A disk is a registration that points at a bucket; the bucket holds the files. The fake keeps
each bucket (per tenant, by endpoint and bucket name) as its own in-memory tree, so what a
sandbox writes under a disk's mount path outlives the sandbox, shows in every other sandbox
the disk is attached to, and is still there when the bucket is registered again after the
registration was deleted (deleting a disk never touches the bucket, as on the real service).

Credentials are kept only so a registration can be rotated; no view, journal entry or state
snapshot ever holds them.

Example::

    disks = Disks()
    disk = disks.create(ids, clock.wall(), DiskSpec.parse(name="data", kind="s3",
        config={"bucket": "b", "endpoint": "https://s3.example"},
        credentials={"access_key": "a", "secret_key": "s"}))
    disks.attach(sandbox, MountRequest("data", "/mnt/data"))
    disks.mounts(sandbox)   # [('/mnt/data', <FileSystem>)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from fake_server import errors
from fake_server.clock import isoformat
from fake_server.errors import ApiError
from fake_server.filesystem import RESERVED_MOUNTS, FileSystem, FsError, Mount
from fake_server.identifiers import Identifiers
from fake_server.lifecycle import Status
from fake_server.registry import Registry
from fake_server.sandbox import Sandbox
from fake_server.validation import path_problem

__all__ = [
    "KIND_S3",
    "Attachment",
    "Disk",
    "DiskCredentials",
    "DiskSpec",
    "Disks",
    "MountRequest",
]

#: The only kind of disk the API knows.
KIND_S3 = "s3"
#: The fields of a disk's ``config``: which are strings, which is a boolean, which required.
_CONFIG_STRINGS = ("bucket", "endpoint", "region")
_CONFIG_REQUIRED = ("bucket", "endpoint")
_CONFIG_BOOLEANS = ("use_path_style",)


@dataclass(frozen=True, slots=True)
class DiskCredentials:
    """An access key pair. Neither half shows in ``repr`` (nor anywhere else)."""

    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)

    @classmethod
    def parse(cls, raw: object) -> DiskCredentials:
        """``credentials`` of a request: both keys, non-empty strings (400 otherwise).

        Example:
            >>> DiskCredentials.parse({"access_key": "a", "secret_key": "s"})
            DiskCredentials()
        """
        if not isinstance(raw, Mapping):
            raise ApiError.invalid("credentials", "is required: {access_key, secret_key}")
        unknown = sorted(set(raw) - {"access_key", "secret_key"})
        if unknown:
            raise ApiError.invalid(f"credentials.{unknown[0]}", errors.UNKNOWN_FIELD)
        keys = []
        for name in ("access_key", "secret_key"):
            value = raw.get(name)
            if not isinstance(value, str) or not value.strip() or "\x00" in value:
                raise ApiError.invalid(f"credentials.{name}", "must be a non-empty string")
            keys.append(value)
        return cls(*keys)


def _parse_config(raw: object) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ApiError.invalid(
            "config", "is required: {bucket, endpoint, region?, use_path_style?}"
        )
    unknown = sorted(set(raw) - {*_CONFIG_STRINGS, *_CONFIG_BOOLEANS})
    if unknown:
        raise ApiError.invalid(f"config.{unknown[0]}", errors.UNKNOWN_FIELD)
    config: dict[str, Any] = {}
    for name in _CONFIG_STRINGS:
        value = raw.get(name)
        if value is None or (value == "" and name not in _CONFIG_REQUIRED):
            continue  # an optional field sent empty: unset
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise ApiError.invalid(f"config.{name}", "must be a non-empty string")
        config[name] = value
    for name in _CONFIG_REQUIRED:
        if name not in config:
            raise ApiError.invalid(f"config.{name}", "is required")
    for name in _CONFIG_BOOLEANS:
        value = raw.get(name)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise ApiError.invalid(f"config.{name}", "must be a boolean")
        config[name] = value
    return config


@dataclass(frozen=True, slots=True)
class DiskSpec:
    """A disk create request, checked: a valid kind, config and credentials (the name is
    checked against the tenant's other disks when it is made)."""

    name: str | None
    config: dict[str, Any]
    credentials: DiskCredentials

    @classmethod
    def parse(
        cls, *, name: str | None, kind: str | None, config: object, credentials: object
    ) -> DiskSpec:
        """Check a create request's fields (400 naming the first bad one).

        Example:
            >>> spec = DiskSpec.parse(name="data", kind="s3",
            ...     config={"bucket": "b", "endpoint": "https://s3.example"},
            ...     credentials={"access_key": "a", "secret_key": "s"})
            >>> spec.config
            {'bucket': 'b', 'endpoint': 'https://s3.example'}
        """
        if kind not in (None, KIND_S3):
            raise ApiError.invalid("kind", errors.DISK_KIND)
        return cls(name, _parse_config(config), DiskCredentials.parse(credentials))


class MountRequest(NamedTuple):
    """A disk to mount, as a request names it: the disk by id or name, where, and which part
    of the bucket (only the whole bucket can be mounted in the fake)."""

    disk: str
    mount_path: str | None
    sub_path: str | None = None

    @classmethod
    def parse_list(cls, raw: object, field: str = "disks") -> list[MountRequest]:
        """The ``disks`` of a create request: ``[{disk_id, mount_path, sub_path?}]`` (400
        naming the first bad item otherwise).

        Example:
            >>> MountRequest.parse_list([{"disk_id": "data", "mount_path": "/mnt"}])
            [MountRequest(disk='data', mount_path='/mnt', sub_path=None)]
        """
        if not isinstance(raw, list):
            raise ApiError.invalid(field, "must be a list of {disk_id, mount_path, sub_path?}")
        return [cls.parse(item, f"{field}[{index}]") for index, item in enumerate(raw)]

    @classmethod
    def parse(cls, raw: object, field: str = "body") -> MountRequest:
        """One ``{disk_id, mount_path, sub_path?}`` (the body of ``POST …/disks``).

        Example:
            >>> MountRequest.parse({"disk_id": "data", "mount_path": "/mnt"}).disk
            'data'
        """
        if not isinstance(raw, Mapping):
            raise ApiError.invalid(field, "must be an object {disk_id, mount_path, sub_path?}")
        unknown = sorted(set(raw) - {"disk_id", "mount_path", "sub_path"})
        if unknown:
            raise ApiError.invalid(f"{field}.{unknown[0]}", errors.UNKNOWN_FIELD)
        values: list[str | None] = []
        for name in ("disk_id", "mount_path", "sub_path"):
            value = raw.get(name)
            if value is not None and (not isinstance(value, str) or "\x00" in value):
                raise ApiError.invalid(f"{field}.{name}", "must be a string")
            values.append(value)
        if not values[0]:
            raise ApiError.invalid(f"{field}.disk_id", "is required")
        return cls(values[0], values[1], values[2])


@dataclass(eq=False, slots=True)
class Disk:
    """One disk registration."""

    id: str
    name: str
    config: dict[str, Any]
    credentials: DiskCredentials = field(repr=False)
    created_at: datetime
    kind: str = KIND_S3

    @property
    def bucket_key(self) -> tuple[str, str]:
        """Which bucket holds its files: two registrations of one bucket share them."""
        return (self.config["endpoint"], self.config["bucket"])

    def view(self) -> dict[str, Any]:
        """The DiskView (never the credentials).

        Example::

            disk.view()   # {'id': 'disk_...', 'name': 'data', 'kind': 's3', 'config': {...}, ...}
        """
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "config": dict(self.config),
            "created_at": isoformat(self.created_at),
        }


@dataclass(eq=False, slots=True)
class Attachment:
    """A disk mounted in a sandbox at a path."""

    disk: Disk
    sandbox: Sandbox
    mount_path: str

    def view(self) -> dict[str, Any]:
        """The SandboxDiskView: mounts in the fake are ready at once (``mounted``).

        Example::

            attachment.view()["mount_status"]   # 'mounted'
        """
        return {
            "disk_id": self.disk.id,
            "name": self.disk.name,
            "kind": self.disk.kind,
            "config": dict(self.disk.config),
            "mount_path": self.mount_path,
            "mount_status": "mounted",
        }


def check_mount_path(raw: str | None) -> str:
    """A mount path a disk may take: absolute, not ``/`` and not where the image keeps its
    programs or devices (400 otherwise); returned normalized.

    Example:
        >>> check_mount_path("/mnt/data/")
        '/mnt/data'
    """
    if not raw:
        raise ApiError.invalid("mount_path", "is required")
    problem = path_problem(raw)
    if problem is not None:
        raise ApiError.invalid("mount_path", problem)
    if not raw.startswith("/"):
        raise ApiError.invalid("mount_path", errors.PATH_NOT_ABSOLUTE)
    path = FileSystem.normalize(raw)
    if path == "/" or any(_within(path, reserved) for reserved in RESERVED_MOUNTS):
        raise ApiError.invalid("mount_path", errors.MOUNT_PATH_RESERVED)
    return path


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


class Disks(Registry[Disk]):
    """One tenant's disks, their attachments, and the buckets they point at.

    Example::

        disks = Disks()
        disks.attach(sandbox, MountRequest("data", "/mnt/data"))
        [a.mount_path for a in disks.attached_to(sandbox)]   # ['/mnt/data']
    """

    def __init__(self) -> None:
        super().__init__(errors.DISK_NOT_FOUND, errors.DISK_NAME_TAKEN)
        #: Each bucket's files, by (endpoint, bucket).
        self._buckets: dict[tuple[str, str], FileSystem] = {}
        #: Attachments by sandbox id, in the order they were made.
        self._attached: dict[str, list[Attachment]] = {}

    # -- registrations ----------------------------------------------------------------------

    def create(self, ids: Identifiers, now: datetime, spec: DiskSpec) -> Disk:
        """Register a disk (400 for a bad name, 409 for a taken one).

        Example::

            disks.create(ids, clock.wall(), spec).id   # 'disk_...'
        """
        name = self.check_new_name(spec.name)
        disk = Disk(
            id=ids.disk_id(),
            name=name,
            config=spec.config,
            credentials=spec.credentials,
            created_at=now,
        )
        return self.add(disk)

    def rotate_credentials(self, ref: str, credentials: DiskCredentials) -> Disk:
        """Replace a disk's stored credentials.

        Example::

            disks.rotate_credentials("data", DiskCredentials("a2", "s2"))
        """
        disk = self.get(ref)
        disk.credentials = credentials
        return disk

    def delete(self, ref: str) -> Disk:
        """Forget a registration (the bucket's files stay); 409 while it is attached.

        Example::

            disks.delete("data")
        """
        disk = self.get(ref)
        if any(a.disk is disk for attachments in self._attached.values() for a in attachments):
            raise ApiError(409, errors.DISK_ATTACHED)
        self.remove(disk)
        return disk

    def files(self, disk: Disk) -> FileSystem:
        """The tree of the disk's bucket (empty until something is written).

        Example::

            disks.files(disk).read("/report.txt")
        """
        tree = self._buckets.get(disk.bucket_key)
        if tree is None:
            tree = self._buckets[disk.bucket_key] = FileSystem(image=False)
        return tree

    # -- attachments ------------------------------------------------------------------------

    def attach(self, sandbox: Sandbox, wanted: MountRequest) -> Attachment:
        """Mount a disk in a running sandbox (409 otherwise); see :meth:`plan` for the checks.

        Example::

            disks.attach(sandbox, MountRequest("data", "/mnt/data"))
        """
        planned = self.plan([wanted], sandbox)
        if sandbox.status is not Status.RUNNING:
            raise ApiError.conflict(errors.DISK_NOT_RUNNING, sandbox.status.value)
        return self.mount(sandbox, planned)[0]

    def plan(
        self, wanted: Sequence[MountRequest], sandbox: Sandbox | None = None
    ) -> list[tuple[Disk, str]]:
        """Check mounts before making any: each disk exists (404), each path is one a disk may
        take (400) and none is taken by, or nests with, another of these mounts or one the
        sandbox already has (409). The disks and normalized paths.

        Example::

            disks.plan([MountRequest("data", "/mnt/data/")])   # [(<Disk data>, '/mnt/data')]
        """
        taken = [a.mount_path for a in self._attached.get(sandbox.id, ())] if sandbox else []
        planned: list[tuple[Disk, str]] = []
        for request in wanted:
            disk = self.get(request.disk)
            path = check_mount_path(request.mount_path)
            if request.sub_path not in (None, "", "/"):
                # A mount shows the whole bucket; a part of it cannot be mounted on its own.
                raise ApiError.invalid("sub_path", errors.SUB_PATH_UNSUPPORTED)
            if any(_within(path, other) or _within(other, path) for other in taken):
                raise ApiError(409, errors.MOUNT_PATH_TAKEN)
            taken.append(path)
            planned.append((disk, path))
        return planned

    def mount(self, sandbox: Sandbox, planned: Sequence[tuple[Disk, str]]) -> list[Attachment]:
        """Make the mounts :meth:`plan` checked, whatever the sandbox's status (a create
        request's disks mount while the sandbox is being created): 400, and nothing mounted,
        when a mount point cannot be made.

        Example::

            disks.mount(sandbox, disks.plan([MountRequest("data", "/mnt/data")]))
        """
        for _, path in planned:
            # The mount point exists in the sandbox, as on a real host: `ls` of its parent
            # shows it.
            try:
                sandbox.fs.mkdir(path, parents=True)
            except FsError as exc:  # a file where the mount point (or a directory above) goes
                raise ApiError.invalid("mount_path", str(exc)) from None
        made = [Attachment(disk, sandbox, path) for disk, path in planned]
        if made:
            self._attached.setdefault(sandbox.id, []).extend(made)
        return made

    def detach(self, sandbox: Sandbox, ref: str, mount_path: str | None) -> bool:
        """Unmount the disk ``ref`` from the sandbox: at ``mount_path``, or everywhere when it
        is empty. Whether anything was mounted there (404 only for an unknown disk).

        Example::

            disks.detach(sandbox, "data", "/mnt/data")   # True
        """
        disk = self.get(ref)
        path = check_mount_path(mount_path) if mount_path else None
        attachments = self._attached.get(sandbox.id, [])
        kept = [a for a in attachments if a.disk is not disk or (path and a.mount_path != path)]
        if len(kept) == len(attachments):
            return False
        if kept:
            self._attached[sandbox.id] = kept
        else:
            del self._attached[sandbox.id]
        return True

    def attached_to(self, sandbox: Sandbox) -> list[Attachment]:
        """The sandbox's attachments, in the order they were made.

        Example::

            [a.view() for a in disks.attached_to(sandbox)]
        """
        return list(self._attached.get(sandbox.id, ()))

    def state(self) -> list[dict[str, Any]]:
        """Each disk's view with where it is mounted now (for the control API's snapshot).

        Example::

            disks.state()   # [{'id': 'disk_...', ..., 'mounts': [{'sandbox_id': ..., ...}]}]
        """
        mounts: dict[str, list[dict[str, str]]] = {}
        for attachments in self._attached.values():
            for a in attachments:
                mounts.setdefault(a.disk.id, []).append(
                    {"sandbox_id": a.sandbox.id, "mount_path": a.mount_path}
                )
        return [{**disk.view(), "mounts": mounts.get(disk.id, [])} for disk in self]

    def mounts(self, sandbox: Sandbox) -> list[Mount]:
        """What the sandbox's commands and files API see mounted: (path, the bucket's tree).

        Example::

            disks.mounts(sandbox)   # [('/mnt/data', <FileSystem>)]
        """
        attachments = self._attached.get(sandbox.id)
        if not attachments:
            return []
        return [(a.mount_path, self.files(a.disk)) for a in attachments]

    def leave_all(self, sandbox: Sandbox) -> None:
        """A sandbox that ended has nothing mounted (its disks may then be deleted).

        Example::

            disks.leave_all(sandbox)   # when it reaches destroyed or failed
        """
        self._attached.pop(sandbox.id, None)
