"""Requests whose clients give up end on the server too: a latency of days (or on a manual
clock that never moves) and a ``connect`` stream waiting for output no longer keep a task, a
timer and a connection until the server stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fake_server import FakeCreateOS, ManualClock, ServerConfig, serve
from fake_server.app import CLIENT_LEFT
from fake_server.routes import common
from tests.conftest import eventually

KEY = {"X-Api-Key": "skp_abandon"}


@dataclass
class Served:
    """A manual-clock fake served on loopback, a client session with a key, one sandbox."""

    fake: FakeCreateOS
    clock: ManualClock
    session: aiohttp.ClientSession
    sandbox: str

    async def start(self, cmd: str) -> str:
        """The id of a new managed process running ``cmd``; its URL is under :attr:`processes`."""
        async with self.session.post(self.processes, json={"cmd": cmd}) as started:
            return str((await started.json())["data"]["process_id"])

    @property
    def processes(self) -> str:
        return f"/v1/sandboxes/{self.sandbox}/processes"


@contextlib.asynccontextmanager
async def served_sandbox() -> AsyncIterator[Served]:
    fake = FakeCreateOS(ServerConfig(seed=1, manual_clock=True, transition_ms=0))
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    async with serve(fake) as url, aiohttp.ClientSession(url, headers=KEY) as session:
        async with session.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as created:
            sandbox = (await created.json())["data"]["id"]
        yield Served(fake, clock, session, sandbox)


async def give_up(request: asyncio.Future[Any]) -> None:
    """The client gives up on ``request`` and closes its connection."""
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request


async def test_a_client_leaving_a_latency_fault_ends_its_request() -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, manual_clock=True, transition_ms=0))
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    fake.faults.latency(86_400_000, route="GET /v1/whoami")  # a day, on a clock that stays put
    async with serve(fake) as url, aiohttp.ClientSession(url, headers=KEY) as session:
        for _ in range(3):
            request = asyncio.ensure_future(session.get("/v1/whoami"))
            await eventually(lambda: clock.pending == 1)
            await give_up(request)
            await eventually(lambda: clock.pending == 0)  # the server let go of its timer
        entries = fake.journal.requests(route="GET /v1/whoami")
        assert [entry.detail for entry in entries] == ["client closed the connection"] * 3


async def test_the_fakes_own_connections_tell_a_waiting_request_its_client_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a connection the fake hardened (``serve``, ``BackgroundServer``, the fixtures), a
    waiting request learns that its client left when the connection is lost, not by polling:
    with a poll that would take an hour, the request still ends at once."""
    monkeypatch.setattr(common, "CLIENT_POLL_S", 3600.0)
    fake = FakeCreateOS(ServerConfig(seed=1, manual_clock=True, transition_ms=0))
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    fake.faults.latency(86_400_000, route="GET /v1/whoami")
    async with serve(fake) as url, aiohttp.ClientSession(url, headers=KEY) as session:
        request = asyncio.ensure_future(session.get("/v1/whoami"))
        await eventually(lambda: clock.pending == 1)
        await give_up(request)
        await eventually(lambda: len(fake.journal.requests(route="GET /v1/whoami")) == 1)
        assert clock.pending == 0


async def test_a_connect_stream_ends_when_its_client_leaves_on_a_manual_clock() -> None:
    async with served_sandbox() as served:
        session, processes = served.session, served.processes
        process = await served.start("cat")
        connect = f"{processes}/{process}/connect"
        # Before any frame (the stream is open but quiet: no output, no heartbeat on this
        # clock) ...
        quiet = await session.get(connect)
        assert quiet.status == 200
        await eventually(lambda: process_waits(served.fake, served.sandbox, process))
        quiet.close()
        await eventually(lambda: len(connects(served.fake)) == 1)
        # ... and while following, after a first frame.
        async with session.post(
            f"{processes}/{process}/input", json={"data_base64": "aGkK"}
        ) as sent:
            assert sent.status == 200
        stream = await session.get(connect)
        assert stream.status == 200
        assert (await stream.content.readline()).startswith(b'{"type":"data"')
        stream.close()
        await eventually(lambda: len(connects(served.fake)) == 2)
        # Both answered 200 (their headers went out); the journal says how they ended.
        assert [(e.status, e.detail) for e in connects(served.fake)] == [
            (200, "client closed the connection")
        ] * 2
        # The process itself goes on (losing the output connection does not stop it).
        async with session.get(f"{processes}/{process}") as view:
            assert (await view.json())["data"]["state"] == "running"


