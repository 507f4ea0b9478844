"""The official Python SDK (``createos-sandbox``, import ``createos``) against the fake, unchanged.

The SDK is synchronous (httpx), so the fake runs in a background thread: one server for the
module, a fresh tenant per test. Requests the SDK sends are recorded through an httpx event hook
on a client we hand to the SDK (a supported constructor argument), so tests can assert on the
wire without touching the SDK's code.
"""

from __future__ import annotations

import contextlib
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import createos
import createos.instance
import httpx
import pytest
from createos import (
    APIError,
    AuthenticationError,
    CommandError,
    CreateSandboxRequest,
    ExecOptions,
    ExecStreamEventType,
    ForkSandboxRequest,
    ListSandboxesOptions,
    ManagedProcessConnectEventType,
    ManagedProcessConnectOptions,
    ManagedProcessCreateRequest,
    ManagedProcessDeleteOptions,
    ManagedProcessState,
    ManagedProcessStream,
    ManagedProcessWaitOptions,
    OperationTimeout,
    RetryOptions,
    RunCommandRequest,
    SandboxInstance,
    SandboxStatus,
    WaitOptions,
)

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from fake_server.journal import Entry
from fake_server.sandboxes import CreateSpec

T = TypeVar("T")

SHAPE = "s-1vcpu-1gb"
#: Generous for a loaded CI machine; transitions take 20 ms.
WAIT = WaitOptions(timeout=5.0)


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    """One fake for the module. Strict mode so an unregistered key is a real 401; heartbeats
    every 50 ms so stream tests see them without waiting the real service's 5 s."""
    config = ServerConfig(seed=1, transition_ms=20, strict=True, heartbeat_s=0.05)
    with BackgroundServer(FakeCreateOS(config)) as background:
        yield background


