"""Every fault action, shown through a real HTTP client; gates; seeded probability."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import random
import uuid
from typing import Any

import aiohttp
import pytest

from fake_server import FakeCreateOS, ManualClock, ServerConfig
from fake_server.fault_rules import (
    ACTION_TYPES,
    DEFAULT_MARKER_PATH,
    Action,
    FaultError,
    parse_rule,
)
from fake_server.faults import FaultEngine
from fake_server.lifecycle import Status
from fake_server.routes import route_table
from fake_server.routes.ndjson import MALFORMED_LINE
from fake_server.sandboxes import CreateSpec
from tests.conftest import (
    Client,
    ClientFactory,
    create_sandbox,
    eventually,
    output_reaches,
    process_with_frames,
)
from tests.test_api_sandboxes import expect_error

MARKER = "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease"


@pytest.fixture
async def sandbox_id(client: Client) -> str:
    return str((await create_sandbox(client))["id"])


async def test_error_answers_in_the_envelope_with_retry_after(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    fake.faults.error(503, route="GET /v1/sandboxes/{id}", retry_after=2, times=1)
    failed = await client.get(f"/v1/sandboxes/{sandbox_id}")
    await expect_error(failed, 503, "injected error")
    assert failed.headers["Retry-After"] == "2"
    assert (await client.get(f"/v1/sandboxes/{sandbox_id}")).status == 200  # times=1


async def test_error_with_custom_message_and_body(fake: FakeCreateOS, client: Client) -> None:
    fake.faults.add(
        {
            "match": {"route": "POST /v1/sandboxes"},
            "action": {
                "type": "error",
                "status": 402,
                "body": {"credit": "exhausted"},
                "message": "no credit",
            },
        }
    )
    body = await expect_error(
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}), 402, "no credit"
    )
    assert body["data"] == {"credit": "exhausted"}
    assert not fake.tenant("skp_test_owner").sandboxes


async def test_latency_waits_on_the_clock(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, transition_ms=0))
    clock = fake.clock
    assert isinstance(clock, ManualClock)
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    fake.faults.latency(250, route="/v1/whoami")
    request = asyncio.ensure_future(client.get("/v1/whoami"))
    await eventually(lambda: clock.pending == 1)
    clock.advance(0.2)
    await asyncio.sleep(0)
    assert not request.done()
    clock.advance(0.05)
    assert (await request).status == 200
    entry = fake.journal.requests(route="/v1/whoami")[-1]
    assert entry.duration_ms == 250.0
    assert entry.rules == ["rule_1"]


async def test_reset_closes_without_answer_or_effect(fake: FakeCreateOS, client: Client) -> None:
    fake.faults.reset(route="POST /v1/sandboxes", times=1)
    with pytest.raises(aiohttp.ClientError):
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"})
    assert not fake.tenant("skp_test_owner").sandboxes
    entry = fake.journal.requests(route="POST /v1/sandboxes")[-1]
    assert entry.status is None


async def test_drop_response_is_the_lost_create(fake: FakeCreateOS, client: Client) -> None:
    fake.faults.drop_response(route="POST /v1/sandboxes", times=1)
    with pytest.raises(aiohttp.ClientError):
        await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb", "name": "lost"})
    # The sandbox exists although the client saw an error.
    listing = (await (await client.get("/v1/sandboxes")).json())["data"]["data"]
    assert [s["name"] for s in listing] == ["lost"]


async def test_hang_never_answers(fake: FakeCreateOS, client: Client) -> None:
    fake.faults.hang(route="/v1/whoami")
    with pytest.raises(asyncio.TimeoutError):
        await client.get("/v1/whoami", timeout=aiohttp.ClientTimeout(total=0.2))


async def test_malformed_body_after_the_effect(fake: FakeCreateOS, client: Client) -> None:
    fake.faults.malformed(route="POST /v1/sandboxes")
    response = await client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"})
    assert response.status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(await response.text())
    assert len(fake.tenant("skp_test_owner").sandboxes) == 1


async def test_rate_limit_answers_429_with_retry_after(fake: FakeCreateOS, client: Client) -> None:
    fake.faults.rate_limit(2, window_s=60)
    assert (await client.get("/v1/whoami")).status == 200
    assert (await client.get("/v1/whoami")).status == 200
    limited = await client.get("/v1/whoami")
    await expect_error(limited, 429, "rate limit")
    assert 1 <= int(limited.headers["Retry-After"]) <= 60


async def test_after_and_times_select_which_matches_fire(
    fake: FakeCreateOS, client: Client
) -> None:
    fake.faults.error(500, route="/v1/whoami", after=1, times=2)
    statuses = [(await client.get("/v1/whoami")).status for _ in range(5)]
    assert statuses == [200, 500, 500, 200, 200]
    rule = fake.faults.rules[0]
    assert (rule.seen, rule.fired) == (5, 2)


async def probability_run(aiohttp_client: ClientFactory, seed: int) -> list[int]:
    fake = FakeCreateOS(ServerConfig(seed=seed, transition_ms=0))
    client = await aiohttp_client(fake.app(), headers={"X-Api-Key": "skp_a"})
    fake.faults.error(503, route="/v1/whoami", probability=0.5)
    return [(await client.get("/v1/whoami")).status for _ in range(40)]


async def test_seeded_probability_replays_exactly(aiohttp_client: ClientFactory) -> None:
    first = await probability_run(aiohttp_client, 42)
    again = await probability_run(aiohttp_client, 42)
    other = await probability_run(aiohttp_client, 43)
    assert first == again
    assert first != other
    assert 5 < first.count(503) < 35


def test_installed_shows_the_rules_as_they_are_added_and_removed() -> None:
    # The request layer asks it on every request whether to take the fault path at all.
    engine = FaultEngine(1, route_table())
    assert not engine.installed
    first, second = engine.add_all(
        [
            {
                "match": {"route": "GET /v1/sandboxes/{id}"},
                "action": {"type": "error", "status": 503},
            },
            {"match": {"tenant": "ten_a"}, "action": {"type": "error", "status": 503}},
        ]
    )
    assert list(engine.installed) == [first.id, second.id]
    engine.remove(first.id)
    assert list(engine.installed) == [second.id]
    engine.clear(tenant="ten_a")
    assert not engine.installed


def test_the_fault_generator_is_made_on_first_draw_from_the_latest_seed() -> None:
    # Made lazily (seeding costs more than the rest of the engine): its draws are those of a
    # generator seeded when the fake was made and reseeded since, state faults' included.
    jittered = Action("latency", {"ms": 100, "jitter_ms": 50})

    def draws(engine: FaultEngine) -> list[float]:
        return [engine.latency_seconds(jittered) for _ in range(3)]

    def expected(seed: int) -> list[float]:
        return draws(FaultEngine(seed, route_table()))

    fresh = FakeCreateOS(ServerConfig(seed=42))
    assert draws(fresh.faults) == expected(42)
    reseeded = FakeCreateOS(ServerConfig(seed=42))
    reseeded.reseed(7)  # before any draw
    assert draws(reseeded.faults) == expected(7) != expected(42)
    reseeded.reseed(7)  # after draws: the generator itself starts again
    assert draws(reseeded.faults) == expected(7)

    reseeded.reseed(9)
    sandbox = reseeded.sandboxes.create(reseeded.tenant("skp_a"), CreateSpec(shape="s-1vcpu-1gb"))
    reseeded.state_faults.marker(sandbox, "replace")
    marker = str(uuid.UUID(int=random.Random(9).getrandbits(128))).encode()
    assert sandbox.fs.read(DEFAULT_MARKER_PATH) == marker


async def test_rules_match_only_their_sandbox_and_tenant(
    fake: FakeCreateOS, client: Client, aiohttp_client: ClientFactory
) -> None:
    first = (await create_sandbox(client))["id"]
    second = (await create_sandbox(client))["id"]
    fake.faults.error(500, sandbox=first)
    assert (await client.get(f"/v1/sandboxes/{first}")).status == 500
    assert (await client.get(f"/v1/sandboxes/{second}")).status == 200
    fake.faults.clear()
    other_key = fake.create_tenant()
    fake.faults.error(500, tenant=fake.tenant(other_key).id)
    other = await aiohttp_client(fake.app(), headers={"X-Api-Key": other_key})
    assert (await other.get("/v1/whoami")).status == 500
    assert (await client.get("/v1/whoami")).status == 200


async def test_gate_holds_before_the_effect(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    gate = fake.faults.gate("release", route="DELETE /v1/sandboxes/{id}")
    deletion = asyncio.ensure_future(client.delete(f"/v1/sandboxes/{sandbox_id}"))
    await gate.wait_held(1)
    # The DELETE is in flight: the sandbox is untouched, and a racing resume sees it running.
    assert fake.find_sandbox(sandbox_id).status.value == "running"
    await expect_error(await client.post(f"/v1/sandboxes/{sandbox_id}/resume"), 409, "running")
    assert gate.release() == 1
    assert (await (await deletion).json())["data"]["status"] == "destroyed"
    assert gate.as_json() == {
        "name": "release",
        "held": 0,
        "passed": 1,
        "open": False,
        "holding": [],
    }
    delete, resume = (
        fake.journal.requests(route="DELETE /v1/sandboxes/{id}")[0],
        fake.journal.requests(route="POST /v1/sandboxes/{id}/resume")[0],
    )
    assert fake.journal.overlapping(delete, resume)


async def test_gate_after_the_effect_withholds_only_the_answer(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    gate = fake.faults.gate("paused", when="after", route="POST /v1/sandboxes/{id}/pause")
    pausing = asyncio.ensure_future(client.post(f"/v1/sandboxes/{sandbox_id}/pause"))
    await gate.wait_held(1)
    assert fake.find_sandbox(sandbox_id).status.value == "paused"
    gate.open()
    assert (await pausing).status == 200


async def test_gate_wait_times_out_loudly(fake: FakeCreateOS) -> None:
    gate = fake.faults.gate("never", route="/v1/whoami")
    with pytest.raises(TimeoutError, match="0 request"):
        await gate.wait_held(1, timeout=0.05)


async def test_gate_reproduces_the_interleaving_every_time(
    fake: FakeCreateOS, client: Client
) -> None:
    """1,000 runs of "resume while the delete is held": the same outcome every time."""
    outcomes = set()
    gate = fake.faults.gate("delete", route="DELETE /v1/sandboxes/{id}")
    sandbox = fake.sandboxes.create(fake.tenant("skp_test_owner"), CreateSpec(shape="s-1vcpu-1gb"))
    fake.sandboxes.pause(sandbox)
    for _ in range(1000):
        deletion = asyncio.ensure_future(client.delete(f"/v1/sandboxes/{sandbox.id}"))
        await gate.wait_held(1)
        resumed = await client.post(f"/v1/sandboxes/{sandbox.id}/resume")
        status_during = sandbox.status.value
        gate.release()
        deleted = await deletion
        outcomes.add((resumed.status, status_during, deleted.status, sandbox.status.value))
        fake.lifecycle.force(sandbox, Status.PAUSED)
    assert outcomes == {(200, "running", 200, "destroyed")}


async def connect_lines(client: Client, path: str) -> list[str]:
    response = await client.get(path)
    return (await response.text()).splitlines()


@pytest.mark.parametrize(
    ("kind", "expected_seqs", "ends_with_exit"),
    [("gap", [1, 3], True), ("no_exit", [1, 2, 3], False), ("disconnect", [1], False)],
)
async def test_stream_faults_on_connect(
    fake: FakeCreateOS,
    client: Client,
    sandbox_id: str,
    kind: str,
    expected_seqs: list[int],
    ends_with_exit: bool,
) -> None:
    process_id = await process_with_frames(client, sandbox_id, [b"1\n", b"2\n", b"3\n"])
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/connect?after=0"
    fake.faults.stream(
        kind, after_frames=1, route="/v1/sandboxes/{id}/processes/{pid}/connect", times=1
    )
    try:
        frames = [json.loads(line) for line in await connect_lines(client, path)]
    except aiohttp.ClientPayloadError:
        frames = []  # a disconnect can surface as a broken chunked body
    seqs = [f["seq"] for f in frames if f.get("type") == "data"]
    assert seqs == expected_seqs or (kind == "disconnect" and seqs == [])
    assert any(f.get("type") == "exit" for f in frames) is ends_with_exit
    # Reconnecting with the cursor replays correctly once the rule is spent.
    replay = [json.loads(line) for line in await connect_lines(client, path.replace("=0", "=1"))]
    assert [f["seq"] for f in replay if f["type"] == "data"] == [2, 3]
    assert base64.b64decode(replay[0]["data_base64"]) == b"2\n"


async def raw_body(client: Client, path: str, api_key: str) -> bytes:
    """The body of a chunked answer, read over a bare socket up to the end of the connection:
    what the fake wrote before it cut a stream (aiohttp's client drops the lines it holds when
    it sees the cut), complete chunks only."""
    assert client.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: {api_key}\r\nConnection: close\r\n"
    writer.write(request.encode() + b"\r\n")
    answer = b""
    with contextlib.suppress(ConnectionError):
        while data := await asyncio.wait_for(reader.read(1 << 16), timeout=5):
            answer += data
    writer.close()
    head, _, chunked = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    body = b""
    while b"\r\n" in chunked:
        size_line, _, rest = chunked.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0 or len(rest) < size + 2:
            break
        body, chunked = body + rest[:size], rest[size + 2 :]
    return body


@pytest.mark.parametrize("kind", ["disconnect", "malformed_frame"])
@pytest.mark.parametrize("after_frames", [1, 2, 3])
async def test_a_cut_comes_after_exactly_its_frame_of_frames_written_together(
    fake: FakeCreateOS,
    client: Client,
    sandbox_id: str,
    api_key: str,
    kind: str,
    after_frames: int,
) -> None:
    # The four frames are in the journal before the connect: its writer takes them as one
    # batch, which it writes in one go without a fault. The fault still counts them one by one.
    chunks = [b"1\n", b"2\n", b"3\n", b"4\n"]
    process_id = await process_with_frames(client, sandbox_id, chunks)
    route = "/v1/sandboxes/{id}/processes/{pid}/connect"
    fake.faults.stream(kind, after_frames=after_frames, route=route, times=1)
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/connect"
    lines = (await raw_body(client, path, api_key)).splitlines()
    seqs = [json.loads(line)["seq"] for line in lines[:after_frames]]
    assert seqs == list(range(1, after_frames + 1))
    cut = [MALFORMED_LINE.rstrip(b"\n")] if kind == "malformed_frame" else []
    assert lines[after_frames:] == cut


@pytest.mark.parametrize("kind", ["disconnect", "malformed_frame"])
@pytest.mark.parametrize("after_frames", [0, 1])
async def test_stream_cuts_come_right_after_their_frame_on_a_quiet_process(
    fake: FakeCreateOS, client: Client, sandbox_id: str, kind: str, after_frames: int
) -> None:
    # `cat` wrote one frame and waits for more input: no later frame will ever come, and the
    # cut must not wait for one (it did, and the connect then hung until its client gave up).
    base = f"/v1/sandboxes/{sandbox_id}/processes"
    process_id = (await (await client.post(base, json={"cmd": "cat"})).json())["data"]["process_id"]
    chunk = base64.b64encode(b"1\n").decode()
    await (await client.post(f"{base}/{process_id}/input", json={"data_base64": chunk})).read()
    await output_reaches(client, f"{base}/{process_id}", 1)
    route = "/v1/sandboxes/{id}/processes/{pid}/connect"
    fake.faults.stream(kind, after_frames=after_frames, route=route, times=1)
    response = await client.get(f"{base}/{process_id}/connect?after=0")
    lines: list[bytes] = []
    with contextlib.suppress(aiohttp.ClientPayloadError):  # a cut chunked body
        while line := await asyncio.wait_for(response.content.readline(), timeout=5):
            lines.append(line.rstrip(b"\n"))
    seqs = [json.loads(line)["seq"] for line in lines[:after_frames]]
    assert seqs == [1][:after_frames]
    if kind == "malformed_frame":
        assert lines[after_frames:] == [MALFORMED_LINE.rstrip(b"\n")]
    else:
        assert lines[after_frames:] == []
    await (await client.post(f"{base}/{process_id}/stdin/close")).read()


async def test_malformed_frame_and_evict_stream_faults(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    process_id = await process_with_frames(client, sandbox_id, [b"1\n", b"2\n"])
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/connect"
    fake.faults.stream(
        "malformed_frame",
        after_frames=1,
        route=path.replace(sandbox_id, "{id}").replace(process_id, "{pid}"),
        times=1,
    )
    lines = await connect_lines(client, path)
    assert json.loads(lines[0])["seq"] == 1
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[1])
    fake.faults.stream("evict", route="/v1/sandboxes/{id}/processes/{pid}/connect", times=1)
    evicted = [json.loads(line) for line in await connect_lines(client, path)]
    assert evicted == [
        {"type": "error", "error": "output_offset_expired", "oldest_available_seq": 1}
    ]


async def test_exec_stream_without_exit(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    fake.faults.stream("no_exit", route="/v1/sandboxes/{id}/exec")
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true",
        json={"cmd": "echo", "args": ["hi"], "stream": True},
    )
    assert [json.loads(line) for line in (await response.text()).splitlines()] == [
        {"stdout": "hi\n"}
    ]


async def test_evict_on_an_exec_stream_answers_an_exec_frame(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    # An exec stream's frames carry one key each (PC-N reads the first key it knows); the
    # fault answered with a connect stream's three-key error frame.
    fake.faults.stream("evict", route="/v1/sandboxes/{id}/exec", times=1)
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true",
        json={"cmd": "echo", "args": ["hi"], "stream": True},
    )
    frames = [json.loads(line) for line in (await response.text()).splitlines()]
    assert frames == [{"error": "output_offset_expired"}]


async def test_process_survives_delete(fake: FakeCreateOS, client: Client, sandbox_id: str) -> None:
    response = await client.post(f"/v1/sandboxes/{sandbox_id}/processes", json={"cmd": "cat"})
    process_id = (await response.json())["data"]["process_id"]
    fake.faults.process_survives(route="DELETE /v1/sandboxes/{id}/processes/{pid}", times=1)
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}?grace_ms=1000"
    survived = (await (await client.delete(path)).json())["data"]
    assert (survived["tree_exited"], survived["state"]) == (False, "running")
    ended = (await (await client.delete(path)).json())["data"]
    assert ended["tree_exited"] is True


async def test_stuck_transition_until_released(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    fake.faults.add(
        {"match": {"route": "POST /v1/sandboxes/{id}/pause"}, "action": {"type": "stuck"}}
    )
    view = (await (await client.post(f"/v1/sandboxes/{sandbox_id}/pause")).json())["data"]
    assert view["status"] == "pausing"  # transition_ms=0, yet held
    sandbox = fake.find_sandbox(sandbox_id)
    fake.state_faults.unstick(sandbox)
    assert sandbox.status.value == "paused"


async def test_transition_can_end_in_error(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    await client.post(f"/v1/sandboxes/{sandbox_id}/pause")
    fake.faults.add(
        {
            "match": {"route": "POST /v1/sandboxes/{id}/resume"},
            "action": {"type": "transition_error", "status": "failed"},
        }
    )
    await client.post(f"/v1/sandboxes/{sandbox_id}/resume")
    assert (await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json())["data"][
        "status"
    ] == "failed"


async def test_destroyed_behind_the_clients_back(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    fake.faults.add(
        {
            "match": {"route": "POST /v1/sandboxes/{id}/exec"},
            "action": {"type": "destroy"},
            "times": 1,
        }
    )
    await expect_error(
        await client.post(f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "true"}),
        409,
        "destroyed",
    )


@pytest.mark.parametrize("mode", ["wipe", "replace", "garble"])
async def test_marker_faults_change_what_cat_reads(
    fake: FakeCreateOS, client: Client, sandbox_id: str, mode: str
) -> None:
    await client.put(f"/v1/sandboxes/{sandbox_id}/files?path={MARKER}", data=b"lease-marker-1")
    fake.faults.add(
        {
            "match": {"route": "POST /v1/sandboxes/{id}/exec"},
            "action": {"type": "marker", "mode": mode},
            "times": 1,
        }
    )
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "/bin/cat", "args": [MARKER]}
    )
    result = (await response.json())["data"]["result"]
    if mode == "wipe":
        assert result["exit_code"] == 1
    else:
        assert result["exit_code"] == 0
        assert result["stdout"] != "lease-marker-1"
        assert len(result["stdout"]) == (36 if mode == "replace" else len("lease-marker-1"))


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ({"action": {"type": "explode"}}, "unknown"),
        ({"action": {"type": "error"}}, "needs 'status'"),
        ({"action": {"type": "error", "status": 200}}, "status"),
        ({"action": {"type": "latency", "ms": -1}}, "ms"),
        # NaN once read "action.ms must be at least 0".
        ({"action": {"type": "latency", "ms": math.nan}}, r"action.ms must be a finite number"),
        ({"action": {"type": "latency", "ms": 1, "jitter_ms": math.inf}}, "jitter_ms.*finite"),
        ({"action": {"type": "reset"}, "probability": math.nan}, "probability.*finite"),
        ({"action": {"type": "latency", "ms": 1, "speed": 2}}, "no parameter"),
        ({"match": {"verb": "GET"}, "action": {"type": "reset"}}, "no field 'verb'"),
        ({"match": {"route": 5}, "action": {"type": "reset"}}, "string"),
        ({"action": {"type": "reset"}, "probability": 2}, "probability"),
        ({"action": {"type": "reset"}, "times": 0}, "times"),
        ({"action": {"type": "stream", "kind": "sideways"}}, "kind"),
        ({"action": {"type": "gate"}}, "name"),
        ({"action": {"type": "marker", "mode": "burn"}}, "mode"),
        ({"match": {"method": "GET", "route": "POST /v1/x"}, "action": {"type": "reset"}}, "says"),
        ([], "object"),
        ({"action": {"type": "reset"}, "colour": 1}, "no field"),
    ],
)
def test_bad_rules_say_what_is_wrong(rule: Any, fragment: str) -> None:
    with pytest.raises(FaultError, match=fragment):
        parse_rule(rule)


async def test_control_api_manages_rules_gates_and_state(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    added = await client.post(
        "/_fake/faults",
        json={
            "rules": [
                {
                    "match": {"route": "GET /v1/sandboxes/{id}"},
                    "action": {"type": "error", "status": 500},
                },
                {
                    "match": {"route": "DELETE /v1/sandboxes/{id}"},
                    "action": {"type": "gate", "name": "g"},
                },
            ]
        },
    )
    ids = (await added.json())["data"]["ids"]
    assert ids == ["rule_1", "rule_2"]
    assert (await client.get(f"/v1/sandboxes/{sandbox_id}")).status == 500
    listing = (await (await client.get("/_fake/faults")).json())["data"]
    assert [r["fired"] for r in listing["rules"]] == [1, 0]
    assert (await client.delete("/_fake/faults/rule_1")).status == 200
    await expect_error(await client.delete("/_fake/faults/rule_1"), 404)
    deletion = asyncio.ensure_future(client.delete(f"/v1/sandboxes/{sandbox_id}"))
    await fake.faults.gates["g"].wait_held(1)
    gate = (await (await client.get("/_fake/gates/g")).json())["data"]
    assert gate["held"] == 1
    released = await client.post("/_fake/gates/g/release", json={"count": 1})
    assert (await released.json())["data"]["released"] == 1
    assert (await deletion).status == 200
    await expect_error(await client.get("/_fake/gates/nope"), 404)
    await expect_error(await client.post("/_fake/faults", data=b"{oops"), 400, "JSON")
    await expect_error(
        await client.post("/_fake/faults", json={"action": {"type": "x"}}),
        400,
        "invalid fault rule",
    )
    assert (await client.delete("/_fake/faults")).status == 200
    assert (await (await client.get("/_fake/faults")).json())["data"]["rules"] == []


async def test_control_api_state_and_marker_faults(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    stuck = await client.post(f"/_fake/sandboxes/{sandbox_id}/state", json={"stuck": True})
    assert stuck.status == 200
    view = (await (await client.post(f"/v1/sandboxes/{sandbox_id}/pause")).json())["data"]
    assert view["status"] == "pausing"
    await client.post(f"/_fake/sandboxes/{sandbox_id}/state", json={"stuck": False})
    assert fake.find_sandbox(sandbox_id).status.value == "paused"
    forced = await client.post(f"/_fake/sandboxes/{sandbox_id}/state", json={"status": "destroyed"})
    assert (await forced.json())["data"]["status"] == "destroyed"
    await expect_error(
        await client.post(f"/_fake/sandboxes/{sandbox_id}/state", json={"status": "melted"}), 400
    )
    await expect_error(await client.post(f"/_fake/sandboxes/{sandbox_id}/state", json={}), 400)
    await expect_error(
        await client.post("/_fake/sandboxes/sb_nope/state", json={"stuck": True}), 404
    )
    await expect_error(
        await client.post(f"/_fake/sandboxes/{sandbox_id}/marker", json={"mode": "burn"}),
        400,
        "mode",
    )
    marked = await client.post(f"/_fake/sandboxes/{sandbox_id}/marker", json={"mode": "replace"})
    assert (await marked.json())["data"]["path"] == MARKER
    assert fake.find_sandbox(sandbox_id).fs.is_file(MARKER)


async def test_control_api_clock_tenants_journal_reset(aiohttp_client: ClientFactory) -> None:
    fake = FakeCreateOS(ServerConfig(manual_clock=True, seed=5, transition_ms=1000))
    control = await aiohttp_client(fake.app())
    tenant = (await (await control.post("/_fake/tenants")).json())["data"]
    assert tenant["api_key"].startswith("skp_")
    headers = {"X-Api-Key": tenant["api_key"]}
    created = await control.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}, headers=headers)
    sandbox_id = (await created.json())["data"]["id"]
    await control.post(f"/v1/sandboxes/{sandbox_id}/pause", headers=headers)
    advanced = (await (await control.post("/_fake/clock/advance", json={"seconds": 1})).json())[
        "data"
    ]
    assert advanced["fired"] == 1
    await expect_error(await control.post("/_fake/clock/advance", json={"seconds": -1}), 400)
    journal = (await (await control.get("/_fake/journal?since=0")).json())["data"]["entries"]
    transitions = [(e.get("before"), e["after"]) for e in journal if e["kind"] == "transition"]
    assert ("pausing", "paused") in transitions
    assert all(tenant["api_key"] not in json.dumps(e) for e in journal)
    state = (await (await control.get("/_fake/state")).json())["data"]
    assert state["tenants"][0]["sandboxes"][0]["status"] == "paused"
    assert (await control.post("/_fake/reset")).status == 200
    assert (await (await control.get("/_fake/state")).json())["data"]["tenants"] == []


async def test_clock_advance_needs_a_manual_clock(client: Client) -> None:
    await expect_error(
        await client.post("/_fake/clock/advance", json={"seconds": 1}), 409, "manual"
    )


async def test_missing_exit_status_and_duplicate_replay(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    process_id = await process_with_frames(client, sandbox_id, [b"1\n", b"2\n"])
    route = "/v1/sandboxes/{id}/processes/{pid}/connect"
    path = f"/v1/sandboxes/{sandbox_id}/processes/{process_id}/connect"
    fake.faults.stream("missing_exit_status", route=route, times=1)
    frames = [json.loads(line) for line in await connect_lines(client, path)]
    assert frames[-1] == {"type": "exit"}
    # The frames sent so far come again once after_frames went out; the exit only once. It
    # ignored after_frames (and a first connect saw no duplicate at all).
    fake.faults.stream("duplicate", route=route, times=1)
    replayed = [json.loads(line) for line in await connect_lines(client, path)]
    assert [f.get("seq") for f in replayed] == [1, 1, 2, None]
    fake.faults.stream("duplicate", route=route, after_frames=2, times=1)
    replayed = [json.loads(line) for line in await connect_lines(client, path)]
    assert [f.get("seq") for f in replayed] == [1, 2, 1, 2, None]
    fake.faults.stream("duplicate", route=route, times=1)
    replayed = [json.loads(line) for line in await connect_lines(client, path + "?after=1")]
    assert [f.get("seq") for f in replayed] == [2, 2, None]
    # On an exec stream too (it did nothing there).
    fake.faults.stream("duplicate", route="/v1/sandboxes/{id}/exec", times=1)
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true", json={"cmd": "echo", "args": ["hi"]}
    )
    assert [json.loads(line) for line in (await response.text()).splitlines()] == [
        {"stdout": "hi\n"},
        {"stdout": "hi\n"},
        {"exit_code": 0},
    ]
    fake.faults.stream("missing_exit_status", route="/v1/sandboxes/{id}/exec")
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true", json={"cmd": "true", "stream": True}
    )
    assert (await response.text()).splitlines() == ['{"exit_code":null}']


@pytest.mark.parametrize(
    ("action", "before", "after"), [("pause", "running", "paused"), ("resume", "paused", "running")]
)
async def test_stale_read_shows_the_status_before_the_accepted_action(
    fake: FakeCreateOS, client: Client, sandbox_id: str, action: str, before: str, after: str
) -> None:
    # Transitions finish at once here: the lagging read must still show the old status (what
    # trips Paperclip's b51bb95 client after its resume POST), not the midway `resuming`.
    if action == "resume":
        await client.post(f"/v1/sandboxes/{sandbox_id}/pause")
    await client.post(f"/v1/sandboxes/{sandbox_id}/{action}")
    fake.faults.stale_read(route="GET /v1/sandboxes/{id}", times=1)
    first = (await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json())["data"]
    second = (await (await client.get(f"/v1/sandboxes/{sandbox_id}")).json())["data"]
    assert (first["status"], second["status"]) == (before, after)


async def test_client_leaving_a_held_request_is_not_an_error(
    fake: FakeCreateOS, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    gate = fake.faults.gate("held", route="POST /v1/sandboxes")
    posting = asyncio.ensure_future(client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}))
    await gate.wait_held(1)
    posting.cancel()  # the client gives up (not a timeout that may come before the gate)
    with pytest.raises(asyncio.CancelledError):
        await posting
    gate.release()
    await eventually(lambda: bool(fake.journal.requests(route="POST /v1/sandboxes")))
    entry = fake.journal.requests(route="POST /v1/sandboxes")[0]
    assert [r.levelname for r in caplog.records if r.name == "fake_server"] == []
    assert entry.status in (None, 200)


async def test_control_reads_stay_out_of_the_journal(fake: FakeCreateOS, client: Client) -> None:
    await client.get("/v1/whoami")
    before = len(fake.journal)
    for path in ("/_fake/state", "/_fake/faults", "/_fake/journal", "/_fake/"):
        await client.get(path)
    assert len(fake.journal) == before
    await client.post("/_fake/tenants")
    assert fake.journal.requests()[-1].route == "/_fake/tenants"


async def test_a_misdirected_marker_rule_never_breaks_the_request(
    fake: FakeCreateOS, client: Client, sandbox_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake.faults.add(
        {
            "match": {"route": "POST /v1/sandboxes/{id}/exec"},
            "action": {"type": "marker", "mode": "replace", "path": "/tmp"},
        }
    )
    response = await client.post(f"/v1/sandboxes/{sandbox_id}/exec", json={"cmd": "true"})
    assert response.status == 200
    assert "rule_1 not applied" in caplog.text


async def test_streams_carry_a_request_id(client: Client, sandbox_id: str) -> None:
    response = await client.post(
        f"/v1/sandboxes/{sandbox_id}/exec?stream=true", json={"cmd": "true", "stream": True}
    )
    assert response.headers["X-Request-ID"].startswith("req_")


async def test_removing_a_gate_rule_releases_and_forgets_the_gate(
    fake: FakeCreateOS, client: Client
) -> None:
    gate = fake.faults.gate("g", route="POST /v1/sandboxes")
    held = asyncio.ensure_future(client.post("/v1/sandboxes", json={"shape": "s-1vcpu-1gb"}))
    await gate.wait_held(1)
    assert fake.faults.remove("rule_1")
    assert (await held).status == 200
    assert "g" not in fake.faults.gates
    again = fake.faults.gate("g", route="POST /v1/sandboxes")
    assert not again.opened  # a new gate of the same name starts closed


def test_every_action_type_says_what_it_does() -> None:
    # The OpenAPI document and the docs' action table are rendered from each ActionSpec.
    assert all(spec.effect.strip() for spec in ACTION_TYPES.values())
    assert all(spec.required <= spec.params for spec in ACTION_TYPES.values())


MISSPELT = {
    "GET /v1/sandbox/{id}": "did you mean GET /v1/sandboxes/{id}",
    "GIT /v1/sandboxes/{id}": "no method 'GIT'; use DELETE, GET, HEAD, PATCH, POST, PUT",
    "DELETE /v1/sandboxes/:id": "did you mean DELETE /v1/sandboxes/{id}?",
    "DELETE /v1/sandboxes/sb_X": "use DELETE /v1/sandboxes/{id} with sandbox=<its id>",
    "/_fake/faults": "fault rules never apply to the control API",
}


@pytest.mark.parametrize(("route", "message"), MISSPELT.items())
def test_a_rule_on_a_route_nobody_serves_is_refused(
    fake: FakeCreateOS, route: str, message: str
) -> None:
    with pytest.raises(FaultError, match=r"^invalid fault rule: match") as refused:
        fake.faults.reset(route=route)
    assert message in str(refused.value)
    assert fake.faults.rules == []


def test_an_unknown_method_alone_is_refused(fake: FakeCreateOS) -> None:
    with pytest.raises(FaultError, match=r"no method 'GIT'.*did you mean GET"):
        fake.faults.reset(method="git")


@pytest.mark.parametrize(
    "match",
    [
        {},
        {"method": "get"},
        {"route": "/v1/sandboxes/{id}/exec"},
        {"route": "delete /v1/sandboxes/{id}"},
        {"method": "DELETE", "route": "/v1/sandboxes/{id}"},
        {"route": "HEAD /v1/sandboxes/{id}"},
        {"route": "GET /healthz"},
        {"sandbox": "sb_1", "tenant": "usr_1"},
    ],
)
def test_every_served_route_form_is_accepted(fake: FakeCreateOS, match: dict[str, str]) -> None:
    assert fake.faults.add({"match": match, "action": {"type": "reset"}}).id == "rule_1"


async def test_a_refused_route_answers_400_with_a_suggestion(client: Client) -> None:
    rule = {"match": {"route": "GET /v1/sandbox/{id}"}, "action": {"type": "reset"}}
    await expect_error(
        await client.post("/_fake/faults", json=rule),
        400,
        "invalid fault rule: match: no route GET /v1/sandbox/{id};"
        " did you mean GET /v1/sandboxes/{id}",
    )


async def test_the_control_api_takes_a_plain_list_of_rules(
    fake: FakeCreateOS, client: Client
) -> None:
    rules = [
        {"match": {"route": "GET /v1/whoami"}, "action": {"type": "error", "status": 503}},
        {"match": {"route": "POST /v1/sandboxes"}, "action": {"type": "reset"}},
    ]
    added = await client.post("/_fake/faults", json=rules)
    assert (await added.json())["data"]["ids"] == ["rule_1", "rule_2"]
    await expect_error(await client.get("/v1/whoami"), 503, "injected error")


@pytest.mark.parametrize("wrapped", [False, True])
async def test_a_list_with_one_bad_rule_adds_none(
    fake: FakeCreateOS, client: Client, wrapped: bool
) -> None:
    rules: list[Any] = [
        {"match": {"route": "GET /v1/whoami"}, "action": {"type": "reset"}},
        {"match": {"route": "GIT /v1/whoami"}, "action": {"type": "reset"}},
    ]
    body = {"rules": rules} if wrapped else rules
    await expect_error(await client.post("/_fake/faults", json=body), 400, "no method 'GIT'")
    assert fake.faults.rules == []


@pytest.mark.parametrize("body", [[], {"rules": []}, {"rules": "all"}, 5])
async def test_no_rules_at_all_is_refused(client: Client, body: Any) -> None:
    await expect_error(
        await client.post("/_fake/faults", json=body), 400, "a non-empty list of rules"
    )


async def test_a_gate_says_which_requests_it_holds_and_since_when(
    fake: FakeCreateOS, client: Client, sandbox_id: str
) -> None:
    fake.faults.gate("g", route="DELETE /v1/sandboxes/{id}")
    deletion = asyncio.ensure_future(client.delete(f"/v1/sandboxes/{sandbox_id}"))
    await fake.faults.gates["g"].wait_held(1)
    gate = (await (await client.get("/_fake/gates/g")).json())["data"]
    [held] = gate["holding"]
    assert held == {
        "id": 1,
        "method": "DELETE",
        "path": f"/v1/sandboxes/{sandbox_id}",
        "since": held["since"],
        "tenant": fake.tenant("skp_test_owner").id,
        "sandbox": sandbox_id,
    }
    assert held["since"].endswith("Z")
    state = (await (await client.get("/_fake/state")).json())["data"]
    assert state["gates"][0]["holding"] == [held]
    fake.faults.gates["g"].release()
    assert (await deletion).status == 200
    assert fake.faults.gates["g"].as_json()["holding"] == []
