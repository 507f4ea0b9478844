"""The cleanup guard: which leases may be touched now, by whom, and what runs on each.

Per lease (keyed by API URL and sandbox id) the provider records whether a release or destroy
is in flight (``closing``) and whether a cleanup could not be confirmed (``unconfirmed``);
``resume`` is refused with :class:`~pytest_createos.errors.CleanupPendingError` in either case.
Every operation runs as its own task, and those on an existing lease are tracked per lease, so
that a release can cancel exactly that lease's in-flight work and await its cleanup, and
``shutdown`` can cancel everything. The ownership checks (company and environment ids, the
lease's binding metadata) live here too.

Everything here is internal: :class:`~pytest_createos.provider.LeaseProvider` is built on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from .._client import valid_id
from ..errors import (
    EXPIRED_LEASE_MESSAGE,
    CleanupPendingError,
    LeaseError,
    LeaseOwnershipError,
    ProviderShutDownError,
)
from .client import _SandboxApi
from .config import _Settings
from .results import Lease

__all__: list[str] = []

T = TypeVar("T")

#: How the guard keys a lease: its API URL and its sandbox id.
LeaseKey = tuple[str, str]


class _CleanupGuard(_SandboxApi):
    """Per-lease cleanup state and in-flight operations; ``LeaseProvider.__init__`` sets them."""

    _closing: set[LeaseKey]
    _unconfirmed: set[LeaseKey]
    _ops: dict[LeaseKey, set[asyncio.Task[Any]]]
    _tasks: set[asyncio.Task[Any]]
    _shut_down: bool

    # -- internals: bookkeeping --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._shut_down:
            raise ProviderShutDownError()

    def _check_cleanup(self, key: LeaseKey) -> None:
        if key in self._closing:
            raise CleanupPendingError(reason="closing")
        if key in self._unconfirmed:
            raise CleanupPendingError(reason="unconfirmed")

    def _owned_sandbox(
        self, lease: Lease, company_id: str, environment_id: str, cfg: _Settings
    ) -> str:
        sandbox_id = lease.provider_lease_id
        if sandbox_id is None:
            raise LeaseError(EXPIRED_LEASE_MESSAGE)
        _check_owner(lease.metadata, company_id, environment_id)
        if lease.metadata.get("apiUrl") != cfg.api_url or lease.metadata.get("sandboxId") != (
            sandbox_id
        ):
            raise LeaseOwnershipError()
        if not valid_id(sandbox_id):
            raise LeaseOwnershipError()
        return sandbox_id

    async def _tracked(
        self,
        key: LeaseKey | None,
        coro: Coroutine[Any, Any, T],
        *,
        cancel_error: Callable[[], LeaseError] | None,
    ) -> T:
        # Each operation runs in its own task so that a release (or shutdown) can cancel
        # exactly that operation -- not the caller's whole task -- and await its cleanup.
        task: asyncio.Task[T] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        if key is not None and cancel_error is not None:
            self._ops.setdefault(key, set()).add(task)
        try:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.done() and task.cancelled():
                    # Cancelled from inside the provider: by a release of this lease or by
                    # shutdown. Tell the caller why instead of a bare CancelledError.
                    if self._shut_down:
                        raise ProviderShutDownError() from None
                    if cancel_error is not None:
                        raise cancel_error() from None
                    raise
                # The caller itself was cancelled: stop the operation and let it clean up.
                task.cancel()
                await asyncio.wait({task})
                raise
        finally:
            self._tasks.discard(task)
            if key is not None:
                ops = self._ops.get(key)
                if ops is not None:
                    ops.discard(task)
                    if not ops:
                        del self._ops[key]

    async def _cancel_ops(self, key: LeaseKey) -> None:
        tasks = [task for task in self._ops.get(key, ()) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


def _check_ids(company_id: object, environment_id: object) -> None:
    if not isinstance(company_id, str) or not company_id:
        raise LeaseError("company_id must be a non-empty string")
    if not isinstance(environment_id, str) or not environment_id:
        raise LeaseError("environment_id must be a non-empty string")


def _check_owner(metadata: Mapping[str, Any], company_id: str, environment_id: str) -> None:
    if not isinstance(metadata, Mapping) or (
        metadata.get("companyId") != company_id or metadata.get("environmentId") != environment_id
    ):
        raise LeaseOwnershipError()