@pytest.fixture(autouse=True)
def fast_sdk_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's ``wait_until_*`` poll every 0.5 s, a constant ``WaitOptions`` cannot change.
    Shorten only that sleep (the SDK module's view of ``time``): the polling logic under test
    stays the SDK's own, and a wait costs milliseconds instead of half a second."""
    shim = types.SimpleNamespace(
        monotonic=time.monotonic, sleep=lambda s: time.sleep(min(s, 0.005))
    )
    monkeypatch.setattr(createos.instance, "time", shim)


@dataclass
class Tenant:
    """A fresh tenant: its key, its id, an SDK client and every request the client sent."""

    server: BackgroundServer
    key: str
    id: str
    client: createos.Client
    sent: list[httpx.Request] = field(default_factory=list)

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self.server.call(function, *args, **kwargs)

    def requests(self, route: str, **filters: Any) -> list[Entry]:
        """This tenant's journal entries for ``route`` (e.g. ``"GET /v1/sandboxes/{id}"``)."""
        journal = self.server.fake.journal
        return self.call(journal.requests, route=route, tenant=self.id, **filters)

    def sent_to(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.sent if r.method == method and r.url.path == path]


@contextlib.contextmanager
def sdk_client(url: str, key: str, sent: list[httpx.Request]) -> Iterator[createos.Client]:
    """An SDK client with short retry delays whose requests land in ``sent``."""
    with httpx.Client(event_hooks={"request": [sent.append]}) as http:
        # The SDK leaves a client it was given open: closing it is ours to do.
        yield createos.Client(
            api_key=key,
            base_url=url,
            timeout=5.0,
            retry=RetryOptions(max_retries=2, base_delay=0.01, max_delay=0.05),
            http_client=http,
        )


@pytest.fixture
def tenant(server: BackgroundServer) -> Iterator[Tenant]:
    key = server.call(server.fake.create_tenant)
    tenant_id = server.call(server.fake.tenant, key).id
    sent: list[httpx.Request] = []
    with sdk_client(server.url, key, sent) as client:
        yield Tenant(server, key, tenant_id, client, sent)
    server.call(server.fake.faults.clear, tenant=tenant_id)
    server.call(server.fake.drop_tenant, key)


def create(tenant: Tenant, **fields: Any) -> SandboxInstance:
    return tenant.client.create_sandbox(CreateSandboxRequest(shape=SHAPE, **fields))


def paused(tenant: Tenant, **fields: Any) -> SandboxInstance:
    sandbox = create(tenant, **fields)
    sandbox.pause()
    return sandbox.wait_until_paused(WAIT)


def hold_next_transition(fake: FakeCreateOS, sandbox_id: str) -> None:
    fake.state_faults.stick(fake.find_sandbox(sandbox_id))


def release_transition(fake: FakeCreateOS, sandbox_id: str) -> None:
    fake.state_faults.unstick(fake.find_sandbox(sandbox_id))


def api_error(call: Callable[[], object]) -> APIError:
    with pytest.raises(APIError) as caught:
        call()
    return caught.value


# -- unauthenticated endpoints and identity ------------------------------------------------------


def test_health_readiness_and_catalog_need_no_key(server: BackgroundServer) -> None:
    sent: list[httpx.Request] = []
    with sdk_client(server.url, "", sent) as anonymous:
        assert anonymous.health().up is True
        readiness = anonymous.readiness()
        assert readiness.ready is True
        shapes = {shape.id: shape for shape in anonymous.list_shapes()}
        assert shapes[SHAPE].vcpu == 1
        assert shapes[SHAPE].memory_mib == 1024  # wire name mem_mib
        assert shapes[SHAPE].default_disk_mib > 0
        rootfs = anonymous.list_root_file_systems()
        assert rootfs.default in rootfs.root_file_systems
        assert {entry.name for entry in rootfs.entries} == set(rootfs.root_file_systems)
        # The SDK refuses authenticated calls without a key before sending anything.
        with pytest.raises(AuthenticationError):
            anonymous.who_am_i()
    assert [r.url.path for r in sent] == ["/healthz", "/readyz", "/v1/shapes", "/v1/rootfs"]
    assert all("x-api-key" not in r.headers for r in sent)


def test_who_am_i_counts_the_tenants_sandboxes(tenant: Tenant) -> None:
    assert tenant.client.who_am_i().stats.total == 0
    create(tenant)
    paused(tenant)
    doomed = create(tenant)
    doomed.destroy()
    doomed.wait_until_destroyed(WAIT)
    me = tenant.client.who_am_i()
    assert me.user_id == tenant.id
    # Destroyed sandboxes no longer count.
    assert (me.stats.running, me.stats.paused, me.stats.other, me.stats.total) == (1, 1, 0, 2)


# -- the whole lifecycle through the SDK -----------------------------------------------------------


def test_lifecycle_create_exec_files_pause_resume_processes_destroy(tenant: Tenant) -> None:
    sandbox = create(
        tenant,
        name="sdk-lifecycle",
        environment_variables={"GREETING": "hello"},
        egress_rules=["api.example.com:443"],
    )
    assert sandbox.status is SandboxStatus.RUNNING
    assert sandbox.id.startswith("sb_")
    assert sandbox.name == "sdk-lifecycle"
    assert sandbox.ip_address
    assert sandbox.data.egress_rules == ["api.example.com:443"]

    # run_command / shell through the sandbox shell.
    echoed = sandbox.run_command(RunCommandRequest(command="echo", arguments=["hi", "there"]))
    assert (echoed.result.standard_output, echoed.result.exit_code) == ("hi there\n", 0)
    script = "mkdir -p /work/out && cd /work/out && printf '%s' \"$GREETING\" > greeting.txt"
    sandbox.shell(script)
    assert sandbox.shell("cat /work/out/greeting.txt").result.standard_output == "hello"
    with pytest.raises(CommandError) as failed:
        sandbox.shell("echo oops >&2; exit 3")
    assert failed.value.response.result.exit_code == 3
    assert failed.value.response.result.standard_error == "oops\n"

    # Binary files survive the round trip; parent directories are created.
    payload = bytes(range(256)) * 3
    sandbox.files.upload("/data/deep/blob.bin", payload)
    with sandbox.files.download("/data/deep/blob.bin") as download:
        assert download.read() == payload

    # Pause is asynchronous: the call answers ``pausing`` and a later poll sees ``paused``. The
    # transition is held (not raced against a timer) so the SDK's polling is seen mid-flight.
    tenant.call(hold_next_transition, tenant.server.fake, sandbox.id)
    sandbox.pause()
    assert sandbox.status is SandboxStatus.PAUSING
    conflict = api_error(lambda: sandbox.run_command(RunCommandRequest(command="true")))
    assert (conflict.status_code, conflict.code) == (409, 409)
    assert "resume it" in str(conflict)
    with pytest.raises(OperationTimeout):
        sandbox.wait_until_paused(WaitOptions(timeout=0.05))
    polls = tenant.requests("GET /v1/sandboxes/{id}", sandbox=sandbox.id)
    assert polls
    assert {poll.sandbox_status for poll in polls} == {"pausing"}
    tenant.call(release_transition, tenant.server.fake, sandbox.id)
    assert sandbox.wait_until_paused(WAIT).status is SandboxStatus.PAUSED
    assert tenant.requests("GET /v1/sandboxes/{id}", sandbox=sandbox.id)[-1].sandbox_status == (
        "paused"
    )
    assert sandbox.data.paused_at is not None
    assert api_error(lambda: sandbox.files.download("/data/deep/blob.bin")).status_code == 409

    sandbox.resume()
    assert sandbox.status is SandboxStatus.RESUMING
    assert sandbox.wait_until_running(WAIT).status is SandboxStatus.RUNNING
    assert sandbox.data.last_resumed_at is not None
    with sandbox.files.download("/data/deep/blob.bin") as download:
        assert download.read() == payload  # the filesystem outlives a pause

    # A managed process: create, connect (replay + exit), wait.
    process = sandbox.processes.create(
        ManagedProcessCreateRequest(
            command="bash",
            arguments=["-lc", "echo out; echo err >&2; exit 4"],
            working_directory="/work/out",
        )
    )
    assert process.process_id.startswith("proc_")
    assert process.working_directory == "/work/out"
    with sandbox.processes.connect(process.process_id) as stream:
        events = list(stream)
    data = [e for e in events if e.type is ManagedProcessConnectEventType.DATA]
    assert [(e.sequence, e.stream, e.data) for e in data] == [
        (1, ManagedProcessStream.STDOUT, b"out\n"),
        (2, ManagedProcessStream.STDERR, b"err\n"),
    ]
    assert events[-1].type is ManagedProcessConnectEventType.EXIT
    assert events[-1].exit_code == 4
    finished = sandbox.processes.wait(process.process_id, ManagedProcessWaitOptions(wait_timeout=2))
    assert finished.state is ManagedProcessState.EXITED
    assert (finished.exit_code, finished.leader_exited, finished.tree_exited) == (4, True, True)
    assert finished.output.newest_sequence == 2

    # Destroy is asynchronous too, and the row stays readable as ``destroyed``.
    sandbox.destroy()
    assert sandbox.status is SandboxStatus.DESTROYING
    assert sandbox.wait_until_destroyed(WAIT).status is SandboxStatus.DESTROYED
    assert sandbox.data.destroyed_at is not None
    assert tenant.client.get_sandbox(sandbox.id).status is SandboxStatus.DESTROYED
    # The name is free again once the sandbox is gone.
    assert create(tenant, name="sdk-lifecycle").name == "sdk-lifecycle"


def test_refresh_patch_resize_keys_and_lookup_by_ip(tenant: Tenant) -> None:
    sandbox = create(tenant)
    assert tenant.client.get_sandbox_by_ip(sandbox.ip_address).id == sandbox.id
    assert sandbox.refresh().data.created_at is not None
    assert sandbox.set_ingress(True).preview_url(8080).startswith("https://8080-")
    assert sandbox.set_auto_pause(600).data.auto_pause_after_seconds == 600
    assert sandbox.set_auto_pause(None).data.auto_pause_after_seconds is None
    grown = sandbox.resize(sandbox.data.disk_mib + 1024)
    assert sandbox.data.disk_mib == grown.disk_mib
    assert sandbox.add_ssh_public_keys(["ssh-ed25519 AAAAC3Nza test@host"]) == 1
    assert sandbox.bandwidth().id == sandbox.id


# -- exec: stdin, env, streaming -------------------------------------------------------------------


def test_run_command_stdin_and_declared_env_overrides(tenant: Tenant) -> None:
    sandbox = create(tenant, environment_variables={"MODE": "prod"})
    piped = sandbox.run_command(RunCommandRequest(command="cat"), ExecOptions(standard_input="ab"))
    assert piped.result.standard_output == "ab"
    override = ExecOptions(environment_variables={"MODE": "test"})
    assert sandbox.shell('echo "$MODE"', override).result.standard_output == "test\n"
    missing = sandbox.run_command(RunCommandRequest(command="no-such-tool"))
    assert missing.result.exit_code == 127
    # Only keys declared at create time may be overridden.
    undeclared = api_error(
        lambda: sandbox.shell("true", ExecOptions(environment_variables={"OTHER": "x"}))
    )
    assert (undeclared.status_code, undeclared.code) == (400, 400)


def test_stream_command_yields_output_heartbeats_and_exit(tenant: Tenant) -> None:
    sandbox = create(tenant)
    request = RunCommandRequest(
        command="bash", arguments=["-lc", "echo first; sleep 0.2; echo second >&2; exit 5"]
    )
    with sandbox.stream_command(request) as stream:
        events = list(stream)
    kinds = [e.type for e in events]
    assert ExecStreamEventType.HEARTBEAT in kinds  # the 0.2 s sleep spans several heartbeats
    output = [(e.type, e.data) for e in events if e.data]
    assert output == [
        (ExecStreamEventType.STDOUT, "first\n"),
        (ExecStreamEventType.STDERR, "second\n"),
    ]
    assert kinds[-1] is ExecStreamEventType.EXIT
    assert events[-1].exit_code == 5
    (sent,) = tenant.sent_to("POST", f"/v1/sandboxes/{sandbox.id}/exec")
    assert sent.url.params["stream"] == "true"


# -- managed processes ----------------------------------------------------------------------------


def test_process_input_replay_heartbeats_and_delete(tenant: Tenant) -> None:
    sandbox = create(tenant)
    processes = sandbox.processes

    # stdin: input then close; ``cat`` echoes and exits.
    cat = processes.create(ManagedProcessCreateRequest(command="cat"))
    assert processes.input(cat.process_id, "hello ") == 1
    assert processes.input_bytes(cat.process_id, b"world") == 2
    processes.close_standard_input(cat.process_id)
    done = processes.wait(cat.process_id, ManagedProcessWaitOptions(wait_timeout=2))
    assert done.exit_code == 0
    with processes.connect(cat.process_id) as stream:
        echoed = b"".join(e.data for e in stream)
    assert echoed == b"hello world"
    # Reconnecting after the first frame replays only what followed it.
    with processes.connect(cat.process_id, ManagedProcessConnectOptions(after_sequence=1)) as s:
        replay = list(s)
    assert all(e.sequence > 1 for e in replay if e.type is ManagedProcessConnectEventType.DATA)
    assert replay[-1].type is ManagedProcessConnectEventType.EXIT
    assert api_error(lambda: processes.close_standard_input(cat.process_id)).status_code == 409

    # A long runner: live follow shows heartbeats; DELETE ends the whole tree.
    sleeper = processes.create(ManagedProcessCreateRequest(command="sleep", arguments=["30"]))
    assert {p.process_id for p in processes.list()} == {cat.process_id, sleeper.process_id}
    with processes.connect(sleeper.process_id) as stream:
        first = next(stream)
    assert first.type is ManagedProcessConnectEventType.HEARTBEAT
    assert processes.get(sleeper.process_id).state is ManagedProcessState.RUNNING
    timed_out = api_error(
        lambda: processes.wait(
            sleeper.process_id,
            ManagedProcessWaitOptions(wait_timeout=0.05, disable_retry=True),
        )
    )
    assert timed_out.status_code == 408
    deleted = processes.delete(sleeper.process_id, ManagedProcessDeleteOptions(grace_period=1))
    assert deleted.tree_exited is True
    (sent,) = tenant.sent_to("DELETE", f"/v1/sandboxes/{sandbox.id}/processes/{sleeper.process_id}")
    assert sent.url.params["grace_ms"] == "1000"
    assert api_error(lambda: processes.get("proc_missing")).status_code == 404


# -- egress and fork ---------------------------------------------------------------------------


def test_egress_get_and_set(tenant: Tenant) -> None:
    sandbox = create(tenant, egress_rules=["10.0.0.0/8"])
    assert sandbox.egress().egress_rules == ["10.0.0.0/8"]
    updated = sandbox.set_egress(["api.example.com:443", "1.2.3.4/32"])
    assert (updated.id, updated.egress_rules) == (sandbox.id, ["api.example.com:443", "1.2.3.4/32"])
    assert sandbox.egress().egress_rules == updated.egress_rules
    assert sandbox.refresh().data.egress_rules == updated.egress_rules


def test_fork_copies_the_filesystem_into_an_independent_sandbox(tenant: Tenant) -> None:
    running = create(tenant)
    assert api_error(running.fork).status_code == 409  # only a paused sandbox can be forked

    source = create(tenant, environment_variables={"ROLE": "source"})
    source.files.upload("/state/checkpoint", b"step-7")
    source.pause()
    source.wait_until_paused(WAIT)
    child = source.fork(ForkSandboxRequest(environment_variables={"ROLE": "child"}))
    assert child.id != source.id
    assert child.data.forked_from == source.id
    assert child.status is SandboxStatus.FORKING
    child.wait_until_running(WAIT)
    with child.files.download("/state/checkpoint") as download:
        assert download.read() == b"step-7"
    assert child.shell('echo "$ROLE"').result.standard_output == "child\n"
    # The child is independent: changing it leaves the (still paused) source alone.
    child.files.upload("/state/checkpoint", b"step-8")
    assert tenant.client.get_sandbox(source.id).status is SandboxStatus.PAUSED


# -- listing across pages --------------------------------------------------------------------------


def test_list_sandboxes_follows_pagination_across_pages(tenant: Tenant) -> None:
    # The SDK pages 500 at a time; seeding 1,001 sandboxes in-process (no HTTP) costs ~0.1 s and
    # makes it walk three pages.
    def seed(count: int) -> list[str]:
        fake = tenant.server.fake
        owner = fake.tenant(tenant.key)
        return [fake.sandboxes.create(owner, CreateSpec(shape=SHAPE)).id for _ in range(count)]

    seeded = tenant.call(seed, 1000)
    last = create(tenant)
    expected = [*seeded, last.id]

    everything = tenant.client.list_sandboxes()
    assert [s.id for s in everything] == expected  # creation order, no gaps or repeats
    pages = [
        (r.url.params["limit"], r.url.params["offset"])
        for r in tenant.sent_to("GET", "/v1/sandboxes")
    ]
    assert pages == [("500", "0"), ("500", "500"), ("500", "1000")]

    tenant.sent.clear()
    first_700 = tenant.client.list_sandboxes(ListSandboxesOptions(limit=700))
    assert [s.id for s in first_700] == expected[:700]
    pages = [
        (r.url.params["limit"], r.url.params["offset"])
        for r in tenant.sent_to("GET", "/v1/sandboxes")
    ]
    assert pages == [("500", "0"), ("200", "500")]

    last.pause()
    last.wait_until_paused(WAIT)
    only_paused = tenant.client.list_sandboxes(ListSandboxesOptions(status=SandboxStatus.PAUSED))
    assert [s.id for s in only_paused] == [last.id]
    assert only_paused[0].status is SandboxStatus.PAUSED


# -- the SDK's error mapping -----------------------------------------------------------------------


def test_unknown_key_is_an_api_error_401(server: BackgroundServer) -> None:
    sent: list[httpx.Request] = []
    with sdk_client(server.url, "skp_never_registered", sent) as stranger:
        error = api_error(stranger.who_am_i)
    assert (error.status_code, error.code, error.method) == (401, 401, "GET")
    assert "missing or invalid API key" in str(error)
    assert error.request_id  # the fake sends X-Request-ID
    assert b"skp_never_registered" not in error.body  # the key is never echoed back


def test_missing_and_foreign_sandboxes_are_404(tenant: Tenant, server: BackgroundServer) -> None:
    missing = api_error(lambda: tenant.client.get_sandbox("sb_doesnotexist"))
    assert (missing.status_code, missing.code) == (404, 404)
    assert "sandbox not found" in str(missing)

    other_key = server.call(server.fake.create_tenant)
    try:
        with sdk_client(server.url, other_key, []) as other:
            theirs = other.create_sandbox(CreateSandboxRequest(shape=SHAPE))
            foreign = api_error(lambda: tenant.client.get_sandbox(theirs.id))
            assert (foreign.status_code, foreign.code) == (404, 404)  # existence not disclosed
            assert other.get_sandbox(theirs.id).status is SandboxStatus.RUNNING
    finally:
        server.call(server.fake.drop_tenant, other_key)


def test_state_conflicts_are_409(tenant: Tenant) -> None:
    sandbox = create(tenant, name="conflicted")
    resume = api_error(sandbox.resume)
    assert (resume.status_code, resume.code) == (409, 409)
    assert "only a paused or errored sandbox can be resumed" in str(resume)
    duplicate = api_error(lambda: create(tenant, name="conflicted"))
    assert (duplicate.status_code, duplicate.code) == (409, 409)
    sandbox.pause()
    assert api_error(sandbox.pause).status_code == 409  # already pausing
    sandbox.wait_until_paused(WAIT)
    assert api_error(sandbox.pause).status_code == 409


def test_validation_errors_are_400_with_the_field(tenant: Tenant) -> None:
    error = api_error(lambda: tenant.client.create_sandbox(CreateSandboxRequest(shape="s-huge")))
    assert (error.status_code, error.code) == (400, 400)
    assert "shape" in str(error)


def test_sdk_retries_transient_errors_honouring_retry_after(tenant: Tenant) -> None:
    sandbox = create(tenant)
    # One 503 with ``Retry-After: 0``: the SDK retries the idempotent GET and succeeds.
    tenant.call(
        tenant.server.fake.faults.error,
        503,
        route="GET /v1/sandboxes/{id}",
        tenant=tenant.id,
        times=1,
        retry_after=0,
    )
    assert sandbox.refresh().status is SandboxStatus.RUNNING
    answered = [e.status for e in tenant.requests("GET /v1/sandboxes/{id}", sandbox=sandbox.id)]
    assert answered == [503, 200]
    # A non-idempotent POST is not retried on 500: the error reaches the caller.
    tenant.call(
        tenant.server.fake.faults.error,
        500,
        route="POST /v1/sandboxes/{id}/pause",
        tenant=tenant.id,
        times=1,
    )
    failure = api_error(sandbox.pause)
    assert (failure.status_code, failure.code) == (500, 500)
    assert len(tenant.requests("POST /v1/sandboxes/{id}/pause")) == 1
