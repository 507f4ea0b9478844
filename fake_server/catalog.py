"""The static catalog the fake serves: shapes, root filesystems and its region.

Shape ids are the ones the real service published (see the contract, section 3).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_REGION", "DEFAULT_ROOTFS", "DESKTOP_ROOTFS", "ROOTFS", "SHAPES", "Shape"]


@dataclass(frozen=True, slots=True)
class Shape:
    """A sizing preset a sandbox is created from."""

    id: str
    vcpu: int
    mem_mib: int
    default_disk_mib: int
    cpu_quota_pct: int

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "vcpu": self.vcpu,
            "mem_mib": self.mem_mib,
            "default_disk_mib": self.default_disk_mib,
            "cpu_quota_pct": self.cpu_quota_pct,
        }


def _shape(id: str, vcpu_pct: int, mem_mib: int) -> Shape:
    # Fractional shapes still report one whole vCPU and cap it with cpu_quota_pct.
    return Shape(id, max(1, vcpu_pct // 100), mem_mib, max(2048, mem_mib * 4), vcpu_pct)


SHAPES: dict[str, Shape] = {
    s.id: s
    for s in (
        _shape("s-1vcpu-256mb", 100, 256),
        _shape("s-0.25vcpu-512mb", 25, 512),
        _shape("s-0.5vcpu-1gb", 50, 1024),
        _shape("s-1vcpu-1gb", 100, 1024),
        _shape("s-1vcpu-2gb", 100, 2048),
        _shape("s-2vcpu-2gb", 200, 2048),
        _shape("s-2vcpu-4gb", 200, 4096),
        _shape("s-4vcpu-4gb", 400, 4096),
        _shape("s-4vcpu-8gb", 400, 8192),
        _shape("s-8vcpu-8gb", 800, 8192),
        _shape("s-8vcpu-16gb", 800, 16384),
    )
}

DEFAULT_ROOTFS = "devbox:1"

#: Built-in root filesystems: name -> description. Template ids (``tpl_...``) are accepted too.
ROOTFS: dict[str, str] = {
    "devbox:1": "Debian-based development image",
    "desktop:1": "Desktop image for computer use",
}

#: The root filesystems with a graphical desktop (the ``…/computer`` routes need one).
DESKTOP_ROOTFS = frozenset({"desktop:1"})

DEFAULT_REGION = "us"


def rootfs_catalog() -> dict[str, object]:
    """The ``GET /v1/rootfs`` payload."""
    return {
        "rootfs": list(ROOTFS),
        "default": DEFAULT_ROOTFS,
        "entries": [{"name": name, "description": text} for name, text in ROOTFS.items()],
    }


def is_known_rootfs(name: str) -> bool:
    """Whether ``name`` is a built-in rootfs or a template id."""
    return name in ROOTFS or (name.startswith("tpl_") and len(name) > 4)
