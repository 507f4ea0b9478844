"""A provider the kit watches: every call a host makes to it is recorded with its sandbox, how
it ended and when, and the checks count the calls that never reach the fake."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pytest_createos.errors import OWNERSHIP_MESSAGE, LeaseOwnershipError
from pytest_createos.kit import ConformanceError, ConformanceKit
from pytest_createos.provider import Lease, LeaseProvider


def lease_args(params: dict[str, Any], lease: Lease) -> dict[str, Any]:
    """The arguments of a provider hook about ``lease``."""
    return {
        **params,
        "provider_lease_id": lease.provider_lease_id,
        "lease_metadata": lease.metadata,
    }


async def test_every_call_is_recorded_with_its_sandbox_and_outcome(
    createos_kit: ConformanceKit,
    createos_provider: LeaseProvider,
    createos_lease_params: dict[str, Any],
) -> None:
    provider = createos_kit.watch(createos_provider)
    lease = await provider.acquire(**createos_lease_params)
    sandbox = lease.provider_lease_id
    args = lease_args(createos_lease_params, lease)
    result = await provider.execute(**createos_lease_params, lease=lease, command="true")
    assert result.exit_code == 0
    with pytest.raises(LeaseOwnershipError):
        await provider.resume(**{**args, "company_id": "someone-else"})
    await provider.destroy(**args)
    assert provider.is_closing(str(sandbox)) is False  # not a coroutine: the provider's own
    assert [call.describe() for call in createos_kit.calls] == [
        f"acquire({sandbox}) returned",
        f"execute({sandbox}) returned",
        f"resume({sandbox}) raised LeaseOwnershipError: {OWNERSHIP_MESSAGE}",
        f"destroy({sandbox}) returned",
    ]
    times = [t for call in createos_kit.calls for t in (call.started, call.ended)]
    assert times == sorted(times)
    createos_kit.assert_ok()


async def test_assert_ok_counts_refusals_that_never_reached_the_fake(
    createos_kit: ConformanceKit,
    createos_provider: LeaseProvider,
    createos_lease_params: dict[str, Any],
) -> None:
    provider = createos_kit.watch(createos_provider)
    lease = await provider.acquire(**createos_lease_params)
    args = lease_args(createos_lease_params, lease)
    for _ in range(12):  # refused before sending anything, asked again at once
        with pytest.raises(LeaseOwnershipError):
            await provider.resume(**{**args, "company_id": "someone-else"})
    await provider.destroy(**args)
    with pytest.raises(ConformanceError) as raised:
        createos_kit.assert_ok()
    assert [v.check for v in raised.value.violations] == ["retries-back-off"]
    assert "the provider's resume() was called again 11 times within" in str(raised.value)


def test_a_copy_watches_into_the_same_calls(createos_kit: ConformanceKit) -> None:
    provider = LeaseProvider()
    watched = createos_kit.watch(provider)
    # copy builds the stand-in before its provider is set: asking that for attributes
    # would recurse forever.
    copied = copy.copy(watched)
    assert (copied.is_closing("sb_1"), vars(copied)) == (False, vars(watched))
