"""Fixtures of the example project: each host under test, bound to the test's CreateOS fake.

``createos_server`` (from the pytest-createos plugin) gives every test a fresh tenant of a
shared in-process fake; the hosts talk to it over HTTP like they would to the real service.
The hosts in ``node/`` are JavaScript programs the kit drives over its bridge protocol; their
tests skip where Node is not installed.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from example_hosts import NaiveHost, RobustHost, SandboxApi

from pytest_createos import CreateosServer, LeaseHost, LeaseProvider
from pytest_createos.bridge import SubprocessHost
from pytest_createos.kit import ConformanceKit, LeaseHostAdapter

NODE_PROGRAMS = Path(__file__).resolve().parent / "node"


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


async def node_host(program: str, server: CreateosServer) -> AsyncIterator[SubprocessHost]:
    """The JavaScript host ``node/<program>`` as a kit ``Host``, on this test's tenant."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Debian: nodejs): the JavaScript hosts cannot run")
    async with SubprocessHost([node, str(NODE_PROGRAMS / program)], server=server) as host:
        yield host


@pytest_asyncio.fixture
async def node_naive_host(createos_server: CreateosServer) -> AsyncIterator[SubprocessHost]:
    """``node/naive_host.mjs``: ``NaiveHost`` in JavaScript, bug for bug."""
    async for host in node_host("naive_host.mjs", createos_server):
        yield host


@pytest_asyncio.fixture
async def node_robust_host(createos_server: CreateosServer) -> AsyncIterator[SubprocessHost]:
    """``node/robust_host.mjs``: ``RobustHost`` in JavaScript."""
    async for host in node_host("robust_host.mjs", createos_server):
        yield host
