"""Hypothesis stateful tests: the fake over HTTP, step by step, against a reference model.

A :class:`RuleBasedStateMachine` drives create / pause / resume / delete / fork / exec / files
/ processes (and, on a manual clock, ``advance``) in random orders, and checks every answer —
HTTP status, envelope, returned status and content — against :class:`LifecycleModel`, a plain
dict-based model of the lifecycle written from the contract (``createos-api.md`` §4, §5, §8),
not from the fake's code. Any divergence is a failing example that Hypothesis shrinks.

Hypothesis' state machines are synchronous, so the fake is served on a private event loop
(one per configuration, reset and reseeded before every example, so nothing leaks between
examples) that :class:`LoopClient` drives one request at a time over real HTTP on 127.0.0.1.
Keeping client and server in one thread makes a request about three times cheaper than a
``BackgroundServer`` thread plus a blocking client, and shrinking a failure runs hundreds of
examples.

Runs are bounded and deterministic: ``derandomize=True`` fixes Hypothesis' seed, the fake has a
fixed seed, and no step depends on wall-clock time (transitions are instant, or wait on the
manual clock that only the ``advance`` rule moves). A passing run takes a few seconds; a
failing one also shrinks, which Hypothesis caps at five minutes.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from fake_server import FakeCreateOS, ServerConfig
from fake_server.runner import LOOPBACK, start_site, stop_site

SHAPE = "s-1vcpu-1gb"
#: Statuses that no longer hold a name (contract §4.6: ``destroyed``/``failed`` free it).
TERMINAL = frozenset({"destroyed", "failed"})
#: A small, fixed set of paths so reads often hit files written earlier. None is a directory
#: of another, so any of them can always be written.
PATHS = ("/data/a.txt", "/data/b.txt", "/root/notes/c.txt", "/tmp/d")
#: One fixed name (besides auto-generated ones), so name conflicts and reuse actually happen.
NAME = "alpha"
#: Per-request bound: a hang in the fake becomes a failing example instead of a stuck suite.
REQUEST_TIMEOUT_S = 5.0

#: Sized by mutation testing: with these settings, each of nine deliberate errors in the model
#: (resume refused from ``error``, a fork not copying files or copying processes, names never
#: freed, ``failed`` holding its name, pause accepted when paused, work accepted in ``error``,
#: fork from ``pausing``, transitions landing late) makes the run fail.
SETTINGS = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

#: Text fed to ``cat > path`` through exec's stdin: quotes, ``$`` and backslashes included,
#: since stdin is never parsed by the shell.
texts = st.text(alphabet="ab xyz'\"$\n\\", max_size=24)
READERS = st.sampled_from(("files", "exec", "exec-stream"))
words = st.text(alphabet="abcdefghij", min_size=1, max_size=8)


# -- the reference model ---------------------------------------------------------------------------


@dataclass
class ModelSandbox:
    """What the contract says one sandbox must look like."""

    status: str
    name: str
    forked_from: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    #: Managed processes: id -> (the word it echoes, its exit code).
    processes: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: An asynchronous transition in flight: (target status, model time it is due).
    pending: tuple[str, float] | None = None


class LifecycleModel:
    """The lifecycle of §5 as a table, with asynchronous transitions on a model clock.

    ``duration`` is the length of every pause/resume/fork/delete transition (create is
    synchronous, as on the real service); ``0`` finishes each one inside its own request.
    """

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self.now = 0.0
        self.sandboxes: dict[str, ModelSandbox] = {}

    def names_held(self) -> set[str]:
        """Names are unique among non-terminal sandboxes, ``destroying`` included."""
        return {sb.name for sb in self.sandboxes.values() if sb.status not in TERMINAL}

    def begin(self, sandbox: ModelSandbox, between: str, target: str) -> None:
        """Start a transition: ``between`` now, ``target`` after ``duration``."""
        if self.duration <= 0:
            sandbox.status, sandbox.pending = target, None
        else:
            sandbox.status, sandbox.pending = between, (target, self.now + self.duration)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for sandbox in self.sandboxes.values():
            if sandbox.pending is not None and sandbox.pending[1] <= self.now:
                sandbox.status, sandbox.pending = sandbox.pending[0], None

    # Legality, straight from the operation table of §5.

    @staticmethod
    def can_pause(sandbox: ModelSandbox) -> bool:
        return sandbox.status == "running"

    @staticmethod
    def can_resume(sandbox: ModelSandbox) -> bool:
        return sandbox.status in ("paused", "error")

    @staticmethod
    def can_fork(sandbox: ModelSandbox) -> bool:
        return sandbox.status == "paused"

    @staticmethod
    def can_work(sandbox: ModelSandbox) -> bool:
        """Exec, files and processes need a running sandbox."""
        return sandbox.status == "running"

    def delete(self, sandbox: ModelSandbox) -> None:
        """DELETE is accepted in every state; a transition in flight is abandoned, and a
        sandbox already going away (or gone) stays as it is."""
        if sandbox.status in TERMINAL or sandbox.status == "destroying":
            return
        self.begin(sandbox, "destroying", "destroyed")

    def stats(self) -> dict[str, int]:
        """``whoami`` stats: ``total`` counts every sandbox that is not destroyed."""
        counts = {"running": 0, "paused": 0, "other": 0, "total": 0}
        for sandbox in self.sandboxes.values():
            if sandbox.status == "destroyed":
                continue
            counts["total"] += 1
            key = sandbox.status if sandbox.status in ("running", "paused") else "other"
            counts[key] += 1
        return counts


# -- talking to the fake ----------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, fully read."""

    url: str
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LoopClient:
    """A fake served on its own event loop, and a synchronous client for it: each call runs
    one request to completion on that loop (client and server in one thread)."""

    def __init__(self, config: ServerConfig) -> None:
        self.loop = asyncio.new_event_loop()
        self.fake = FakeCreateOS(config)
        self._runner, self.url = self.loop.run_until_complete(start_site(self.fake, LOOPBACK, 0))
        self._session = self.loop.run_until_complete(self._open())

    @staticmethod
    async def _open() -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            headers={"X-Api-Key": "skp_stateful_owner"},
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        async def send() -> Answer:
            async with self._session.request(
                method,
                self.url + path,
                json=json,
                params={k: str(v) for k, v in (params or {}).items()},
                data=content,
                headers=headers,
            ) as response:
                return Answer(
                    url=str(response.url),
                    status_code=response.status,
                    headers={k.lower(): v for k, v in response.headers.items()},
                    content=await response.read(),
                )

        return self.loop.run_until_complete(send())

    def get(self, path: str, **options: Any) -> Answer:
        return self.request("GET", path, **options)

    def post(self, path: str, **options: Any) -> Answer:
        return self.request("POST", path, **options)

    def put(self, path: str, **options: Any) -> Answer:
        return self.request("PUT", path, **options)

    def delete(self, path: str, **options: Any) -> Answer:
        return self.request("DELETE", path, **options)

    def close(self) -> None:
        self.loop.run_until_complete(self._session.close())
        self.loop.run_until_complete(stop_site(self.fake, self._runner))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


