"""Typed errors raised by the reference lease provider, and their fixed messages.

Every user-facing message lives here as a named constant so downstream code can match on the
text (``CLEANUP_PENDING_MESSAGE`` above all) and so we can check in one place that no message
ever carries a response body, a URL path or query, or an API key.

Example:
    >>> from pytest_createos.errors import CleanupPendingError, is_cleanup_pending
    >>> is_cleanup_pending(CleanupPendingError())
    True
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CLEANUP_IN_PROGRESS_MESSAGE",
    "CLEANUP_PENDING_MESSAGE",
    "CLEANUP_UNCONFIRMED_MESSAGE",
    "COMMAND_CANCELLED_MESSAGE",
    "EXPIRED_LEASE_MESSAGE",
    "GUARANTEED_EXPIRY_MESSAGE",
    "LEASE_CLOSING_MESSAGE",
    "OWNERSHIP_MESSAGE",
    "PROCESS_CREATION_UNCONFIRMED_MESSAGE",
    "PROVIDER_SHUT_DOWN_MESSAGE",
    "SETUP_CLEANUP_UNCONFIRMED_MESSAGE",
    "TERMINATION_UNCONFIRMED_MESSAGE",
    "CleanupInProgressError",
    "CleanupPendingError",
    "CleanupUnconfirmedError",
    "CommandCancelledError",
    "CommandStreamError",
    "CreateosApiError",
    "CreateosTransportError",
    "LeaseConfigError",
    "LeaseError",
    "LeaseOwnershipError",
    "ProviderShutDownError",
    "TransitionError",
    "is_cleanup_pending",
]

#: The exact text downstream hosts match on. Never change it.
CLEANUP_PENDING_MESSAGE = "CreateOS lease cleanup must finish before resume."
CLEANUP_IN_PROGRESS_MESSAGE = "CreateOS lease cleanup is already in progress."
CLEANUP_UNCONFIRMED_MESSAGE = (
    "CreateOS lease cleanup is unconfirmed; destroy the lease instead of reusing it."
)
#: ``{sandbox_id}`` is the only substitution; ids are validated to ``[A-Za-z0-9_-]``.
SETUP_CLEANUP_UNCONFIRMED_MESSAGE = (
    "CreateOS sandbox {sandbox_id} setup failed and cleanup is unconfirmed."
)
#: ``{detail}`` is either ``HTTP <status>`` or a fixed transport label.
PROCESS_CREATION_UNCONFIRMED_MESSAGE = (
    "CreateOS process creation could not be confirmed ({detail}); the lease must be destroyed."
)
TERMINATION_UNCONFIRMED_MESSAGE = (
    "CreateOS process termination is unconfirmed; the lease must be destroyed."
)
OWNERSHIP_MESSAGE = "CreateOS lease belongs to another company, environment or API URL."
GUARANTEED_EXPIRY_MESSAGE = "CreateOS leases cannot guarantee an expiry time."
EXPIRED_LEASE_MESSAGE = "CreateOS lease has expired; acquire a new one."
LEASE_CLOSING_MESSAGE = "CreateOS lease is being released; no new work is accepted."
COMMAND_CANCELLED_MESSAGE = "CreateOS command was cancelled because its lease is closing."
PROVIDER_SHUT_DOWN_MESSAGE = "CreateOS lease provider is shut down."

CleanupPendingReason = Literal["closing", "unconfirmed"]


class LeaseError(Exception):
    """Base class of every error the provider raises on purpose.

    ``retryable`` tells a host whether the same call may succeed later without any other
    action (for example after a release finishes, or after a 503 passes).

    Example:
        >>> err = LeaseError("boom", retryable=True)
        >>> err.retryable
        True
    """

    #: Class default; instances may override it through the constructor.
    default_retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = self.default_retryable if retryable is None else retryable


class CleanupPendingError(LeaseError):
    """A resume was refused because the lease's cleanup has not finished.

    ``reason`` is ``"closing"`` while a release/destroy is in flight (wait and retry) or
    ``"unconfirmed"`` after a cleanup that could not be confirmed (destroy, then acquire).
    The message is always :data:`CLEANUP_PENDING_MESSAGE`.

    Example:
        >>> str(CleanupPendingError(reason="unconfirmed"))
        'CreateOS lease cleanup must finish before resume.'
    """

    default_retryable = True

    def __init__(self, *, reason: CleanupPendingReason = "closing") -> None:
        super().__init__(CLEANUP_PENDING_MESSAGE)
        self.reason: CleanupPendingReason = reason


class CleanupInProgressError(LeaseError):
    """A second release/destroy of the same lease was refused while the first runs.

    Example:
        >>> CleanupInProgressError().retryable
        True
    """

    default_retryable = True

    def __init__(self) -> None:
        super().__init__(CLEANUP_IN_PROGRESS_MESSAGE)


class CleanupUnconfirmedError(LeaseError):
    """Cleanup of a sandbox or process could not be confirmed.

    The lease must not be paused or reused; ``destroy`` it. ``sandbox_id`` names the sandbox
    when known.

    Example:
        >>> err = CleanupUnconfirmedError(sandbox_id="sb_1")
        >>> err.sandbox_id
        'sb_1'
    """

    def __init__(
        self, message: str = CLEANUP_UNCONFIRMED_MESSAGE, *, sandbox_id: str | None = None
    ):
        super().__init__(message)
        self.sandbox_id = sandbox_id


class LeaseOwnershipError(LeaseError):
    """The lease belongs to another company, environment or API URL; nothing was sent.

    Example:
        >>> str(LeaseOwnershipError()) == OWNERSHIP_MESSAGE
        True
    """

    def __init__(self, message: str = OWNERSHIP_MESSAGE) -> None:
        super().__init__(message)


class LeaseConfigError(LeaseError):
    """The provider configuration is invalid; ``errors`` lists each problem.

    Example:
        >>> LeaseConfigError(["shape is required"]).errors
        ['shape is required']
    """

    def __init__(self, errors: list[str]) -> None:
        super().__init__("Invalid CreateOS configuration: " + "; ".join(errors))
        self.errors = list(errors)


class ProviderShutDownError(LeaseError):
    """The provider was shut down; it accepts no further calls.

    Example:
        >>> str(ProviderShutDownError()) == PROVIDER_SHUT_DOWN_MESSAGE
        True
    """

    def __init__(self) -> None:
        super().__init__(PROVIDER_SHUT_DOWN_MESSAGE)


class CommandCancelledError(LeaseError):
    """A command was cancelled because its lease started closing (its tree was terminated).

    Example:
        >>> str(CommandCancelledError()) == COMMAND_CANCELLED_MESSAGE
        True
    """

    def __init__(self) -> None:
        super().__init__(COMMAND_CANCELLED_MESSAGE)


class CommandStreamError(LeaseError):
    """The process output stream could not be trusted (gap, malformed, evicted, no exit).

    The provider fails closed: it terminates the process tree before raising this.

    Example:
        >>> str(CommandStreamError("output sequence gap"))
        'CreateOS command output failed: output sequence gap'
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"CreateOS command output failed: {reason}")
        self.reason = reason


