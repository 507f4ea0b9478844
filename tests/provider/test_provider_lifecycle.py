"""The lease lifecycle against the fake: acquire, resume, release, destroy, probe."""

from __future__ import annotations

import asyncio
import re

import pytest

from pytest_createos.errors import (
    CleanupUnconfirmedError,
    CreateosApiError,
    LeaseError,
    TransitionError,
)
from pytest_createos.provider import LEASE_MARKER_PATH, WORKSPACE_DIR, Lease, LeaseProvider

from .conftest import FakeEnv

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


async def test_full_lifecycle_with_reuse(env: FakeEnv) -> None:
    lease = await env.acquire()
    sandbox_id = lease.provider_lease_id
    assert sandbox_id is not None
    assert lease.metadata == {
        "provider": "createos",
        "companyId": "co",
        "environmentId": "env",
        "apiUrl": env.url,
        "sandboxId": sandbox_id,
        "shape": "s-1vcpu-1gb",
        "rootfs": "devbox:1",
        "region": None,
        "reuseLease": True,
        "marker": lease.metadata["marker"],
        "workspace": WORKSPACE_DIR,
    }
    assert UUID_RE.fullmatch(lease.metadata["marker"])
    assert env.api_key not in repr(lease)
    # The create body is exactly what Paperclip sends.
    create = next(s for s in env.recorded.sent if s.url.endswith("/v1/sandboxes"))
    assert create.json() == {"shape": "s-1vcpu-1gb", "rootfs": "devbox:1", "ingress_enabled": False}
    # Workspace prepared with one exec, then the marker written.
    assert env.routes() == [
        "POST /v1/sandboxes",
        "GET /v1/sandboxes/{id}",
        "POST /v1/sandboxes/{id}/exec",
        "PUT /v1/sandboxes/{id}/files",
    ]
    assert env.sandbox(lease).fs.read(LEASE_MARKER_PATH) == lease.metadata["marker"].encode()

    result = await env.execute(lease, "echo", args=["hello"], cwd=WORKSPACE_DIR)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "hello\n", False)

    mark = env.last_seq()
    await env.release(lease)
    assert env.status(lease) == "paused"
    assert "POST /v1/sandboxes/{id}/pause" in env.routes(mark)
    assert "DELETE /v1/sandboxes/{id}" not in env.routes(mark)

    resumed = await env.resume(lease)
    assert resumed.provider_lease_id == sandbox_id
    assert resumed.metadata == {**lease.metadata, "resumedLease": True}
    assert env.status(lease) == "running"
    assert (await env.execute(resumed, "echo", args=["again"])).stdout == "again\n"

    await env.destroy(resumed)
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"
    assert env.status(lease) in ("destroying", "destroyed")


async def test_release_without_reuse_deletes(env: FakeEnv) -> None:
    env.config["reuseLease"] = False
    lease = await env.acquire()
    assert lease.metadata["reuseLease"] is False
    mark = env.last_seq()
    await env.release(lease)
    assert env.routes(mark) == ["DELETE /v1/sandboxes/{id}"]
    # The next resume finds nothing to keep.
    assert (await env.resume(lease)).expired


async def test_release_of_a_reusable_lease_deletes_when_config_no_longer_reuses(
    env: FakeEnv,
) -> None:
    lease = await env.acquire()
    env.config["reuseLease"] = False
    mark = env.last_seq()
    await env.release(lease)
    assert env.routes(mark) == ["DELETE /v1/sandboxes/{id}"]


async def test_secret_never_reaches_metadata_or_requests_other_than_the_header(
    env: FakeEnv,
) -> None:
    lease = await env.acquire()
    assert env.api_key not in str(lease.metadata)
    for sent in env.recorded.sent:
        assert env.api_key not in sent.url
        assert env.api_key.encode() not in sent.body


# -- failed acquisition ------------------------------------------------------------------------


async def test_failed_acquisition_deletes_the_sandbox(env: FakeEnv) -> None:
    env.fake.faults.error(503, route="POST /v1/sandboxes/{id}/exec")
    with pytest.raises(CreateosApiError, match=r"HTTP 503") as info:
        await env.acquire()
    assert info.value.status == 503
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"
    sandboxes = list(env.fake.tenant(env.api_key).sandboxes.values())
    assert [s.status.value for s in sandboxes] in (["destroying"], ["destroyed"])


