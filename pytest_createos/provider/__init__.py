"""The reference CreateOS lease provider: the lease lifecycle, with cleanup before resume.

A faithful asyncio port of the Paperclip CreateOS provider (contract §11). A *lease* is one
sandbox bound to a company and an environment. Hosts drive it through the hooks
:meth:`LeaseProvider.acquire`, :meth:`~LeaseProvider.resume`, :meth:`~LeaseProvider.release`,
:meth:`~LeaseProvider.destroy`, :meth:`~LeaseProvider.execute`,
:meth:`~LeaseProvider.realize_workspace`, :meth:`~LeaseProvider.probe`,
:meth:`~LeaseProvider.validate_config` and :meth:`~LeaseProvider.shutdown`.

The guard this package exists for: while a lease is being released or destroyed, or after a
cleanup that could not be confirmed, ``resume`` raises :class:`CleanupPendingError` with the
message ``CreateOS lease cleanup must finish before resume.``

Its modules follow the lease lifecycle's seams, each built on the ones listed before it:

- :mod:`~pytest_createos.provider.config`: :func:`validate_config` and the settings the other
  modules work from;
- :mod:`~pytest_createos.provider.results`: the values the hooks return (:class:`Lease`,
  :class:`ExecuteResult`, :class:`RealizedWorkspace`, :class:`ProbeResult`);
- :mod:`~pytest_createos.provider.client`: the sandbox API calls (status, pause and resume
  transitions, exec, delete) and what their answers mean for a lease;
- :mod:`~pytest_createos.provider.guard`: the cleanup guard (per-lease closing and unconfirmed
  state, in-flight operations) and the ownership checks;
- :mod:`~pytest_createos.provider.execution`: a command run as a managed process, its output
  stream, and the termination of its process tree;
- :mod:`~pytest_createos.provider.lifecycle`: :class:`LeaseProvider` and its hooks (acquire,
  resume, release, destroy, execute, realize_workspace, probe, shutdown).

Example:
    >>> import asyncio
    >>> async def main(url: str, key: str) -> None:
    ...     config = {"apiUrl": url, "apiKey": key, "shape": "s-1vcpu-1gb", "reuseLease": True}
    ...     async with LeaseProvider() as provider:
    ...         ids = {"company_id": "co", "environment_id": "env", "config": config}
    ...         lease = await provider.acquire(**ids)
    ...         result = await provider.execute(**ids, lease=lease, command="echo", args=["hi"])
    ...         assert result.stdout == "hi\\n"
    ...         await provider.release(**ids, provider_lease_id=lease.provider_lease_id,
    ...                                lease_metadata=lease.metadata)
"""

# The names in ``__all__``, and the public constants that were importable from here without
# being in it (they still are).
from .config import API_KEY_ENV, DEFAULT_API_URL, ConfigResult, validate_config
from .config import DEFAULT_POLL_INTERVAL_MS as DEFAULT_POLL_INTERVAL_MS
from .config import DEFAULT_REQUEST_SPACING_MS as DEFAULT_REQUEST_SPACING_MS
from .config import DEFAULT_TIMEOUT_MS as DEFAULT_TIMEOUT_MS
from .config import MAX_TIMEOUT_MS as MAX_TIMEOUT_MS
from .execution import MAX_RECONNECTS as MAX_RECONNECTS
from .execution import STDIN_PATH_PREFIX
from .execution import TERMINATE_GRACE_MS as TERMINATE_GRACE_MS
from .lifecycle import LEASE_MARKER_PATH, PROBE_TOKEN, WORKSPACE_DIR, LeaseProvider
from .results import ExecuteResult, Lease, ProbeResult, RealizedWorkspace

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_API_URL",
    "LEASE_MARKER_PATH",
    "PROBE_TOKEN",
    "STDIN_PATH_PREFIX",
    "WORKSPACE_DIR",
    "ConfigResult",
    "ExecuteResult",
    "Lease",
    "LeaseProvider",
    "ProbeResult",
    "RealizedWorkspace",
    "validate_config",
]
