"""Schemathesis against the OpenAPI document, on a live fake with no fault rules.

Every documented operation is called with generated data (a bounded number of examples each,
derandomized so CI never flakes), then chains of operations follow the document's links
(create a sandbox, then pause/exec/fork/... it by id; start a process, then connect/wait/...).
Every answer must:

- not be a 5xx (nothing injected one);
- have a documented status code and content type, and a body matching its schema;
- arrive within a per-request timeout (no hangs). NDJSON streams are read as they arrive:
  each line must match its frame schema, a finished stream must end with its exit frame, data
  frames must count up by one, and a stream still following a live process is cut after a
  short deadline, having never gone silent for longer than a few heartbeats.

Left out on purpose: schemathesis' ``use_after_free`` check (a deleted sandbox stays readable as
``destroyed``, as on the real service) and the positive/negative acceptance checks (a stateful
API answers valid input with 404/409 all the time). Fault rules added through
``POST /_fake/faults`` are cleared before the next ``/v1`` call, so generated rules never fault
the run; the control API itself is never subject to them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

if sys.version_info < (3, 11):  # schemathesis 4 needs Python 3.11
    pytest.skip("schemathesis needs Python 3.11+", allow_module_level=True)

schemathesis = pytest.importorskip("schemathesis", minversion="4.0")

import requests  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import initialize, multiple  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402
from referencing import Registry, Resource  # noqa: E402
from referencing.jsonschema import DRAFT202012  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.generation.stateful.state_machine import StepInput  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig  # noqa: E402
from fake_server.api_schema import NDJSON, OCTET_STREAM  # noqa: E402
from fake_server.credentials import CREDENTIAL_HEADERS  # noqa: E402
from fake_server.openapi import document  # noqa: E402

API_KEY = "skp_schemathesis"
# Every credential header the document declares carries the key: schemathesis may fill one
# it picks with a value of its own, and the first header present wins (fake_server.credentials).
AUTH = {
    header: f"Bearer {API_KEY}" if header == "Authorization" else API_KEY
    for header in CREDENTIAL_HEADERS
}
SHAPE = "s-1vcpu-1gb"
#: (operationId, status) of every answer, to prove the chains reached what they are meant to.
SEEN: Counter[tuple[str, int]] = Counter()
#: Generous for a fake that answers in milliseconds; anything slower is a hang.
REQUEST_TIMEOUT = 10.0
#: How long a stream that follows a live process is read before the test moves on.
STREAM_DEADLINE = 0.25
#: Server-side heartbeat and long-poll bounds, short so live streams and waits stay cheap.
HEARTBEAT_S = 0.05
MAX_WAIT_MS = 100
#: Silence that counts as a stalled stream (40 missed heartbeats: generous for a loaded CI box).
STREAM_SILENCE = 40 * HEARTBEAT_S
#: The suite's bounded run; raise them for a longer hunt, e.g.
#: ``CREATEOS_FUZZ_EXAMPLES=200 CREATEOS_FUZZ_SCENARIOS=2000 CREATEOS_FUZZ_COVERAGE=1
#: CREATEOS_FUZZ_STATEFUL_MODE=all``.
EXAMPLES_PER_OPERATION = int(os.environ.get("CREATEOS_FUZZ_EXAMPLES", "12"))
STATEFUL_SCENARIOS = int(os.environ.get("CREATEOS_FUZZ_SCENARIOS", "60"))
STATEFUL_STEPS = 15

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

DOCUMENT = document()
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20260908,
        "generation": {
            "deterministic": True,
            "max-examples": EXAMPLES_PER_OPERATION,
            # NUL bytes only ever earn a 400 ("must not contain NUL bytes"): spend the examples
            # on inputs that reach deeper.
            "allow-x00": False,
            "database": "none",
        },
        "phases": {
            # The coverage phase enumerates every boundary case whatever max-examples says:
            # thorough, but too slow for the suite's budget.
            "coverage": {"enabled": os.environ.get("CREATEOS_FUZZ_COVERAGE") == "1"},
            # Chains only go deep on valid input; invalid input is the per-operation test's job.
            "stateful": {
                "generation": {"mode": os.environ.get("CREATEOS_FUZZ_STATEFUL_MODE", "positive")}
            },
        },
        "request-timeout": REQUEST_TIMEOUT,
        "headers": AUTH,
        # Nothing is written next to the checkout.
        "reports": {"vcr": {"enabled": False}},
    }
)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)
#: Chains follow a sandbox through its lifecycle, its runtime and its processes (the routes a
#: lease's races go through), named here rather than "everything under /v1/sandboxes": other
#: routes have chains of their own (the desktop and access token, networks and disks) or stay in
#: the per-operation test, where they cannot crowd out the chains that reach running sandboxes
#: and live processes (each route added under a sandbox did).
_LIFECYCLE = r"pause|resume|fork|egress|resize|ssh-pubkeys|bandwidth|exec|files|state|marker"
STATEFUL_SCHEMA = SCHEMA.include(
    path_regex=(
        r"^/(v1|_fake)/sandboxes(/by-ip/\{ip\}|/\{id\}"
        rf"(/({_LIFECYCLE})|/processes(/\{{pid\}}(/[a-z/]+)?)?)?)?$"
    )
)
#: The desktop chains: creating a sandbox, its desktop and its access token.
DESKTOP_SCHEMA = SCHEMA.include(
    path_regex=r"^/v1/sandboxes(/\{id\}/(computer/.*|access-token.*))?$"
)
SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=EXAMPLES_PER_OPERATION,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


# -- the live fake ---------------------------------------------------------------------------


def serve_live() -> Iterator[BackgroundServer]:
    """A fake in a background thread with the test tenant and short stream bounds."""
    config = ServerConfig(
        transition_ms=0,
        seed=1,
        heartbeat_s=HEARTBEAT_S,
        max_wait_ms=MAX_WAIT_MS,
    )
    with BackgroundServer(FakeCreateOS(config)) as server:
        server.call(server.fake.create_tenant, API_KEY)
        yield server


@pytest.fixture(scope="module")
def live() -> Iterator[BackgroundServer]:
    """One fake for every per-operation case (they are independent requests)."""
    yield from serve_live()


@pytest.fixture
def chain_live() -> Iterator[BackgroundServer]:
    """A fake of the chains' own: the per-operation cases also call the control API (reset,
    seed, tenants...), and whatever they leave behind must not steer which links a chain
    reaches (it made this test depend on which cases an xdist worker ran before it)."""
    yield from serve_live()


def fresh_tenant(fake: FakeCreateOS) -> None:
    """Forget the test tenant's sandboxes and rules, and restart ids from the seed."""
    fake.drop_tenant(API_KEY)
    fake.faults.clear()
    fake.create_tenant(API_KEY)
    fake.reseed(1)


