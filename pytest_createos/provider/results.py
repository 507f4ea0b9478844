"""What the provider's hooks hand back: the lease handle and the other hooks' results.

A :class:`Lease` is what ``acquire`` and ``resume`` return and what the other hooks take; an
expired lease (``provider_lease_id`` of ``None``) is what ``resume`` returns when a lease cannot
be kept. :class:`ExecuteResult`, :class:`RealizedWorkspace` and :class:`ProbeResult` are the
results of ``execute``, ``realize_workspace`` and ``probe``.

Example:
    >>> Lease("sb_1", {}).expired, Lease(None, {"expired": True}).expired
    (False, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ExecuteResult", "Lease", "ProbeResult", "RealizedWorkspace"]


@dataclass(frozen=True)
class Lease:
    """A lease handle: the sandbox id (``None`` once expired) and its binding metadata.

    Example:
        >>> Lease(None, {"expired": True}).expired
        True
    """

    provider_lease_id: str | None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def expired(self) -> bool:
        """True for the expired lease that ``resume`` returns when a lease cannot be kept.

        Example:
            >>> Lease("sb_1", {}).expired
            False
        """
        return self.provider_lease_id is None


def _expired() -> Lease:
    return Lease(None, {"expired": True})


@dataclass(frozen=True)
class ExecuteResult:
    """The outcome of :meth:`LeaseProvider.execute`.

    ``exit_code`` is ``None`` when the command was killed by ``signal`` or timed out; on a
    timeout ``stdout``/``stderr`` hold the output received before the deadline.

    Example:
        >>> ExecuteResult(0, None, False, "hi\\n", "", {}).exit_code
        0
    """

    exit_code: int | None
    signal: str | None
    timed_out: bool
    stdout: str
    stderr: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RealizedWorkspace:
    """Where a lease's work runs inside the sandbox (no request is needed to know it).

    Example:
        >>> RealizedWorkspace("/paperclip-workspace", {}).cwd
        '/paperclip-workspace'
    """

    cwd: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of :meth:`LeaseProvider.probe`: ``ok`` and a one-line summary.

    Example:
        >>> ProbeResult(True, "ok").ok
        True
    """

    ok: bool
    summary: str
