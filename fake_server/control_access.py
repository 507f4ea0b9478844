"""Who may use the control API and the dashboard: local tools, not web pages.

The control API needs no key (it is for the test harness), so the fake must make sure that a
request for it really comes from this machine's tools and not from a page in a browser on it:

* its ``Host`` must name a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``); a page
  that re-binds its own host name to 127.0.0.1 (DNS rebinding) still sends its own name;
* an ``Origin``, when there is one, must be a loopback origin: a page elsewhere that posts to
  ``/_fake/reset`` sends its own;
* with a control token set (``ServerConfig.control_token``, ``--control-token``), the request
  must carry it in ``X-Control-Token``.

``ServerConfig.allow_remote`` (``--allow-remote``) lifts the first two, for a fake deliberately
served beyond loopback. Each refusal is a 403 in the API's envelope.

Example::

    check_control_access(request.host, request.headers, config)  # raises ApiError(403)
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

from fake_server import errors
from fake_server.config import ServerConfig
from fake_server.errors import ApiError

__all__ = ["CONTROL_TOKEN_HEADER", "check_control_access", "is_loopback"]

CONTROL_TOKEN_HEADER = "X-Control-Token"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is loopback.

    Example:
        >>> is_loopback("localhost"), is_loopback("[::1]"), is_loopback("example.com")
        (True, True, False)
    """
    host = host.strip().lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def _host_name(authority: str) -> str:
    """The host of ``host[:port]`` (IPv6 in brackets)."""
    return _url_host("//" + authority)


def _url_host(url: str) -> str:
    """The host a URL names; empty for one that names none or cannot be read."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:  # an unclosed bracket, a port that is not a number
        return ""


def check_control_access(
    host: str, headers: Mapping[str, str], config: ServerConfig, *, token: bool = True
) -> None:
    """Refuse (``ApiError(403)``) a control request that may come from a web page, or that
    lacks the control token when one is set (``token=False``: the dashboard's page itself, which
    holds no data and cannot be loaded with a header)."""
    if not config.allow_remote:
        if not is_loopback(_host_name(host)):
            raise ApiError(403, errors.CONTROL_HOST_REFUSED)
        origin = headers.get("Origin")
        if origin is not None and not is_loopback(_url_host(origin)):
            raise ApiError(403, errors.CONTROL_ORIGIN_REFUSED)
    expected = config.control_token
    if token and expected is not None:
        given = headers.get(CONTROL_TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(errors="replace"), expected.encode()):
            raise ApiError(403, errors.CONTROL_TOKEN_REQUIRED)
