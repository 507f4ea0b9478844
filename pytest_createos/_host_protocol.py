"""What the conformance kit drives: the :class:`Host` protocol a downstream host adapts itself
to (:class:`ShutdownHost` when it can be stopped), :class:`ProgramOutput` for hosts and providers
whose output belongs in a report, and :class:`LeaseHostAdapter`, the reference host as a
:class:`Host`. :mod:`pytest_createos.kit` exports them all.

Example::

    from pytest_createos.kit import Host, LeaseHostAdapter

    host: Host[Lease] = LeaseHostAdapter(LeaseHost(provider))
"""

from __future__ import annotations

import shlex
from typing import Protocol, TypeVar, runtime_checkable

from pytest_createos.host import LeaseHost
from pytest_createos.provider import ExecuteResult, Lease

__all__ = ["Host", "LeaseHostAdapter", "ProgramOutput", "ShutdownHost"]

LeaseT = TypeVar("LeaseT")


class Host(Protocol[LeaseT]):
    """What the kit drives: your host, adapted in a few lines.

    ``resume`` returns the lease to use from then on: the same one resumed, or a fresh one
    when the old one could not be kept. ``run`` runs a shell command line on the lease (its
    result is not inspected). A lease can be anything your host uses.

    Example::

        class MySchedulerHost:
            def __init__(self, scheduler):
                self.scheduler = scheduler
            async def acquire(self):
                return await self.scheduler.lease()
            async def release(self, lease):
                await self.scheduler.give_back(lease)
            async def resume(self, lease):
                return await self.scheduler.take_back(lease)
            async def run(self, lease, command):
                return await self.scheduler.execute(lease, command)
    """

    async def acquire(self) -> LeaseT:
        """A fresh lease."""

    async def release(self, lease: LeaseT) -> None:
        """Give the lease back (pause it for reuse, or delete it)."""

    async def resume(self, lease: LeaseT) -> LeaseT:
        """The lease to use from now on: ``lease`` resumed, or a fresh one replacing it."""

    async def run(self, lease: LeaseT, command: str) -> object:
        """Run a shell command line (e.g. ``"echo hi"``) on the lease."""


class ShutdownHost(Host[LeaseT], Protocol[LeaseT]):
    """A :class:`Host` that can be shut down; only such hosts get ``shutdown-during-run``.

    Example::

        class MyStoppableHost(MySchedulerHost):
            async def shutdown(self):
                await self.scheduler.stop()
    """

    async def shutdown(self) -> None:
        """Stop: no command of the host may be left running afterwards."""


@runtime_checkable
class ProgramOutput(Protocol):
    """A host or provider whose output the kit appends to a scenario's report (the bridge's
    ``SubprocessHost`` and ``SubprocessProvider`` are: their program's stderr).

    Example::

        mark = host.output_mark()
        ...
        print(host.output_since(mark))
    """

    name: str

    def output_mark(self) -> int:
        """A mark of the output so far."""

    def output_since(self, mark: int) -> str:
        """The output after ``mark`` (empty when there is none)."""


class LeaseHostAdapter:
    """The reference :class:`~pytest_createos.host.LeaseHost` as a :class:`Host`.

    Example::

        @pytest.fixture
        def host(createos_kit, createos_provider, createos_lease_params):
            provider = createos_kit.watch(createos_provider)
            return LeaseHostAdapter(LeaseHost(provider, **createos_lease_params))
    """

    def __init__(self, host: LeaseHost) -> None:
        self.host = host

    async def acquire(self) -> Lease:
        return await self.host.acquire()

    async def release(self, lease: Lease) -> None:
        await self.host.release(lease)

    async def resume(self, lease: Lease) -> Lease:
        return await self.host.resume(lease)

    async def run(self, lease: Lease, command: str) -> ExecuteResult:
        program, *args = shlex.split(command)
        return await self.host.execute(lease, program, args=args)

    async def shutdown(self) -> None:
        await self.host.shutdown()
