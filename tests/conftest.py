"""Fixtures for the project's own tests: a fake served in the test's loop and a client for it."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

import pytest
from aiohttp.test_utils import TestClient

from fake_server import FakeCreateOS, ServerConfig
from tests.test_shell import Harness

if TYPE_CHECKING:
    import createos

    from pytest_createos import CreateosServer

# String aliases: older aiohttp's TestClient is not subscriptable at run time.
Client: TypeAlias = "TestClient[Any, Any]"
ClientFactory: TypeAlias = "Callable[..., Awaitable[TestClient[Any, Any]]]"


@pytest.fixture
def shell_tree() -> str:
    """The script that makes the files a module's :func:`h` starts with: none, unless the
    module overrides this fixture."""
    return ""


@pytest.fixture
async def h(shell_tree: str) -> AsyncIterator[Harness]:
    """A sandbox shell on a manual clock, over the files :func:`shell_tree` makes."""
    harness = Harness()
    if shell_tree:
        assert (await harness.sh(shell_tree)).status == 0
    yield harness
    # Some tests leave a run going on purpose: stop it while this test's loop still runs.
    await harness.shell.wait_idle()


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


@pytest.fixture
def sdk(createos_server: CreateosServer) -> Iterator[createos.Client]:
    """The official SDK (sync) for the plugin's ``createos_server`` tenant, with fast retries
    so a ``Retry-After`` is what decides a wait."""
    import createos  # only the SDK tests pay for importing it

    retry = createos.RetryOptions(max_retries=2, base_delay=0.01, max_delay=0.05)
    with createos.Client(
        api_key=createos_server.api_key, base_url=createos_server.url, retry=retry, timeout=5
    ) as client:
        yield client


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Yield to the event loop until ``condition()`` holds (a condition wait, not a sleep: it
    returns as soon as the state is reached and fails loudly if it never is)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not reached within {timeout}s")
        await asyncio.sleep(0.001)


async def data_of(response: Any) -> Any:
    """The ``data`` of a successful answer (its body in the assertion when it is not one)."""
    body = await response.json()
    assert response.status == 200, body
    assert body["status"] == "success", body
    return body["data"]


async def create_sandbox(client: TestClient[Any, Any], **fields: Any) -> dict[str, Any]:
    """Create a sandbox and return its ``data``."""
    data: dict[str, Any] = await data_of(
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", **fields})
    )
    return data


async def output_reaches(client: TestClient[Any, Any], base: str, seq: int) -> None:
    """Wait until the process at ``base`` has exactly ``seq`` output frames (as its view says;
    a bounded poll: the pipe between a command and the journal is not the test's to await)."""
    for _ in range(5000):
        view = (await (await client.get(base)).json())["data"]
        if view["output"]["newest_seq"] >= seq:
            break
        await asyncio.sleep(0.001)
    assert view["output"]["newest_seq"] == seq, view


async def process_with_frames(
    client: TestClient[Any, Any], sandbox_id: str, chunks: list[bytes]
) -> str:
    """A finished managed process whose output is exactly ``chunks``, one data frame each.

    A command's writes may reach the output journal merged (as a pipe's reads merge them), so
    tests that count frames feed ``cat`` one chunk at a time and wait for each to show.
    """
    base = f"/v1/sandboxes/{sandbox_id}/processes"
    response = await client.post(base, json={"cmd": "cat"})
    process_id: str = (await response.json())["data"]["process_id"]
    base = f"{base}/{process_id}"
    for seq, chunk in enumerate(chunks, start=1):
        sent = await client.post(
            f"{base}/input", json={"data_base64": base64.b64encode(chunk).decode()}
        )
        assert sent.status == 200, await sent.text()
        await output_reaches(client, base, seq)
    await (await client.post(f"{base}/stdin/close")).read()
    await (await client.get(f"{base}/wait")).read()
    return process_id