def connects(fake: FakeCreateOS) -> list[Any]:
    return fake.journal.requests(route="GET /v1/sandboxes/{id}/processes/{pid}/connect")


def process_waits(fake: FakeCreateOS, sandbox: str, process: str) -> bool:
    """Whether someone waits for the process's next output (a connect that got this far)."""
    return bool(fake.find_sandbox(sandbox).processes[process]._waiters)


async def test_an_answer_its_client_no_longer_waits_for_is_journaled_as_such() -> None:
    """A handler that does not watch its client ends after the client left: the journal keeps
    what the fake answered, and says nobody got it. (A buffered exec, on a plain runner of
    the app: on connections the fake hardened, and where aiohttp cancels handlers, as its test
    server does, it ends with its client.)"""
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    started, finish = asyncio.Event(), asyncio.Event()

    async def block(ctx: Any, args: list[str]) -> int:
        started.set()
        await finish.wait()
        return 0

    fake.commands.register("block", block)
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = runner.server
    assert server is not None
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession(url, headers=KEY) as session:
            async with session.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as created:
                sandbox = (await created.json())["data"]["id"]
            exec_path = f"/v1/sandboxes/{sandbox}/exec"
            request = asyncio.ensure_future(session.post(exec_path, json={"cmd": "block"}))
            await started.wait()
            [connection] = server.connections
            request.cancel()  # the client gives up and closes its connection
            with pytest.raises(asyncio.CancelledError):
                await request
            await eventually(lambda: connection.transport is None)  # the server saw it go
            finish.set()
            await eventually(lambda: bool(fake.journal.requests(route=f"POST {exec_path}")))
            [entry] = fake.journal.requests(route=f"POST {exec_path}")
            assert (entry.status, entry.detail) == (200, CLIENT_LEFT)
            assert "-> 200 [the client left before the answer]" in entry.describe()
            async with session.get("/v1/whoami") as answered:  # a client that waits: unchanged
                assert answered.status == 200
            assert fake.journal.requests(route="GET /v1/whoami")[0].detail is None
    finally:
        await runner.cleanup()


async def test_a_wait_long_poll_ends_when_its_client_leaves() -> None:
    # PC-N long-polls wait?scope=tree&timeout_ms=30000 and gives up on cancel or timeout. The
    # wait held its task and timer until the timeout passed on the fake's clock (on a manual
    # clock, until the process exited), and the journal did not show the request meanwhile.
    async with served_sandbox() as served:
        process = await served.start("cat")
        wait = f"{served.processes}/{process}/wait?scope=tree&timeout_ms=30000"
        request = asyncio.ensure_future(served.session.get(wait))
        await eventually(lambda: served.clock.pending == 1)  # the wait's timeout timer
        await give_up(request)
        await eventually(lambda: served.clock.pending == 0)  # the server let go of its timer
        fake = served.fake
        entries = fake.journal.requests(route="GET /v1/sandboxes/{id}/processes/{pid}/wait")
        assert [entry.detail for entry in entries] == ["client closed the connection"]


async def test_a_buffered_exec_whose_client_left_stops_its_command() -> None:
    # aiohttp does not cancel a handler whose client left: the exec's command ran on for
    # nobody (here, it would have created the file once the clock moved on).
    async with served_sandbox() as served:
        fake, clock, session, sandbox = served.fake, served.clock, served.session, served.sandbox
        script = {"cmd": "/bin/bash", "args": ["-lc", "sleep 3; touch /tmp/after"]}
        request = asyncio.ensure_future(session.post(f"/v1/sandboxes/{sandbox}/exec", json=script))
        await eventually(lambda: clock.pending == 1)  # the command sleeps
        await give_up(request)
        await eventually(lambda: clock.pending == 0)  # the command was stopped, its sleep too
        clock.advance(3)
        async with session.get(f"/v1/sandboxes/{sandbox}/files?path=/tmp/after") as after:
            assert after.status == 404
        # The sandbox still runs commands for clients that stay.
        async with session.post(
            f"/v1/sandboxes/{sandbox}/exec", json={"cmd": "echo", "args": ["here"]}
        ) as answered:
            assert (await answered.json())["data"]["result"]["stdout"] == "here\n"
        entries = fake.journal.requests(route="POST /v1/sandboxes/{id}/exec")
        assert [(e.status, e.detail) for e in entries] == [
            (None, "cancelled: the client left or the server stopped"),
            (200, None),
        ]
