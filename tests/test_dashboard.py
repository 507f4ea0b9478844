"""The dashboard at ``GET /_fake/``: served right, self-contained, and working in a real browser.

The browser test drives Debian's ``chromium`` through Playwright (never a downloaded browser);
it skips, saying why, when either is missing. Set ``CREATEOS_CHROMIUM`` to use another binary.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from fake_server import BackgroundServer, FakeCreateOS, ServerConfig
from fake_server.app import CLIENT_LEFT
from fake_server.routes.dashboard import JOURNAL_KEPT
from tests.conftest import create_sandbox

# -- served right (no browser) ------------------------------------------------------------------


async def test_page_is_html_and_self_contained(client: TestClient[Any, Any]) -> None:
    response = await client.get("/_fake/", allow_redirects=False)
    assert response.status == 200
    assert response.content_type == "text/html"
    assert response.charset == "utf-8"
    html = await response.text()
    assert "<table" in html
    # Nothing fetched from elsewhere: no absolute URLs, no external scripts, styles or fonts.
    assert "http://" not in html
    assert "https://" not in html
    # (The one link is an empty data: icon, so the browser does not ask for /favicon.ico.)
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=\"(?!data:)", html)
    assert "@import" not in html
    assert "url(" not in html
    # Client-supplied strings are only ever set as text.
    assert "innerHTML" not in html
    assert "insertAdjacentHTML" not in html
    assert "document.write" not in html


async def test_page_policy_allows_only_its_own_script(client: TestClient[Any, Any]) -> None:
    response = await client.get("/_fake/")
    html = await response.text()
    scripts = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    policy = response.headers["Content-Security-Policy"]
    assert f"script-src 'sha256-{digest}'" in policy
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    assert response.headers["Cache-Control"] == "no-store"


async def test_dashboard_paths_never_redirect(client: TestClient[Any, Any]) -> None:
    response = await client.get("/_fake/", allow_redirects=False)
    assert response.status == 200
    # Without the slash: a 404 in the API's envelope, not a 3xx to the slash form.
    response = await client.get("/_fake", allow_redirects=False)
    assert response.status == 404
    assert (await response.json())["status"] == "fail"
    response = await client.post("/_fake/", allow_redirects=False)
    assert response.status == 405


async def test_dashboard_data_never_contains_api_keys(
    client: TestClient[Any, Any], api_key: str
) -> None:
    await create_sandbox(client)
    for path in ("/_fake/", "/_fake/state", "/_fake/journal", "/_fake/faults"):
        response = await client.get(path)
        assert response.status == 200
        assert api_key not in await response.text(), path


def _snapshot(html: str) -> str:
    """The text of the page's embedded first state."""
    found = re.search(r'<script type="application/json" id="snapshot">(.*?)</script>', html)
    assert found is not None
    return found.group(1)


async def test_page_comes_with_its_first_state(
    fake: FakeCreateOS, client: TestClient[Any, Any]
) -> None:
    sandbox = await create_sandbox(client)
    fake.faults.latency(1, tenant=HOSTILE, sandbox="</script><script>alert(1)</script>")
    embedded = _snapshot(await (await client.get("/_fake/")).text())
    # Client-supplied text cannot close the data block, nor open markup in it.
    assert "<" not in embedded
    assert ">" not in embedded
    first = json.loads(embedded)
    assert first["keep"] == JOURNAL_KEPT
    assert first["state"]["seed"] == fake.seed
    assert [s["id"] for s in first["state"]["tenants"][0]["sandboxes"]] == [sandbox["id"]]
    assert first["state"]["rules"][0]["match"]["tenant"] == HOSTILE
    entries = first["journal"]["entries"]
    assert [e["route"] for e in entries if e["kind"] == "request"] == ["/v1/sandboxes"]
    assert first["journal"]["next"] == entries[-1]["seq"] == fake.journal.tail(1)[0].seq


