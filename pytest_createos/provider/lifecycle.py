"""The lease lifecycle: :class:`LeaseProvider` and its hooks, with cleanup before resume.

``acquire`` creates a sandbox, prepares :data:`WORKSPACE_DIR` and writes a random marker to
:data:`LEASE_MARKER_PATH`; ``resume`` reads the marker back to prove that the sandbox is the one
it prepared, or returns an expired lease; ``release`` pauses the lease for reuse or deletes it
and ``destroy`` deletes it, both after cancelling and awaiting the lease's in-flight
operations; ``probe`` echoes :data:`PROBE_TOKEN` through a throwaway lease. The hooks check
with the cleanup guard before they send anything: while a lease is being released or destroyed,
or after a cleanup that could not be confirmed, ``resume`` raises
:class:`~pytest_createos.errors.CleanupPendingError`.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

import aiohttp

from .._client import CreateosClient, RequestPacer, valid_id
from ..errors import (
    GUARANTEED_EXPIRY_MESSAGE,
    LEASE_CLOSING_MESSAGE,
    SETUP_CLEANUP_UNCONFIRMED_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CommandCancelledError,
    CreateosTransportError,
    LeaseConfigError,
    LeaseError,
    LeaseOwnershipError,
    TransitionError,
)
from .client import _TERMINAL, _SandboxGone
from .config import MAX_TIMEOUT_MS, ConfigResult, _Settings, _settings, validate_config
from .execution import _Execution, _shell_quote, _validate_command
from .guard import LeaseKey, _check_ids, _check_owner
from .results import ExecuteResult, Lease, ProbeResult, RealizedWorkspace, _expired

__all__ = ["LEASE_MARKER_PATH", "PROBE_TOKEN", "WORKSPACE_DIR", "LeaseProvider"]

#: Where every lease's work happens inside the sandbox.
WORKSPACE_DIR: Final = "/paperclip-workspace"
#: The random marker file that proves, on resume, that the sandbox is the one we prepared.
LEASE_MARKER_PATH: Final = "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease"
#: What :meth:`LeaseProvider.probe` echoes and expects back.
PROBE_TOKEN: Final = "paperclip-createos-ready"

_MARKER_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class LeaseProvider(_Execution):
    """The reference CreateOS lease provider (one per worker).

    It keeps, per lease, whether a release/destroy is in flight (``closing``) and whether a
    cleanup could not be confirmed (``unconfirmed``), plus the lease's in-flight operations so
    that a release can cancel and await them. All methods take keyword arguments only.

    Construction options: ``session`` (an ``aiohttp.ClientSession`` to reuse; otherwise one is
    created on first use and closed by :meth:`shutdown`), ``environ`` (where the
    ``CREATEOS_API_KEY`` fallback is read; default ``os.environ``), ``terminate_timeout_ms``
    (the fresh deadline for terminating a process tree) and ``reconnect_delay_ms`` (the pause
    before reconnecting to a process output stream).

    Example:
        >>> async def main(config: dict[str, object]) -> None:
        ...     async with LeaseProvider() as provider:
        ...         lease = await provider.acquire(company_id="co", environment_id="env",
        ...                                        config=config)
    """

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession | None = None,
        environ: Mapping[str, str] | None = None,
        terminate_timeout_ms: int = 10_000,
        reconnect_delay_ms: int = 250,
    ) -> None:
        self._session = session
        self._owns_session = session is None
        self._environ = environ
        self._terminate_timeout_s = terminate_timeout_ms / 1000
        self._reconnect_delay_s = reconnect_delay_ms / 1000
        self._pacer = RequestPacer()
        self._closing: set[LeaseKey] = set()
        self._unconfirmed: set[LeaseKey] = set()
        self._ops: dict[LeaseKey, set[asyncio.Task[Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._shut_down = False

    async def __aenter__(self) -> LeaseProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- state, for hosts and tests ----------------------------------------------------------

    def is_closing(self, provider_lease_id: str) -> bool:
        """True while a release or destroy of that lease is in flight.

        Example:
            >>> LeaseProvider().is_closing("sb_1")
            False
        """
        return any(key[1] == provider_lease_id for key in self._closing)

    def is_cleanup_unconfirmed(self, provider_lease_id: str) -> bool:
        """True when a cleanup of that lease could not be confirmed (destroy it).

        Example:
            >>> LeaseProvider().is_cleanup_unconfirmed("sb_1")
            False
        """
        return any(key[1] == provider_lease_id for key in self._unconfirmed)

    # -- hooks -------------------------------------------------------------------------------

    def validate_config(self, config: Mapping[str, Any]) -> ConfigResult:
        """Validate ``config`` as :func:`validate_config` does, with this provider's environ.

        Example:
            >>> LeaseProvider(environ={}).validate_config({"shape": "s", "apiKey": "k"}).ok
            True
        """
        return validate_config(config, environ=self._environ)

    async def acquire(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        run_id: str | None = None,
        requested_expires_at: object | None = None,
    ) -> Lease:
        """Create a sandbox, prepare the workspace and marker, and return its lease.

        Refuses a guaranteed-expiry request before sending anything. If any step after the
        sandbox exists fails, the sandbox is deleted; if that delete fails too, a
        :class:`CleanupUnconfirmedError` names the sandbox. The metadata never holds the key.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object]) -> None:
            ...     lease = await provider.acquire(company_id="co", environment_id="env",
            ...                                    config=config, run_id="run-1")
            ...     assert lease.metadata["marker"]
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        if requested_expires_at is not None:
            raise LeaseError(GUARANTEED_EXPIRY_MESSAGE)
        return await self._tracked(
            None, self._acquire(cfg, company_id, environment_id, run_id), cancel_error=None
        )

    async def resume(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> Lease:
        """Resume a lease, or return an expired lease when it cannot be kept.

        Raises :class:`LeaseOwnershipError` (nothing sent) for another company's or
        environment's lease, and :class:`CleanupPendingError` while the lease is closing or
        after an unconfirmed cleanup. Returns an expired lease for a bad marker, a changed
        shape/rootfs/region or API URL, a missing or terminal sandbox, or a marker that does not
        read back identically. Transient errors (5xx, timeouts) propagate unchanged.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     lease = await provider.resume(company_id="co", environment_id="env",
            ...                                   config=config,
            ...                                   provider_lease_id=lease.provider_lease_id,
            ...                                   lease_metadata=lease.metadata)
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        _check_owner(lease_metadata, company_id, environment_id)
        if provider_lease_id is None or not valid_id(provider_lease_id):
            return _expired()
        key = (cfg.api_url, provider_lease_id)
        self._check_cleanup(key)
        if not _metadata_matches(lease_metadata, cfg, provider_lease_id):
            return _expired()
        return await self._tracked(
            key,
            self._resume(cfg, key, lease_metadata),
            cancel_error=lambda: CleanupPendingError(reason="closing"),
        )

    async def release(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None:
        """Release a lease: pause it for reuse (``reuseLease``) or delete it.

        Cancels and awaits the lease's in-flight operations first. A 404 counts as deleted.
        Refuses to pause a lease whose process cleanup is unconfirmed
        (:class:`CleanupUnconfirmedError`) and a second concurrent cleanup of the same lease
        (:class:`CleanupInProgressError`).

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     await provider.release(company_id="co", environment_id="env", config=config,
            ...                            provider_lease_id=lease.provider_lease_id,
            ...                            lease_metadata=lease.metadata)
        """
        await self._cleanup(
            company_id, environment_id, config, provider_lease_id, lease_metadata, destroy=False
        )

    async def destroy(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None:
        """Delete the lease's sandbox (404 counts as deleted) and clear unconfirmed state.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     await provider.destroy(company_id="co", environment_id="env", config=config,
            ...                            provider_lease_id=lease.provider_lease_id,
            ...                            lease_metadata=lease.metadata)
        """
        await self._cleanup(
            company_id, environment_id, config, provider_lease_id, lease_metadata, destroy=True
        )

    async def execute(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        lease: Lease,
        command: str,
        args: Sequence[str] = (),
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        timeout_ms: int | None = None,
    ) -> ExecuteResult:
        """Run one command as a managed process and collect its output.

        The command runs through ``/bin/bash -lc`` with every word single-quoted; ``env`` is
        exported inside the script (names validated before anything is sent); ``stdin`` is
        staged as a file and removed afterwards. On timeout the partial output comes back with
        ``timed_out=True``. On a timeout, an untrustworthy stream or cancellation the process
        tree is terminated; if that cannot be confirmed the lease is marked unconfirmed.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     result = await provider.execute(company_id="co", environment_id="env",
            ...                                     config=config, lease=lease, command="cat",
            ...                                     stdin="hello", timeout_ms=5_000)
            ...     assert result.stdout == "hello"
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        _validate_command(command, args, cwd, env)
        if timeout_ms is not None and (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, int)
            or not 1 <= timeout_ms <= MAX_TIMEOUT_MS
        ):
            raise LeaseError(f"CreateOS command timeout_ms must be from 1 to {MAX_TIMEOUT_MS}")
        sandbox_id = self._owned_sandbox(lease, company_id, environment_id, cfg)
        key = (cfg.api_url, sandbox_id)
        if key in self._closing:
            raise LeaseError(LEASE_CLOSING_MESSAGE, retryable=False)
        if key in self._unconfirmed:
            raise CleanupUnconfirmedError(sandbox_id=sandbox_id)
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else stdin
        timeout_s = (timeout_ms if timeout_ms is not None else cfg.timeout_ms) / 1000
        return await self._tracked(
            key,
            self._execute(cfg, key, command, args, cwd, env, stdin_bytes, timeout_s),
            cancel_error=CommandCancelledError,
        )

    async def realize_workspace(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        lease: Lease,
    ) -> RealizedWorkspace:
        """Return where the lease's work runs; no request is sent.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     workspace = await provider.realize_workspace(
            ...         company_id="co", environment_id="env", config=config, lease=lease)
            ...     assert workspace.cwd == WORKSPACE_DIR
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        sandbox_id = self._owned_sandbox(lease, company_id, environment_id, cfg)
        return RealizedWorkspace(WORKSPACE_DIR, {"sandboxId": sandbox_id, "cwd": WORKSPACE_DIR})

    async def probe(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
    ) -> ProbeResult:
        """Acquire a throwaway lease, run one echo command, and always delete the sandbox.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object]) -> None:
            ...     result = await provider.probe(company_id="co", environment_id="env",
            ...                                   config=config)
            ...     print(result.summary)
        """
        self._check_open()
        try:
            cfg = _settings(config, self._environ)
        except LeaseConfigError as exc:
            return ProbeResult(False, str(exc))
        try:
            lease = await self.acquire(
                company_id=company_id, environment_id=environment_id, config=config
            )
        except LeaseError as exc:
            return ProbeResult(False, str(exc))
        sandbox_id = lease.provider_lease_id
        assert sandbox_id is not None
        outcome: ProbeResult
        try:
            result = await self.execute(
                company_id=company_id,
                environment_id=environment_id,
                config=config,
                lease=lease,
                command="/bin/echo",
                args=[PROBE_TOKEN],
                cwd=WORKSPACE_DIR,
            )
            if result.exit_code == 0 and PROBE_TOKEN in result.stdout:
                outcome = ProbeResult(True, f"CreateOS sandbox {sandbox_id} ran a command")
            else:
                outcome = ProbeResult(False, "CreateOS probe command did not succeed")
        except LeaseError as exc:
            outcome = ProbeResult(False, str(exc))
        finally:
            try:
                await self._delete(self._client(cfg), sandbox_id)
                self._unconfirmed.discard((cfg.api_url, sandbox_id))
            except LeaseError:
                self._unconfirmed.add((cfg.api_url, sandbox_id))
                outcome = ProbeResult(
                    False, SETUP_CLEANUP_UNCONFIRMED_MESSAGE.format(sandbox_id=sandbox_id)
                )
        return outcome

    async def shutdown(self) -> None:
        """Cancel and await every in-flight operation; refuse all later calls.

        Example:
            >>> import asyncio
            >>> asyncio.run(LeaseProvider().shutdown())
        """
        if self._shut_down:
            return
        self._shut_down = True
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    # -- internals: lifecycle ----------------------------------------------------------------

    async def _acquire(
        self, cfg: _Settings, company_id: str, environment_id: str, run_id: str | None
    ) -> Lease:
        client = self._client(cfg)
        body: dict[str, Any] = {"shape": cfg.shape}
        if cfg.rootfs is not None:
            body["rootfs"] = cfg.rootfs
        if cfg.region is not None:
            body["region"] = cfg.region
        body["ingress_enabled"] = False
        reply = await client.json("POST", "/sandboxes", "create sandbox", body=body)
        assert reply.data is not None
        sandbox_id = reply.data.get("id")
        if not valid_id(sandbox_id):
            raise CreateosTransportError("create sandbox", "invalid response")
        assert isinstance(sandbox_id, str)
        try:
            try:
                await self._transition(client, sandbox_id, "running", cfg)
            except _SandboxGone:
                raise TransitionError("running", "gone") from None
            code, _ = await self._exec(
                client,
                sandbox_id,
                "/bin/bash",
                ["-lc", f"mkdir -p -- {_shell_quote(WORKSPACE_DIR)}"],
                "prepare workspace",
            )
            if code != 0:
                raise LeaseError(f"CreateOS workspace preparation failed: exit {code}")
            marker = str(uuid.uuid4())
            await client.json(
                "PUT",
                client.path("sandboxes", sandbox_id, "files"),
                "write lease marker",
                params={"path": LEASE_MARKER_PATH},
                raw=marker.encode(),
            )
        except _SandboxGone:
            await self._discard_failed(client, cfg, sandbox_id, None)
            raise TransitionError("running", "gone") from None
        except BaseException as exc:
            await self._discard_failed(client, cfg, sandbox_id, exc)
            raise
        metadata: dict[str, Any] = {
            "provider": "createos",
            "companyId": company_id,
            "environmentId": environment_id,
            "apiUrl": cfg.api_url,
            "sandboxId": sandbox_id,
            "shape": cfg.shape,
            "rootfs": cfg.rootfs,
            "region": cfg.region,
            "reuseLease": cfg.reuse_lease,
            "marker": marker,
            "workspace": WORKSPACE_DIR,
        }
        if run_id is not None:
            metadata["runId"] = run_id
        return Lease(sandbox_id, metadata)

    async def _discard_failed(
        self,
        client: CreateosClient,
        cfg: _Settings,
        sandbox_id: str,
        cause: BaseException | None,
    ) -> None:
        try:
            await self._delete(client, sandbox_id)
        except asyncio.CancelledError:
            self._unconfirmed.add((cfg.api_url, sandbox_id))
            raise
        except LeaseError as delete_error:
            self._unconfirmed.add((cfg.api_url, sandbox_id))
            if isinstance(cause, Exception) or cause is None:
                raise CleanupUnconfirmedError(
                    SETUP_CLEANUP_UNCONFIRMED_MESSAGE.format(sandbox_id=sandbox_id),
                    sandbox_id=sandbox_id,
                ) from (cause or delete_error)
            # The caller was cancelled: keep the cancellation; the state above records it.

    async def _resume(self, cfg: _Settings, key: LeaseKey, metadata: Mapping[str, Any]) -> Lease:
        sandbox_id = key[1]
        client = self._client(cfg)
        try:
            status = await self._get_status(client, sandbox_id)
            if status in _TERMINAL:
                return _expired()
            await self._transition(client, sandbox_id, "running", cfg)
            code, stdout = await self._exec(
                client, sandbox_id, "/bin/cat", [LEASE_MARKER_PATH], "read lease marker"
            )
        except _SandboxGone:
            return _expired()
        if code != 0 or stdout != metadata.get("marker"):
            return _expired()
        return Lease(sandbox_id, {**metadata, "resumedLease": True})

    async def _cleanup(
        self,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        metadata: Mapping[str, Any],
        *,
        destroy: bool,
    ) -> None:
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        if provider_lease_id is None:
            return  # an expired lease has nothing left to clean up
        _check_owner(metadata, company_id, environment_id)
        if (
            not valid_id(provider_lease_id)
            or metadata.get("sandboxId") != provider_lease_id
            or metadata.get("apiUrl") != cfg.api_url
        ):
            raise LeaseOwnershipError()
        key = (cfg.api_url, provider_lease_id)
        if key in self._closing:
            raise CleanupInProgressError()
        self._closing.add(key)
        try:
            reuse = cfg.reuse_lease and metadata.get("reuseLease") is True and not destroy
            await self._tracked(None, self._cleanup_lease(cfg, key, reuse), cancel_error=None)
        finally:
            self._closing.discard(key)

    async def _cleanup_lease(self, cfg: _Settings, key: LeaseKey, reuse: bool) -> None:
        # In-flight work goes first: its process-tree cleanup must finish (or be recorded as
        # unconfirmed) before we decide between pausing and deleting.
        await self._cancel_ops(key)
        client = self._client(cfg)
        sandbox_id = key[1]
        if not reuse:
            try:
                await self._delete(client, sandbox_id)
            except BaseException:
                # The sandbox may or may not be going away; nobody may resume it blindly.
                self._unconfirmed.add(key)
                raise
            self._unconfirmed.discard(key)
            return
        if key in self._unconfirmed:
            raise CleanupUnconfirmedError(sandbox_id=sandbox_id)
        try:
            await self._transition(client, sandbox_id, "paused", cfg)
        except _SandboxGone:
            return  # nothing left to keep warm; the next resume expires the lease


# --------------------------------------------------------------------------------------------
# Helpers


def _metadata_matches(metadata: Mapping[str, Any], cfg: _Settings, sandbox_id: str) -> bool:
    marker = metadata.get("marker")
    return (
        metadata.get("sandboxId") == sandbox_id
        and metadata.get("apiUrl") == cfg.api_url
        and isinstance(marker, str)
        and _MARKER_RE.fullmatch(marker) is not None
        and metadata.get("shape") == cfg.shape
        and metadata.get("rootfs") == cfg.rootfs
        and metadata.get("region") == cfg.region
    )
