"""The official Python SDK's network, disk and bandwidth-recharge methods against the fake,
unchanged (the SDK is synchronous: the fake runs in a background thread, as in test_sdk.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from createos import (
    AttachDiskOptions,
    CreateSandboxRequest,
    DetachDiskOptions,
    DiskConfig,
    DiskCreateRequest,
    DiskCredentials,
    DiskKind,
    DiskMountStatus,
    NetworkCreateRequest,
    NetworkEntry,
    RunCommandRequest,
)

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from tests.test_sdk import SHAPE, Tenant, api_error, sdk_client

SECRET = "sdk-secret-never-shown"


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(FakeCreateOS(ServerConfig(seed=5, transition_ms=0, strict=True))) as bg:
        yield bg


@pytest.fixture
def tenant(server: BackgroundServer) -> Iterator[Tenant]:
    key = server.call(server.fake.create_tenant)
    tenant_id = server.call(server.fake.tenant, key).id
    sent: list[httpx.Request] = []
    with sdk_client(server.url, key, sent) as client:
        yield Tenant(server, key, tenant_id, client, sent)
    server.call(server.fake.drop_tenant, key)


def _disk_request(name: str = "data") -> DiskCreateRequest:
    return DiskCreateRequest(
        name=name,
        kind=DiskKind.S3,
        config=DiskConfig(bucket="team", endpoint="https://s3.example.test", region="eu-1"),
        credentials=DiskCredentials(access_key="AKIA", secret_key=SECRET),
    )


def test_networks_through_the_sdk(tenant: Tenant) -> None:
    networks = tenant.client.networks
    made = networks.create(NetworkCreateRequest(name="backend"))
    assert made.id.startswith("net_")
    assert made.created_at is not None
    sandbox = tenant.client.create_sandbox(
        CreateSandboxRequest(shape=SHAPE, networks=[NetworkEntry(id="backend")])
    )
    other = tenant.client.create_sandbox(CreateSandboxRequest(shape=SHAPE))
    other.attach_network(made.id)
    got = networks.get("backend")
    assert got.member_count == 2
    assert {m.sandbox_id for m in got.members} == {sandbox.id, other.id}
    assert {m.ip_address for m in got.members} == {sandbox.ip_address, other.ip_address}
    assert [n.name for n in networks.list()] == ["backend"]
    assert api_error(lambda: networks.delete("backend")).status_code == 409
    other.detach_network("backend")
    sandbox.destroy()
    networks.delete(made.id)
    assert api_error(lambda: networks.get(made.id)).status_code == 404


def test_disks_through_the_sdk(tenant: Tenant) -> None:
    disks = tenant.client.disks
    disk = disks.create(_disk_request())
    assert disk.id.startswith("disk_")
    assert disk.kind is DiskKind.S3
    assert disk.config.bucket == "team"
    assert disks.get("data").id == disk.id
    assert [d.name for d in disks.list()] == ["data"]
    assert disks.rotate_credentials("data", DiskCredentials("AKIA2", "other")).id == disk.id
    first = tenant.client.create_sandbox(CreateSandboxRequest(shape=SHAPE))
    # The SDK checks that the answer names this sandbox.
    first.attach_disk(AttachDiskOptions(disk_id=disk.id, mount_path="/mnt/data"))
    [mounted] = first.list_disks()
    assert (mounted.disk_id, mounted.mount_path) == (disk.id, "/mnt/data")
    assert mounted.mount_status is DiskMountStatus.MOUNTED
    first.shell("echo kept > /mnt/data/kept.txt")
    assert api_error(lambda: disks.delete("data")).status_code == 409
    assert first.detach_disk(DetachDiskOptions(disk_id="data", mount_path="/mnt/data")) is True
    assert first.detach_disk(DetachDiskOptions(disk_id="data")) is False
    first.destroy()
    second = tenant.client.create_sandbox(CreateSandboxRequest(shape=SHAPE))
    second.attach_disk(AttachDiskOptions(disk_id="data", mount_path="/srv"))
    echoed = second.run_command(RunCommandRequest(command="cat", arguments=["/srv/kept.txt"]))
    assert echoed.result.standard_output == "kept\n"
    with second.files.download("/srv/kept.txt") as download:
        assert download.read() == b"kept\n"
    second.destroy()
    assert disks.delete("data") is True


def test_bandwidth_recharge_through_the_sdk(tenant: Tenant) -> None:
    sandbox = tenant.client.create_sandbox(CreateSandboxRequest(shape=SHAPE))
    assert sandbox.recharge_bandwidth(1 << 20).quota_bytes == -1  # unmetered: a no-op
    tenant.call(tenant.server.fake.set_credit, tenant.key, has_credit=False)
    assert api_error(lambda: sandbox.recharge_bandwidth(1 << 20)).status_code == 402
