"""Fixtures of the example project: each host under test, bound to the test's CreateOS fake.

``createos_server`` (from the pytest-createos plugin) gives every test a fresh tenant of a
shared in-process fake; the hosts talk to it over HTTP like they would to the real service.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from example_hosts import NaiveHost, RobustHost, SandboxApi

from pytest_createos import CreateosServer, LeaseHost, LeaseProvider
from pytest_createos.kit import ConformanceKit, LeaseHostAdapter


@pytest_asyncio.fixture
async def naive_host(createos_server: CreateosServer) -> AsyncIterator[NaiveHost]:
    api = SandboxApi(createos_server.url, createos_server.api_key)
    yield NaiveHost(api)
    await api.close()


@pytest_asyncio.fixture
async def robust_host(createos_server: CreateosServer) -> AsyncIterator[RobustHost]:
    api = SandboxApi(createos_server.url, createos_server.api_key)
    yield RobustHost(api, seed=createos_server.seed)
    await api.close()


@pytest_asyncio.fixture
async def reference_host(
    createos_kit: ConformanceKit, createos_lease_params: dict[str, Any]
) -> AsyncIterator[LeaseHostAdapter]:
    """The plugin's reference ``LeaseHost``, keeping released leases warm (paused), on a
    provider the kit watches: the kit also checks the calls the provider refuses itself."""
    config = {**createos_lease_params["config"], "reuseLease": True}
    params = {**createos_lease_params, "config": config}
    async with LeaseProvider() as provider:
        yield LeaseHostAdapter(LeaseHost(createos_kit.watch(provider), **params))
