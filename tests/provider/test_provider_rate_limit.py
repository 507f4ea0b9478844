"""A 429 is the service asking to slow down, not a failed call: the reference provider sends
the same request again once its ``Retry-After`` is over, a bounded number of times."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pytest_createos._client import RATE_LIMIT_RETRIES, retry_after_s
from pytest_createos.errors import CreateosApiError

from .conftest import FakeEnv

RESUME = "POST /v1/sandboxes/{id}/resume"


async def test_a_rate_limited_resume_is_sent_again_after_retry_after(env: FakeEnv) -> None:
    lease = await env.acquire()
    await env.release(lease)
    env.fake.faults.error(429, route=RESUME, times=1, retry_after=1)
    resumed = await env.resume(lease)
    assert resumed.provider_lease_id == lease.provider_lease_id
    assert env.status(lease) == "running"
    limited, retry = env.fake.journal.requests(route=RESUME)
    assert (limited.status, retry.status) == (429, 200)
    # Measured from the 429's answer, on the fake's clock (the provider's own, in-process).
    answered = limited.at + (limited.duration_ms or 0) / 1000
    assert retry.at - answered >= 1.0


async def test_rate_limit_retries_are_bounded(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(429, route="DELETE /v1/sandboxes/{id}", retry_after=0)
    with pytest.raises(CreateosApiError, match="HTTP 429"):
        await env.destroy(lease)
    env.fake.journal.assert_requested("DELETE /v1/sandboxes/{id}", times=RATE_LIMIT_RETRIES + 1)


async def test_a_wait_past_the_deadline_is_not_waited(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(429, route="DELETE /v1/sandboxes/{id}", times=1, retry_after=3600)
    with pytest.raises(CreateosApiError, match="HTTP 429"):
        await env.destroy(lease)  # at once: the hour it asks for is past the 5 s timeout
    env.fake.journal.assert_requested("DELETE /v1/sandboxes/{id}", times=1)


def test_retry_after_takes_seconds_or_an_http_date() -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert retry_after_s("3", now) == 3.0
    assert retry_after_s("Thu, 01 Jan 2026 00:00:02 GMT", now) == 2.0
    assert retry_after_s("Wed, 31 Dec 2025 23:59:00 GMT", now) == 0.0  # past: no wait
    assert [retry_after_s(v, now) for v in ("-1", "nan", "inf", "later", "")] == [
        0.0,
        None,
        None,
        None,
        None,
    ]
