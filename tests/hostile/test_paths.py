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


DEEP = "/" + "/".join(["a"] * 1200)
LONG_NAME = "/tmp/" + "n" * 256


@pytest.mark.parametrize(("path", "fragment"), [(DEEP, "100 directories"), (LONG_NAME, "255")])
async def test_paths_past_the_filesystem_limits_are_refused(
    client: Client, path: str, fragment: str
) -> None:
    sandbox = (await create_sandbox(client))["id"]
    files = f"/v1/sandboxes/{sandbox}/files"
    await expect_error(await client.put(files, params={"path": path}, data=b"x"), 400, fragment)
    await expect_error(await client.get(files, params={"path": path}), 400, fragment)
    marker = await client.post(
        f"/_fake/sandboxes/{sandbox}/marker", json={"mode": "wipe", "path": path}
    )
    await expect_error(marker, 400, fragment)
    rule = {
        "match": {"route": "POST /v1/sandboxes/{id}/exec"},
        "action": {"type": "marker", "mode": "replace", "path": path},
    }
    await expect_error(await client.post("/_fake/faults", json=rule), 400, fragment)
    ran = await client.post(f"/v1/sandboxes/{sandbox}/exec", json={"cmd": "true"})
    assert ran.status == 200


async def test_the_deepest_allowed_path_round_trips(client: Client) -> None:
    sandbox = (await create_sandbox(client))["id"]
    files = f"/v1/sandboxes/{sandbox}/files"
    path = "/" + "/".join(["d"] * 99) + "/" + "n" * 255
    assert (await client.put(files, params={"path": path}, data=b"deep")).status == 200
    assert await (await client.get(files, params={"path": path})).read() == b"deep"


@pytest.mark.parametrize("upload", [False, True], ids=["json body", "file upload"])
async def test_a_body_that_does_not_match_its_encoding_is_a_400(
    client: Client, upload: bool, caplog: pytest.LogCaptureFixture
) -> None:
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    if upload:
        sandbox = (await create_sandbox(client))["id"]
        files = f"/v1/sandboxes/{sandbox}/files"
        sent = await client.put(files, params={"path": "/tmp/z"}, data=b"not gzip", headers=headers)
    else:
        sent = await client.post("/v1/sandboxes", data=b'{"shape": "x"}', headers=headers)
    await expect_error(sent, 400, "Content-Encoding")
    # The fake goes on serving (the broken connection was closed, a new one is used), and
    # nothing was logged as an unhandled error.
    assert (await client.get("/v1/sandboxes")).status == 200
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
