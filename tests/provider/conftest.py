"""Shared fixtures for the reference provider and host tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from pytest_createos.provider import ExecuteResult, Lease, LeaseProvider

# Nothing listens on the discard port; any request that got this far would fail with a
# transport error, and the trace below records it before connecting anyway.
UNREACHABLE = "http://127.0.0.1:9"


@dataclass
class Sent:
    """One request as the client sent it."""

    method: str
    url: str
    body: bytearray = field(default_factory=bytearray)

    def json(self) -> Any:
        return json.loads(bytes(self.body))


@dataclass
class RecordedSession:
    """An aiohttp session that records every request it starts, with its body."""

    session: aiohttp.ClientSession
    sent: list[Sent] = field(default_factory=list)

    @property
    def requests(self) -> list[tuple[str, str]]:
        return [(s.method, s.url) for s in self.sent]


@pytest.fixture
async def recorded() -> AsyncIterator[RecordedSession]:
    """A real client session with a request trace (client-side view of what was sent)."""
    sent: list[Sent] = []

    async def on_start(
        _session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        ctx.sent = Sent(params.method, str(params.url))
        sent.append(ctx.sent)

    async def on_chunk(
        _session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestChunkSentParams,
    ) -> None:
        ctx.sent.body.extend(params.chunk)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    trace.on_request_chunk_sent.append(on_chunk)
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        yield RecordedSession(session, sent)


class ConfigFactory:
    """Builds a valid provider config, with overrides."""

    def __init__(self, base: dict[str, object]) -> None:
        self.base = base

    def __call__(self, **overrides: object) -> dict[str, object]:
        return {**self.base, **overrides}


@pytest.fixture
def offline_config() -> ConfigFactory:
    """A valid config that points nowhere (for tests that must not send anything)."""
    config: dict[str, object] = {
        "apiUrl": UNREACHABLE,
        "apiKey": "skp_secret_offline",
        "shape": "s-1vcpu-1gb",
        "rootfs": "devbox:1",
        "region": "local",
        "reuseLease": True,
        "requestSpacingMs": 0,
        "pollIntervalMs": 1,
        "timeoutMs": 2_000,
    }
    return ConfigFactory(config)


@dataclass
class FakeEnv:
    """A fake CreateOS served in the test's loop, a fresh tenant, and a provider bound to it."""

    fake: Any  # fake_server.FakeCreateOS (imported lazily so offline tests run without it)
    url: str
    api_key: str
    config: dict[str, Any]
    provider: LeaseProvider
    recorded: RecordedSession

    @property
    def ids(self) -> dict[str, Any]:
        return {"company_id": "co", "environment_id": "env", "config": self.config}

    def lease_args(self, lease: Lease) -> dict[str, Any]:
        return {
            **self.ids,
            "provider_lease_id": lease.provider_lease_id,
            "lease_metadata": lease.metadata,
        }

    def sandbox(self, lease: Lease) -> Any:
        return self.fake.tenant(self.api_key).sandboxes[lease.provider_lease_id]

    def status(self, lease: Lease) -> str:
        return str(self.sandbox(lease).status.value)

    def routes(self, since: int = 0) -> list[str]:
        """``METHOD template`` of every request the fake answered, in order."""
        return [f"{e.method} {e.route}" for e in self.fake.journal.requests(since=since)]

    def sent_count(self) -> int:
        """How many requests the provider has started (client side, so nothing is pending)."""
        return len(self.recorded.sent)

    def sent_since(self, count: int) -> list[str]:
        """``METHOD path`` of the requests started after ``sent_count()`` returned ``count``."""
        return [f"{s.method} {urlsplit(s.url).path}" for s in self.recorded.sent[count:]]

    async def wait_sent(self, path_suffix: str, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until the provider has started ``count`` requests whose path ends with the
        suffix."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        sent = self.recorded.sent
        while sum(urlsplit(s.url).path.endswith(path_suffix) for s in sent) < count:
            assert loop.time() < deadline, f"fewer than {count} requests to *{path_suffix} sent"
            await asyncio.sleep(0.001)

    def last_seq(self) -> int:
        entries = list(self.fake.journal)
        return entries[-1].seq if entries else 0

    async def acquire(self) -> Lease:
        return await self.provider.acquire(**self.ids)

    async def execute(self, lease: Lease, command: str, **kwargs: Any) -> ExecuteResult:
        return await self.provider.execute(**self.ids, lease=lease, command=command, **kwargs)

    async def resume(self, lease: Lease) -> Lease:
        return await self.provider.resume(**self.lease_args(lease))

    async def release(self, lease: Lease) -> None:
        await self.provider.release(**self.lease_args(lease))

    async def destroy(self, lease: Lease) -> None:
        await self.provider.destroy(**self.lease_args(lease))


@pytest.fixture
def transition_ms() -> float:
    """How long the fake's pause/resume/delete transitions take (override per module/test)."""
    return 0.0


@pytest.fixture
async def env(recorded: RecordedSession, transition_ms: float) -> AsyncIterator[FakeEnv]:
    from fake_server import FakeCreateOS, ServerConfig, serve

    fake = FakeCreateOS(ServerConfig(transition_ms=transition_ms, seed=1))
    async with serve(fake) as url:
        api_key = fake.create_tenant()
        config: dict[str, Any] = {
            "apiUrl": url,
            "apiKey": api_key,
            "shape": "s-1vcpu-1gb",
            "rootfs": "devbox:1",
            "reuseLease": True,
            "requestSpacingMs": 0,
            "pollIntervalMs": 2,
            "timeoutMs": 5_000,
        }
        provider = LeaseProvider(
            session=recorded.session, terminate_timeout_ms=2_000, reconnect_delay_ms=1
        )
        try:
            yield FakeEnv(fake, url, api_key, config, provider, recorded)
        finally:
            await provider.shutdown()
