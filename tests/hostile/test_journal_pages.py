"""``GET /_fake/journal`` answers a page at a time: reading the whole ring in one answer held
the event loop for half a second, and a dashboard polling it slowed everyone down."""

from __future__ import annotations

from typing import Any

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from fake_server.journal import JOURNAL_PAGE, JOURNAL_PAGE_MAX, Entry
from pytest_createos.channel import HttpChannel
from tests.conftest import Client
from tests.test_api_sandboxes import expect_error


def fill(fake: FakeCreateOS, count: int, tenant: str = "usr_1") -> None:
    journal = fake.journal
    for _ in range(count):
        journal.request(
            journal.ticket(), 0.0, "GET", "/v1/whoami", "/v1/whoami", tenant, None, None, 200, 1.0,
            (), None,
        )  # fmt: skip


async def page(client: Client, query: str) -> dict[str, Any]:
    response = await client.get("/_fake/journal" + query)
    assert response.status == 200, await response.text()
    data: dict[str, Any] = (await response.json())["data"]
    return data


async def test_pages_cover_the_journal_once_in_order(client: Client, fake: FakeCreateOS) -> None:
    fill(fake, 2 * JOURNAL_PAGE + 17)
    seen: list[int] = []
    since, more = 0, True
    while more:
        data = await page(client, f"?since={since}")
        assert len(data["entries"]) <= JOURNAL_PAGE
        seen += [entry["seq"] for entry in data["entries"]]
        since, more = data["next"], data["more"]
    assert seen == sorted(set(seen))
    assert len(seen) == len(fake.journal)
    last = await page(client, f"?since={since}")
    assert (last["entries"], last["next"], last["more"]) == ([], since, False)


async def test_limit_is_checked_and_capped(client: Client, fake: FakeCreateOS) -> None:
    fill(fake, 30)
    assert len((await page(client, "?limit=7"))["entries"]) == 7
    await expect_error(await client.get("/_fake/journal?limit=0"), 400, "limit")
    await expect_error(await client.get("/_fake/journal?limit=x"), 400, "limit")
    capped = await page(client, f"?limit={JOURNAL_PAGE_MAX * 10}")
    assert len(capped["entries"]) == len(fake.journal)


async def test_pages_of_one_tenant(client: Client, fake: FakeCreateOS) -> None:
    fill(fake, 5, tenant="usr_a")
    fill(fake, 5, tenant="usr_b")
    data = await page(client, "?tenant=usr_b&limit=3")
    assert [entry["tenant"] for entry in data["entries"]] == ["usr_b"] * 3
    rest = await page(client, f"?tenant=usr_b&since={data['next']}")
    assert len(rest["entries"]) == 2
    assert rest["more"] is False


def test_the_plugin_channel_reads_every_page() -> None:
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        server.call(fill, server.fake, JOURNAL_PAGE + 5)
        entries = HttpChannel(server.url).journal()
        expected = server.call(lambda: [entry.seq for entry in server.fake.journal.entries()])
        assert len(expected) == JOURNAL_PAGE + 5
        assert [entry["seq"] for entry in entries] == expected


def test_an_entry_reads_back_from_its_json(fake: FakeCreateOS) -> None:
    fill(fake, 1)
    entry = fake.journal.entries()[0]
    body = entry.as_json()
    assert Entry.from_json(body).as_json() == body
    body["rules"] = ["mutated"]
    assert entry.rules == []
