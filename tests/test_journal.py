"""The journal on its own: ordering, bounds, queries and explaining assertions."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from fake_server import FakeCreateOS
from fake_server.clock import MANUAL_EPOCH, ManualClock
from fake_server.journal import Entry, Journal, JournalAssertionError
from fake_server.lifecycle import Status
from fake_server.routes import route_table
from fake_server.runner import serve


def request(journal: Journal, method: str, route: str, path: str, **fields: object) -> Entry:
    opened = journal.ticket()
    return Entry(
        seq=0,
        opened=opened,
        kind="request",
        at=0.0,
        time="t",
        method=method,
        route=route,
        path=path,
        **fields,
    )  # type: ignore[arg-type]


def finish(journal: Journal, entry: Entry, status: int = 200) -> Entry:
    entry.seq = journal.ticket()
    entry.status = status
    return journal.record(entry)


def test_overlap_is_decided_by_tickets() -> None:
    journal = Journal()
    delete = request(journal, "DELETE", "/v1/sandboxes/{id}", "/v1/sandboxes/sb_1", sandbox="sb_1")
    resume = request(
        journal, "POST", "/v1/sandboxes/{id}/resume", "/v1/sandboxes/sb_1/resume", sandbox="sb_1"
    )
    finish(journal, resume, 409)
    finish(journal, delete)
    later = finish(journal, request(journal, "GET", "/v1/sandboxes/{id}", "/v1/sandboxes/sb_1"))
    assert Journal.overlapping(delete, resume)
    assert not Journal.overlapping(delete, later)
    assert journal.in_flight_during(delete, route="/v1/sandboxes/{id}/resume") == [resume]


def test_filters_by_route_with_or_without_method() -> None:
    journal = Journal()
    finish(journal, request(journal, "GET", "/v1/sandboxes/{id}", "/v1/sandboxes/a", sandbox="a"))
    finish(
        journal, request(journal, "DELETE", "/v1/sandboxes/{id}", "/v1/sandboxes/a", sandbox="a")
    )
    assert len(journal.requests(route="/v1/sandboxes/{id}")) == 2
    assert [e.method for e in journal.requests(route="DELETE /v1/sandboxes/{id}")] == ["DELETE"]
    assert journal.requests(route="delete /v1/sandboxes/{id}")[0].method == "DELETE"


def test_ring_drops_the_oldest_and_counts_them() -> None:
    journal = Journal(capacity=3)
    for index in range(5):
        finish(journal, request(journal, "GET", "/healthz", f"/healthz?{index}"))
    assert len(journal) == 3
    assert journal.dropped == 2
    assert next(e.path for e in journal) == "/healthz?2"


def test_assertion_lists_the_closest_requests() -> None:
    journal = Journal()
    finish(
        journal,
        request(journal, "POST", "/v1/sandboxes/{id}/pause", "/v1/sandboxes/a/pause", sandbox="a"),
        409,
    )
    with pytest.raises(JournalAssertionError) as caught:
        journal.assert_requested("POST /v1/sandboxes/{id}/pause", status=200)
    assert "/v1/sandboxes/a/pause -> 409" in str(caught.value)
    journal.assert_requested("POST /v1/sandboxes/{id}/pause", times=1)


def test_assert_not_requested_names_the_offender() -> None:
    journal = Journal()
    finish(
        journal,
        request(
            journal,
            "POST",
            "/v1/sandboxes/{id}/exec",
            "/v1/sandboxes/a/exec",
            sandbox="a",
            sandbox_status="pausing",
        ),
    )
    with pytest.raises(JournalAssertionError, match="sandbox pausing"):
        journal.assert_not_requested("/v1/sandboxes/{id}/exec", sandbox="a")
    journal.assert_not_requested("/v1/sandboxes/{id}/exec", sandbox="b")


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Journal(capacity=0)


def test_packed_requests_read_back_as_entries_in_order_with_their_wall_time() -> None:
    clock = ManualClock()
    journal = Journal(capacity=3, wall_at=clock.wall_at)
    opened = journal.ticket()
    transition = journal.record(
        Entry(seq=journal.ticket(), opened=0, kind="transition", at=0.0, time="t", after="running")
    )
    journal.request(
        opened, 2.5, "GET", "/v1/sandboxes/{id}", "/v1/sandboxes/sb%5F1?verbose=1", "usr_1",
        "sb_1", Status.PAUSING, 200, 2.75, ("rule_1",), None,
    )  # fmt: skip
    entries = list(journal)
    assert entries[0] is transition
    request = entries[1]
    assert (request.seq, request.opened, request.kind) == (3, 1, "request")
    assert request.time == MANUAL_EPOCH + timedelta(seconds=2.5)
    # The path as aiohttp decodes a request's (stored as it came), the duration from the
    # two clock readings: both built on read.
    assert (request.path, request.duration_ms) == ("/v1/sandboxes/sb_1", 250.0)
    # The enum is stored as it came and read back as the API's plain string.
    assert request.sandbox_status == "pausing"
    assert type(request.sandbox_status) is str
    assert request.rules == ["rule_1"]
    assert request.as_json()["route"] == "/v1/sandboxes/{id}"
    assert journal.requests(sandbox="sb_1", status=200) == [request]
    assert list(journal)[1] is request  # built once, not on every read


def test_packed_requests_count_against_the_ring() -> None:
    journal = Journal(capacity=2)
    for index in range(4):
        journal.request(
            journal.ticket(), 0.0, "GET", "/healthz", f"/healthz/{index}", None, None,
            None, 200, 0.1, (), None,
        )  # fmt: skip
    assert journal.dropped == 2
    assert [entry.path for entry in journal.tail(5)] == ["/healthz/2", "/healthz/3"]
    assert isinstance(journal.tail(1)[0].time, datetime)  # real wall time by default


def test_dropped_and_packed_requests_follow_reads_clears_and_snapshots() -> None:
    journal = Journal(capacity=3)

    def send(path: str) -> None:
        journal.request(
            journal.ticket(), 0.0, "GET", "/healthz", path, None, None, None, 200, 0.1, (), None
        )

    for index in range(2):
        send(f"/a{index}")
    assert [entry.path for entry in journal] == ["/a0", "/a1"]  # settled: built once
    for index in range(3):
        send(f"/b{index}")  # packed again, and wrapping past what was settled
    finish(journal, request(journal, "GET", "/healthz", "/c"))  # an entry among them
    assert journal.dropped == 3
    assert [entry.path for entry in journal] == ["/b1", "/b2", "/c"]
    journal.clear()
    assert (journal.dropped, len(journal)) == (0, 0)
    send("/d")
    assert [entry.path for entry in journal] == ["/d"]
    snapshot = Journal.of(list(journal))
    assert snapshot.dropped == 0
    assert [entry.path for entry in snapshot] == ["/d"]


def deleted(journal: Journal) -> Entry:
    return finish(
        journal,
        request(journal, "DELETE", "/v1/sandboxes/{id}", "/v1/sandboxes/sb_X", sandbox="sb_X"),
    )


def test_a_concrete_path_matches_the_requests_made_to_it() -> None:
    journal = Journal()
    entry = deleted(journal)
    journal.assert_requested("DELETE /v1/sandboxes/sb_X")
    journal.assert_requested("/v1/sandboxes/sb_X", times=1)
    assert journal.requests(route="delete /v1/sandboxes/sb_X") == [entry]
    journal.assert_not_requested("DELETE /v1/sandboxes/sb_Y")
    journal.assert_not_requested("GET /v1/sandboxes/sb_X")
    with pytest.raises(JournalAssertionError, match="expected no DELETE /v1/sandboxes/sb_X"):
        journal.assert_not_requested("DELETE /v1/sandboxes/sb_X")
    with pytest.raises(JournalAssertionError) as caught:
        journal.assert_requested("DELETE /v1/sandboxes/sb_X", times=2)
    assert str(caught.value).startswith("expected DELETE /v1/sandboxes/sb_X 2 time(s), found 1.")
    assert "DELETE /v1/sandboxes/sb_X -> 200" in str(caught.value)


@pytest.mark.parametrize("call", ["assert_requested", "assert_not_requested", "requests"])
def test_an_unknown_filter_names_the_filters(call: str) -> None:
    journal = Journal()
    with pytest.raises(TypeError) as caught:
        getattr(journal, call)(route="/v1/sandboxes/{id}", sandbox_id="sb_X")
    assert f"{call}() has no filter sandbox_id= (did you mean sandbox=?); the filters are" in str(
        caught.value
    )
    assert "sandbox=, tenant=, status=" in str(caught.value)


def test_times_on_assert_not_requested_points_to_assert_requested() -> None:
    with pytest.raises(TypeError, match=r"takes no times=; .* assert_requested\(route, times=N\)"):
        Journal().assert_not_requested("DELETE /v1/sandboxes/{id}", times=1)


def test_a_route_nobody_serves_says_what_was_meant() -> None:
    journal = Journal(routes=route_table())
    deleted(journal)
    with pytest.raises(JournalAssertionError) as caught:
        journal.assert_requested("DELETE /v1/sandbox/{id}")
    assert "no route DELETE /v1/sandbox/{id}; did you mean DELETE /v1/sandboxes/{id}" in str(
        caught.value
    )
    with pytest.raises(ValueError, match=r"no method 'GIT'"):
        journal.assert_not_requested("GIT /v1/sandboxes/{id}")
    with pytest.raises(ValueError, match=r"did you mean DELETE /v1/sandboxes/\{id\}\?"):
        journal.assert_not_requested("DELETE /v1/sandboxes/:id")
    journal.assert_not_requested("POST /v1/sandboxes/{id}/pause")
    journal.assert_not_requested("POST /v1/sandboxes/sb_X/pause")


async def test_a_served_requests_path_is_journaled_decoded_as_aiohttp_decodes_it() -> None:
    """The request layer journals the target as it came; the entry shows it decoded, as
    ``request.path`` would: percent-escapes decoded, the query left out, a whole URL's path."""
    fake = FakeCreateOS()
    targets = {
        "/v1/sandboxes/sb%5Fnope?verbose=1": "/v1/sandboxes/sb_nope",
        "/v1/%E2%82%AC/a%2Fb": "/v1/€/a/b",
        "http://127.0.0.1/v1/sandboxes?limit=1": "/v1/sandboxes",
    }
    async with serve(fake) as url:
        host, port = url.removeprefix("http://").split(":")
        for target in targets:
            reader, writer = await asyncio.open_connection(host, int(port))
            head = f"GET {target} HTTP/1.1\r\nHost: x\r\nX-Api-Key: skp_t\r\nConnection: close\r\n"
            writer.write(head.encode() + b"\r\n")
            assert (await reader.read()).startswith(b"HTTP/1.1 ")
            writer.close()
        assert [entry.path for entry in fake.journal.requests()] == list(targets.values())
