"""Checking a ``--createos-url`` before the session relies on it: one sentence that says what
is wrong (nothing answers, not the server's root, not the fake, control API refused).

Example::

    problem = remote_problem("http://127.0.0.1:8080/v1", None)
    # "--createos-url must be the fake's root URL, e.g. http://127.0.0.1:8080, not ..."
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fake_server.errors import CONTROL_TOKEN_REQUIRED
from fake_server.fake import SERVER_NAME
from pytest_createos.channel import ControlError, HttpChannel

__all__ = ["MANUAL_CLOCK_REMOTE", "manual_clock_problem", "remote_problem"]

#: ``manual_clock=True`` against a ``--createos-url`` fake on the real clock.
MANUAL_CLOCK_REMOTE = (
    "@pytest.mark.createos(manual_clock=True) needs the in-process fake, or a server started "
    "with `fake-createos serve --manual-clock`: the fake at {url} runs on the real clock, and "
    "its one clock is shared by every tenant, so a test cannot have a manual clock of its own "
    "there"
)

#: ``--createos-url`` checks, made once per session before any test runs.
URL_UNREACHABLE = (
    "--createos-url: {error}. Start the fake with `fake-createos serve` (it prints its URL), "
    "or drop --createos-url to use the in-process fake."
)
URL_NOT_ROOT = (
    "--createos-url must be the fake's root URL, e.g. {root}, not {url} "
    "(the fake serves /v1 and /_fake itself; GET {url}/_fake/info answered 404)"
)
URL_NOT_A_FAKE = (
    "--createos-url {url} answers, but not as fake-createos does ({detail}); "
    "point it at a server started with `fake-createos serve`"
)
URL_REFUSED = "--createos-url {url}: the fake refuses its control API ({detail})"
URL_TOKEN_HINT = "; give its --control-token as --createos-control-token"
URL_WRONG_TOKEN_HINT = (
    "; the --createos-control-token given is not the --control-token the fake was started with"
)


def remote_problem(url: str, control_token: str | None) -> str | None:
    """Why ``url`` is not a fake the plugin can use, in one sentence; ``None`` if it is.

    Example::

        remote_problem("http://127.0.0.1:8080/v1", None)  # "... must be the fake's root ..."
    """
    try:
        info = HttpChannel(url, control_token=control_token, timeout=5.0).info()
    except ControlError as exc:
        if exc.status is None:
            return URL_UNREACHABLE.format(error=exc)
        if exc.status == 403:
            hint = ""
            if CONTROL_TOKEN_REQUIRED in str(exc):
                hint = URL_TOKEN_HINT if control_token is None else URL_WRONG_TOKEN_HINT
            return URL_REFUSED.format(url=url, detail=exc) + hint
        parts = urlsplit(url.rstrip("/"))
        if exc.status == 404 and parts.path:
            root = parts._replace(path="", query="", fragment="").geturl()
            return URL_NOT_ROOT.format(root=root, url=url.rstrip("/"))
        return URL_NOT_A_FAKE.format(url=url, detail=exc)
    if info.get("server") != SERVER_NAME:
        return URL_NOT_A_FAKE.format(url=url, detail="GET /_fake/info names no fake-createos")
    return None


def manual_clock_problem(channel: HttpChannel) -> str | None:
    """Why a test cannot have ``manual_clock=True`` on this shared fake; ``None`` if it can.

    A fake has one clock for every tenant (its timers, latency and journal all read it), so a
    test cannot get a manual clock of its own there; on a fake started with ``--manual-clock``
    the test gets that shared clock, which every test using the fake advances.

    Example::

        manual_clock_problem(HttpChannel("http://127.0.0.1:8080"))  # None if --manual-clock
    """
    if channel.info()["clock"]["manual"]:
        return None
    return MANUAL_CLOCK_REMOTE.format(url=channel.url)
