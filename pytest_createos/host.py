"""A reference lease host: the right way to drive a CreateOS lease provider.

Copy this when you write a host or scheduler. The rules it follows:

1. Lifecycle calls (acquire aside) are serialised per lease, so a ``resume`` issued while a
   ``release`` of the same lease is in flight waits for it instead of racing it.
2. When the provider still refuses with ``CreateOS lease cleanup must finish before resume.``
   (for example because another worker is releasing the lease), back off exponentially --
   bounded, with jitter drawn from a seeded generator -- and retry.
3. A lease whose cleanup is unconfirmed is never resumed or paused: destroy it and acquire a
   fresh lease instead. An expired lease is replaced by a fresh one too.

It is also the "robust host" that the conformance kit must pass.

Example:
    >>> async def main(config: dict[str, object]) -> None:
    ...     from pytest_createos.provider import LeaseProvider
    ...     async with LeaseProvider() as provider:
    ...         host = LeaseHost(provider, company_id="co", environment_id="env", config=config)
    ...         lease = await host.acquire()
    ...         await host.release(lease)
    ...         lease = await host.resume(lease)  # waits, retries or re-acquires as needed
    ...         await host.destroy(lease)
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import CleanupUnconfirmedError, LeaseError, is_cleanup_pending
from .provider import ExecuteResult, Lease

__all__ = ["HostEvent", "LeaseHost", "LeaseProviderLike"]


class LeaseProviderLike(Protocol):
    """The provider hooks :class:`LeaseHost` uses (``LeaseProvider`` satisfies it).

    Example:
        >>> from pytest_createos.provider import LeaseProvider
        >>> provider: LeaseProviderLike = LeaseProvider()
    """

    async def acquire(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        run_id: str | None = None,
        requested_expires_at: object | None = None,
    ) -> Lease: ...

    async def resume(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> Lease: ...

    async def release(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None: ...

    async def destroy(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None: ...

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
    ) -> ExecuteResult: ...

    async def shutdown(self) -> None: ...


@dataclass(frozen=True)
class HostEvent:
    """One decision the host made, kept in :attr:`LeaseHost.events` for inspection.

    ``action`` is one of ``acquire``, ``resume``, ``resumed``, ``expired``, ``backoff``,
    ``replace``, ``release``, ``release-destroy``, ``destroy``.

    Example:
        >>> HostEvent("backoff", "sb_1", 0.05).action
        'backoff'
    """

    action: str
    lease_id: str | None
    delay_s: float | None = None


class LeaseHost:
    """Drives a provider for one company and environment, safely.

    ``seed`` feeds the jitter generator so a run is reproducible; ``max_attempts`` bounds the
    retries of a refused resume, of a cleanup refused because another one is running, and of
    a resume, release or destroy whose answer was lost or a retryable error (5xx, 429: the
    call may have taken effect, so it is asked again; the lease's lock stays held meanwhile);
    delays grow as ``base_delay_ms * 2**n`` up to ``max_delay_ms``, each jittered into
    ``[delay/2, delay]``. ``sleep`` is injectable for tests. Every decision is appended to
    :attr:`events`.

    Example:
        >>> async def main(provider: LeaseProviderLike, config: dict[str, object]) -> None:
        ...     host = LeaseHost(provider, company_id="co", environment_id="env",
        ...                      config=config, seed=7, base_delay_ms=10)
        ...     lease = await host.acquire(run_id="run-1")
        ...     result = await host.execute(lease, "echo", args=["hi"])
    """

    def __init__(
        self,
        provider: LeaseProviderLike,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        seed: int = 0,
        max_attempts: int = 8,
        base_delay_ms: float = 50,
        max_delay_ms: float = 2_000,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.provider = provider
        self.company_id = company_id
        self.environment_id = environment_id
        self.config = config
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_ms / 1000
        self.max_delay_s = max_delay_ms / 1000
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._locks: dict[str, asyncio.Lock] = {}
        #: Decisions in order; see :class:`HostEvent`.
        self.events: list[HostEvent] = []

    def _ids(self) -> dict[str, Any]:
        return {
            "company_id": self.company_id,
            "environment_id": self.environment_id,
            "config": self.config,
        }

    def _lease_args(self, lease: Lease) -> dict[str, Any]:
        return {
            **self._ids(),
            "provider_lease_id": lease.provider_lease_id,
            "lease_metadata": lease.metadata,
        }

    def _lock(self, lease: Lease) -> asyncio.Lock:
        key = lease.provider_lease_id or ""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def backoff_delay(self, attempt: int) -> float:
        """Return the jittered delay in seconds before retry number ``attempt`` (from 1).

        Example:
            >>> host = LeaseHost.__new__(LeaseHost)
            >>> host.base_delay_s, host.max_delay_s, host._rng = 0.1, 1.0, random.Random(0)
            >>> 0.05 <= host.backoff_delay(1) <= 0.1
            True
        """
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    async def _backoff(self, lease: Lease, attempt: int) -> None:
        delay = self.backoff_delay(attempt)
        self.events.append(HostEvent("backoff", lease.provider_lease_id, delay))
        await self._sleep(delay)

    async def acquire(self, *, run_id: str | None = None) -> Lease:
        """Acquire a fresh lease.

        Example:
            >>> async def main(host: LeaseHost) -> None:
            ...     lease = await host.acquire(run_id="run-1")
        """
        lease = await self.provider.acquire(**self._ids(), run_id=run_id)
        self.events.append(HostEvent("acquire", lease.provider_lease_id))
        return lease

    async def resume(self, lease: Lease) -> Lease:
        """Resume ``lease``, or return a fresh lease when it cannot be kept.

        Waits for this host's in-flight release of the same lease, retries with backoff while
        the provider reports cleanup pending or the answer was lost or retryable, and destroys
        then replaces a lease whose cleanup is unconfirmed or that came back expired. Raises
        the last refusal after ``max_attempts``.

        Example:
            >>> async def main(host: LeaseHost, lease: Lease) -> None:
            ...     lease = await host.resume(lease)
            ...     assert not lease.expired
        """
        if lease.expired:
            return await self._replace(lease)
        async with self._lock(lease):
            attempt = 0
            while True:
                self.events.append(HostEvent("resume", lease.provider_lease_id))
                try:
                    resumed = await self.provider.resume(**self._lease_args(lease))
                except Exception as exc:
                    # A lost answer or a 5xx may come after the resume took effect: asking
                    # again (backed off) finds the sandbox resuming or running.
                    if not (is_cleanup_pending(exc) or getattr(exc, "retryable", False)):
                        raise
                    if is_cleanup_pending(exc) and getattr(exc, "reason", "") == "unconfirmed":
                        # Waiting cannot help: nobody is finishing this cleanup. Make it
                        # certain, then start over on a new sandbox.
                        await self._destroy_locked(lease)
                        return await self._replace(lease)
                    attempt += 1
                    if attempt >= self.max_attempts:
                        raise
                    await self._backoff(lease, attempt)
                    continue
                if resumed.expired:
                    self.events.append(HostEvent("expired", lease.provider_lease_id))
                    return await self._replace(lease)
                self.events.append(HostEvent("resumed", resumed.provider_lease_id))
                return resumed

    async def _replace(self, old: Lease) -> Lease:
        self.events.append(HostEvent("replace", old.provider_lease_id))
        return await self.acquire()

    async def release(self, lease: Lease) -> None:
        """Release ``lease``; if the provider refuses to keep it warm, destroy it instead.

        Example:
            >>> async def main(host: LeaseHost, lease: Lease) -> None:
            ...     await host.release(lease)
        """
        if lease.expired:
            return
        async with self._lock(lease):
            self.events.append(HostEvent("release", lease.provider_lease_id))
            try:
                await self._retry_cleanup(lease, self.provider.release)
            except CleanupUnconfirmedError:
                self.events.append(HostEvent("release-destroy", lease.provider_lease_id))
                await self._destroy_locked(lease)

    async def destroy(self, lease: Lease) -> None:
        """Destroy ``lease`` (a 404 counts as destroyed).

        Example:
            >>> async def main(host: LeaseHost, lease: Lease) -> None:
            ...     await host.destroy(lease)
        """
        if lease.expired:
            return
        async with self._lock(lease):
            await self._destroy_locked(lease)

    async def _destroy_locked(self, lease: Lease) -> None:
        self.events.append(HostEvent("destroy", lease.provider_lease_id))
        await self._retry_cleanup(lease, self.provider.destroy)

    async def _retry_cleanup(self, lease: Lease, hook: Callable[..., Awaitable[None]]) -> None:
        # Another worker may be cleaning the same lease: wait for it rather than fail. A lost
        # answer or a 5xx is asked again too (backed off): the lock stays held meanwhile, so
        # no resume or work slips in while the cleanup's outcome is unknown.
        attempt = 0
        while True:
            try:
                await hook(**self._lease_args(lease))
                return
            except LeaseError as exc:
                # An unconfirmed cleanup is not retryable: the caller destroys the lease.
                if not exc.retryable:
                    raise
                attempt += 1
                if attempt >= self.max_attempts:
                    raise
                await self._backoff(lease, attempt)

    async def execute(
        self,
        lease: Lease,
        command: str,
        *,
        args: Sequence[str] = (),
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        timeout_ms: int | None = None,
    ) -> ExecuteResult:
        """Run a command on ``lease``; not serialised, so a release can cancel it.

        Example:
            >>> async def main(host: LeaseHost, lease: Lease) -> None:
            ...     result = await host.execute(lease, "cat", stdin="hi")
        """
        return await self.provider.execute(
            **self._ids(),
            lease=lease,
            command=command,
            args=args,
            cwd=cwd,
            env=env,
            stdin=stdin,
            timeout_ms=timeout_ms,
        )

    async def shutdown(self) -> None:
        """Shut the provider down (cancels its in-flight operations).

        Example:
            >>> async def main(host: LeaseHost) -> None:
            ...     await host.shutdown()
        """
        await self.provider.shutdown()
