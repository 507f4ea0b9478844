"""The conformance kit for providers and hosts written in any language.

Your program (Node, Go, Java, ...) speaks the bridge protocol -- JSON lines on its stdin and
stdout, documented in ``docs/bridge.md`` -- and :class:`SubprocessProvider` /
:class:`SubprocessHost` stand in for it on the Python side: they satisfy the kit's
:class:`~pytest_createos.host.LeaseProviderLike` and :class:`~pytest_createos.kit.Host`, so
``ProviderConformance``, ``HostConformance`` and ``createos_kit.run(...)`` work unchanged. The
fake's URL and API key reach the program as ``CREATEOS_API_URL`` and ``CREATEOS_API_KEY``;
what it writes to stderr during a scenario is appended to the kit's report.

Example::

    import pytest_asyncio
    from pytest_createos.bridge import SubprocessHost
    from pytest_createos.kit import HostConformance

    class TestMyNodeHost(HostConformance):
        @pytest_asyncio.fixture
        async def host(self, createos_server):
            async with SubprocessHost(["node", "host.mjs"], server=createos_server) as host:
                yield host
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar

from pytest_createos._bridge_program import (
    API_KEY_ENV,
    API_URL_ENV,
    PROTOCOL_VERSION,
    BridgeError,
    BridgeTimeoutError,
    Program,
    ProgramError,
)
from pytest_createos.provider import ExecuteResult, Lease

__all__ = [
    "API_KEY_ENV",
    "API_URL_ENV",
    "HOST_METHODS",
    "PROTOCOL_VERSION",
    "PROVIDER_METHODS",
    "BridgeError",
    "BridgeTimeoutError",
    "FakeEndpoint",
    "ProgramError",
    "SubprocessHost",
    "SubprocessProvider",
]

#: What a provider program must offer.
PROVIDER_METHODS: Final = ("acquire", "resume", "release", "destroy", "execute", "shutdown")
#: What a host program must offer; ``shutdown`` is optional (without it the kit skips
#: ``shutdown-during-run``).
HOST_METHODS: Final = ("acquire", "release", "resume", "run")

#: Defaults: a program announces itself within START, answers every call within CALL (the
#: kit's own 10 s timeout on a call fires first in a scenario), and exits within CLOSE of its
#: stdin closing (then it is killed).
DEFAULT_START_TIMEOUT_S: Final = 10.0
DEFAULT_CALL_TIMEOUT_S: Final = 30.0
DEFAULT_CLOSE_TIMEOUT_S: Final = 5.0

BAD_LEASE: Final = "{name} answered {method}() with {value!r}, not a lease"
BAD_EXECUTE_RESULT: Final = "{name} answered execute() with {value!r}, not an execute result"

ClientT = TypeVar("ClientT", bound="_ProgramClient")


class FakeEndpoint(Protocol):
    """Where the program finds the fake: a ``CreateosServer`` (``createos_server``) fits.

    Example::

        SubprocessHost(["node", "host.mjs"], server=createos_server)
    """

    @property
    def url(self) -> str: ...

    @property
    def api_key(self) -> str: ...


class _ProgramClient:
    """What both stand-ins share: the program's process, its life and its stderr."""

    _required: tuple[str, ...] = ()

    def __init__(
        self,
        command: Sequence[str],
        *,
        server: FakeEndpoint | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        close_timeout_s: float = DEFAULT_CLOSE_TIMEOUT_S,
    ) -> None:
        if not command:
            raise ValueError("command must name a program to run")
        environment = dict(env or {})
        if server is not None:
            environment = {API_URL_ENV: server.url, API_KEY_ENV: server.api_key, **environment}
        self.name = name or shlex.join(command)
        self._program = Program(
            command,
            name=self.name,
            env=environment,
            cwd=cwd,
            required=self._required,
            start_timeout_s=start_timeout_s,
            call_timeout_s=call_timeout_s,
            close_timeout_s=close_timeout_s,
        )

    async def start(self: ClientT) -> ClientT:
        """Start the program and wait until it has announced itself
        (:class:`BridgeError` if it cannot, or does not offer what it must).

        Example::

            host = await SubprocessHost(["node", "host.mjs"], server=createos_server).start()
        """
        await self._program.start()
        return self

    async def close(self) -> None:
        """Close the program's stdin, wait for it to exit (killed after ``close_timeout_s``).

        Example::

            await host.close()
        """
        await self._program.close()

    async def __aenter__(self: ClientT) -> ClientT:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def methods(self) -> frozenset[str]:
        """What the program announced it offers (empty until it started).

        Example::

            assert "shutdown" in host.methods
        """
        return self._program.methods

    @property
    def returncode(self) -> int | None:
        """The program's exit code once it has exited (negative: killed by that signal).

        Example::

            await host.close()
            assert host.returncode == 0
        """
        return self._program.returncode

    def output_mark(self) -> int:
        """How many lines the program has written to stderr so far.

        Example::

            mark = host.output_mark()
            await host.acquire()
            print(host.output_since(mark))
        """
        return self._program.stderr_mark()

    def output_since(self, mark: int) -> str:
        """What the program wrote to stderr after :meth:`output_mark` returned ``mark`` (the
        kit appends it to a scenario's report): its last 100 lines, each cut at 1000
        characters, after a note of how many earlier ones are not shown.

        Example::

            mark = host.output_mark()
            await host.run(lease, "true")
            await host.close()   # everything it wrote is read by now
            print(host.output_since(mark))
        """
        return "\n".join(self._program.stderr_since(mark))

    async def _call(self, method: str, **params: Any) -> Any:
        return await self._program.call(method, params)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _lease_json(lease: Lease) -> dict[str, Any]:
    return {"provider_lease_id": lease.provider_lease_id, "metadata": lease.metadata}


