"""Fixtures for the project's own tests: a fake served in the test's loop and a client for it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import pytest
from aiohttp.test_utils import TestClient

from fake_server import FakeCreateOS, ServerConfig

# String aliases: older aiohttp's TestClient is not subscriptable at run time.
Client: TypeAlias = "TestClient[Any, Any]"
ClientFactory: TypeAlias = "Callable[..., Awaitable[TestClient[Any, Any]]]"


@pytest.fixture
def fake_config() -> ServerConfig:
    """Zero-length transitions and a fixed seed; tests that need time use a manual clock."""
    return ServerConfig(seed=1234, transition_ms=0)


@pytest.fixture
def fake(fake_config: ServerConfig) -> FakeCreateOS:
    return FakeCreateOS(fake_config)


@pytest.fixture
def api_key(fake: FakeCreateOS) -> str:
    return fake.create_tenant("skp_test_owner")


@pytest.fixture
async def client(
    fake: FakeCreateOS, api_key: str, aiohttp_client: ClientFactory
) -> TestClient[Any, Any]:
    """An aiohttp test client sending the tenant's key on every request."""
    return await aiohttp_client(fake.app(), headers={"X-Api-Key": api_key})


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Yield to the event loop until ``condition()`` holds (a condition wait, not a sleep: it
    returns as soon as the state is reached and fails loudly if it never is)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s")
        await asyncio.sleep(0.001)


async def create_sandbox(client: TestClient[Any, Any], **fields: Any) -> dict[str, Any]:
    """Create a sandbox and return its ``data``."""
    response = await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", **fields})
    body = await response.json()
    assert response.status == 200, body
    data: dict[str, Any] = body["data"]
    return data