async def test_failed_acquisition_reports_a_failed_delete(env: FakeEnv) -> None:
    env.fake.faults.error(503, route="POST /v1/sandboxes/{id}/exec")
    env.fake.faults.error(500, route="DELETE /v1/sandboxes/{id}")
    with pytest.raises(CleanupUnconfirmedError) as info:
        await env.acquire()
    sandbox_id = next(iter(env.fake.tenant(env.api_key).sandboxes))
    assert info.value.sandbox_id == sandbox_id
    assert str(info.value) == (
        f"CreateOS sandbox {sandbox_id} setup failed and cleanup is unconfirmed."
    )
    assert isinstance(info.value.__cause__, CreateosApiError)
    assert env.provider.is_cleanup_unconfirmed(sandbox_id)


async def test_failed_marker_write_deletes_the_sandbox(env: FakeEnv) -> None:
    env.fake.faults.error(500, route="PUT /v1/sandboxes/{id}/files")
    with pytest.raises(CreateosApiError, match="write lease marker failed: HTTP 500"):
        await env.acquire()
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"


async def test_failed_workspace_command_deletes_the_sandbox(env: FakeEnv) -> None:
    async def broken_mkdir(ctx: object, args: list[str]) -> int:
        return 1

    env.fake.register_command("mkdir", broken_mkdir)
    with pytest.raises(LeaseError, match="workspace preparation failed: exit 1"):
        await env.acquire()
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"


async def test_sandbox_that_goes_away_during_setup_is_deleted(env: FakeEnv) -> None:
    env.fake.faults.add(
        {"match": {"route": "GET /v1/sandboxes/{id}"}, "action": {"type": "destroy"}, "times": 1}
    )
    with pytest.raises(TransitionError, match="did not reach running"):
        await env.acquire()
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"


# -- resume: expiry and transient errors -------------------------------------------------------


@pytest.mark.parametrize("mode", ["wipe", "replace", "garble"])
async def test_marker_mismatch_expires_the_lease(env: FakeEnv, mode: str) -> None:
    lease = await env.acquire()
    await env.release(lease)
    env.fake.state_faults.marker(env.sandbox(lease), mode)
    mark = env.last_seq()
    assert await env.resume(lease) == Lease(None, {"expired": True})
    routes = env.routes(mark)
    assert "POST /v1/sandboxes/{id}/exec" in routes  # the marker was read back
    assert "DELETE /v1/sandboxes/{id}" not in routes  # expiring never deletes


