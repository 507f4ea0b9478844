"""Persistent disks over HTTP: registrations (name rule, credentials never shown), lookups by id
or name, PATCH, delete (refused while attached), mounts in running sandboxes, and files that
outlive the sandbox that wrote them — through exec and the files API alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fake_server import FakeCreateOS, ServerConfig
from fake_server.lifecycle import Status
from tests.conftest import Client, ClientFactory, create_sandbox, data_of
from tests.test_api_runtime import run
from tests.test_api_sandboxes import expect_error

SECRET = "wJalrXUtnFEMI-never-shown"
CONFIG = {"bucket": "team-data", "endpoint": "https://s3.example.test", "region": "eu-1"}


def disk_body(name: str = "data", **changes: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "s3",
        "config": CONFIG,
        "credentials": {"access_key": "AKIAFAKE", "secret_key": SECRET},
        **changes,
    }


async def create_disk(client: Client, name: str = "data", **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = await data_of(
        await client.post("/v1/disks", json=disk_body(name, **changes))
    )
    return data


async def attach(client: Client, sandbox_id: str, disk: str, mount_path: str) -> Any:
    return await client.post(
        f"/v1/sandboxes/{sandbox_id}/disks", json={"disk_id": disk, "mount_path": mount_path}
    )


async def test_create_get_list_patch_delete(client: Client) -> None:
    disk = await create_disk(client)
    assert disk["id"].startswith("disk_")
    assert disk == {
        "id": disk["id"],
        "name": "data",
        "kind": "s3",
        "config": CONFIG,
        "created_at": disk["created_at"],
    }
    assert await data_of(await client.get("/v1/disks/data")) == disk
    assert await data_of(await client.get(f"/v1/disks/{disk['id']}")) == disk
    await create_disk(client, "more")
    listed = await data_of(await client.get("/v1/disks", params={"limit": "1"}))
    assert [d["name"] for d in listed["data"]] == ["data"]
    assert listed["pagination"] == {"total": 2, "limit": 1, "offset": 0, "count": 1}
    rotated = await client.patch(
        "/v1/disks/data", json={"credentials": {"access_key": "A2", "secret_key": "S2"}}
    )
    assert await data_of(rotated) == disk
    await expect_error(await client.patch("/v1/disks/data", json={"name": "x"}), 400, "name")
    await expect_error(await client.patch("/v1/disks/data", json={}), 400, "credentials")
    assert await data_of(await client.delete("/v1/disks/data")) == {"deleted": True}
    await expect_error(await client.get("/v1/disks/data"), 404, "disk not found")
    await expect_error(await client.delete("/v1/disks/data"), 404, "disk not found")


async def test_bad_create_bodies(client: Client) -> None:
    await create_disk(client)
    await expect_error(await client.post("/v1/disks", json=disk_body()), 409, "exists")
    cases = [
        (disk_body("Data"), "name"),
        (disk_body("x" * 64), "name"),
        (disk_body(kind="gcs"), "kind"),
        (disk_body(config={"bucket": "b"}), "config.endpoint"),
        (disk_body(credentials={"access_key": "a", "secret_key": ""}), "credentials.secret_key"),
        ({**disk_body(), "extra": True}, "extra"),
    ]
    for body, field in cases:
        error = await expect_error(await client.post("/v1/disks", json=body), 400)
        assert field in error["data"], (body, error)


async def test_credentials_are_never_answered_journaled_or_shown(
    fake: FakeCreateOS, client: Client
) -> None:
    await create_disk(client)
    sandbox = await create_sandbox(client)
    await attach(client, sandbox["id"], "data", "/mnt/data")
    await client.patch(
        "/v1/disks/data", json={"credentials": {"access_key": "A", "secret_key": SECRET}}
    )
    seen = [
        await (await client.get(path)).text()
        for path in ("/v1/disks", "/v1/disks/data", f"/v1/sandboxes/{sandbox['id']}/disks")
    ]
    seen.append(json.dumps([entry.as_json() for entry in fake.journal.entries()]))
    seen.append(json.dumps(fake.state(), default=str))
    for text in seen:
        assert SECRET not in text
        assert "AKIAFAKE" not in text


async def test_attach_list_detach(client: Client) -> None:
    disk = await create_disk(client)
    sandbox = await create_sandbox(client)
    base = f"/v1/sandboxes/{sandbox['id']}/disks"
    # The answer names the sandbox: the SDKs check it.
    assert await data_of(await attach(client, sandbox["id"], "data", "/mnt/data")) == {
        "id": sandbox["id"]
    }
    await expect_error(await attach(client, sandbox["id"], disk["id"], "/mnt/data/x"), 409, "mount")
    await expect_error(await attach(client, sandbox["id"], "nope", "/mnt/x"), 404, "disk not found")
    await expect_error(await attach(client, sandbox["id"], "data", "relative"), 400, "mount_path")
    await expect_error(await attach(client, sandbox["id"], "data", "/bin"), 400, "mount_path")
    listed = await data_of(await client.get(base))
    assert listed["data"] == [
        {
            "disk_id": disk["id"],
            "name": "data",
            "kind": "s3",
            "config": CONFIG,
            "mount_path": "/mnt/data",
            "mount_status": "mounted",
        }
    ]
    assert listed["pagination"]["total"] == 1
    await expect_error(await client.delete("/v1/disks/data"), 409, "attached")
    detach = f"{base}/data"
    assert await data_of(await client.delete(detach, params={"mount_path": "/elsewhere"})) == {
        "detached": False
    }
    assert await data_of(await client.delete(detach, params={"mount_path": "/mnt/data"})) == {
        "detached": True
    }
    assert await data_of(await client.delete(detach)) == {"detached": False}
    await expect_error(await client.delete(f"{base}/nope"), 404, "disk not found")
    assert (await data_of(await client.get(base)))["data"] == []
    assert await data_of(await client.delete("/v1/disks/data")) == {"deleted": True}


async def test_attach_needs_a_running_sandbox(client: Client) -> None:
    await create_disk(client)
    sandbox = await create_sandbox(client)
    await client.post(f"/v1/sandboxes/{sandbox['id']}/pause")
    await expect_error(await attach(client, sandbox["id"], "data", "/mnt"), 409, "paused")
    await client.post(f"/v1/sandboxes/{sandbox['id']}/resume")
    assert (await attach(client, sandbox["id"], "data", "/mnt")).status == 200


async def test_files_written_on_a_disk_survive_the_sandbox(client: Client) -> None:
    """The issue's scenario: write under the mount path (exec and files API), destroy the
    sandbox, attach the disk to another one, and read it all back both ways."""
    await create_disk(client)
    first = (await create_sandbox(client))["id"]
    assert (await attach(client, first, "data", "/mnt/data")).status == 200
    wrote = await run(
        client,
        first,
        "/bin/bash",
        "-c",
        "echo from-exec > /mnt/data/exec.txt && mkdir -p /mnt/data/dir && echo not-kept > /tmp/x",
    )
    assert wrote["result"]["exit_code"] == 0, wrote
    upload = await client.put(
        f"/v1/sandboxes/{first}/files", params={"path": "/mnt/data/dir/api.txt"}, data=b"from-api"
    )
    assert upload.status == 200, await upload.text()
    # Both writes landed on the disk, whichever way they are read.
    listing = await run(client, first, "ls", "-R", "/mnt/data")
    assert "exec.txt" in listing["result"]["stdout"]
    assert "api.txt" in listing["result"]["stdout"]
    read_back = await client.get(
        f"/v1/sandboxes/{first}/files", params={"path": "/mnt/data/exec.txt"}
    )
    assert await read_back.read() == b"from-exec\n"
    await client.delete(f"/v1/sandboxes/{first}")

    second = (await create_sandbox(client))["id"]
    missing = await run(client, second, "cat", "/mnt/data/exec.txt")
    assert missing["result"]["exit_code"] != 0  # not mounted yet
    assert (await attach(client, second, "data", "/srv/shared")).status == 200
    cat = await run(client, second, "cat", "/srv/shared/exec.txt", "/srv/shared/dir/api.txt")
    assert cat["result"]["stdout"] == "from-exec\nfrom-api"
    got = await client.get(
        f"/v1/sandboxes/{second}/files", params={"path": "/srv/shared/dir/api.txt"}
    )
    assert await got.read() == b"from-api"
    # Only the disk survived: the first sandbox's own files went with it.
    gone = await run(client, second, "cat", "/tmp/x")
    assert gone["result"]["exit_code"] != 0


async def test_two_sandboxes_share_a_disk_live(client: Client) -> None:
    await create_disk(client)
    one, two = (await create_sandbox(client))["id"], (await create_sandbox(client))["id"]
    await attach(client, one, "data", "/data")
    await attach(client, two, "data", "/data")
    await run(client, one, "bash", "-c", "echo hello > /data/note")
    assert (await run(client, two, "cat", "/data/note"))["result"]["stdout"] == "hello\n"
    # Detached, the path is an ordinary (empty) directory of the sandbox again.
    await client.delete(f"/v1/sandboxes/{two}/disks/data", params={"mount_path": "/data"})
    assert (await run(client, two, "ls", "-A", "/data"))["result"]["stdout"] == ""
    # And a managed process sees the disk too.
    response = await client.post(
        f"/v1/sandboxes/{one}/processes", json={"cmd": "cat", "args": ["/data/note"]}
    )
    process_id = (await data_of(response))["process_id"]
    await (await client.get(f"/v1/sandboxes/{one}/processes/{process_id}/wait")).read()
    view = await data_of(await client.get(f"/v1/sandboxes/{one}/processes/{process_id}"))
    assert view["exit_code"] == 0


async def test_a_create_that_names_disks_mounts_them(fake: FakeCreateOS, client: Client) -> None:
    disk = await create_disk(client)
    sandbox = await create_sandbox(
        client, disks=[{"disk_id": disk["id"], "mount_path": "/workspace"}]
    )
    await run(client, sandbox["id"], "bash", "-c", "echo hi > /workspace/a")
    views = (await data_of(await client.get(f"/v1/sandboxes/{sandbox['id']}/disks")))["data"]
    assert [v["mount_path"] for v in views] == ["/workspace"]
    for disks, status, fragment in (
        ([{"disk_id": "nope", "mount_path": "/w"}], 404, "disk not found"),
        ([{"disk_id": "data", "mount_path": "/w", "sub_path": "team"}], 400, "sub_path"),
        ([{"disk_id": "data"}], 400, "mount_path"),
        ({"disk_id": "data"}, 400, "disks"),
    ):
        response = await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "disks": disks})
        await expect_error(response, status, fragment)
    assert len(fake.tenant("skp_test_owner").sandboxes) == 1


async def test_tenants_never_see_each_others_disks(
    fake: FakeCreateOS, client: Client, aiohttp_client: ClientFactory
) -> None:
    disk = await create_disk(client)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant("skp_b")})
    for ref in ("data", disk["id"]):
        await expect_error(await other.get(f"/v1/disks/{ref}"), 404, "disk not found")
        await expect_error(await other.delete(f"/v1/disks/{ref}"), 404, "disk not found")
        patch = await other.patch(
            f"/v1/disks/{ref}", json={"credentials": {"access_key": "a", "secret_key": "b"}}
        )
        await expect_error(patch, 404, "disk not found")
    theirs = (await create_sandbox(other))["id"]
    await expect_error(await attach(other, theirs, disk["id"], "/mnt"), 404, "disk not found")
    # The same bucket registered by another tenant is that tenant's own (empty) bucket.
    mine = (await create_sandbox(client))["id"]
    await attach(client, mine, "data", "/mnt")
    await run(client, mine, "bash", "-c", "echo secret > /mnt/f")
    await create_disk(other)
    await attach(other, theirs, "data", "/mnt")
    assert (await run(other, theirs, "ls", "-A", "/mnt"))["result"]["stdout"] == ""


@pytest.fixture
def fake_config() -> ServerConfig:
    return ServerConfig(seed=99, transition_ms=0)


async def test_reset_forgets_disks(fake: FakeCreateOS, client: Client) -> None:
    await create_disk(client)
    fake.reset()
    fake.create_tenant("skp_test_owner")
    assert (await data_of(await client.get("/v1/disks")))["data"] == []


async def test_a_fork_carries_no_disk_and_a_forced_end_unmounts(
    fake: FakeCreateOS, client: Client
) -> None:
    await create_disk(client)
    await client.post("/v1/networks", json={"name": "backend"})
    sandbox = (await create_sandbox(client, networks=[{"id": "backend"}]))["id"]
    await attach(client, sandbox, "data", "/mnt/data")
    await run(client, sandbox, "bash", "-c", "echo on-disk > /mnt/data/f")
    await client.post(f"/v1/sandboxes/{sandbox}/pause")
    child = await data_of(await client.post(f"/v1/sandboxes/{sandbox}/fork", json={}))
    assert (await data_of(await client.get(f"/v1/sandboxes/{child['id']}/disks")))["data"] == []
    # The fork's mount point is an ordinary empty directory: the files stayed on the disk.
    listing = await run(client, child["id"], "ls", "-A", "/mnt/data")
    assert listing["result"]["stdout"] == ""
    # Destroyed behind the client's back (a state fault): it unmounts and leaves its network.
    fake.state_faults.set_status(fake.find_sandbox(sandbox), Status.DESTROYED)
    assert (await data_of(await client.get("/v1/networks/backend")))["members"] == []
    assert await data_of(await client.delete("/v1/disks/data")) == {"deleted": True}


async def test_the_control_state_shows_networks_disks_and_credit(
    fake: FakeCreateOS, api_key: str, client: Client
) -> None:
    disk = await create_disk(client)
    await client.post("/v1/networks", json={"name": "backend"})
    sandbox = (await create_sandbox(client, networks=[{"id": "backend"}]))["id"]
    await attach(client, sandbox, "data", "/mnt/data")
    fake.set_credit(api_key, has_credit=False)
    tenant_id = fake.tenant(api_key).id
    [tenant] = (await data_of(await client.get("/_fake/state", params={"tenant": tenant_id})))[
        "tenants"
    ]
    assert tenant["has_credit"] is False
    assert [m["sandbox_id"] for m in tenant["networks"][0]["members"]] == [sandbox]
    assert tenant["disks"] == [
        {**disk, "mounts": [{"sandbox_id": sandbox, "mount_path": "/mnt/data"}]}
    ]
