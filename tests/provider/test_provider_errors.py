"""Error types, retryable flags and messages."""

from __future__ import annotations

import pytest

from pytest_createos.errors import (
    CLEANUP_PENDING_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CommandStreamError,
    CreateosApiError,
    CreateosTransportError,
    LeaseConfigError,
    LeaseError,
    LeaseOwnershipError,
    ProviderShutDownError,
    TransitionError,
    is_cleanup_pending,
)


def test_cleanup_pending_message_is_the_documented_text() -> None:
    assert CLEANUP_PENDING_MESSAGE == "CreateOS lease cleanup must finish before resume."
    for reason in ("closing", "unconfirmed"):
        err = CleanupPendingError(reason=reason)  # type: ignore[arg-type]
        assert str(err) == CLEANUP_PENDING_MESSAGE
        assert err.reason == reason
        assert err.retryable


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (404, False),
        (409, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
    ],
)
def test_api_error_names_only_status_and_operation(status: int, retryable: bool) -> None:
    err = CreateosApiError(status, "get sandbox")
    assert str(err) == f"CreateOS get sandbox failed: HTTP {status}"
    assert err.status == status
    assert err.operation == "get sandbox"
    assert err.retryable is retryable


def test_every_error_is_a_lease_error() -> None:
    errors: list[LeaseError] = [
        CleanupPendingError(),
        CleanupInProgressError(),
        CleanupUnconfirmedError(sandbox_id="sb_1"),
        LeaseOwnershipError(),
        LeaseConfigError(["x"]),
        ProviderShutDownError(),
        CommandStreamError("gap"),
        TransitionError("running", "error"),
        CreateosApiError(503, "x"),
        CreateosTransportError("x", "timeout"),
    ]
    assert all(isinstance(err, LeaseError) for err in errors)
    assert [err.retryable for err in errors] == [
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        True,
        True,
    ]


def test_is_cleanup_pending() -> None:
    assert is_cleanup_pending(CleanupPendingError())
    assert is_cleanup_pending(RuntimeError(CLEANUP_PENDING_MESSAGE))
    assert not is_cleanup_pending(CleanupInProgressError())
    assert not is_cleanup_pending(CleanupUnconfirmedError())
    assert not is_cleanup_pending(ValueError("nope"))


def test_retryable_can_be_overridden() -> None:
    assert LeaseError("x", retryable=True).retryable
    assert not TransitionError("running", "creating").retryable
    assert TransitionError("running", "creating", retryable=True).retryable
