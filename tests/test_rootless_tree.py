"""A sandbox whose command emptied its root (or took bashkit's root itself): the fake copes
everywhere, and one tree that cannot be packed never fails another sandbox's request.

The red-team case: with more trees live than :data:`~fake_server.cold_trees.LIVE_TREES`, the
fake packs the oldest idle one; a root-less tree could not be read, the error reached whichever
request (any tenant's) made another tree live, and stayed for every later one. Here the limit is
made small, so a handful of sandboxes reach it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import bashkit
import pytest

from fake_server import FakeCreateOS, cold_trees, filesystem
from fake_server.filesystem import FileSystem
from tests.conftest import Client, ClientFactory, create_sandbox, data_of, eventually
from tests.test_templates import create_template, on_manual_clock

#: Empties the root as Linux's would be emptied (GNU rm refuses a plain ``rm -rf /``).
WIPE = "rm -rf --no-preserve-root /"


@pytest.fixture(autouse=True)
def few_live_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack a tree as soon as three are live (the fake's limit is 64)."""
    monkeypatch.setattr(cold_trees, "LIVE_TREES", 3)


async def run(client: Client, sandbox_id: str, script: str) -> dict[str, Any]:
    """The ``result`` of running ``script`` under bash in the sandbox (a 200 is asserted)."""
    answer = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "/bin/bash", "args": ["-c", script]}
    )
    result: dict[str, Any] = (await data_of(answer))["result"]
    return result


def rootless() -> FileSystem:
    """A tree whose root bashkit removed (what ``rm -rf --no-preserve-root /`` leaves)."""
    fs = FileSystem()
    fs.write("/root/a.txt", b"hi")
    fs.native.remove("/", recursive=True)
    return fs


async def log_frames(following: asyncio.Future[Any]) -> list[dict[str, Any]]:
    """The frames of a template's followed log, once it ends (a bound, not a wait: a build
    that never ended left its followers waiting forever)."""

    async def read() -> str:
        return str(await (await following).text())

    return [json.loads(line) for line in (await asyncio.wait_for(read(), 10)).splitlines()]


# -- the tree itself ------------------------------------------------------------------------------


def test_a_rootless_tree_reads_as_an_empty_root() -> None:
    fs = rootless()
    assert fs.is_dir("/")
    assert fs.listdir("/") == []
    assert fs.total_bytes == 0
    fs.write("/root/b.txt", b"back", make_parents=True)
    assert fs.read("/root/b.txt") == b"back"


def test_a_rootless_tree_packs_thaws_and_clones_as_an_empty_root() -> None:
    fs = rootless()
    copy = fs.clone()
    assert fs.freeze()
    # Thawed, it holds the interpreter's devices and nothing of the image (no /tmp, /home).
    assert fs.listdir("/") == ["dev"]
    assert copy.listdir("/") == ["dev"]


