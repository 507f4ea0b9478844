"""Faults configured by the ``createos`` marker, in the same schema as the control API."""

from __future__ import annotations

from itertools import pairwise

import pytest
from example_hosts import RobustHost

from pytest_createos import CreateosServer
from pytest_createos.kit import ConformanceKit

RESUME = "POST /v1/sandboxes/{id}/resume"


@pytest.mark.asyncio
@pytest.mark.createos(
    faults=[{"match": {"route": RESUME}, "action": {"type": "error", "status": 503}, "times": 2}]
)
async def test_robust_host_backs_off_through_a_flaky_resume(
    robust_host: RobustHost, createos_server: CreateosServer, createos_kit: ConformanceKit
) -> None:
    lease = await robust_host.acquire()
    await robust_host.release(lease)
    assert await robust_host.resume(lease) == lease
    resumes = createos_server.journal.requests(route=RESUME)
    assert [entry.status for entry in resumes] == [503, 503, 200]
    # Jittered exponential backoff: at least half the base delay, then more.
    gaps = [later.at - earlier.at for earlier, later in pairwise(resumes)]
    assert gaps[0] >= robust_host.base_delay_s / 2
    assert gaps[1] >= robust_host.base_delay_s
    createos_kit.assert_ok(keep=[lease])
    await robust_host.destroy(lease)
