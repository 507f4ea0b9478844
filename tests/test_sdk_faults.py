"""Faults as the official SDK experiences them, through the plugin's own fixtures (sync tests)."""

from __future__ import annotations

import createos
import httpx
import pytest

from pytest_createos import CreateosServer

SHAPE = createos.CreateSandboxRequest(shape="s-1vcpu-1gb")


def test_503_with_retry_after_is_retried_by_the_sdk(
    sdk: createos.Client, createos_server: CreateosServer
) -> None:
    createos_server.faults.error(503, route="GET /v1/whoami", times=1, retry_after=0)
    assert sdk.who_am_i().user_id == createos_server.tenant_id
    requests = createos_server.journal.requests(route="GET /v1/whoami")
    assert [entry.status for entry in requests] == [503, 200]


def test_409_surfaces_as_an_api_error(sdk: createos.Client) -> None:
    sandbox = sdk.create_sandbox(SHAPE)
    with pytest.raises(createos.APIError) as caught:
        sandbox.resume()  # a running sandbox cannot be resumed
    assert (caught.value.status_code, caught.value.code) == (409, 409)
    assert "running" in str(caught.value)
    sandbox.destroy()


def test_reset_is_a_transport_error_and_retried_when_idempotent(
    sdk: createos.Client, createos_server: CreateosServer
) -> None:
    sandbox = sdk.create_sandbox(SHAPE)
    createos_server.faults.reset(route="GET /v1/sandboxes/{id}", times=1)
    assert sandbox.refresh().status == createos.SandboxStatus.RUNNING  # GET: retried
    createos_server.faults.reset(route="POST /v1/sandboxes/{id}/pause", times=1)
    with pytest.raises(httpx.TransportError):
        sandbox.pause()  # POST: never retried
    sandbox.destroy()


def test_hang_ends_in_the_sdk_timeout(createos_server: CreateosServer) -> None:
    createos_server.faults.hang(route="GET /v1/whoami")
    with (
        createos.Client(
            api_key=createos_server.api_key,
            base_url=createos_server.url,
            timeout=0.2,
            retry=createos.RetryOptions(max_retries=0),
        ) as client,
        pytest.raises(httpx.TimeoutException),
    ):
        client.who_am_i()


def test_lost_create_leaves_a_sandbox_behind(
    sdk: createos.Client, createos_server: CreateosServer
) -> None:
    createos_server.faults.drop_response(route="POST /v1/sandboxes", times=1)
    with pytest.raises(httpx.TransportError):
        sdk.create_sandbox(createos.CreateSandboxRequest(shape="s-1vcpu-1gb", name="lost-one"))
    # The client saw an error, yet the sandbox exists: a careful client finds it by name.
    found = [s for s in sdk.list_sandboxes() if s.name == "lost-one"]
    assert len(found) == 1
    found[0].destroy()