class SubprocessProvider(_ProgramClient):
    """A lease provider program, as the kit's
    :class:`~pytest_createos.host.LeaseProviderLike`: each hook is one request with the
    hook's keyword arguments as ``params`` (a lease as ``{"provider_lease_id", "metadata"}``);
    an ``error`` answer is raised as the kit's error type its ``kind`` names (see
    :class:`ProgramError`).

    Example::

        import pytest_asyncio
        from pytest_createos.bridge import SubprocessProvider
        from pytest_createos.kit import ProviderConformance

        class TestMyNodeProvider(ProviderConformance):
            @pytest_asyncio.fixture
            async def provider(self, createos_server):
                command = ["node", "provider.mjs"]
                async with SubprocessProvider(command, server=createos_server) as provider:
                    yield provider
    """

    _required = PROVIDER_METHODS

    async def acquire(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        run_id: str | None = None,
        requested_expires_at: object | None = None,
    ) -> Lease:
        """A fresh lease (``acquire`` request).

        Example::

            lease = await provider.acquire(**createos_lease_params)
        """
        answer = await self._call(
            "acquire",
            company_id=company_id,
            environment_id=environment_id,
            config=dict(config),
            run_id=run_id,
            requested_expires_at=requested_expires_at,
        )
        return self._lease("acquire", answer)

    async def resume(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> Lease:
        """The lease resumed, or an expired lease (``resume`` request).

        Example::

            lease = await provider.resume(**createos_lease_params,
                                          provider_lease_id=lease.provider_lease_id,
                                          lease_metadata=lease.metadata)
        """
        answer = await self._call(
            "resume",
            company_id=company_id,
            environment_id=environment_id,
            config=dict(config),
            provider_lease_id=provider_lease_id,
            lease_metadata=dict(lease_metadata),
        )
        return self._lease("resume", answer)

    async def release(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None:
        """Pause or delete the lease (``release`` request).

        Example::

            await provider.release(**createos_lease_params,
                                   provider_lease_id=lease.provider_lease_id,
                                   lease_metadata=lease.metadata)
        """
        await self._call(
            "release",
            company_id=company_id,
            environment_id=environment_id,
            config=dict(config),
            provider_lease_id=provider_lease_id,
            lease_metadata=dict(lease_metadata),
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
        """Delete the lease's sandbox (``destroy`` request).

        Example::

            await provider.destroy(**createos_lease_params,
                                   provider_lease_id=lease.provider_lease_id,
                                   lease_metadata=lease.metadata)
        """
        await self._call(
            "destroy",
            company_id=company_id,
            environment_id=environment_id,
            config=dict(config),
            provider_lease_id=provider_lease_id,
            lease_metadata=dict(lease_metadata),
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
        """Run one command on the lease (``execute`` request; ``stdin`` bytes must be UTF-8).

        Example::

            result = await provider.execute(**createos_lease_params, lease=lease,
                                            command="echo", args=["hi"])
        """
        answer = await self._call(
            "execute",
            company_id=company_id,
            environment_id=environment_id,
            config=dict(config),
            lease=_lease_json(lease),
            command=command,
            args=list(args),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=stdin.decode() if isinstance(stdin, bytes) else stdin,
            timeout_ms=timeout_ms,
        )
        if not isinstance(answer, dict):
            raise BridgeError(BAD_EXECUTE_RESULT.format(name=self.name, value=answer))
        try:
            return ExecuteResult(
                exit_code=answer.get("exit_code"),
                signal=answer.get("signal"),
                timed_out=bool(answer.get("timed_out", False)),
                stdout=str(answer.get("stdout", "")),
                stderr=str(answer.get("stderr", "")),
                metadata=dict(answer.get("metadata") or {}),
            )
        except (TypeError, ValueError):
            raise BridgeError(BAD_EXECUTE_RESULT.format(name=self.name, value=answer)) from None

    async def shutdown(self) -> None:
        """The provider's own shutdown hook (``shutdown`` request); the program keeps running
        until :meth:`close`.

        Example::

            await provider.shutdown()
        """
        await self._call("shutdown")

    def _lease(self, method: str, answer: object) -> Lease:
        if isinstance(answer, dict) and isinstance(answer.get("metadata", {}), dict):
            lease_id = answer.get("provider_lease_id")
            if lease_id is None or isinstance(lease_id, str):
                return Lease(lease_id, dict(answer.get("metadata") or {}))
        raise BridgeError(BAD_LEASE.format(name=self.name, method=method, value=answer))


class SubprocessHost(_ProgramClient):
    """A host program, as the kit's :class:`~pytest_createos.kit.Host`: ``acquire`` (no
    params), ``release`` and ``resume`` (``{"lease": ...}``) and ``run``
    (``{"lease": ..., "command": "echo hi"}``). A lease is whatever JSON the program hands
    back. ``shutdown`` exists only when the program offers it (otherwise the kit skips
    ``shutdown-during-run``).

    Example::

        async def test_my_node_host(createos_kit, createos_server):
            async with SubprocessHost(["node", "host.mjs"], server=createos_server) as host:
                report = await createos_kit.run("concurrent-resumes", host)
            report.assert_ok()
    """

    _required = HOST_METHODS

    async def acquire(self) -> Any:
        """A fresh lease (``acquire`` request).

        Example::

            lease = await host.acquire()
        """
        return await self._call("acquire")

    async def release(self, lease: Any) -> None:
        """Give the lease back (``release`` request).

        Example::

            await host.release(lease)
        """
        await self._call("release", lease=lease)

    async def resume(self, lease: Any) -> Any:
        """The lease to use from now on (``resume`` request).

        Example::

            lease = await host.resume(lease)
        """
        return await self._call("resume", lease=lease)

    async def run(self, lease: Any, command: str) -> Any:
        """Run a shell command line on the lease (``run`` request); its result as sent.

        Example::

            await host.run(lease, "echo hi")
        """
        return await self._call("run", lease=lease, command=command)

    @property
    def shutdown(self) -> Callable[[], Coroutine[Any, Any, None]]:
        """The program's ``shutdown`` (an ``AttributeError`` if it does not offer one, so the
        kit sees a host without it).

        Example::

            await host.shutdown()
        """
        if "shutdown" not in self.methods:
            raise AttributeError(f"{self.name} offers no shutdown()")
        return self._shutdown

    async def _shutdown(self) -> None:
        await self._call("shutdown")