# -- checking answers ---------------------------------------------------------------------------


def expect_ok(response: Answer) -> Any:
    """A 200 JSend success; returns ``data``."""
    assert response.status_code == 200, (response.url, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == "success", body
    return body["data"]


def expect_fail(response: Answer, status: int) -> None:
    """A JSend ``fail`` with ``status`` and the same ``code``."""
    assert response.status_code == status, (response.url, response.text)
    body = response.json()
    assert body["status"] == "fail", body
    assert body["code"] == status, body
    assert isinstance(body["message"], str)
    assert body["message"]


def ndjson(response: Answer) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines() if line]


# -- the servers ------------------------------------------------------------------------------

#: One served fake per configuration, shared by the examples of a module run and reset before
#: each: starting one per example would dominate the run time.
_SERVERS: dict[ServerConfig, LoopClient] = {}


def shared_client(config: ServerConfig) -> LoopClient:
    client = _SERVERS.get(config)
    if client is None:
        client = _SERVERS[config] = LoopClient(config)
    return client


@pytest.fixture(autouse=True, scope="module")
def _stop_shared_servers() -> Iterator[None]:
    yield
    while _SERVERS:
        _SERVERS.popitem()[1].close()


# -- the machine -----------------------------------------------------------------------------------


class LifecycleMachine(RuleBasedStateMachine):
    """Random lifecycle and runtime traffic on zero-length transitions, checked step by step.

    Every rule that acts on a sandbox draws it with :meth:`_choose`: by default one for which
    the operation is legal (so the machine makes progress into paused, forked, errored...
    states that uniform picks rarely reach), otherwise any sandbox (so the 409s are exercised
    too). Rules are few and rich (a write is read back through the other channel, a fork checks
    what the child inherited) so that a short run still reaches deep states.
    """

    CONFIG = ServerConfig(seed=20260101, transition_ms=0)

    def __init__(self) -> None:
        super().__init__()
        self.http = shared_client(self.CONFIG)
        # A fresh fake for every example: no tenants, no rules, ids from the same seed.
        expect_ok(self.http.post("/_fake/reset"))
        expect_ok(self.http.post("/_fake/seed", json={"seed": self.CONFIG.seed}))
        self.model = LifecycleModel(self.CONFIG.transition_ms / 1000)
        # The manual clock is not reset: the model's clock starts where the fake's is.
        self.model.now = expect_ok(self.http.get("/_fake/state"))["clock"]["now"]

    def _choose(
        self,
        data: st.DataObject,
        legal: Callable[[ModelSandbox], bool],
        *prefer: Callable[[ModelSandbox], bool],
    ) -> str:
        everything = list(self.model.sandboxes)
        aimed = [key for key in everything if legal(self.model.sandboxes[key])]
        # Among legal targets, those that make the step tell more (a fork source with files
        # and processes to inherit), by the first preference any of them meets.
        for wish in prefer:
            wished = [key for key in aimed if wish(self.model.sandboxes[key])]
            if wished:
                aimed = wished
                break
        # Drawn as "wander", so the simplest choice (False) is the aimed one.
        if aimed and not data.draw(st.booleans(), label="wander"):
            return data.draw(st.sampled_from(aimed), label="sandbox")
        return data.draw(st.sampled_from(everything), label="sandbox")

    def _running(self) -> list[str]:
        return [key for key, sb in self.model.sandboxes.items() if sb.status == "running"]

    def _path(self, data: st.DataObject, sandbox: ModelSandbox) -> str:
        """By default a path the sandbox has (so reads hit), otherwise any path."""
        known = sorted(sandbox.files)
        if known and not data.draw(st.booleans(), label="wander"):
            return data.draw(st.sampled_from(known), label="path")
        return data.draw(st.sampled_from(PATHS), label="path")

    # -- sandbox management ------------------------------------------------------------------------

    @initialize()
    def first_sandboxes(self) -> None:
        # A few to start from: deletes and crashes soon leave a lone sandbox nothing to do.
        for name in (None, NAME, None):
            self._create(name)

    @rule(name=st.none() | st.just(NAME))
    def create(self, name: str | None) -> None:
        if name is not None and name in self.model.names_held():
            expect_fail(self.http.post("/v1/sandboxes", json={"shape": SHAPE, "name": name}), 409)
            return
        self._create(name)

    def _create(self, name: str | None) -> None:
        body: dict[str, Any] = {"shape": SHAPE}
        if name is not None:
            body["name"] = name
        data = expect_ok(self.http.post("/v1/sandboxes", json=body))
        # Create is synchronous: the answer is already running (§4.2).
        assert data["status"] == "running", data
        assert data["id"] not in self.model.sandboxes
        if name is not None:
            assert data["name"] == name
        assert data["name"] not in self.model.names_held(), "a live name was handed out twice"
        self.model.sandboxes[data["id"]] = ModelSandbox(status="running", name=data["name"])

    def _check_get(self, sandbox_id: str) -> None:
        self._check_view(expect_ok(self.http.get(f"/v1/sandboxes/{sandbox_id}")), sandbox_id)

    def _check_view(self, view: dict[str, Any], sandbox_id: str) -> None:
        expected = self.model.sandboxes[sandbox_id]
        assert view["id"] == sandbox_id
        assert view["status"] == expected.status, (sandbox_id, view["status"], expected)
        assert view["name"] == expected.name
        assert view.get("forked_from") == expected.forked_from
        assert ("destroyed_at" in view) == (expected.status in TERMINAL)

    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        sandbox_id = self._choose(data, self.model.can_pause)
        sandbox = self.model.sandboxes[sandbox_id]
        response = self.http.post(f"/v1/sandboxes/{sandbox_id}/pause")
        if not self.model.can_pause(sandbox):
            expect_fail(response, 409)
            return
        self.model.begin(sandbox, "pausing", "paused")
        self._check_view(expect_ok(response), sandbox_id)

    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        sandbox_id = self._choose(data, self.model.can_resume)
        sandbox = self.model.sandboxes[sandbox_id]
        response = self.http.post(f"/v1/sandboxes/{sandbox_id}/resume", json={})
        if not self.model.can_resume(sandbox):
            expect_fail(response, 409)
            return
        self.model.begin(sandbox, "resuming", "running")
        self._check_view(expect_ok(response), sandbox_id)

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        # Preferably one that is not running: deleting from the other states is the riskier
        # path, and running sandboxes are what most other rules need.
        sandbox_id = self._choose(
            data, lambda sb: sb.status not in TERMINAL, lambda sb: sb.status != "running"
        )
        self.model.delete(self.model.sandboxes[sandbox_id])
        answer = expect_ok(self.http.delete(f"/v1/sandboxes/{sandbox_id}"))
        assert answer == {"id": sandbox_id, "status": self.model.sandboxes[sandbox_id].status}

    @rule(data=st.data(), start_paused=st.booleans())
    def fork(self, data: st.DataObject, start_paused: bool) -> None:
        source_id = self._choose(
            data,
            self.model.can_fork,
            lambda sb: bool(sb.files and sb.processes),
            lambda sb: bool(sb.files or sb.processes),
        )
        source = self.model.sandboxes[source_id]
        response = self.http.post(
            f"/v1/sandboxes/{source_id}/fork", json={"start_paused": start_paused}
        )
        if not self.model.can_fork(source):
            expect_fail(response, 409)
            return
        view = expect_ok(response)
        assert view["id"] not in self.model.sandboxes
        assert view["name"] not in self.model.names_held()
        child = ModelSandbox(
            status="forking", name=view["name"], forked_from=source_id, files=dict(source.files)
        )
        self.model.sandboxes[view["id"]] = child
        self.model.begin(child, "forking", "paused" if start_paused else "running")
        self._check_view(view, view["id"])
        # The child has the parent's files but none of its processes.
        self._list_processes(view["id"])
        self._read(view["id"], self._path(data, source), data.draw(READERS, label="reader"))

    @precondition(lambda self: len(self._running()) >= 2)
    @rule(data=st.data(), into=st.sampled_from(("error", "failed")))
    def crash(self, data: st.DataObject, into: str) -> None:
        """A running sandbox crashes (a state fault through the control API) into ``error``,
        from which only ``resume`` and ``delete`` are legal, or into terminal ``failed``.
        Only while another one runs: crashes are cheap to draw and would otherwise leave
        nothing for the runtime rules to work on."""
        sandbox_id = self._choose(data, lambda sb: sb.status == "running")
        sandbox = self.model.sandboxes[sandbox_id]
        if sandbox.status != "running":
            return
        view = expect_ok(
            self.http.post(f"/_fake/sandboxes/{sandbox_id}/state", json={"status": into})
        )
        sandbox.status = into
        self._check_view(view, sandbox_id)

    @rule(data=st.data())
    def tenancy_and_stats(self, data: st.DataObject) -> None:
        """Another tenant sees nothing of ours; unknown ids answer like foreign ones (existence
        is not disclosed); ``whoami`` counts what the model counts."""
        sandbox_id = self._choose(data, lambda sb: True)
        stranger = {"X-Api-Key": "skp_stateful_stranger"}
        expect_fail(self.http.get(f"/v1/sandboxes/{sandbox_id}", headers=stranger), 404)
        expect_fail(self.http.delete(f"/v1/sandboxes/{sandbox_id}", headers=stranger), 404)
        assert expect_ok(self.http.get("/v1/sandboxes", headers=stranger))["data"] == []
        expect_fail(self.http.get("/v1/sandboxes/sb_doesnotexist"), 404)
        assert expect_ok(self.http.get("/v1/whoami"))["stats"] == self.model.stats()
        self._check_get(sandbox_id)

    # -- exec and files ----------------------------------------------------------------------------

    @rule(data=st.data(), path=st.sampled_from(PATHS), via_exec=st.booleans())
    def write(self, data: st.DataObject, path: str, via_exec: bool) -> None:
        """Write a file through ``PUT /files`` or through exec (``cat > path`` fed by stdin),
        then read it back through a reader drawn at random."""
        sandbox_id = self._choose(data, self.model.can_work)
        sandbox = self.model.sandboxes[sandbox_id]
        if via_exec:
            text = data.draw(texts, label="content")
            parent = path.rsplit("/", 1)[0]
            response = self.http.post(
                f"/v1/sandboxes/{sandbox_id}/exec",
                json={
                    "cmd": "/bin/bash",
                    "args": ["-lc", f"mkdir -p {parent} && cat > {path}"],
                    "stdin": text,
                },
            )
            content = text.encode()
        else:
            content = data.draw(st.binary(max_size=48), label="content")
            response = self.http.put(
                f"/v1/sandboxes/{sandbox_id}/files",
                params={"path": path},
                content=content,
                headers={"Content-Type": "application/octet-stream"},
            )
        if not self.model.can_work(sandbox):
            expect_fail(response, 409)
            return
        answer = expect_ok(response)
        if via_exec:
            assert answer["result"]["exit_code"] == 0, answer
            assert answer["result"]["stdout"] == ""
        else:
            assert answer["bytes"] == len(content)  # parents are created for us (§7)
        sandbox.files[path] = content
        self._read(sandbox_id, path, data.draw(READERS, label="reader"))

    @rule(data=st.data(), reader=READERS)
    def read(self, data: st.DataObject, reader: str) -> None:
        sandbox_id = self._choose(data, lambda sb: self.model.can_work(sb) and bool(sb.files))
        self._read(sandbox_id, self._path(data, self.model.sandboxes[sandbox_id]), reader)

    def _read(self, sandbox_id: str, path: str, reader: str) -> None:
        """Read ``path`` with ``GET /files``, buffered exec ``cat`` or streamed exec ``cat``."""
        sandbox = self.model.sandboxes[sandbox_id]
        expected = sandbox.files.get(path)
        if reader == "files":
            response = self.http.get(f"/v1/sandboxes/{sandbox_id}/files", params={"path": path})
            if not self.model.can_work(sandbox):
                expect_fail(response, 409)
            elif expected is None:
                expect_fail(response, 404)
            else:
                assert response.status_code == 200, response.text
                assert response.content == expected
            return
        stream = reader == "exec-stream"
        response = self.http.post(
            f"/v1/sandboxes/{sandbox_id}/exec" + ("?stream=true" if stream else ""),
            json={"cmd": "/bin/bash", "args": ["-lc", f"cat {path}"], "stream": stream},
        )
        if not self.model.can_work(sandbox):
            expect_fail(response, 409)
            return
        if stream:
            frames = ndjson(response)
            assert all(len(frame) == 1 for frame in frames), frames  # one key per frame (§6.3)
            assert "exit_code" in frames[-1]
            exit_code = frames[-1]["exit_code"]
            stdout = "".join(frame.get("stdout", "") for frame in frames)
        else:
            result = expect_ok(response)["result"]
            exit_code, stdout = result["exit_code"], result["stdout"]
        if expected is None:
            assert (exit_code, stdout) == (1, "")
        else:
            assert (exit_code, stdout) == (0, expected.decode("utf-8", "replace"))

    # -- managed processes -------------------------------------------------------------------------

    @rule(data=st.data(), word=words, code=st.integers(0, 3))
    def start_process(self, data: st.DataObject, word: str, code: int) -> None:
        sandbox_id = self._choose(data, self.model.can_work)
        sandbox = self.model.sandboxes[sandbox_id]
        response = self.http.post(
            f"/v1/sandboxes/{sandbox_id}/processes",
            json={"cmd": "/bin/bash", "args": ["-lc", f"echo {word}; exit {code}"]},
        )
        if not self.model.can_work(sandbox):
            expect_fail(response, 409)
            return
        view = expect_ok(response)
        assert view["state"] in ("starting", "running", "exited"), view
        assert view["process_id"] not in sandbox.processes
        sandbox.processes[view["process_id"]] = (word, code)

    @precondition(lambda self: any(sb.processes for sb in self.model.sandboxes.values()))
    @rule(data=st.data())
    def wait_process(self, data: st.DataObject) -> None:
        sandbox_id = self._choose(data, lambda sb: self.model.can_work(sb) and bool(sb.processes))
        sandbox = self.model.sandboxes[sandbox_id]
        self._list_processes(sandbox_id)
        if not sandbox.processes:
            return
        process_id = data.draw(st.sampled_from(sorted(sandbox.processes)), label="process")
        base = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}"
        response = self.http.get(f"{base}/wait", params={"scope": "tree"})
        if not self.model.can_work(sandbox):
            expect_fail(response, 409)
            return
        word, code = sandbox.processes[process_id]
        view = expect_ok(response)
        assert view["state"] == "exited", view
        assert view["exit_code"] == code
        assert view["leader_exited"] is True
        assert view["tree_exited"] is True
        # Its output replays in order, then the exit frame (§8.3).
        frames = ndjson(self.http.get(f"{base}/connect", params={"after": 0}))
        chunks = [frame for frame in frames if frame["type"] == "data"]
        assert [frame["seq"] for frame in chunks] == list(range(1, len(chunks) + 1))
        output = b"".join(base64.b64decode(frame["data_base64"]) for frame in chunks)
        assert output == f"{word}\n".encode()
        assert frames[-1] == {"type": "exit", "exit_code": code, "signal": None}

    def _list_processes(self, sandbox_id: str) -> None:
        sandbox = self.model.sandboxes[sandbox_id]
        response = self.http.get(f"/v1/sandboxes/{sandbox_id}/processes")
        if not self.model.can_work(sandbox):
            expect_fail(response, 409)
            return
        listed = {view["process_id"] for view in expect_ok(response)["processes"]}
        # Processes are retained after exit and survive pause/resume; a fork starts with none.
        assert listed == set(sandbox.processes)

    # -- the whole tenant, after every step -------------------------------------------------------

    @invariant()
    def listing_matches_the_model(self) -> None:
        listing = expect_ok(self.http.get("/v1/sandboxes", params={"limit": 500}))
        # Creation order, terminal rows retained (§4.3); each row as the model says (so a fork's
        # parent is seen to stay paused, §4.8).
        assert [view["id"] for view in listing["data"]] == list(self.model.sandboxes)
        assert listing["pagination"]["total"] == len(self.model.sandboxes)
        for view in listing["data"]:
            self._check_view(view, view["id"])


class ManualClockMachine(LifecycleMachine):
    """The same traffic with 0.5 s transitions on a manual clock, stepped by ``advance``: every
    in-between status (``pausing``, ``resuming``, ``forking``, ``destroying``) is observable."""

    CONFIG = ServerConfig(seed=20260102, transition_ms=500, manual_clock=True)

    @rule(seconds=st.sampled_from((0.25, 0.5, 1.0)))
    def advance(self, seconds: float) -> None:
        # Quarter seconds are exact binary fractions: model and fake agree on "due" exactly.
        data = expect_ok(self.http.post("/_fake/clock/advance", json={"seconds": seconds}))
        self.model.advance(seconds)
        assert data["now"] == self.model.now

    @precondition(lambda self: any(sb.pending for sb in self.model.sandboxes.values()))
    @rule()
    def settle(self) -> None:
        """Advance exactly to the next due transition (lands right on the boundary)."""
        due = min(sb.pending[1] for sb in self.model.sandboxes.values() if sb.pending)
        self.advance(due - self.model.now)


LifecycleMachine.TestCase.settings = SETTINGS
ManualClockMachine.TestCase.settings = SETTINGS

TestZeroTransitions = LifecycleMachine.TestCase
TestManualClock = ManualClockMachine.TestCase