async def test_missing_sandbox_expires_the_lease(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(404, route="GET /v1/sandboxes/{id}", times=1)
    assert (await env.resume(lease)).expired
    env.fake.journal.assert_not_requested("DELETE /v1/sandboxes/{id}")


@pytest.mark.parametrize("status", ["destroyed", "failed", "destroying"])
async def test_terminal_sandbox_expires_the_lease(env: FakeEnv, status: str) -> None:
    from fake_server import Status

    lease = await env.acquire()
    env.fake.state_faults.set_status(env.sandbox(lease), Status(status))
    mark = env.last_seq()
    assert (await env.resume(lease)).expired
    assert env.routes(mark) == ["GET /v1/sandboxes/{id}"]


async def test_sandbox_destroyed_during_resume_expires(env: FakeEnv) -> None:
    lease = await env.acquire()
    await env.release(lease)
    env.fake.faults.add(
        {"match": {"route": "POST /v1/sandboxes/{id}/resume"}, "action": {"type": "destroy"}}
    )
    assert (await env.resume(lease)).expired


async def test_transient_errors_propagate_and_keep_the_lease(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(503, route="GET /v1/sandboxes/{id}", times=1)
    with pytest.raises(CreateosApiError, match=r"^CreateOS get sandbox failed: HTTP 503$") as info:
        await env.resume(lease)
    assert info.value.retryable
    env.fake.journal.assert_not_requested("DELETE /v1/sandboxes/{id}")
    # Nothing was expired or deleted: the same lease resumes once the fault has passed.
    assert (await env.resume(lease)).provider_lease_id == lease.provider_lease_id


async def test_transient_marker_read_error_propagates(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.fake.faults.error(502, route="POST /v1/sandboxes/{id}/exec", times=1)
    with pytest.raises(CreateosApiError, match="read lease marker failed: HTTP 502"):
        await env.resume(lease)


async def test_timeout_propagates_as_a_retryable_error(env: FakeEnv) -> None:
    lease = await env.acquire()
    env.config["timeoutMs"] = 200
    env.fake.faults.hang(route="GET /v1/sandboxes/{id}", times=1)
    with pytest.raises(LeaseError, match="get sandbox failed: timeout") as info:
        await env.resume(lease)
    assert info.value.retryable


async def test_resume_from_error_status_is_submitted(env: FakeEnv) -> None:
    from fake_server import Status

    lease = await env.acquire()
    env.fake.state_faults.set_status(env.sandbox(lease), Status("error"))
    resumed = await env.resume(lease)
    assert resumed.metadata["resumedLease"] is True
    env.fake.journal.assert_requested("POST /v1/sandboxes/{id}/resume", times=1)


# -- secrets -----------------------------------------------------------------------------------


async def test_errors_never_expose_bodies_or_keys(env: FakeEnv) -> None:
    env.fake.faults.error(
        401, message=f"private provider diagnostics {env.api_key} /v1/sandboxes?x=1"
    )
    with pytest.raises(CreateosApiError) as info:
        await env.acquire()
    text = str(info.value)
    assert text == "CreateOS create sandbox failed: HTTP 401"
    assert env.api_key not in repr(info.value)
    assert info.value.__cause__ is None


async def test_transport_errors_hide_the_url(env: FakeEnv) -> None:
    env.fake.faults.reset(route="POST /v1/sandboxes")
    with pytest.raises(LeaseError) as info:
        await env.acquire()
    assert str(info.value) == "CreateOS create sandbox failed: connection error"
    assert info.value.__cause__ is None
    assert "127.0.0.1" not in str(info.value)


async def test_malformed_body_is_a_protocol_error_without_echo(env: FakeEnv) -> None:
    env.fake.faults.malformed(route="POST /v1/sandboxes")
    with pytest.raises(LeaseError, match=r"^CreateOS create sandbox failed: invalid response$"):
        await env.acquire()


# -- probe -------------------------------------------------------------------------------------


async def test_probe_runs_a_command_and_always_deletes(env: FakeEnv) -> None:
    result = await env.provider.probe(**env.ids)
    assert result.ok, result.summary
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"
    process_bodies = [s.json() for s in env.recorded.sent if s.url.endswith("/processes")]
    assert process_bodies[0]["cwd"] == WORKSPACE_DIR
    assert "paperclip-createos-ready" in process_bodies[0]["args"][1]


async def test_probe_failure_is_reported_and_still_deletes(env: FakeEnv) -> None:
    env.fake.faults.error(500, route="POST /v1/sandboxes/{id}/processes")
    result = await env.provider.probe(**env.ids)
    assert not result.ok
    assert "HTTP 500" in result.summary
    assert env.routes()[-1] == "DELETE /v1/sandboxes/{id}"


async def test_probe_reports_invalid_config(env: FakeEnv) -> None:
    result = await env.provider.probe(**{**env.ids, "config": {}})
    assert not result.ok
    assert env.routes() == []


# -- pacing ------------------------------------------------------------------------------------


async def test_requests_are_paced_per_api_url(env: FakeEnv) -> None:
    env.config["requestSpacingMs"] = 40
    loop = asyncio.get_running_loop()
    start = loop.time()
    await env.acquire()  # four requests: create, get, exec, put
    assert loop.time() - start >= 0.11
    # Request i cannot reach the fake before the pacer let it go, i spacings after the start
    # (both clocks are time.monotonic()). A lower bound only: a busy machine may delay any
    # request further, which would make gaps between arrivals shrink or grow.
    arrivals = [e.at - start for e in env.fake.journal.requests()]
    assert len(arrivals) == 4
    assert all(at >= index * 0.04 for index, at in enumerate(arrivals)), arrivals


async def test_shutdown_closes_the_session_it_created(env: FakeEnv) -> None:
    provider = LeaseProvider()
    await provider.acquire(**env.ids)
    session = provider._session
    assert session is not None
    await provider.shutdown()
    assert session.closed
