"""The official Python SDK's template methods against the fake, unchanged: build a Dockerfile,
read its log, start a sandbox from it, delete it."""

from __future__ import annotations

import time

import pytest
from createos import (
    APIError,
    GetTemplateOptions,
    RunCommandRequest,
    TemplateCreateRequest,
    TemplateInclude,
    TemplateStatus,
)

from tests.test_sdk import Tenant, create, fast_sdk_polls, server, tenant

__all__ = ["fast_sdk_polls", "server", "tenant"]  # the fixtures these tests share with test_sdk

DOCKERFILE = "FROM devbox:1\nENV GREETING=hello\nRUN mkdir -p /srv && echo $GREETING > /srv/motd"


def test_a_template_is_built_followed_and_started_from(tenant: Tenant) -> None:
    templates = tenant.client.templates
    template = templates.create(TemplateCreateRequest(name="web", dockerfile=DOCKERFILE))
    assert template.id.startswith("tpl_")
    assert template.status is TemplateStatus.PENDING

    # The SDK's follow_logs cannot decode any frame (TemplateLogEvent.from_dict fails in
    # SDK 0.1.3: a zero-argument super() in a slots dataclass), so the build is polled.
    deadline = time.monotonic() + 10
    while templates.get(template.id).status is not TemplateStatus.READY:
        assert time.monotonic() < deadline, templates.logs(template.id)
        time.sleep(0.005)

    ready = templates.get("web", GetTemplateOptions(include=TemplateInclude.DOCKERFILE))
    assert ready.status is TemplateStatus.READY
    assert ready.dockerfile == DOCKERFILE
    assert ready.built_at is not None
    assert [listed.id for listed in templates.list()] == [template.id]
    log = templates.logs(template.id)
    assert "Step 3/3 : RUN mkdir -p /srv && echo $GREETING > /srv/motd\n" in log
    assert log.endswith(f"template {template.id} ready\n")

    sandbox = create(tenant, rootfs=template.id)
    motd = sandbox.run_command(RunCommandRequest(command="cat", arguments=["/srv/motd"]))
    assert motd.result.standard_output == "hello\n"

    templates.delete(template.id)
    with pytest.raises(APIError) as gone:
        templates.get(template.id)
    assert gone.value.status_code == 404
