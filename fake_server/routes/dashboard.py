"""``GET /_fake/``: the dashboard, one self-contained HTML page over the control API.

The page (``fake_server/dashboard.html``) polls ``/_fake/state`` and ``/_fake/journal`` and
releases gates through ``/_fake/gates/{name}/release``; it loads nothing from anywhere else.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from importlib import resources

from aiohttp import web

from fake_server.routes.common import Routes

__all__ = ["DASHBOARD_PATH", "ROUTES", "page"]

DASHBOARD_PATH = "/_fake/"

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


async def dashboard(request: web.Request) -> web.Response:
    html, policy = page()
    return web.Response(
        text=html,
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
    ("GET", DASHBOARD_PATH, dashboard),
)