# -- NDJSON streams ----------------------------------------------------------------------------

_REGISTRY = Registry().with_resource(
    "urn:fake-createos", Resource.from_contents(DOCUMENT, default_specification=DRAFT202012)
)


def _frame_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": f"urn:fake-createos#/components/schemas/{name}"}, registry=_REGISTRY
    )


FRAME_VALIDATORS = {
    "execCommand": _frame_validator("ExecFrame"),
    "connectProcess": _frame_validator("ProcessFrame"),
}


def _read_stream(response: requests.Response) -> tuple[bytes, bool]:
    """The body of a streamed answer and whether it was cut at the deadline (still live)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + STREAM_DEADLINE
    # read1 returns as soon as bytes arrive; a silent server trips the read timeout instead.
    while chunk := response.raw.read1(65536, decode_content=True):
        chunks.append(chunk)
        if time.monotonic() > deadline:
            return b"".join(chunks), True
    return b"".join(chunks), False


def _check_frames(case: Any, body: bytes, cut_short: bool) -> None:
    """Every line is one frame matching the documented schema; a finished stream ends with its
    exit frame; process data frames count up by one."""
    operation = _operation_id(case)
    validator = FRAME_VALIDATORS[operation]
    lines = body.split(b"\n")
    assert lines[-1] == b"" or cut_short, f"{operation}: unterminated last line {lines[-1]!r}"
    complete = lines[:-1]
    assert complete or cut_short, f"{operation}: empty stream"
    frames = [json.loads(line) for line in complete]
    for frame in frames:
        errors = sorted(validator.iter_errors(frame), key=str)
        assert not errors, f"{operation}: frame {frame} breaks its schema: {errors[0].message}"
    if operation == "connectProcess":
        seqs = [frame["seq"] for frame in frames if frame["type"] == "data"]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)) if seqs else []), seqs
        ends = [frame for frame in frames if frame["type"] in ("exit", "error")]
    else:
        ends = [frame for frame in frames if "exit_code" in frame]
    assert len(ends) == (0 if cut_short else 1), f"{operation}: end frames {ends}"
    if ends:
        assert frames[-1] is ends[0], f"{operation}: frames after the end: {frames}"


def _operation_id(case: Any) -> str:
    return str(case.operation.definition.raw["operationId"])


def _streaming(case: Any) -> bool:
    return _operation_id(case) in FRAME_VALIDATORS


def send(case: Any, server: BackgroundServer) -> schemathesis.Response:
    """Make the call; streams are read by hand so a live one is cut at a deadline instead of
    being mistaken for a hang (schemathesis only knows how to cut SSE streams)."""
    if not case.path.startswith("/_fake/"):
        # Rules generated for POST /_fake/faults must not fault the run (the control API is
        # never subject to them, so they are checked, listed and deleted there first).
        server.call(server.fake.faults.clear)
    response = _stream(case, server) if _streaming(case) else case.call(server.url, headers=AUTH)
    SEEN[_operation_id(case), response.status_code] += 1
    return response


def _stream(case: Any, server: BackgroundServer) -> schemathesis.Response:
    kwargs = case.as_transport_kwargs(base_url=server.url, headers=AUTH)
    # (connect, read): between two bytes of a live stream a heartbeat is at most HEARTBEAT_S
    # away, so a stream silent for this long has stalled.
    kwargs["timeout"] = (REQUEST_TIMEOUT, STREAM_SILENCE)
    with requests.Session() as session:
        raw = session.request(**kwargs, stream=True)
        try:
            if raw.headers.get("Content-Type", "").startswith(NDJSON):
                body, cut_short = _read_stream(raw)
                _check_frames(case, body, cut_short)
                raw._content = body
            else:
                raw._content = raw.raw.read(decode_content=True)
        finally:
            raw.close()
    return schemathesis.Response.from_requests(raw, verify=True)


def check(case: Any, response: schemathesis.Response) -> None:
    case.validate_response(response, checks=CHECKS)


# -- every operation alone -----------------------------------------------------------------------


@SCHEMA.parametrize()
@SETTINGS
def test_operation_answers_as_documented(case: Any, live: BackgroundServer) -> None:
    check(case, send(case, live))


# -- chains along the document's links ------------------------------------------------------------


#: Operations the chains must get a 200 from (each needs state that only links provide).
LINKED_SUCCESSES = {
    "getSandbox",
    "pauseSandbox",
    "forkSandbox",
    "execCommand",
    "connectProcess",
    "deleteSandbox",
}
#: Operations the chains must reach through a link, whatever they answer. Their success is a
#: coin toss: waitProcess answers 200 or 408 depending on which process a chain waits on,
#: downloadFile's one link (from an upload) often follows a pause (409), and so do the process
#: operations a chain reaches after pausing its sandbox. Hypothesis draws different data in
#: different processes even derandomized (it also seeds from constants in the modules loaded
#: so far), so under xdist runs of chains without one successful download, input or process
#: delete happened (each time routes were added). tests/test_api_runtime.py and
#: tests/test_sdk.py cover these operations themselves.
LINKED_CALLS = {"waitProcess", "downloadFile", "sendInput", "deleteProcess"}


def _sandbox_id(output: Any) -> str:
    body = output.response.json()
    assert "data" in body, body
    data: dict[str, Any] = body["data"]
    return str(data["id"])


@pytest.fixture
def same_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis mixes string and number literals of every local module loaded so far into
    what it draws (hypothesis.internal.conjecture.providers), so a derandomized run still
    depended on which modules earlier tests in the worker had imported: a new module, or a
    new literal in one, could steer the chains away from a fork. Here it draws from none."""
    providers = pytest.importorskip("hypothesis.internal.conjecture.providers")
    if hasattr(providers, "_get_local_constants"):  # older Hypothesis has no such pool
        empty = providers.Constants()
        monkeypatch.setattr(providers, "_get_local_constants", lambda: empty)