class TransitionError(LeaseError):
    """A sandbox did not reach the wanted state (unexpected state or timeout).

    Example:
        >>> str(TransitionError("running", "error"))
        'CreateOS sandbox did not reach running: status error'
    """

    def __init__(self, desired: str, status: str, *, retryable: bool = False) -> None:
        super().__init__(
            f"CreateOS sandbox did not reach {desired}: status {status}", retryable=retryable
        )
        self.desired = desired
        self.status = status


# Statuses for which the same request may well succeed later. 408/429/5xx say nothing about
# the resource; everything else in 4xx is a definite answer.
_RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class CreateosApiError(LeaseError):
    """The CreateOS API answered with an unexpected HTTP status.

    The message names only the status and a fixed operation label: response bodies can echo
    keys or private diagnostics, so they are never read into an error.

    Example:
        >>> err = CreateosApiError(503, "get sandbox")
        >>> str(err), err.retryable
        ('CreateOS get sandbox failed: HTTP 503', True)
    """

    def __init__(self, status: int, operation: str) -> None:
        super().__init__(
            f"CreateOS {operation} failed: HTTP {status}",
            retryable=status in _RETRYABLE_STATUSES,
        )
        self.status = status
        self.operation = operation


class CreateosTransportError(LeaseError):
    """A request failed without an HTTP status: connection error, timeout or bad envelope.

    Retryable, because it does not prove anything about the sandbox. ``kind`` is a fixed label
    such as ``"timeout"``, ``"connection error"`` or ``"invalid response"``.

    Example:
        >>> str(CreateosTransportError("exec", "timeout"))
        'CreateOS exec failed: timeout'
    """

    default_retryable = True

    def __init__(self, operation: str, kind: str) -> None:
        super().__init__(f"CreateOS {operation} failed: {kind}")
        self.operation = operation
        self.kind = kind


def is_cleanup_pending(exc: BaseException) -> bool:
    """Tell whether ``exc`` is the cleanup-must-finish-before-resume refusal.

    Matches the type and, for errors that crossed a process or language boundary, the exact
    message text.

    Example:
        >>> is_cleanup_pending(RuntimeError(CLEANUP_PENDING_MESSAGE))
        True
        >>> is_cleanup_pending(ValueError("other"))
        False
    """
    if isinstance(exc, CleanupPendingError):
        return True
    return CLEANUP_PENDING_MESSAGE in str(exc)
