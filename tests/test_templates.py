"""Templates over HTTP: a Dockerfile built for real, its log, and sandboxes started from it."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from fake_server import FakeCreateOS, ManualClock, ServerConfig
from tests.conftest import Client, ClientFactory, create_sandbox, data_of, eventually
from tests.test_api_sandboxes import expect_error

DOCKERFILE = """\
# a comment, then a continued line
FROM devbox:1
ARG GREETING=hello
ENV APP_HOME=/srv/app \\
    MODE=prod
WORKDIR $APP_HOME
RUN mkdir -p conf && echo "$GREETING from $MODE" > conf/motd
RUN ["sh", "-c", "echo built; echo warning >&2"]
EXPOSE 8080
CMD ["python3", "app.py"]
"""


async def create_template(
    client: Client, name: str = "app", dockerfile: str = DOCKERFILE, **fields: Any
) -> dict[str, Any]:
    response = await client.post(
        "/v1/templates", json={"name": name, "dockerfile": dockerfile, **fields}
    )
    body = await response.json()
    assert response.status == 200, body
    data: dict[str, Any] = body["data"]
    return data


async def finished(client: Client, fake: FakeCreateOS, template_id: str) -> dict[str, Any]:
    """The template once its build has ended (waits on the build, not on time)."""
    tenant = next(iter(fake.tenants))
    await eventually(lambda: tenant.templates[template_id].finished)
    response = await client.get(f"/v1/templates/{template_id}")
    data: dict[str, Any] = (await response.json())["data"]
    return data


async def on_manual_clock(
    aiohttp_client: ClientFactory, *, create_ms: float
) -> tuple[FakeCreateOS, ManualClock, Client]:
    """A fake on a manual clock whose creates (so template builds' queueing) take
    ``create_ms``, its clock, and a client of one tenant."""
    config = ServerConfig(seed=1, transition_ms=0, create_ms=create_ms, manual_clock=True)
    fake = FakeCreateOS(config)
    assert isinstance(fake.clock, ManualClock)
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    return fake, fake.clock, client


async def exec_stdout(client: Client, sandbox_id: str, script: str) -> str:
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "bash", "args": ["-c", script]}
    )
    body = await response.json()
    assert response.status == 200, body
    return str(body["data"]["result"]["stdout"])


async def test_a_dockerfile_is_built_and_sandboxes_start_with_its_files(
    client: Client, fake: FakeCreateOS
) -> None:
    template = await create_template(client)
    assert template["id"].startswith("tpl_")
    assert template["status"] == "pending"
    ready = await finished(client, fake, template["id"])
    assert ready["status"] == "ready"
    assert ready["built_at"] >= ready["created_at"]
    assert ready["ext4_size_bytes"] >= 512 << 20
    assert ready["ext4_size_bytes"] % (1 << 20) == 0

    sandbox = await create_sandbox(client, rootfs=template["id"])
    assert sandbox["rootfs"] == template["id"]
    assert await exec_stdout(client, sandbox["id"], "cat /srv/app/conf/motd") == (
        "hello from prod\n"
    )
    # Each sandbox gets its own copy: what one writes, neither the template nor others see.
    await exec_stdout(client, sandbox["id"], "echo changed > /srv/app/conf/motd")
    other = await create_sandbox(client, rootfs=template["id"])
    assert await exec_stdout(client, other["id"], "cat /srv/app/conf/motd") == "hello from prod\n"


async def test_a_sandbox_names_its_template_by_name_as_well_as_by_id(
    client: Client, fake: FakeCreateOS
) -> None:
    # Contract §3: template ids and names are both valid rootfs values at create.
    template = await create_template(client, "web-app")
    await finished(client, fake, template["id"])
    sandbox = await create_sandbox(client, rootfs="web-app")
    assert sandbox["rootfs"] == "web-app"
    assert await exec_stdout(client, sandbox["id"], "cat /srv/app/conf/motd") == (
        "hello from prod\n"
    )
    await expect_error(
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "rootfs": "web-ap"}),
        400,
        "unknown rootfs",
    )


async def test_the_log_tells_each_step_and_its_output(client: Client, fake: FakeCreateOS) -> None:
    template = await create_template(client)
    await finished(client, fake, template["id"])
    response = await client.get(f"/v1/templates/{template['id']}/logs")
    assert response.headers["Content-Type"].startswith("text/plain")
    text = await response.text()
    assert "Step 1/8 : FROM devbox:1" in text
    assert "built\nwarning\n" in text
    assert "Step 7/8 : EXPOSE 8080\n ---> ignored" in text
    assert text.endswith(f"template {template['id']} ready\n")


async def test_a_failing_run_fails_the_build_and_its_sandboxes(
    client: Client, fake: FakeCreateOS
) -> None:
    template = await create_template(
        client, dockerfile="FROM devbox:1\nRUN echo before\nRUN exit 3\nRUN echo never"
    )
    failed = await finished(client, fake, template["id"])
    assert failed["status"] == "failed"
    assert "built_at" not in failed
    text = await (await client.get(f"/v1/templates/{template['id']}/logs")).text()
    assert "error: the command 'exit 3' returned a non-zero code: 3" in text
    assert "never" not in text
    await expect_error(
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "rootfs": template["id"]}),
        409,
        "template is not ready (status failed)",
    )


@pytest.mark.parametrize(
    ("dockerfile", "reason"),
    [
        ("FROM devbox:1\nCOPY . /srv", "line 2: COPY needs a build context"),
        ("RUN echo hi", "the first instruction must be FROM"),
        ("FROM devbox:1\nFROBNICATE x", "line 2: unknown instruction: FROBNICATE"),
        ("FROM devbox:1\nENV A='unbalanced", "line 2: No closing quotation"),
    ],
)
async def test_a_dockerfile_that_cannot_be_built_fails_saying_why(
    client: Client, fake: FakeCreateOS, dockerfile: str, reason: str
) -> None:
    template = await create_template(client, dockerfile=dockerfile)
    assert (await finished(client, fake, template["id"]))["status"] == "failed"
    text = await (await client.get(f"/v1/templates/{template['id']}/logs")).text()
    assert f"error: {reason}" in text


async def test_a_build_waits_pending_as_long_as_a_create_takes_on_the_fakes_clock(
    aiohttp_client: ClientFactory,
) -> None:
    fake, clock, client = await on_manual_clock(aiohttp_client, create_ms=5000)
    template = await create_template(client)
    # The build is parked on the clock (its only timer): nothing moves it on but the clock.
    await eventually(lambda: clock.pending == 1)
    assert (await (await client.get(f"/v1/templates/{template['id']}")).json())["data"][
        "status"
    ] == "pending"
    clock.advance(5)
    assert (await finished(client, fake, template["id"]))["status"] == "ready"


async def test_following_the_log_streams_it_to_the_final_frame(
    aiohttp_client: ClientFactory,
) -> None:
    fake, clock, client = await on_manual_clock(aiohttp_client, create_ms=1000)
    template = await create_template(client)
    # Followed from before the build starts: every line arrives live, then the end.
    following = asyncio.ensure_future(
        client.get(f"/v1/templates/{template['id']}/logs?follow=true")
    )
    await eventually(lambda: bool(next(iter(fake.tenants)).templates[template["id"]]._waiters))
    clock.advance(1)
    response = await following
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    frames = [json.loads(line) for line in (await response.text()).splitlines()]
    assert frames[-1] == {"final": True, "status": "ready", "attempt": 1}
    lines = [frame["line"] for frame in frames[:-1]]
    assert "Step 1/8 : FROM devbox:1" in lines
    assert "built" in lines
    assert {frame["level"] for frame in frames[:-1]} == {"info", "error"}
    assert all(frame["final"] is False and frame["attempt"] == 1 for frame in frames[:-1])


async def test_templates_are_listed_and_read_by_id_or_name(client: Client) -> None:
    first = await create_template(client, "first")
    second = await create_template(client, "second", base="desktop:1")
    page = (await (await client.get("/v1/templates?limit=1&offset=1")).json())["data"]
    assert [item["id"] for item in page["data"]] == [second["id"]]
    assert page["pagination"] == {"total": 2, "limit": 1, "offset": 1, "count": 1}
    by_name = (await (await client.get("/v1/templates/first")).json())["data"]
    assert by_name["id"] == first["id"]
    assert "dockerfile" not in by_name
    with_file = await client.get(f"/v1/templates/{first['id']}?include=dockerfile")
    assert (await with_file.json())["data"]["dockerfile"] == DOCKERFILE
    assert second["base"] == "desktop:1"
    assert first["base"] == "devbox:1"


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"name": "Bad Name", "dockerfile": "FROM x"}, 400, "must be 1-63 characters"),
        ({"name": "ok"}, 400, "is required"),
        ({"name": "ok", "dockerfile": "  "}, 400, "is required"),
        ({"name": "ok", "dockerfile": "FROM x", "base": "nope:1"}, 400, "unknown rootfs"),
        ({"name": "ok", "dockerfile": "x" * 70000}, 400, "must be at most 65536 bytes"),
        ({"name": "ok", "dockerfile": "FROM x", "size": 1}, 400, "unknown field"),
    ],
)
async def test_bad_creates_are_refused(
    client: Client, body: dict[str, Any], status: int, message: str
) -> None:
    await expect_error(await client.post("/v1/templates", json=body), status, message)


async def test_names_are_unique_per_tenant_and_tenants_never_see_each_other(
    client: Client, fake: FakeCreateOS, aiohttp_client: ClientFactory
) -> None:
    template = await create_template(client, "shared-name")
    await expect_error(
        await client.post("/v1/templates", json={"name": "shared-name", "dockerfile": "FROM x"}),
        409,
        "a template with this name already exists",
    )
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": fake.create_tenant()})
    for path in (f"/v1/templates/{template['id']}", "/v1/templates/shared-name"):
        await expect_error(await other.get(path), 404, "template not found")
    await expect_error(
        await other.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "rootfs": template["id"]}),
        404,
        "template not found",
    )
    assert (
        await other.post("/v1/templates", json={"name": "shared-name", "dockerfile": "FROM x"})
    ).status == 200


async def test_delete_leaves_sandboxes_alone_and_later_creates_get_404(
    client: Client, fake: FakeCreateOS
) -> None:
    template = await create_template(client)
    await finished(client, fake, template["id"])
    sandbox = await create_sandbox(client, rootfs=template["id"])
    deleted = await client.delete(f"/v1/templates/{template['id']}")
    assert (await deleted.json())["data"] == {"ok": True}
    assert await exec_stdout(client, sandbox["id"], "cat /srv/app/conf/motd") == (
        "hello from prod\n"
    )
    await expect_error(await client.get(f"/v1/templates/{template['id']}"), 404, "not found")
    await expect_error(
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "rootfs": template["id"]}),
        404,
        "template not found",
    )


async def test_deleting_a_building_template_stops_the_build_and_ends_its_followers(
    aiohttp_client: ClientFactory,
) -> None:
    fake, clock, client = await on_manual_clock(aiohttp_client, create_ms=1000)
    template = await create_template(client, dockerfile="FROM devbox:1\nRUN sleep 60")
    following = asyncio.ensure_future(
        client.get(f"/v1/templates/{template['id']}/logs?follow=true")
    )
    clock.advance(1)
    tenant = next(iter(fake.tenants))
    # The build sleeps on the manual clock; the follower waits for its next line.
    await eventually(lambda: bool(tenant.templates[template["id"]]._waiters))
    assert tenant.templates[template["id"]].status.value == "building"
    await client.delete(f"/v1/templates/{template['id']}")
    frames = [json.loads(line) for line in (await (await following).text()).splitlines()]
    assert frames[-1] == {"final": True, "status": "cancelled", "attempt": 1}
    await fake.templates.wait_stopped()


async def test_reset_stops_builds_and_forgets_templates(client: Client, fake: FakeCreateOS) -> None:
    template = await create_template(client, dockerfile="FROM devbox:1\nRUN sleep 600")
    tenant = next(iter(fake.tenants))
    await eventually(lambda: tenant.templates[template["id"]].status.value == "building")
    assert (await client.post("/_fake/reset")).status == 200
    await fake.templates.wait_stopped()
    await expect_error(await client.get(f"/v1/templates/{template['id']}"), 404, "not found")


async def test_only_build_attempt_one_exists(client: Client) -> None:
    template = await create_template(client)
    await expect_error(
        await client.get(f"/v1/templates/{template['id']}/logs?attempt=2"), 404, "no such"
    )
    await expect_error(
        await client.get(f"/v1/templates/{template['id']}/logs?attempt=x"), 400, "integer"
    )


async def test_a_build_needs_credit(client: Client, api_key: str) -> None:
    credit = await client.put("/_fake/tenant/credit", json={"has_credit": False})
    assert credit.status == 200, await credit.text()
    await expect_error(
        await client.post("/v1/templates", json={"name": "web", "dockerfile": "FROM x"}), 402
    )
    await client.put("/_fake/tenant/credit", json={"has_credit": True})
    await create_template(client, "web")


async def test_a_build_writes_into_the_stock_directories_of_the_image(
    client: Client, fake: FakeCreateOS
) -> None:
    # /opt, /srv, /var/log... are in every Ubuntu image: a Dockerfile writes there directly.
    template = await create_template(
        client,
        dockerfile="FROM devbox:1\nRUN echo x > /opt/f && echo y > /srv/g && date > /var/log/b\n",
    )
    assert (await finished(client, fake, template["id"]))["status"] == "ready"
    sandbox = await create_sandbox(client, rootfs=template["id"])
    assert await exec_stdout(client, sandbox["id"], "cat /opt/f /srv/g; ls -A /mnt") == "x\ny\n"


IMAGE_DOCKERFILE = """\
FROM devbox:1
ARG BUILD_ONLY=arg
ENV GREETING="hello there" TOOLS=/opt/tools
ENV PATH=$TOOLS/bin:$PATH
WORKDIR /srv
WORKDIR app
RUN echo "$BUILD_ONLY $GREETING" > built.txt
USER nobody
ENTRYPOINT ["/bin/false"]
CMD ["python3", "app.py"]
"""
#: What a command of a sandbox started from IMAGE_DOCKERFILE sees of its image.
SHOW = 'echo "$GREETING|${BUILD_ONLY-unset}|$PATH|$HOME|$(whoami)"; pwd; cat built.txt'


async def image_template(client: Client, fake: FakeCreateOS) -> str:
    template = await create_template(client, "image", IMAGE_DOCKERFILE)
    assert (await finished(client, fake, template["id"]))["status"] == "ready"
    return str(template["id"])


async def test_commands_start_with_the_images_env_and_workdir(
    client: Client, fake: FakeCreateOS
) -> None:
    # Docker keeps ENV and WORKDIR in the image: every command of a container starts with
    # them; ARG was the build's alone, and USER, ENTRYPOINT and CMD change nothing here.
    sandbox = (await create_sandbox(client, rootfs=await image_template(client, fake)))["id"]
    path = "/opt/tools/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    seen = f"hello there|unset|{path}|/root|root\n/srv/app\narg hello there\n"
    assert await exec_stdout(client, sandbox, SHOW) == seen
    streamed = await client.post(
        f"/v1/sandboxes/{sandbox}/exec?stream=true",
        json={"cmd": "bash", "args": ["-c", SHOW], "stream": True},
    )
    frames = [json.loads(line) for line in (await streamed.text()).splitlines()]
    assert "".join(frame.get("stdout", "") for frame in frames) == seen
    # A managed process without a cwd starts in the WORKDIR; one that names a cwd, there.
    for extra, directory in (({}, "/srv/app"), ({"cwd": "/tmp"}, "/tmp")):
        process = await data_of(
            await client.post(
                f"/v1/sandboxes/{sandbox}/processes",
                json={"cmd": "bash", "args": ["-c", 'pwd; echo "$GREETING"'], **extra},
            )
        )
        assert process["cwd"] == directory
        base = f"/v1/sandboxes/{sandbox}/processes/{process['process_id']}"
        await (await client.get(f"{base}/wait")).read()
        connected = await client.get(f"{base}/connect")
        data = [json.loads(line) for line in (await connected.text()).splitlines()]
        out = b"".join(base64.b64decode(f["data_base64"]) for f in data if f["type"] == "data")
        assert out == f"{directory}\nhello there\n".encode()
    # A fork has its source's image.
    await data_of(await client.post(f"/v1/sandboxes/{sandbox}/pause"))
    forked = await data_of(await client.post(f"/v1/sandboxes/{sandbox}/fork", json={}))
    assert await exec_stdout(client, forked["id"], SHOW) == seen


async def test_the_sandboxes_and_the_requests_variables_win_over_the_images(
    client: Client, fake: FakeCreateOS
) -> None:
    template = await image_template(client, fake)
    sandbox = (await create_sandbox(client, rootfs=template, envs={"GREETING": "declared"}))["id"]
    assert await exec_stdout(client, sandbox, 'echo "$GREETING $TOOLS"') == "declared /opt/tools\n"
    asked = await client.post(
        f"/v1/sandboxes/{sandbox}/exec",
        json={"cmd": "bash", "args": ["-c", "echo $GREETING"], "env": {"GREETING": "asked"}},
    )
    assert (await asked.json())["data"]["result"]["stdout"] == "asked\n"
    # Only what the sandbox declared may be overridden (contract §5): not the image's ENV.
    await expect_error(
        await client.post(
            f"/v1/sandboxes/{sandbox}/exec",
            json={"cmd": "true", "env": {"TOOLS": "/elsewhere"}},
        ),
        400,
        "env",
    )


async def test_a_stock_image_starts_commands_in_roots_home(client: Client) -> None:
    sandbox = await create_sandbox(client)
    assert await exec_stdout(client, sandbox["id"], 'pwd; echo "${GREETING-unset}"') == (
        "/root\nunset\n"
    )