#: How many computer operations besides the seeding's own the desktop chains must get a 200
#: from. A count, not a list: which ones a run reaches depends on Hypothesis' draws, which differ
#: between processes (see LINKED_CALLS); a run reaches about twice this many.
DESKTOP_SUCCESSES = 8
#: The operations on one window (``{wid}``): reaching one proves the window link leads on.
WINDOW_OPERATIONS = {
    "computerGetWindow",
    "computerWindowGeometry",
    "computerFocusWindow",
    "computerMoveWindow",
    "computerResizeWindow",
    "computerMaximizeWindow",
    "computerMinimizeWindow",
    "computerRestoreWindow",
    "computerCloseWindow",
}
SANDBOXES = "/v1/sandboxes"
#: The bundle of created sandboxes, which seeds fill.
CREATED = f"POST {SANDBOXES} -> 200"

#: Seeds a scenario: given the machine and the schema, the steps whose answers start it.
Seed = Callable[[Any, Any], Any]


def run_chains(
    live: BackgroundServer,
    schema: Any,
    seeds: Mapping[str, Seed],
    scenarios: int = STATEFUL_SCENARIOS,
) -> set[str]:
    """Run chains of ``schema``'s operations along the links, each scenario on an empty tenant
    and started from what ``seeds`` make (each fills the bundle it is keyed by, e.g.
    ``"POST /v1/sandboxes -> 200"``); every answer is checked against the document. Returns the
    operations that answered 200 at least once."""
    base = schema.as_state_machine()

    class Machine(base):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            # Every scenario starts from the same state (an empty tenant, the same ids), so
            # Hypothesis can replay and shrink it: bundles fill from the fake's answers.
            live.call(fresh_tenant, live.fake)

        def seed_step(self, case: Any) -> Any:
            """One step outside the generated rules, recorded as the rules record theirs so
            links from its answer work like links from a generated one."""
            step = StepInput.initial(case)
            self.recorder.record_case(case=case)
            self.control.record_step(step, self.recorder)
            return self._step(step)

        def call(self, case: Any, **kwargs: Any) -> schemathesis.Response:
            return send(case, live)

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            check(case, response)

    def seeding(seed: Seed) -> Callable[[Any], Any]:
        def seed_scenario(machine: Any) -> Any:
            return seed(machine, schema)

        return seed_scenario

    for position, (bundle, seed) in enumerate(seeds.items()):
        rule = initialize(target=base.bundles[bundle])(seeding(seed))
        setattr(Machine, f"seed_{position}", rule)
    SEEN.clear()
    Machine.run(
        settings=settings(SETTINGS, max_examples=scenarios, stateful_step_count=STATEFUL_STEPS)
    )
    return {operation for operation, status in SEEN if status == 200}


