"""A sandbox's bandwidth: its quota view and recharges.

Every sandbox of the fake is unmetered (quota ``-1``, as on the real unmetered plan; a create
may not set a quota), so a recharge changes nothing — but it is still a cost-incurring call:
a tenant without credit gets 402 before anything else is looked at, the owner check aside.

Example::

    recharge(tenant, sandbox, 1 << 30)   # the unchanged view; 402 without credit
"""

from __future__ import annotations

from typing import Any

from fake_server.errors import ApiError
from fake_server.sandbox import Sandbox
from fake_server.tenants import Tenant

__all__ = ["UNMETERED", "bandwidth_view", "recharge"]

#: The quota of an unmetered sandbox.
UNMETERED = -1


def bandwidth_view(sandbox: Sandbox) -> dict[str, Any]:
    """The BandwidthView of ``GET /v1/sandboxes/{id}/bandwidth``.

    Example::

        bandwidth_view(sandbox)["quota_bytes"]   # -1
    """
    return {
        "id": sandbox.id,
        "quota_bytes": UNMETERED,
        "used_bytes": 0,
        "ingress_bytes": 0,
        "remaining_bytes": UNMETERED,
        "capped": False,
    }


def recharge(tenant: Tenant, sandbox: Sandbox, add_bytes: int | None) -> dict[str, Any]:
    """Add ``add_bytes`` to the sandbox's quota: 400 unless a positive integer, 402 without
    credit, and a no-op on an unmetered sandbox (which every sandbox of the fake is).

    Example::

        recharge(tenant, sandbox, 1024)   # {'id': 'sb_...', 'quota_bytes': -1, ...}
    """
    if add_bytes is None:
        raise ApiError.invalid("add_bytes", "is required")
    if add_bytes <= 0:
        raise ApiError.invalid("add_bytes", "must be a positive integer")
    tenant.check_credit()
    return bandwidth_view(sandbox)
