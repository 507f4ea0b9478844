"""Workloads: a few host operations started together, whose interleavings the explorer searches.

A workload names its leases (acquired, and optionally released, before the race starts) and the
operations that race. Declaring one takes a line:

Example:
    >>> w = Workload("release-resume", ops=(release(0), resume(0)))
    >>> w.describe()
    'release(L1) || resume(L1)'
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_server.gates import OUTCOMES

__all__ = [
    "WORKLOADS",
    "Op",
    "Workload",
    "acquire",
    "find_workload",
    "release",
    "resume",
    "run",
    "shutdown",
]

#: The command a ``run`` operation runs when the workload gives none.
DEFAULT_COMMAND = "echo createos-explore"
#: A command still running when the other calls of its workload go on: it sleeps on the fake's
#: manual clock, which the explorer moves there only when nothing else can happen.
LONG_COMMAND = "sleep 3"


@dataclass(frozen=True)
class Op:
    """One host call of a workload: ``hook`` (``acquire``, ``release``, ``resume``, ``run``,
    ``shutdown``) on the workload's lease number ``lease`` (from 0; ``None`` for the calls that
    take no lease), with ``command`` for ``run``.

    Example:
        >>> Op("run", 0, "echo hi").describe()
        'run(L1, echo hi)'
    """

    hook: str
    lease: int | None = None
    command: str | None = None

    def describe(self) -> str:
        """The call as a workload shows it, leases numbered from ``L1``."""
        args = [] if self.lease is None else [f"L{self.lease + 1}"]
        if self.command is not None:
            args.append(self.command)
        return f"{self.hook}({', '.join(args)})"

    def call(self, host: Any, leases: Sequence[Any]) -> Coroutine[Any, Any, Any]:
        """The coroutine of this call on ``host``, with the workload's ``leases``."""
        method = getattr(host, self.hook, None)
        if not callable(method):
            raise TypeError(f"the host has no {self.hook}() to call for {self.describe()}")
        args: list[Any] = [] if self.lease is None else [leases[self.lease]]
        if self.command is not None:
            args.append(self.command)
        coroutine: Coroutine[Any, Any, Any] = method(*args)
        return coroutine


def acquire() -> Op:
    """``acquire()`` as a workload operation.

    Example:
        >>> acquire().describe()
        'acquire()'
    """
    return Op("acquire")


def release(lease: int) -> Op:
    """``release(lease)`` as a workload operation (leases numbered from 0).

    Example:
        >>> release(0).describe()
        'release(L1)'
    """
    return Op("release", lease)


def resume(lease: int) -> Op:
    """``resume(lease)`` as a workload operation; the explorer then runs a probe command on
    the lease it returns, to learn where it points.

    Example:
        >>> resume(0).describe()
        'resume(L1)'
    """
    return Op("resume", lease)


def run(lease: int, command: str = DEFAULT_COMMAND) -> Op:
    """``run(lease, command)`` as a workload operation.

    Example:
        >>> run(0, "cat").describe()
        'run(L1, cat)'
    """
    return Op("run", lease, command)


def shutdown() -> Op:
    """``shutdown()`` as a workload operation (workloads with it skip hosts without one).

    Example:
        >>> shutdown().describe()
        'shutdown()'
    """
    return Op("shutdown")


@dataclass(frozen=True)
class Workload:
    """Operations that start together once ``leases`` leases are acquired (and the ones listed
    in ``released`` released again); the explorer searches the orders of their requests.

    Example:
        >>> Workload("resume-resume", ops=(resume(0), resume(0)), released=(0,)).leases
        1
    """

    name: str
    ops: tuple[Op, ...]
    #: Leases the set-up acquires (numbered from 0, shown as L1, L2...).
    leases: int = 1
    #: Leases the set-up releases again before the race.
    released: tuple[int, ...] = ()
    summary: str = field(default="", compare=False)
    #: Besides going on, each request of the race that changes something (not a ``GET``) may
    #: be let go with these outcomes, where they change what it does: ``"lost"`` (it takes
    #: effect, its answer is lost), ``"error"`` (answered 503, without effect), ``"survives"``
    #: (a process DELETE ends nothing) and ``"stuck"`` (the transition a pause, resume, fork or
    #: sandbox DELETE starts never finishes).
    outcomes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError(f"workload {self.name!r} has no operations")
        unknown = sorted(set(self.outcomes) - set(OUTCOMES))
        if unknown:
            raise ValueError(
                f"workload {self.name!r}: outcome {unknown[0]!r} is not one of "
                f"{', '.join(OUTCOMES)}"
            )
        used = [op.lease for op in self.ops if op.lease is not None] + list(self.released)
        if any(lease < 0 or lease >= self.leases for lease in used):
            raise ValueError(
                f"workload {self.name!r} uses a lease outside L1..L{self.leases}: "
                f"declare leases={max(used) + 1}"
            )

    def describe(self) -> str:
        """The operations, ``||`` between the ones that race."""
        return " || ".join(op.describe() for op in self.ops)

    @property
    def needs_shutdown(self) -> bool:
        """Whether a host needs ``shutdown()`` for this workload."""
        return any(op.hook == "shutdown" for op in self.ops)


#: The built-in workloads: the orders the seed's trigger scenarios come from.
WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "release-resume",
        (release(0), resume(0)),
        summary="a resume issued while the release of the same lease is still in flight",
    ),
    Workload(
        "resume-resume",
        (resume(0), resume(0)),
        released=(0,),
        summary="two resumes of one released lease at once",
    ),
    Workload(
        "release-resume-run",
        (release(0), resume(0), run(0)),
        summary="a command, a release and a resume of one lease at once",
    ),
    Workload(
        "run-release",
        (run(0, LONG_COMMAND), release(0)),
        summary="release() while a command on the same lease still runs (a `sleep` on the "
        "fake's clock, which ends only when nothing else can happen)",
    ),
    Workload(
        "run-shutdown",
        (run(0, "cat"), shutdown()),
        summary="shutdown() while a command (reading its stdin) starts",
    ),
    Workload(
        "acquire-shutdown",
        (acquire(), shutdown()),
        summary="shutdown() while a fresh lease is being acquired",
    ),
)


def find_workload(name: str | Workload, extra: Sequence[Workload] = ()) -> Workload:
    """The workload called ``name`` among ``extra`` and :data:`WORKLOADS` (a
    :class:`Workload` is returned as it is); ``ValueError`` lists the names otherwise.

    Example:
        >>> find_workload("resume-resume").released
        (0,)
    """
    if isinstance(name, Workload):
        return name
    for workload in (*extra, *WORKLOADS):
        if workload.name == name:
            return workload
    names = ", ".join(w.name for w in (*extra, *WORKLOADS))
    raise ValueError(f"no workload {name!r}; the workloads are: {names}")