def test_a_tree_that_cannot_be_packed_stays_live_and_fails_no_one_else(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = FileSystem()
    broken.write("/tmp/x", b"x")  # live, and the oldest
    calls = 0
    nodes = filesystem.pack

    def failing(tree: bashkit.FileSystem, *args: Any, **kwargs: Any) -> list[Any]:
        nonlocal calls
        if tree is broken._native:
            calls += 1
            raise RuntimeError("io error: not found")
        return nodes(tree, *args, **kwargs)

    monkeypatch.setattr(filesystem, "pack", failing)
    others = [FileSystem() for _ in range(6)]
    with caplog.at_level(logging.ERROR, logger="fake_server"):
        for tree in others:
            tree.write("/tmp/x", b"x")  # makes it live: the oldest idle trees get packed
    assert broken.live
    assert calls == 1  # tried once, never again
    assert sum("could not be packed" in record.message for record in caplog.records) == 1
    assert not others[0].live  # the packing went on past it
    assert [tree.read("/tmp/x") for tree in others] == [b"x"] * 6


# -- over HTTP ------------------------------------------------------------------------------------


async def test_a_wiped_sandbox_breaks_no_other_tenant(
    fake: FakeCreateOS, client: Client, aiohttp_client: ClientFactory
) -> None:
    attacker = (await create_sandbox(client))["id"]
    wiped = await run(client, attacker, f"{WIPE} 2>/dev/null; echo $?; ls -A /; echo hi $((6 * 7))")
    # What stays: the image's programs, mounted read-only (rm could not remove them: status 1).
    assert wiped["stdout"] == "1\nbin\nusr\nhi 42\n"
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    for n in range(8):  # the attacker's tree is packed early on, then others after it
        sandbox = (await create_sandbox(other))["id"]
        assert (await run(other, sandbox, f"echo hi {n}"))["stdout"] == f"hi {n}\n"
    assert not fake.tenants.known["skp_test_owner"].sandboxes[attacker].fs.live
    # The wiped sandbox thaws as an empty root, and runs the next command.
    again = await run(client, attacker, "echo back > /f; cat /f; ls /")
    assert again["stdout"] == "back\nbin\ndev\nf\nusr\n"


async def test_a_paused_wiped_sandbox_forks(client: Client) -> None:
    parent = (await create_sandbox(client))["id"]
    await run(client, parent, WIPE)
    await data_of(await client.post(f"/v1/sandboxes/{parent}/pause"))
    child = (await data_of(await client.post(f"/v1/sandboxes/{parent}/fork", json={})))["id"]
    await data_of(await client.put(f"/v1/sandboxes/{child}/files?path=/srv/x", data=b"x"))
    assert await (await client.get(f"/v1/sandboxes/{child}/files?path=/srv/x")).read() == b"x"
    assert (await run(client, child, "echo child; ls /tmp"))["stdout"] == "child\n"


@pytest.mark.parametrize(
    ("step", "status"), [("rm -rf /", "failed"), (f"{WIPE} 2>/dev/null || true", "ready")]
)
async def test_a_template_that_wipes_its_root_ends_and_starts_sandboxes(
    aiohttp_client: ClientFactory, step: str, status: str
) -> None:
    fake, clock, client = await on_manual_clock(aiohttp_client, create_ms=1000)
    template = await create_template(client, dockerfile=f"FROM devbox:1\nRUN {step}")
    following = asyncio.ensure_future(
        client.get(f"/v1/templates/{template['id']}/logs?follow=true")
    )
    clock.advance(1)
    frames = await log_frames(following)
    assert frames[-1] == {"final": True, "status": status, "attempt": 1}
    if status == "failed":  # GNU rm's failsafe: the step exits 1
        assert frames[-3]["line"] == "rm: use --no-preserve-root to override this failsafe"
        assert frames[-2]["line"].endswith("returned a non-zero code: 1")
        return
    sandbox = (await create_sandbox(client, rootfs=template["id"]))["id"]
    clock.advance(1)  # created as long as a create takes
    tenant = next(iter(fake.tenants))
    await eventually(lambda: tenant.sandboxes[sandbox].status.value == "running")
    assert (await run(client, sandbox, "echo up; ls /"))["stdout"] == "up\nbin\ndev\nusr\n"


async def test_a_template_whose_build_breaks_in_the_fake_fails_and_says_why(
    aiohttp_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, clock, client = await on_manual_clock(aiohttp_client, create_ms=1000)

    def broken(self: FileSystem) -> int:
        raise RuntimeError("io error: not found")

    monkeypatch.setattr(FileSystem, "total_bytes", property(broken))
    template = await create_template(client, dockerfile="FROM devbox:1\nRUN echo hi")
    following = asyncio.ensure_future(
        client.get(f"/v1/templates/{template['id']}/logs?follow=true")
    )
    clock.advance(1)
    frames = await log_frames(following)
    assert frames[-1] == {"final": True, "status": "failed", "attempt": 1}
    assert frames[-2]["level"] == "error"
    assert "internal error in the fake" in frames[-2]["line"]
    assert "io error: not found" in frames[-2]["line"]
    await eventually(lambda: not fake.templates._builds)


async def test_rm_rf_root_is_refused_as_gnu_rm_refuses_it(client: Client) -> None:
    sandbox = (await create_sandbox(client))["id"]
    result = await run(client, sandbox, "rm -rf /; echo status=$?; ls /etc/os-release")
    assert result["stderr"] == (
        "rm: it is dangerous to operate recursively on '/'\n"
        "rm: use --no-preserve-root to override this failsafe\n"
    )
    assert result["stdout"] == "status=1\n/etc/os-release\n"