def seed_sandboxes(machine: Any, operations: Any) -> Any:
    """Start every scenario with what random roots rarely reach: a running sandbox with a
    declared env var, a paused one (a fork source), a live process, a finished one and a
    terminal, and an uploaded file. The links take it from there."""
    processes = SANDBOXES + "/{id}/processes"
    create = operations[SANDBOXES]["POST"]
    running = machine.seed_step(create.Case(body={"shape": SHAPE, "envs": {"A": "1"}}))
    paused = machine.seed_step(create.Case(body={"shape": SHAPE}))
    running_id, paused_id = _sandbox_id(running), _sandbox_id(paused)
    pause = operations[SANDBOXES + "/{id}/pause"]["POST"]
    machine.seed_step(pause.Case(path_parameters={"id": paused_id}, body={}))
    start = operations[processes]["POST"].Case
    in_running = {"id": running_id}
    # `cat` waits for stdin: a live process to connect to, wait for, signal...
    live_process = machine.seed_step(start(path_parameters=in_running, body={"cmd": "cat"}))
    script = {"cmd": "/bin/bash", "args": ["-lc", "echo out; echo err >&2"]}
    finished = machine.seed_step(start(path_parameters=in_running, body=script))
    terminal = {"pty": {"rows": 24, "cols": 80}}
    shell = machine.seed_step(start(path_parameters=in_running, body=terminal))
    upload = machine.seed_step(
        operations[SANDBOXES + "/{id}/files"]["PUT"].Case(
            path_parameters=in_running,
            query={"path": "/srv/app/data.txt"},
            body=b"hello",
            media_type=OCTET_STREAM,
        )
    )
    # A second running sandbox: chains pause sandboxes often, and exec needs one running.
    spare = machine.seed_step(create.Case(body={"shape": SHAPE}))
    return multiple(running, paused, live_process, finished, shell, upload, spare)


