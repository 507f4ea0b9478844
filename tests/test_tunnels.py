"""TCP tunnels: ``POST …/tunnel/{port}`` upgrades to raw bytes relayed to what a test made
listen on that port in the sandbox; nothing else ever answers."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from fake_server.sandboxes import CreateSpec
from fake_server.tunnels import TunnelConnection, echo
from tests.conftest import Client, create_sandbox, eventually

SHAPE = "s-1vcpu-1gb"
Open = Callable[..., Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]]]


@pytest.fixture
async def server(fake: FakeCreateOS, aiohttp_server: Any) -> TestServer:
    served: TestServer = await aiohttp_server(fake.app())
    return served


@pytest.fixture
async def open_tunnel(server: TestServer, api_key: str) -> AsyncIterator[Open]:
    """Send a tunnel request by hand (as a client library does) and read the answer's head."""
    writers: list[asyncio.StreamWriter] = []

    async def open_(
        sandbox_id: str, port: int, *, upgrade: str = "tcp-tunnel"
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writers.append(writer)
        head = (
            f"POST /v1/sandboxes/{sandbox_id}/tunnel/{port} HTTP/1.1\r\n"
            f"Host: 127.0.0.1\r\nX-Api-Key: {api_key}\r\nContent-Length: 0\r\n"
            f"Connection: Upgrade\r\nUpgrade: {upgrade}\r\n\r\n"
        )
        writer.write(head.encode())
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        return reader, writer, answer

    yield open_
    for writer in writers:
        writer.close()


async def test_a_tunnel_relays_bytes_to_the_service_on_its_port(
    client: Client, fake: FakeCreateOS, open_tunnel: Open
) -> None:
    sandbox = await create_sandbox(client)
    fake.tunnels.listen(sandbox["id"], 7, echo)
    reader, writer, head = await open_tunnel(sandbox["id"], 7)
    assert head.startswith(b"HTTP/1.1 101 ")
    assert b"upgrade: tcp-tunnel" in head.lower()
    for chunk in (b"hello", b"\x00\xffbinary\r\n\r\nGET / HTTP/1.1\r\n"):
        writer.write(chunk)
        assert await asyncio.wait_for(reader.readexactly(len(chunk)), 5) == chunk
    # Closing our side ends the echo, and the server closes the tunnel.
    writer.write_eof()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    # A test server cancels a handler whose client left (handler_cancellation): so the
    # journal says (once the server has seen the close), where `fake-createos serve` records
    # the 101 (see the next test).
    route = "POST /v1/sandboxes/{id}/tunnel/{port}"
    await eventually(lambda: bool(fake.journal.requests(route=route)))
    (entry,) = fake.journal.requests(route=route)
    assert entry.detail == "cancelled: the client left or the server stopped"


def test_a_served_fake_journals_the_tunnel_as_switched() -> None:
    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    with BackgroundServer(fake) as background:
        key = background.call(fake.create_tenant)
        sandbox = background.call(
            fake.sandboxes.create, background.call(fake.tenant, key), CreateSpec(shape=SHAPE)
        )
        background.call(fake.tunnels.listen, sandbox.id, 7, echo)
        host, port = background.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as tunnel:
            tunnel.sendall(
                f"POST /v1/sandboxes/{sandbox.id}/tunnel/7 HTTP/1.1\r\nHost: x\r\n"
                f"X-Api-Key: {key}\r\nConnection: Upgrade\r\nUpgrade: tcp-tunnel\r\n\r\n".encode()
            )
            head = b""
            while b"\r\n\r\n" not in head:
                head += tunnel.recv(1024)
            assert head.startswith(b"HTTP/1.1 101 ")
            tunnel.sendall(b"over the served tunnel")
            assert tunnel.recv(1024) == b"over the served tunnel"
        route = "POST /v1/sandboxes/{id}/tunnel/{port}"
        entries = background.call(fake.journal.requests, route=route)
        deadline = time.monotonic() + 5
        while not entries:  # journaled once the server saw the connection close
            assert time.monotonic() < deadline
            time.sleep(0.005)
            entries = background.call(fake.journal.requests, route=route)
        assert [entry.status for entry in entries] == [101]


async def test_a_service_can_talk_first_and_end_the_tunnel(
    client: Client, fake: FakeCreateOS, open_tunnel: Open
) -> None:
    sandbox = await create_sandbox(client)
    seen: list[bytes] = []

    async def banner(connection: TunnelConnection) -> None:
        await connection.write(b"SSH-2.0-fake\r\n")
        seen.append(await connection.read())

    fake.tunnels.listen(sandbox["id"], 22, banner)
    reader, writer, _ = await open_tunnel(sandbox["id"], 22)
    assert await asyncio.wait_for(reader.readline(), 5) == b"SSH-2.0-fake\r\n"
    writer.write(b"SSH-2.0-client\r\n")
    assert await asyncio.wait_for(reader.read(), 5) == b""  # the service returned: closed
    assert seen == [b"SSH-2.0-client\r\n"]


async def test_a_large_transfer_goes_through_whole(
    client: Client, fake: FakeCreateOS, open_tunnel: Open
) -> None:
    sandbox = await create_sandbox(client)
    fake.tunnels.listen(sandbox["id"], 9, echo)
    reader, writer, _ = await open_tunnel(sandbox["id"], 9)
    payload = bytes(range(256)) * 8192  # 2 MiB: more than either side buffers

    async def send() -> None:
        writer.write(payload)
        await writer.drain()
        writer.write_eof()

    sending = asyncio.ensure_future(send())
    received = await asyncio.wait_for(reader.read(), 10)
    await sending
    assert received == payload


async def refusal(reader: asyncio.StreamReader, head: bytes) -> dict[str, Any]:
    length = int(
        next(
            line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        ).split(b":")[1]
    )
    body: dict[str, Any] = json.loads(await reader.readexactly(length))
    return body


async def test_nothing_listening_is_a_502_and_the_upgrade_header_is_required(
    client: Client, fake: FakeCreateOS, open_tunnel: Open
) -> None:
    sandbox = await create_sandbox(client)
    reader, _, head = await open_tunnel(sandbox["id"], 8080)
    assert head.startswith(b"HTTP/1.1 502 ")
    body = await refusal(reader, head)
    assert body["message"] == "nothing listens on port 8080 in the sandbox"
    fake.tunnels.listen(sandbox["id"], 8080, echo)
    reader, _, head = await open_tunnel(sandbox["id"], 8080, upgrade="websocket")
    assert head.startswith(b"HTTP/1.1 426 ")
    assert b"upgrade: tcp-tunnel" in head.lower()


@pytest.mark.parametrize("port", ["0", "65536", "http", "-1"])
async def test_a_port_out_of_range_is_refused(client: Client, port: str) -> None:
    sandbox = await create_sandbox(client)
    response = await client.post(
        f"/v1/sandboxes/{sandbox['id']}/tunnel/{port}",
        headers={"Connection": "Upgrade", "Upgrade": "tcp-tunnel"},
    )
    assert response.status == 400
    assert "port" in (await response.json())["data"]


async def test_only_a_running_sandbox_of_the_tenant_has_tunnels(
    client: Client, fake: FakeCreateOS, open_tunnel: Open
) -> None:
    sandbox = await create_sandbox(client)
    fake.tunnels.listen(sandbox["id"], 7, echo)
    await client.post(f"/v1/sandboxes/{sandbox['id']}/pause")
    _, _, head = await open_tunnel(sandbox["id"], 7)
    assert head.startswith(b"HTTP/1.1 409 ")
    _, _, head = await open_tunnel("sb_not_yours", 7)
    assert head.startswith(b"HTTP/1.1 404 ")


async def test_the_control_api_starts_and_stops_the_built_in_echo(
    client: Client, fake: FakeCreateOS, open_tunnel: Open
) -> None:
    sandbox = await create_sandbox(client)
    path = f"/_fake/sandboxes/{sandbox['id']}/tunnels/5000"
    refused = await client.put(path, json={"service": "shell"})
    assert refused.status == 400
    assert (await client.put(path, json={"service": "echo"})).status == 200
    reader, writer, head = await open_tunnel(sandbox["id"], 5000)
    assert head.startswith(b"HTTP/1.1 101 ")
    writer.write(b"ping")
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"ping"
    assert (await client.delete(path)).status == 200
    assert (await client.delete(path)).status == 404
    assert fake.tunnels.ports(sandbox["id"]) == []


async def test_the_control_api_starts_no_service_on_a_sandbox_going_away(
    client: Client, fake: FakeCreateOS
) -> None:
    paused, doomed = await create_sandbox(client), await create_sandbox(client)
    assert (await client.post(f"/v1/sandboxes/{paused['id']}/pause")).status == 200
    assert (await client.delete(f"/v1/sandboxes/{doomed['id']}")).status == 200
    # A paused sandbox's service answers once it runs again ...
    path = f"/_fake/sandboxes/{paused['id']}/tunnels/5000"
    assert (await client.put(path, json={"service": "echo"})).status == 200
    # ... a destroyed one's never would: refused, not stored.
    refused = await client.put(
        f"/_fake/sandboxes/{doomed['id']}/tunnels/5000", json={"service": "echo"}
    )
    assert refused.status == 409
    assert "destroyed" in (await refused.json())["message"]
    assert fake.tunnels.ports(doomed["id"]) == []


async def test_services_go_with_their_sandbox_and_with_a_reset(
    client: Client, fake: FakeCreateOS
) -> None:
    sandbox = await create_sandbox(client)
    fake.tunnels.listen(sandbox["id"], 7, echo)
    fake.tunnels.listen(sandbox["id"], 8, echo)
    assert fake.tunnels.ports(sandbox["id"]) == [7, 8]
    await client.delete(f"/v1/sandboxes/{sandbox['id']}")
    assert fake.tunnels.ports(sandbox["id"]) == []
    other = await create_sandbox(client)
    fake.tunnels.listen(other["id"], 7, echo)
    fake.reset()
    assert fake.tunnels.service(other["id"], 7) is None
    with pytest.raises(ValueError, match="port must be between 1 and 65535"):
        fake.tunnels.listen(other["id"], 0, echo)