async def test_page_with_a_control_token_comes_without_state(
    aiohttp_client: Any,
) -> None:
    fake = FakeCreateOS(ServerConfig(transition_ms=0, control_token="t0k"))
    client = await aiohttp_client(fake.app())
    html = await (await client.get("/_fake/")).text()
    assert json.loads(_snapshot(html)) == {"keep": JOURNAL_KEPT}


# -- in a real browser --------------------------------------------------------------------------

#: Flags that work in containers and CI: no sandboxing, GPU, QUIC or background traffic.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Upper bound in ms for any single browser step, so a broken browser fails instead of hanging.
STEP_MS = 10_000
HOSTILE = "<img src=x onerror=window.__xss=1>"
GATE = 'release <b>&"1"'


def _chromium() -> str:
    """The browser binary, or a skip saying what is missing."""
    path = (
        os.environ.get("CREATEOS_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if not path:
        pytest.skip("no chromium on PATH (apt-get install -y chromium, or set CREATEOS_CHROMIUM)")
    return path


def _http(
    method: str, url: str, body: Any = None, api_key: str | None = None, timeout: float = 10
) -> tuple[int, Any]:
    """A stdlib HTTP call answering (status, parsed JSON) — errors included."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["X-Api-Key"] = api_key
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def _populate(url: str) -> dict[str, str]:
    """A tenant with a running, a paused and a soon-deleted sandbox, processes, and rules
    (one a gate on the deletion, one full of markup that must show up as plain text)."""
    _, tenant = _http("POST", f"{url}/_fake/tenants", {})
    key = tenant["data"]["api_key"]
    ids: dict[str, str] = {"key": key, "tenant": tenant["data"]["tenant"]}
    for role in ("running", "paused", "doomed"):
        status, body = _http("POST", f"{url}/v1/sandboxes", {"shape": "s-1vcpu-1gb"}, key)
        assert status == 200, body
        ids[role] = body["data"]["id"]
    sandbox_url = f"{url}/v1/sandboxes/{ids['running']}"
    status, body = _http("POST", f"{sandbox_url}/processes", {"cmd": "sleep", "args": ["600"]}, key)
    assert status == 200, body
    ids["process"] = body["data"]["process_id"]
    status, body = _http("POST", f"{sandbox_url}/processes", {"cmd": HOSTILE}, key)
    assert status == 200, body
    status, body = _http("POST", f"{url}/v1/sandboxes/{ids['paused']}/pause", {}, key)
    assert status == 200, body
    rules = [
        {
            "match": {"route": "DELETE /v1/sandboxes/{id}", "sandbox": ids["doomed"]},
            "action": {"type": "gate", "name": GATE},
        },
        {
            # Rule ids are names now; the match's strings are still free text.
            "match": {"sandbox": "</td><script>window.__xss=2</script>", "tenant": HOSTILE},
            "action": {"type": "latency", "ms": 1},
        },
    ]
    status, body = _http("POST", f"{url}/_fake/faults", {"rules": rules})
    assert status == 200, body
    return ids


def _hold_delete(url: str, ids: dict[str, str]) -> tuple[threading.Thread, list[int]]:
    """Send the gated DELETE from a thread; its status lands in the returned list."""
    outcome: list[int] = []

    def delete() -> None:
        status, _ = _http(
            "DELETE", f"{url}/v1/sandboxes/{ids['doomed']}", api_key=ids["key"], timeout=30
        )
        outcome.append(status)

    thread = threading.Thread(target=delete, name="held-delete", daemon=True)
    thread.start()
    return thread, outcome


def test_dashboard_in_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    expect = sync_api.expect
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        ids = _populate(server.url)
        thread, outcome = _hold_delete(server.url, ids)
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, headless=True, args=CHROMIUM_FLAGS, timeout=30_000
            )
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.set_default_timeout(STEP_MS)
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

                def on_console(message: Any) -> None:
                    if message.type in ("error", "warning"):  # e.g. a CSP violation
                        problems.append(f"console: {message.text}")

                page.on("console", on_console)
                page.goto(f"{server.url}/_fake/")

                sandboxes = page.locator("#sandboxes")
                for role, status in (("running", "running"), ("paused", "paused")):
                    row = sandboxes.locator("tr", has_text=ids[role])
                    expect(row.locator(".badge")).to_have_text(status, timeout=STEP_MS)
                    expect(row.locator(".badge")).to_have_class(re.compile(f"st-{status}"))
                paused_badge = sandboxes.locator("tr", has_text=ids["paused"]).locator(".badge")
                running_badge = sandboxes.locator("tr", has_text=ids["running"]).locator(".badge")
                colour = "el => getComputedStyle(el).backgroundColor"
                assert paused_badge.evaluate(colour) != running_badge.evaluate(colour)
                expect(page.locator("#tenants")).to_contain_text(ids["tenant"])
                expect(page.locator("#processes")).to_contain_text(ids["process"])
                expect(page.locator("#processes")).to_contain_text("sleep 600")
                expect(page.locator("#processes")).to_contain_text(HOSTILE)
                expect(page.locator("#rules")).to_contain_text(HOSTILE)
                expect(page.locator("#rules")).to_contain_text("window.__xss=2</script>")
                expect(page.locator("#n-journal")).to_contain_text("/")

                # The held DELETE shows up at its gate; the button lets it through.
                gate_row = page.locator("#gates tr", has_text=GATE)
                release = gate_row.get_by_role("button", name="release 1")
                expect(gate_row.locator("td").nth(1)).to_have_text("1")
                holding = gate_row.locator("td").nth(5)
                expect(holding).to_contain_text(f"DELETE /v1/sandboxes/{ids['doomed']} since ")
                expect(release).to_be_enabled()
                # A laptop's width: a held request's long path wraps in its cell (it hid the
                # column behind a scroll bar).
                page.set_viewport_size({"width": 1280, "height": 1000})
                overflow = (
                    "el => el.closest('section').scrollWidth - el.closest('section').clientWidth"
                )
                assert page.locator("#gates").evaluate(overflow) <= 0
                page.screenshot(path=str(tmp_path / "dashboard-held.png"), full_page=True)
                release.click()
                thread.join(timeout=STEP_MS / 1000)
                assert outcome == [200], "the released DELETE did not complete"
                expect(gate_row.locator("td").nth(1)).to_have_text("0")
                expect(gate_row.locator("td").nth(2)).to_have_text("1")
                expect(holding).to_have_text("")
                expect(sandboxes.locator("tr", has_text=ids["doomed"])).to_contain_text("destroyed")
                expect(page.locator("#journal")).to_contain_text(
                    f"DELETE /v1/sandboxes/{ids['doomed']}"
                )
                page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

                assert page.evaluate("() => window.__xss === undefined")
                assert page.locator("#sandboxes img, #rules img, #processes img").count() == 0
                assert problems == []
                _check_hidden_tab_stops_polling(page)
            finally:
                browser.close()
        thread.join(timeout=1)


def _check_hidden_tab_stops_polling(page: Any) -> None:
    """Headless tabs are always visible, so hiding is simulated the way the page sees it."""
    polls: list[float] = []

    def on_request(request: Any) -> None:
        if "/_fake/state" in request.url:
            polls.append(time.monotonic())

    page.on("request", on_request)
    page.evaluate(
        """() => {
            Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
            document.dispatchEvent(new Event("visibilitychange"));
        }"""
    )
    page.wait_for_timeout(300)  # let a poll already in flight finish
    hidden_at = time.monotonic()
    page.wait_for_timeout(2_500)
    assert [at for at in polls if at > hidden_at] == [], "polled while the tab was hidden"
    assert page.locator("#conn").text_content() == "paused (tab hidden)"
    page.evaluate(
        """() => {
            Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
            document.dispatchEvent(new Event("visibilitychange"));
        }"""
    )
    page.wait_for_function(
        "() => document.getElementById('conn').className === 'live'", timeout=STEP_MS
    )


def test_dashboard_with_a_control_token_in_chromium() -> None:
    chromium = _chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    expect = sync_api.expect
    config = ServerConfig(transition_ms=0, control_token="t0k")
    with BackgroundServer(FakeCreateOS(config)) as server:
        shape = {"shape": "s-1vcpu-1gb"}
        status, body = _http("POST", f"{server.url}/v1/sandboxes", shape, "skp_tok")
        assert status == 200, body
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, headless=True, args=CHROMIUM_FLAGS, timeout=30_000
            )
            try:
                page = browser.new_page()
                page.set_default_timeout(STEP_MS)
                page.goto(f"{server.url}/_fake/#token=t0k")
                expect(page.locator("#sandboxes")).to_contain_text(body["data"]["id"])
                expect(page.locator("#conn")).to_have_class("live")
                page.goto("about:blank")
                page.goto(f"{server.url}/_fake/#token=wrong")
                expect(page.locator("#conn")).to_contain_text("control token")
            finally:
                browser.close()


def _unanswered(fake: FakeCreateOS) -> None:
    """Journal a DELETE answered after its client left, and one whose connection dropped."""
    journal = fake.journal
    now = fake.clock.now()
    for sandbox, status, detail in (
        ("sb_left", 200, CLIENT_LEFT),
        ("sb_dropped", None, "connection closed without a response"),
    ):
        journal.request(
            journal.ticket(),
            now,
            "DELETE",
            "/v1/sandboxes/{id}",
            f"/v1/sandboxes/{sandbox}",
            None,
            sandbox,
            None,
            status,
            now + 63.672,
            (),
            detail,
        )


def test_headless_dump_shows_the_fake_without_waiting_for_a_poll() -> None:
    """``chromium --headless --dump-dom`` (as ``--screenshot``) takes the page as its load
    leaves it, with no time for a first poll: the page must be drawn by then."""
    chromium = _chromium()
    with BackgroundServer(FakeCreateOS(ServerConfig(transition_ms=0))) as server:
        ids = _populate(server.url)
        thread, outcome = _hold_delete(server.url, ids)
        gate = server.call(lambda: server.fake.faults.gates[GATE])
        server.run(gate.wait_held(1))
        server.call(_unanswered, server.fake)
        try:
            dumped = subprocess.run(
                [chromium, "--headless", *CHROMIUM_FLAGS, "--dump-dom", f"{server.url}/_fake/"],
                capture_output=True,
                text=True,
                timeout=STEP_MS / 1000 * 3,
                check=True,
            ).stdout
        finally:
            server.call(gate.open)
            thread.join(timeout=STEP_MS / 1000)
    assert outcome == [200]
    assert re.search(r'<span id="conn" class="live">live · ', dumped)
    assert "connecting…</span>" not in dumped
    for role in ("running", "paused", "doomed"):
        assert ids[role] in dumped
    # The held DELETE, while held: what it is and since when.
    assert re.search(
        rf"DELETE <span class=\"mono\">/v1/sandboxes/{ids['doomed']}</span>"
        r'<span class="muted"> since [0-9:.]+Z \([0-9.]+ s\)',
        dumped,
    )
    # The header's count is of evicted journal entries, not of unanswered requests...
    assert '>evicted <b id="n-evicted">0</b>' in dumped
    # ... which the journal shows as such, never as a status their client did not get.
    assert "the client left before the answer · 200 never received · 63672 ms" in dumped
    assert "connection closed without a response · 63672 ms" in dumped
    assert "unanswered)" in dumped
    assert not re.search(r"<img src=.?x", dumped)  # hostile text stays text
