"""Fault rules that once slipped through: ids that are not names, a ``match`` that is not an
object (``[]`` matched every request), too many rules, and clearing many rules at once."""

from __future__ import annotations

from typing import Any

import pytest

from fake_server import FakeCreateOS
from fake_server.fault_rules import MAX_RULES, FaultError, Rule
from tests.conftest import Client
from tests.test_api_sandboxes import expect_error

ERROR = {"type": "error", "status": 503}


@pytest.mark.parametrize(
    "rule",
    [
        {"id": {"a": 1}, "match": {}, "action": ERROR},
        {"id": 7, "match": {}, "action": ERROR},
        {"id": "", "match": {}, "action": ERROR},
        {"id": "a/b", "match": {}, "action": ERROR},
        {"id": "x" * 65, "match": {}, "action": ERROR},
        {"match": [], "action": ERROR},
        {"match": None, "action": ERROR},
        {"match": "GET /v1/sandboxes", "action": ERROR},
    ],
)
async def test_malformed_rules_are_refused(
    client: Client, fake: FakeCreateOS, rule: dict[str, Any]
) -> None:
    await expect_error(await client.post("/_fake/faults", json=rule), 400, "invalid fault rule")
    assert list(fake.faults) == []
    assert (await client.get("/v1/sandboxes")).status == 200


async def test_a_named_rule_can_be_deleted_by_its_name(client: Client) -> None:
    rule = {"id": "slow-list:1", "match": {"route": "GET /v1/sandboxes"}, "action": ERROR}
    added = await client.post("/_fake/faults", json=rule)
    assert (await added.json())["data"]["ids"] == ["slow-list:1"]
    assert (await client.get("/v1/sandboxes")).status == 503
    assert (await client.delete("/_fake/faults/slow-list:1")).status == 200
    assert (await client.get("/v1/sandboxes")).status == 200


def test_rules_past_the_cap_are_refused_whole(fake: FakeCreateOS) -> None:
    batch = [{"match": {"route": "GET /v1/whoami"}, "action": ERROR}] * (MAX_RULES - 1)
    fake.faults.add_all(batch)
    with pytest.raises(FaultError, match=f"at most {MAX_RULES}"):
        fake.faults.add_all(batch[:2])
    assert len(fake.faults.rules) == MAX_RULES - 1
    fake.faults.add(batch[0])
    assert len(fake.faults.rules) == MAX_RULES


def test_clearing_rules_compares_no_rules(
    fake: FakeCreateOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Clearing once compared every rule with every other (8,000 rules froze the server for
    # 5 s); counting comparisons shows the cost without timing anything.
    comparisons = 0
    compare = Rule.__eq__

    def counted(self: Rule, other: object) -> bool:
        nonlocal comparisons
        comparisons += 1
        return compare(self, other)

    monkeypatch.setattr(Rule, "__eq__", counted)
    fake.faults.add_all([{"match": {"route": "GET /v1/whoami"}, "action": ERROR}] * 2000)
    fake.faults.remove("rule_1000")
    fake.faults.clear()
    assert fake.faults.rules == []
    assert comparisons < 2000


def test_a_gate_stays_while_another_rule_uses_it(fake: FakeCreateOS) -> None:
    gate = {"type": "gate", "name": "g"}
    first, second = fake.faults.add_all(
        [
            {"match": {"route": "GET /v1/whoami"}, "action": gate},
            {"match": {"route": "GET /v1/shapes"}, "action": gate},
        ]
    )
    held = fake.faults.gates["g"]
    assert fake.faults.remove(first.id)
    assert fake.faults.gates["g"] is held
    assert fake.faults.remove(second.id)
    assert "g" not in fake.faults.gates
    assert not fake.faults.remove(second.id)


async def test_a_rule_matching_everything_leaves_the_whole_control_api_alone(
    client: Client, fake: FakeCreateOS
) -> None:
    # A path under /_fake/ that no route serves, or a method no control route takes, went to
    # the catch-all, and rules applied there: a match-all latency hung them.
    fake.faults.add({"match": {}, "action": ERROR})
    await expect_error(await client.get("/_fake/nope"), 404)
    await expect_error(await client.delete("/_fake/info"), 405)
    assert (await client.get("/_fake/info")).status == 200
    # The API's own routes, and paths it does not serve, still meet the rule.
    await expect_error(await client.get("/v1/sandboxes"), 503)
    await expect_error(await client.get("/v1/nope"), 503)
