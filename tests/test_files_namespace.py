"""The files API and the shell see one namespace: links followed, programs read-only."""

from __future__ import annotations

import pytest

from fake_server.filesystem import FileSystem, FsError
from fake_server.namespace import MAX_SYMLINKS, Namespace
from tests.conftest import Client, create_sandbox
from tests.test_api_runtime import run
from tests.test_api_sandboxes import expect_error

#: Links made in the sandbox by its shell, as a client's script would make them.
LINKS = (
    "mkdir -p /srv/data && printf target > /srv/data/t"
    " && ln -s /srv/data/t /root/abs && ln -s data/t /srv/rel && ln -s /srv/data /root/dir"
    " && ln -s /srv/data/new /root/dangling && ln -s /nowhere/x /root/nowhere"
    " && ln -s /root/loop-b /root/loop-a && ln -s /root/loop-a /root/loop-b"
)


@pytest.fixture
async def sandbox_id(client: Client) -> str:
    sandbox_id = str((await create_sandbox(client))["id"])
    made = await run(client, sandbox_id, "/bin/bash", "-c", LINKS)
    assert made["result"]["exit_code"] == 0, made
    return sandbox_id


def files(sandbox_id: str, path: str) -> str:
    return f"/v1/sandboxes/{sandbox_id}/files?path={path}"


async def shell(client: Client, sandbox_id: str, script: str) -> str:
    result = (await run(client, sandbox_id, "/bin/bash", "-c", script))["result"]
    return str(result["stdout"])


@pytest.mark.parametrize("path", ["/root/abs", "/srv/rel", "/root/dir/t"])
async def test_a_download_follows_links(client: Client, sandbox_id: str, path: str) -> None:
    got = await client.get(files(sandbox_id, path))
    assert got.status == 200, await got.text()
    assert await got.read() == b"target"


@pytest.mark.parametrize("path", ["/root/dangling", "/root/nowhere"])
async def test_a_download_of_a_dangling_link_is_404(
    client: Client, sandbox_id: str, path: str
) -> None:
    await expect_error(await client.get(files(sandbox_id, path)), 404, "not found")


@pytest.mark.parametrize(
    ("path", "data", "script", "seen"),
    [
        ("/root/abs", b"new", "cat /srv/data/t; readlink /root/abs", "new/srv/data/t\n"),
        # open(O_CREAT) through a dangling link creates its target.
        (
            "/root/dangling",
            b"made",
            "cat /srv/data/new; readlink /root/dangling",
            "made/srv/data/new\n",
        ),
        # Below a linked directory, the upload lands in its target.
        ("/root/dir/sub/f", b"deep", "cat /srv/data/sub/f", "deep"),
    ],
)
async def test_an_upload_writes_through_links(
    client: Client, sandbox_id: str, path: str, data: bytes, script: str, seen: str
) -> None:
    put = await client.put(files(sandbox_id, path), data=data)
    assert put.status == 200, await put.text()
    assert await shell(client, sandbox_id, script) == seen


async def test_an_upload_cannot_create_what_a_link_leads_nowhere(
    client: Client, sandbox_id: str
) -> None:
    # open(O_CREAT) through a link into a missing directory: ENOENT, as the shell says.
    await expect_error(await client.put(files(sandbox_id, "/root/nowhere"), data=b""), 404)
    # mkdir -p meets a link to nothing where a directory should be: EEXIST.
    await expect_error(
        await client.put(files(sandbox_id, "/root/nowhere/y/f"), data=b""), 400, "File exists"
    )
    assert await shell(client, sandbox_id, "ls /nowhere 2>&1 || echo gone") == (
        "ls: cannot access '/nowhere': No such file or directory\ngone\n"
    )


async def test_a_link_loop_is_refused(client: Client, sandbox_id: str) -> None:
    await expect_error(await client.get(files(sandbox_id, "/root/loop-a")), 400, "Too many levels")


@pytest.mark.parametrize("path", ["/usr/bin/cat", "/bin/bash", "/bin/new-program"])
async def test_the_program_directories_are_read_only(
    client: Client, sandbox_id: str, path: str
) -> None:
    """The shell cannot write there (``filesystem is read-only``), nor can the files API."""
    before = await shell(client, sandbox_id, f"cat {path} 2>/dev/null; echo x > {path}")
    await expect_error(await client.put(files(sandbox_id, path), data=b"x"), 403, "read-only")
    await expect_error(await client.put(files(sandbox_id, "/usr/bin/d/f"), data=b"x"), 403)
    assert await shell(client, sandbox_id, f"cat {path} 2>/dev/null") == before
    assert await shell(client, sandbox_id, "echo still-works") == "still-works\n"


async def test_a_download_of_a_program_is_what_the_shell_reads(
    client: Client, sandbox_id: str
) -> None:
    got = await client.get(files(sandbox_id, "/usr/bin/cat"))
    assert got.status == 200, await got.text()
    assert (await got.read()).decode() == await shell(client, sandbox_id, "cat /usr/bin/cat")
    await expect_error(await client.get(files(sandbox_id, "/usr/bin/nope")), 404)
    await expect_error(await client.get(files(sandbox_id, "/bin/x/y")), 404)


def test_links_cross_mounts_both_ways() -> None:
    root, disk = FileSystem(), FileSystem(image=False)
    names = Namespace(root, [("/mnt/disk", disk)])
    root.native.symlink("/mnt/disk/f", "/root/to-disk")
    disk.native.symlink("../../etc/hostname", "/up")
    names.write("/root/to-disk", b"on disk")
    names.write("/mnt/disk/up", b"box\n")
    assert disk.read("/f") == b"on disk"
    assert root.read("/etc/hostname") == b"box\n"
    assert names.resolve("/mnt/disk/up") == "/etc/hostname"
    assert names.resolve("/mnt/disk/up", follow=False) == "/mnt/disk/up"


def test_the_link_limit_is_the_kernels() -> None:
    root = FileSystem()
    root.write("/tmp/l0", b"end")
    for hop in range(1, MAX_SYMLINKS + 2):
        root.native.symlink(f"/tmp/l{hop - 1}", f"/tmp/l{hop}")
    names = Namespace(root, [])
    assert names.read(f"/tmp/l{MAX_SYMLINKS}") == b"end"
    with pytest.raises(FsError, match="Too many levels"):
        names.read(f"/tmp/l{MAX_SYMLINKS + 1}")


def test_a_link_to_a_directory_is_a_directory() -> None:
    root = FileSystem()
    root.native.symlink("/srv", "/root/srv")
    root.native.symlink("/etc/hosts", "/root/hosts")
    names = Namespace(root, [])
    assert names.is_dir("/root/srv")
    assert not names.is_dir("/root/hosts")
    with pytest.raises(FsError, match="Not a directory"):
        names.read("/root/hosts/x")
