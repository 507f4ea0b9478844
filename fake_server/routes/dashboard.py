"""``GET /_fake/``: the dashboard, one self-contained HTML page over the control API.

The page (``fake_server/dashboard.html``) polls ``/_fake/state`` and ``/_fake/journal`` and
releases gates through ``/_fake/gates/{name}/release``; it loads nothing from anywhere else.
It comes with its first state inside (unless the fake has a control token: the page itself is
served without one), so it shows the fake at once, before any poll.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from fake_server.api_schema import control_operation, ok_response, string
from fake_server.routes.common import Route, Routes, fake_of

if TYPE_CHECKING:
    from fake_server.fake import FakeCreateOS

__all__ = ["DASHBOARD_PATH", "JOURNAL_KEPT", "ROUTES", "page", "snapshot"]

DASHBOARD_PATH = "/_fake/"

#: Journal entries the page keeps (it shows the newest hundred of them).
JOURNAL_KEPT = 200

#: Where the page's first state goes: a JSON data block, which no policy has to allow (a
#: browser never runs it) and which the page reads before its first poll.
SNAPSHOT_SLOT = '<script type="application/json" id="snapshot">null</script>'

_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


@functools.cache
def page() -> tuple[str, str]:
    """The page's HTML and its Content-Security-Policy, read once from the package data.

    The policy allows exactly the page's own inline script (by hash) and requests to this
    server only: should some client-supplied string ever slip past the page's escaping, the
    browser still refuses to run it or to send data elsewhere.
    """
    html = resources.files("fake_server").joinpath("dashboard.html").read_text(encoding="utf-8")
    scripts = _SCRIPT.findall(html)
    if len(scripts) != 1:  # the hash below covers exactly one inline script
        raise RuntimeError("dashboard.html must contain exactly one <script> element")
    if html.count(SNAPSHOT_SLOT) != 1:
        raise RuntimeError(f"dashboard.html must contain {SNAPSHOT_SLOT} once")
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    policy = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; "
        "connect-src 'self'; "
        "img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return html, policy


def snapshot(fake: FakeCreateOS) -> dict[str, Any]:
    """What the page starts from: the fake's state and the newest journal entries, as the
    page's polls read them (no state when the fake has a control token).

    Example::

        snapshot(fake)["state"]["seed"]
    """
    if fake.config.control_token is not None:
        return {"keep": JOURNAL_KEPT}
    entries = fake.journal.tail(JOURNAL_KEPT)
    return {
        "keep": JOURNAL_KEPT,
        "state": fake.state(),
        "journal": {
            "entries": [entry.as_json() for entry in entries],
            "next": entries[-1].seq if entries else 0,
        },
    }


def _embedded(data: dict[str, Any]) -> str:
    """``data`` as JSON that cannot end its ``<script>`` element early: every ``<``, ``>`` and
    ``&`` escaped (client-supplied strings, such as sandbox names, are in it)."""
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


async def dashboard(request: web.Request) -> web.Response:
    html, policy = page()
    filled = SNAPSHOT_SLOT.replace("null", _embedded(snapshot(fake_of(request))))
    return web.Response(
        text=html.replace(SNAPSHOT_SLOT, filled),
        content_type="text/html",
        charset="utf-8",
        headers={
            "Content-Security-Policy": policy,
            # The page is tiny and its data live: never let a browser show a stale copy.
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


ROUTES: Routes = (
    # Only the slash form: ``/_fake`` stays a plain 404 in the envelope, never a redirect.
    Route(
        "GET",
        DASHBOARD_PATH,
        dashboard,
        control_operation(
            "fakeDashboard",
            "The dashboard page",
            ok_response(
                "One self-contained HTML page over the control API.",
                content={"text/html": {"schema": string()}},
            ),
        ),
    ),
)
