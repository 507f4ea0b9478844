"""Paths the sandbox filesystem cannot hold (controls, invisible characters) are refused up
front with a message that says so, on every route that takes one; ordinary Unicode is fine."""

from __future__ import annotations

import pytest

from tests.conftest import Client, create_sandbox
from tests.test_api_sandboxes import expect_error


@pytest.mark.parametrize(
    "path", ["/tmp/a\x1bb", "/tmp/a\x7f", "/tmp/\u200bx", "/tmp/a\u202eb", "/tmp/x\U000e0041"]
)
async def test_unsafe_paths_are_refused_on_every_route(client: Client, path: str) -> None:
    sandbox = (await create_sandbox(client))["id"]
    files = f"/v1/sandboxes/{sandbox}/files"
    fragment = "control characters"
    await expect_error(await client.put(files, params={"path": path}, data=b"x"), 400, fragment)
    await expect_error(await client.get(files, params={"path": path}), 400, fragment)
    marker = {"mode": "wipe", "path": path}
    answer = await client.post(f"/_fake/sandboxes/{sandbox}/marker", json=marker)
    await expect_error(answer, 400, fragment)


async def test_ordinary_unicode_paths_round_trip(client: Client) -> None:
    sandbox = (await create_sandbox(client))["id"]
    files = f"/v1/sandboxes/{sandbox}/files"
    path = "/srv/caf\u00e9 \U0001f600/\u65e5\u672c.txt"
    put = await client.put(files, params={"path": path}, data=b"ok")
    assert put.status == 200, await put.text()
    got = await client.get(files, params={"path": path})
    assert await got.read() == b"ok"