@pytest.mark.usefixtures("same_constants")
def test_linked_operations_answer_as_documented(chain_live: BackgroundServer) -> None:
    reached = run_chains(chain_live, STATEFUL_SCHEMA, {CREATED: seed_sandboxes})
    # A chain test that never gets past 404s proves nothing: this fails if the links or the
    # seeding stop leading anywhere.
    assert reached >= LINKED_SUCCESSES, sorted(LINKED_SUCCESSES - reached)
    called = {operation for operation, _ in SEEN}
    assert called >= LINKED_CALLS, sorted(LINKED_CALLS - called)


def seed_desktop(machine: Any, operations: Any) -> Any:
    """A running desktop with a window open and an access token (enabling it is checked here,
    once: the chains' own tries answer 409 from then on), and the window (its link leads to the
    window operations)."""
    created = machine.seed_step(
        operations[SANDBOXES]["POST"].Case(body={"shape": SHAPE, "rootfs": "desktop:1"})
    )
    on_desktop = {"id": _sandbox_id(created)}
    machine.seed_step(
        operations[SANDBOXES + "/{id}/access-token"]["POST"].Case(
            path_parameters=on_desktop, body={}
        )
    )
    computer = SANDBOXES + "/{id}/computer"
    machine.seed_step(
        operations[computer + "/launch"]["POST"].Case(
            path_parameters=on_desktop, body={"application": "xterm"}
        )
    )
    window = machine.seed_step(
        operations[computer + "/windows/current"]["GET"].Case(path_parameters=on_desktop)
    )
    return multiple(created, window)


@pytest.mark.usefixtures("same_constants")
def test_desktop_chains_answer_as_documented(chain_live: BackgroundServer) -> None:
    """The computer routes' successes, which need a running desktop, and the access token's
    (chains of their own, so they do not crowd the sandbox chains out of the operations those
    must reach)."""
    reached = run_chains(chain_live, DESKTOP_SCHEMA, {CREATED: seed_desktop})
    beyond_seeding = {
        operation
        for operation in reached - {"computerLaunch", "computerCurrentWindow"}
        if operation.startswith("computer")
    }
    assert len(beyond_seeding) >= DESKTOP_SUCCESSES, sorted(beyond_seeding)
    assert beyond_seeding & WINDOW_OPERATIONS, sorted(beyond_seeding)


#: Networks and disks chain apart from the sandboxes: in one machine they would crowd out the
#: chains that reach a fork.
RESOURCE_SCHEMA = SCHEMA.include(path_regex=r"^/v1/(networks|disks)")
#: What the resource chains must get a 200 from, from a seeded network and disk.
RESOURCE_SUCCESSES = {"getNetwork", "deleteNetwork", "getDisk", "patchDisk", "deleteDisk"}


def seed_network(machine: Any, operations: Any) -> Any:
    """A network to follow links from (generated names rarely make one)."""
    return machine.seed_step(operations["/v1/networks"]["POST"].Case(body={"name": "seed-net"}))


def seed_disk(machine: Any, operations: Any) -> Any:
    """A disk to follow links from (generated bodies rarely make one)."""
    body = {
        "name": "seed-disk",
        "kind": "s3",
        "config": {"bucket": "b", "endpoint": "https://s3.example.test"},
        "credentials": {"access_key": "a", "secret_key": "s"},
    }
    return machine.seed_step(operations["/v1/disks"]["POST"].Case(body=body))


@pytest.mark.usefixtures("same_constants")
def test_network_and_disk_links_answer_as_documented(chain_live: BackgroundServer) -> None:
    seeds = {"POST /v1/networks -> 200": seed_network, "POST /v1/disks -> 200": seed_disk}
    reached = run_chains(chain_live, RESOURCE_SCHEMA, seeds, STATEFUL_SCENARIOS // 4)
    assert reached >= RESOURCE_SUCCESSES, sorted(RESOURCE_SUCCESSES - reached)
