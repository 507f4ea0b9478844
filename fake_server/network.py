"""The simulated outside world of a fake sandbox: egress rules and responders.

Nothing here opens a socket. A URL a command fetches (:mod:`fake_server.http_tools`) is checked
against the sandbox's egress list: a refused host fails like a firewall drop, an allowed host is
answered by the :class:`Responder` a test registered on a :class:`Network`, and an allowed host
nobody registered fails like a DNS miss.

Example:
    >>> network = Network()
    >>> network.register("api.example.com", lambda req: SimulatedResponse(body="hi"))
    >>> network.responder_for("api.example.com", 443) is not None
    True
    >>> egress_allows(["10.0.0.0/8:8080"], "10.1.2.3", 8080)
    True
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only for annotations: shell.py imports this module to register curl and wget.
    pass

__all__ = [
    "Network",
    "Responder",
    "SimulatedRequest",
    "SimulatedResponse",
    "egress_allows",
    "header_value",
]

#: The port a URL without one connects to, by scheme; other schemes are unsupported.
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class SimulatedRequest:
    """One HTTP request a sandbox command made, as its responder sees it.

    ``path`` includes the query string; ``headers`` keep the spelling the client sent.
    """

    method: str
    url: str
    scheme: str
    host: str
    port: int
    path: str
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        """The value of header ``name``, matched case-insensitively (``None`` if absent)."""
        return header_value(self.headers, name)


@dataclass(slots=True)
class SimulatedResponse:
    """What a responder answers; a ``str`` body is sent UTF-8 encoded."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)


#: Answers a request; may be sync or async. An exception it raises looks like a reset connection.
Responder = Callable[[SimulatedRequest], SimulatedResponse | Awaitable[SimulatedResponse]]


# -- egress -------------------------------------------------------------------------------------


def header_value(headers: dict[str, str], name: str) -> str | None:
    """The value of header ``name`` in ``headers``, matched case-insensitively.

    Example:
        >>> header_value({"Content-Type": "text/plain"}, "content-type")
        'text/plain'
    """
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def egress_allows(egress: Sequence[str] | None, host: str, port: int) -> bool:
    """Whether a sandbox whose egress list is ``egress`` may connect to ``host:port``.

    ``None``, ``[]`` or a list holding ``"*"`` allow everything. Rules are ``host``,
    ``*.domain``, ``ip`` or ``cidr``, each optionally ``:port`` (``[v6]:port`` for IPv6). An IP
    literal only matches ip/cidr rules and a hostname only host rules: the fake has no DNS.

    Example:
        >>> egress_allows(["*.example.com:443"], "API.example.com", 443)
        True
        >>> egress_allows(["10.0.0.0/8"], "ten.example.com", 80)
        False
    """
    if not egress or "*" in egress:
        return True
    host = host.strip("[]").rstrip(".").lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    return any(_rule_allows(rule.strip().lower(), host, address, port) for rule in egress)


def _rule_allows(
    rule: str, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None, port: int
) -> bool:
    target, rule_port = _split_rule(rule)
    if rule_port is not None and rule_port != port:
        return False
    if address is not None:
        try:
            network = ipaddress.ip_network(target, strict=False)
        except ValueError:
            return False
        # Checked first: ``in`` compares bits only, so a v4 address would "match" ``::/0``.
        return network.version == address.version and address in network
    if target.startswith("*."):
        return host.endswith(target[1:])
    return host == target.rstrip(".")


def _split_rule(rule: str) -> tuple[str, int | None]:
    if rule.startswith("["):
        target, _, rest = rule[1:].partition("]")
        return target, (None if not rest else _port(rest[1:]) if rest[0] == ":" else -1)
    if rule.count(":") == 1:
        target, _, port = rule.partition(":")
        return target, _port(port)
    # A host, an IPv4 address or CIDR, or a bare IPv6 one (its colons are not a port).
    return rule, None


def _port(text: str) -> int:
    # -1 never equals a real port, so a rule with a malformed port allows nothing.
    return int(text) if text.isascii() and text.isdigit() else -1


# -- responders ---------------------------------------------------------------------------------


class Network:
    """The simulated outside world of every sandbox: responders by host.

    Keys are ``host``, ``host:port`` or ``*.domain`` (any subdomain of ``domain``, optionally
    with ``:port``), case-insensitive. :meth:`responder_for` prefers ``host:port``, then
    ``host``, then the closest wildcard.

    Example:
        >>> network = Network()
        >>> network.register("*.example.com", lambda req: SimulatedResponse(body="any"))
        >>> network.register("api.example.com:8443", lambda req: SimulatedResponse(body="api"))
        >>> any_host = network.responder_for("x.example.com", 443)
        >>> network.responder_for("api.example.com", 443) is any_host
        True
        >>> network.responder_for("example.com", 443) is None
        True
    """

    def __init__(self) -> None:
        self._responders: dict[str, Responder] = {}

    def register(self, host: str, responder: Responder) -> None:
        """Answer requests to ``host`` with ``responder``, replacing one for the same key."""
        self._responders[_key(host)] = responder

    def registered(self, host: str) -> Responder | None:
        """The responder registered under exactly the key ``host`` (no wildcard or port
        lookup: what :meth:`register` with the same ``host`` would replace), or ``None``.

        Example:
            >>> network = Network()
            >>> network.register("*.example.com", lambda req: SimulatedResponse())
            >>> network.registered("*.EXAMPLE.com") is not None, network.registered("a.example.com")
            (True, None)
        """
        return self._responders.get(_key(host))

    def unregister(self, host: str) -> None:
        """Forget the responder registered for ``host``; an unknown key is ignored."""
        self._responders.pop(_key(host), None)

    def clear(self) -> None:
        """Forget every responder."""
        self._responders.clear()

    def responder_for(self, host: str, port: int) -> Responder | None:
        """The responder for a connection to ``host:port``, or ``None`` if nothing matches."""
        host = _key(host)
        names = [host]
        if ":" not in host:
            labels = host.split(".")
            names += ["*." + ".".join(labels[i:]) for i in range(1, len(labels))]
        for name in names:
            hostport = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
            for key in (hostport, name):
                responder = self._responders.get(key)
                if responder is not None:
                    return responder
        return None


def _key(host: str) -> str:
    key = host.strip().lower()
    # "[::1]" and "::1" are one host; "[::1]:8080" keeps its brackets to mark the port.
    return key[1:-1] if key.startswith("[") and key.endswith("]") else key
