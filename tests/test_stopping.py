"""Stopping a serving fake: at once, whatever its clients are doing, and every client sees its
connection end rather than wait on it."""

from __future__ import annotations

import asyncio
import base64
import gc
import inspect
import json
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from fake_server import FakeCreateOS, ServerConfig, gathering
from fake_server.http_protocol import harden_connections
from fake_server.runner import LOOPBACK, start_site, stop_site
from tests.conftest import eventually

#: A runner's shutdown timeout no test could wait out: a stop that waits for a request in
#: flight by design (aiohttp's own shutdown does) fails the test's bound instead of passing late.
HOUR = 3600.0
#: How long a stop may take here: generous, and far below HOUR.
BOUND_S = 10.0
KEY = "skp_stop"
FOREVER = "echo up; sleep 100000"

Session = aiohttp.ClientSession


async def _sandbox(session: Session, url: str) -> str:
    async with session.post(f"{url}/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}) as answer:
        assert answer.status == 200, await answer.text()
        return str((await answer.json())["data"]["id"])


async def _first_frame(response: aiohttp.ClientResponse) -> None:
    """Wait for the stream's first frame (the command's ``up``): the stream is open."""
    assert response.status == 200, await response.text()
    assert json.loads(await response.content.readline())


async def _held_at_a_gate(fake: FakeCreateOS, session: Session, url: str) -> asyncio.Future[Any]:
    sandbox = await _sandbox(session, url)
    fake.faults.gate("g", route="GET /v1/sandboxes/{id}")
    request = asyncio.ensure_future(session.get(f"{url}/v1/sandboxes/{sandbox}"))
    await fake.faults.gates["g"].wait_held(1)
    return request


async def _exec_stream(fake: FakeCreateOS, session: Session, url: str) -> asyncio.Future[Any]:
    sandbox = await _sandbox(session, url)
    body = {"cmd": "/bin/bash", "args": ["-c", FOREVER]}
    response = await session.post(f"{url}/v1/sandboxes/{sandbox}/exec?stream=true", json=body)
    await _first_frame(response)
    return asyncio.ensure_future(response.content.read())


async def _process_follow(fake: FakeCreateOS, session: Session, url: str) -> asyncio.Future[Any]:
    sandbox = await _sandbox(session, url)
    base = f"{url}/v1/sandboxes/{sandbox}/processes"
    async with session.post(base, json={"cmd": "/bin/bash", "args": ["-c", FOREVER]}) as answer:
        process = (await answer.json())["data"]["process_id"]
    response = await session.get(f"{base}/{process}/connect")
    await _first_frame(response)
    return asyncio.ensure_future(response.content.read())


InFlight = Callable[[FakeCreateOS, Session, str], Awaitable["asyncio.Future[Any]"]]


async def _client_sees_the_end(request: asyncio.Future[Any]) -> None:
    """The request in flight ends with its connection (an error, or a stream cut short)."""
    try:
        outcome = await asyncio.wait_for(request, BOUND_S)
    except aiohttp.ClientError:
        return
    assert b'"exit_code"' not in outcome  # a stream that ends without its command's end


def _other_tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


@pytest.fixture
def fake() -> FakeCreateOS:
    return FakeCreateOS(ServerConfig(seed=7, transition_ms=0))


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    async with aiohttp.ClientSession(headers={"X-Api-Key": KEY}) as session:
        yield session


@pytest.mark.parametrize("in_flight", [_held_at_a_gate, _exec_stream, _process_follow])
async def test_a_runner_stops_without_waiting_for_a_request_in_flight(
    fake: FakeCreateOS, session: Session, in_flight: InFlight
) -> None:
    runner = web.AppRunner(fake.app(), handle_signals=False, shutdown_timeout=HOUR)
    await runner.setup()
    harden_connections(runner, fake)
    site = web.TCPSite(runner, LOOPBACK, 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    request = await in_flight(fake, session, f"http://{host}:{port}")
    try:
        await asyncio.wait_for(runner.cleanup(), BOUND_S)
        await _client_sees_the_end(request)
    finally:
        request.cancel()  # a failed stop leaves it waiting
    assert _other_tasks() == set()


@pytest.mark.parametrize("in_flight", [_held_at_a_gate, _exec_stream])
async def test_aiohttp_test_server_closes_without_waiting_for_a_request_in_flight(
    fake: FakeCreateOS, session: Session, in_flight: InFlight
) -> None:
    # What createos_aiohttp_server does at the end of each test (its shutdown timeout: 60 s).
    server = TestServer(fake.app(), host=LOOPBACK)
    await server.start_server()
    assert server.runner is not None
    harden_connections(server.runner, fake)
    request = await in_flight(fake, session, str(server.make_url("")).rstrip("/"))
    try:
        await asyncio.wait_for(server.close(), BOUND_S)
        await _client_sees_the_end(request)
    finally:
        request.cancel()
    assert _other_tasks() == set()


async def test_a_client_that_stopped_reading_is_cut_off_by_the_stop(fake: FakeCreateOS) -> None:
    # Closing its connection would wait until what is buffered for it is sent: a server whose
    # loop ends after the stop (BackgroundServer, the CLI) never sends it, and the socket
    # stayed open (its client waiting) until garbage collection.
    runner, url = await start_site(fake, LOOPBACK, 0)
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(headers={"X-Api-Key": KEY}) as session:
        sandbox = await _sandbox(session, url)
    body = json.dumps({"cmd": "/bin/bash", "args": ["-c", f"while true; do echo {'x' * 60}; done"]})
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.setblocking(False)
    try:
        await loop.sock_connect(client, runner.addresses[0][:2])
        head = (
            f"POST /v1/sandboxes/{sandbox}/exec?stream=true HTTP/1.1\r\nHost: x\r\n"
            f"X-Api-Key: {KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        await loop.sock_sendall(client, head.encode() + body.encode())
        assert runner.server is not None
        await eventually(lambda: len(runner.server.connections) == 1)  # type: ignore[union-attr]
        transport = runner.server.connections[0].transport
        assert transport is not None
        await eventually(lambda: transport.get_write_buffer_size() > 0)  # the client lags
        await asyncio.wait_for(stop_site(fake, runner), BOUND_S)
        assert transport.get_write_buffer_size() == 0
        await asyncio.wait_for(_drained(loop, client), BOUND_S)
    finally:
        client.close()
    assert _other_tasks() == set()


async def _drained(loop: asyncio.AbstractEventLoop, client: socket.socket) -> None:
    """Read until the connection ends (closed or reset)."""
    try:
        while await loop.sock_recv(client, 1 << 16):
            pass
    except ConnectionResetError:
        pass


def _accepted_but_not_set_up() -> bool:
    """Whether asyncio accepted a connection whose setup (a task of its own, run a loop turn
    later) has not begun."""
    return any(
        task.get_coro().__name__ == "_accept_connection2"  # type: ignore[union-attr]
        and inspect.getcoroutinestate(task.get_coro()) == inspect.CORO_CREATED  # type: ignore[arg-type]
        for task in asyncio.all_tasks()
    )


async def test_a_connection_accepted_as_the_server_stops_is_closed(fake: FakeCreateOS) -> None:
    runner, _ = await start_site(fake, LOOPBACK, 0)
    loop = asyncio.get_running_loop()
    # A blocking connect on loopback: the kernel completes it, and the loop accepts it soon.
    client = socket.create_connection(runner.addresses[0][:2])
    client.setblocking(False)
    collecting = gc.isenabled()
    gc.disable()  # a leaked socket would be closed by whichever collection came first
    try:
        for _ in range(100):
            if _accepted_but_not_set_up():
                break
            await asyncio.sleep(0)
        else:
            pytest.fail("the loop never accepted the connection")
        await stop_site(fake, runner)  # in this turn (wait_for would start it a turn later)
        await asyncio.wait_for(_drained(loop, client), BOUND_S)
    finally:
        client.close()
        if collecting:
            gc.enable()


def test_a_stop_does_not_wait_for_a_shell_parsing_on_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shell parses a command over 64 KiB on a worker thread (up to ~1 s, nothing can cut it
    # short); asyncio.run, which the CLI serves in, waited for the loop's executor threads.
    parsing, release = threading.Event(), threading.Event()
    analyzed = gathering._analyzed

    def slow_analysis(bash: Any, text: str) -> Any:
        parsing.set()
        release.wait()
        return analyzed(bash, text)

    monkeypatch.setattr(gathering, "_analyzed", slow_analysis)

    async def serve_until_a_parse_runs() -> None:
        fake = FakeCreateOS(ServerConfig(seed=7, transition_ms=0))
        runner, url = await start_site(fake, LOOPBACK, 0)
        async with aiohttp.ClientSession(headers={"X-Api-Key": KEY}) as session:
            base = f"{url}/v1/sandboxes/{await _sandbox(session, url)}/processes"
            shell = {"cmd": "bash", "pty": {"rows": 24, "cols": 80}}
            async with session.post(base, json=shell) as answer:
                process = (await answer.json())["data"]["process_id"]
            line = base64.b64encode(b"echo" + b" a" * (50 << 10) + b"\n").decode()
            async with session.post(f"{base}/{process}/input", json={"data_base64": line}):
                pass
        await eventually(parsing.is_set)
        await stop_site(fake, runner)

    served = threading.Thread(target=asyncio.run, args=(serve_until_a_parse_runs(),))
    served.start()
    try:
        served.join(BOUND_S)
        assert not served.is_alive(), "the stop waited for the parse"
    finally:
        release.set()
        served.join()
