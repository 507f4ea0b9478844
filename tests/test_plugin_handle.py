"""The per-test handle's gates and rules, alike in process and over HTTP: a gate's own name,
the requests it holds, releasing one with an outcome, and the errors a slip of the pen gets
(an unknown gate, rule, outcome or shortcut keyword)."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from pytest_createos.channel import ControlChannel, ControlError, HttpChannel, LocalChannel
from pytest_createos.server import CreateosServer, GateHandle, HeldRequestInfo, UnknownGateError

DELETE = "DELETE /v1/sandboxes/{id}"


@pytest.fixture(scope="module")
def background() -> Iterator[BackgroundServer]:
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        yield server


@pytest.fixture(params=["local", "http"])
def handle(
    request: pytest.FixtureRequest, background: BackgroundServer
) -> Iterator[CreateosServer]:
    channel: ControlChannel
    if request.param == "local":
        channel = LocalChannel(background.fake, background.url, background)
    else:
        channel = HttpChannel(background.url)
    tenant = channel.open_test(seed=1)
    yield CreateosServer(
        channel,
        api_key=tenant.api_key,
        tenant_id=tenant.tenant_id,
        seed=1,
        gate_prefix=tenant.gate_prefix,
    )
    channel.close_test(tenant, leak_check=False)


def _call(server: CreateosServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        server.url + path,
        data=data,
        method=method,
        headers={"X-Api-Key": server.api_key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _create(server: CreateosServer) -> str:
    return str(_call(server, "POST", "/v1/sandboxes", {"shape": "s-1vcpu-1gb"})[1]["data"]["id"])


def _in_background(
    server: CreateosServer, method: str, path: str
) -> tuple[threading.Thread, list[Any]]:
    """Send a request from a thread; the list gets its ``(status, body)`` or the exception."""
    results: list[Any] = []

    def send() -> None:
        try:
            results.append(_call(server, method, path))
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError) as exc:
            results.append(exc)

    thread = threading.Thread(target=send)
    thread.start()
    return thread, results


def test_a_gate_has_the_tests_name_and_the_fakes(handle: CreateosServer) -> None:
    gate = handle.faults.gate("release", route=DELETE)
    assert gate.name == "release"
    assert gate.full_name == f"{handle.tenant_id}.release"
    assert handle.faults.gates["release"].full_name == gate.full_name
    assert repr(gate) == "GateHandle('release')"


def test_holding_lists_the_held_requests_and_one_loses_its_answer(handle: CreateosServer) -> None:
    # Losing a held DELETE's answer once took a hand-made call to the control API with the
    # gate's full name.
    sandbox = _create(handle)
    gate = handle.faults.gate("release", route=DELETE)
    assert gate.holding == []
    thread, results = _in_background(handle, "DELETE", f"/v1/sandboxes/{sandbox}")
    gate.wait_held(1)
    (held,) = gate.holding
    assert isinstance(held, HeldRequestInfo)
    assert (held.method, held.path, held.sandbox, held.tenant) == (
        "DELETE",
        f"/v1/sandboxes/{sandbox}",
        sandbox,
        handle.tenant_id,
    )
    assert held.outcomes == {"lost", "error", "stuck", "survives"}
    assert gate.release(1, outcome="lost") == 1
    thread.join(5)
    assert isinstance(results[0], Exception)  # the connection closed before any answer
    assert gate.holding == []
    assert handle.state[0]["status"] == "destroyed"  # yet the DELETE happened


def test_one_held_request_is_released_by_itself_with_an_outcome(handle: CreateosServer) -> None:
    first, second = _create(handle), _create(handle)
    gate = handle.faults.gate("release", route=DELETE)
    threads = [_in_background(handle, "DELETE", f"/v1/sandboxes/{s}") for s in (first, second)]
    gate.wait_held(2)
    newer = next(held for held in gate.holding if held.sandbox == second)
    gate.release_request(newer, outcome="error")  # not the oldest: picked by itself
    threads[1][0].join(5)
    assert threads[1][1][0][0] == 503
    assert [held.sandbox for held in gate.holding] == [first]
    gate.release_request(gate.holding[0].id)  # by id, and as usual
    threads[0][0].join(5)
    assert threads[0][1][0][0] == 200
    statuses = {s["id"]: s["status"] for s in handle.state}
    assert statuses == {first: "destroyed", second: "running"}
    gate.open()
    assert _call(handle, "DELETE", f"/v1/sandboxes/{second}")[0] == 200


def test_a_wrong_outcome_names_the_outcomes(handle: CreateosServer) -> None:
    gate = handle.faults.gate("release", route=DELETE)
    with pytest.raises(
        ValueError,
        match=r"outcome 'lots' is not one of lost, error, .*"
        r"\(did you mean 'lost'\?\)",
    ):
        gate.release(outcome="lots")
    with pytest.raises(ValueError, match="count must not be negative"):
        gate.release(-1, outcome="lost")
    with pytest.raises(ControlError):  # nothing is held under that id
        gate.release_request(99, outcome="lost")


def test_an_unknown_gate_says_which_gates_exist(handle: CreateosServer) -> None:
    with pytest.raises(UnknownGateError, match=r"has no gate 'release'; its gates: none"):
        handle.faults.gates["release"]
    handle.faults.gate("release", route=DELETE)
    handle.faults.gate("resume", route="POST /v1/sandboxes/{id}/resume")
    with pytest.raises(KeyError) as raised:
        handle.faults.gates["relase"]
    assert str(raised.value) == (
        "this test has no gate 'relase' (did you mean 'release'?); its gates: 'release', 'resume'"
    )


def test_removing_an_unknown_rule_is_refused_as_the_control_api_does(
    handle: CreateosServer,
) -> None:
    rule = handle.faults.error(503, route="GET /v1/whoami")
    with pytest.raises(ControlError) as raised:
        handle.faults.remove("rule_999")
    assert (
        str(raised.value) == f"fault rule not found: 'rule_999'; this test's rules: {rule['id']!r}"
    )
    handle.faults.remove(rule["id"])
    assert handle.faults.rules == []
    with pytest.raises(ControlError, match="fault rule not found"):  # the channel alike
        handle.channel.remove_rule(rule["id"])


def test_a_shortcuts_wrong_keyword_names_the_shortcuts_own(handle: CreateosServer) -> None:
    # It said "match has no field 'time'": the user wrote no match.
    with pytest.raises(TypeError) as raised:
        handle.faults.error(503, route="GET /v1/whoami", time=1)
    assert str(raised.value) == (
        "error() got an unexpected keyword argument 'time' (did you mean 'times'?); it takes "
        "status, message, retry_after, the match's method, route, sandbox, tenant and the "
        "counters after, times, probability, id"
    )
    with pytest.raises(
        TypeError,
        match=r"^gate\(\) got .* 'rout' \(did you mean 'route'\?\); "
        r"it takes name, when, the match's",
    ):
        handle.faults.gate("g", rout=DELETE)
    assert handle.faults.rules == []


def test_a_gate_added_without_the_handle_keeps_its_own_name(handle: CreateosServer) -> None:
    # A rule of the test's tenant added through the control API names its gate as it likes.
    handle.channel.add_rules(
        [{"match": {"tenant": handle.tenant_id}, "action": {"type": "gate", "name": "raw"}}]
    )
    gate = handle.faults.gates["raw"]
    assert (gate.name, gate.full_name, gate.held) == ("raw", "raw", 0)


class _DepartingChannel:
    """A channel whose gate holds requests 1 and 2, where 1 leaves (its client gave up) between
    the handle's listing and its release; ``refuse`` makes the fake refuse 2's outcome."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.holding = [1, 2]
        self.refuse = refuse
        self.released: list[int] = []

    def gate(self, name: str) -> dict[str, Any]:
        held = [
            {"id": n, "method": "DELETE", "path": f"/v1/sandboxes/sb_{n}", "since": "t"}
            for n in self.holding
        ]
        return {"name": name, "held": len(held), "passed": 0, "holding": held}

    def release_held(self, name: str, number: int, outcome: str | None) -> None:
        if number == 1:
            self.holding.remove(1)  # gone before the release reached it
            raise ControlError("held request 1 not found")
        if self.refuse:
            raise ControlError(f"held request {number} cannot take outcome {outcome!r}")
        self.holding.remove(number)
        self.released.append(number)


def test_releasing_with_an_outcome_skips_a_request_that_left_meanwhile() -> None:
    channel = _DepartingChannel()
    gate = GateHandle(channel, "g")  # type: ignore[arg-type]  # the two calls release makes
    assert gate.release(outcome="lost") == 1  # 1 left by itself: not counted, not an error
    assert channel.released == [2]


def test_releasing_with_an_outcome_raises_for_a_request_still_held() -> None:
    gate = GateHandle(_DepartingChannel(refuse=True), "g")  # type: ignore[arg-type]
    with pytest.raises(ControlError, match="cannot take outcome 'lost'"):
        gate.release(outcome="lost")
