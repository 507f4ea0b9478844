"""The reference :class:`~pytest_createos.host.LeaseHost` as an explorer's host factory.

Example::

    report = await createos_kit.explore(reference_host(), "release-resume")
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pytest_createos._explore.runner import HostFactory

if TYPE_CHECKING:
    from pytest_createos.kit import ConformanceKit, LeaseHostAdapter

__all__ = ["lease_params", "reference_host"]

#: The reference provider's shape on the fake (the plugin's ``createos_config`` uses it too).
SHAPE = "s-1vcpu-1gb"


def lease_params(kit: ConformanceKit, **config: Any) -> dict[str, Any]:
    """``company_id``, ``environment_id`` and ``config`` for the reference provider on the
    kit's fake (as ``createos_lease_params`` gives them), with ``config`` entries added.

    Example::

        params = lease_params(kit, reuseLease=True)
        host = LeaseHost(kit.watch(provider), **params)
    """
    server = kit.server
    base = {
        "apiUrl": server.url,
        "apiKey": server.api_key,
        "shape": SHAPE,
        "requestSpacingMs": 0,
        "pollIntervalMs": 5,
        "timeoutMs": 30_000,
    }
    return {
        "company_id": "company-test",
        "environment_id": "env-test",
        "config": {**base, **config},
    }


def reference_host(*, reuse_lease: bool = True, **host_options: Any) -> HostFactory:
    """A factory of reference hosts: each run gets a fresh ``LeaseProvider`` the kit watches
    and a ``LeaseHost`` on it (``host_options`` go to ``LeaseHost``; backoff delays default
    to a few milliseconds, which the explorer's virtual time makes free anyway).

    Example::

        report = await createos_kit.explore(reference_host(), "resume-resume")
        report.assert_ok()
    """
    from pytest_createos.host import LeaseHost
    from pytest_createos.kit import LeaseHostAdapter
    from pytest_createos.provider import LeaseProvider

    options = {"base_delay_ms": 5, "max_delay_ms": 50, **host_options}

    @contextlib.asynccontextmanager
    async def make(kit: ConformanceKit) -> AsyncIterator[LeaseHostAdapter]:
        params = lease_params(kit, reuseLease=reuse_lease)
        async with LeaseProvider() as provider:
            yield LeaseHostAdapter(LeaseHost(kit.watch(provider), **params, **options))

    return make
