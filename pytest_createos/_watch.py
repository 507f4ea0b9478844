"""The kit's watch on a provider: every call a host makes to it, how it ended, and when.

The fake's journal only sees what reaches it; a provider refuses some calls itself, before any
request (``CleanupPendingError`` while the lease's cleanup is in flight). A host built on a
provider that :meth:`~pytest_createos.kit.ConformanceKit.watch` handed it has every call
recorded as a :class:`ProviderCall`, so the ``retries-back-off`` check sees those too.

Example::

    @pytest.fixture
    def host(createos_kit, createos_provider, createos_lease_params):
        provider = createos_kit.watch(createos_provider)
        return LeaseHostAdapter(LeaseHost(provider, **createos_lease_params))
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_createos import _kit_messages as text

__all__ = ["ProviderCall", "WatchedProvider"]


@dataclass(frozen=True)
class ProviderCall:
    """One call of a watched provider's coroutine method: ``hook`` (its name), the sandbox it
    concerns (the lease's ``provider_lease_id``, from the arguments or the lease it returned),
    when it started and ended on the event loop's clock (seconds), and ``error`` (the
    exception's type and message) when it raised.

    Example:
        >>> call = ProviderCall("resume", "sb_1", 0.0, 0.001, "CleanupPendingError: wait")
        >>> call.failed, call.describe()
        (True, 'resume(sb_1) raised CleanupPendingError: wait')
    """

    hook: str
    sandbox: str | None
    started: float
    ended: float
    error: str | None = None

    @property
    def failed(self) -> bool:
        """True when the call raised."""
        return self.error is not None

    def describe(self) -> str:
        """The call as one line: ``resume(sb_1) returned`` or ``... raised <error>``."""
        ended = "returned" if self.error is None else f"raised {self.error}"
        return f"{self.hook}({self.sandbox or ''}) {ended}"


def _sandbox(arguments: Mapping[str, Any], result: object) -> str | None:
    """The sandbox a call concerns: the lease id it names, the lease it was given, or the
    lease it returned (an acquire)."""
    for lease_id in (
        arguments.get("provider_lease_id"),
        getattr(arguments.get("lease"), "provider_lease_id", None),
        getattr(result, "provider_lease_id", None),
    ):
        if isinstance(lease_id, str):
            return lease_id
    return None


class WatchedProvider:
    """Stands in for ``provider``: every coroutine method is called through, and recorded in
    ``calls`` once it ends; everything else (``is_closing``, attributes) is the provider's own.

    Build it with :meth:`~pytest_createos.kit.ConformanceKit.watch`, which records into the
    kit.

    Example:
        >>> calls: list[ProviderCall] = []
        >>> class Provider:
        ...     async def resume(self, **kwargs: object) -> None:
        ...         raise RuntimeError("refused")
        >>> watched = WatchedProvider(Provider(), calls)
        >>> asyncio.run(watched.resume(provider_lease_id="sb_1"))
        Traceback (most recent call last):
        RuntimeError: refused
        >>> calls[0].describe()
        'resume(sb_1) raised RuntimeError: refused'
    """

    def __init__(self, provider: object, calls: list[ProviderCall]) -> None:
        self.provider = provider
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        if name == "provider":  # not set yet (a copy being made): no provider to ask
            raise AttributeError(name)
        attribute = getattr(self.provider, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute
        return self._watched(name, attribute)

    def _watched(
        self, hook: str, method: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def watched(*args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            started = loop.time()
            result: object = None
            error: str | None = None
            try:
                result = await method(*args, **kwargs)
                return result
            except BaseException as raised:  # a cancelled call ended too: record it, re-raise
                error = text.error_text(raised)
                raise
            finally:
                sandbox = _sandbox(kwargs, result)
                self.calls.append(ProviderCall(hook, sandbox, started, loop.time(), error))

        return watched

    def __repr__(self) -> str:
        return f"WatchedProvider({self.provider!r})"
