"""The HTTP plumbing that the sandbox's ``curl`` (:mod:`fake_server.curl_command`) and ``wget``
(:mod:`fake_server.wget_command`) share, over the simulated network of :mod:`fake_server.network`:
building a request from a URL, sending it to its responder (egress checked) and following
redirects, formatting status and header lines, writing output where the shell would, and
splitting argv getopt-style. Nothing here opens a socket or reads a wall clock.

Example:
    >>> import asyncio
    >>> from fake_server.network import Network, SimulatedResponse
    >>> network = Network()
    >>> network.register("api.example.com", lambda req: SimulatedResponse(body=f"hi {req.path}"))
    >>> request = build_request("GET", "https://api.example.com/v1?x=1", {}, b"")
    >>> hops: Hops = []
    >>> asyncio.run(fetch(request, hops, follow=True, max_redirects=10, keep_method=False,
    ...                   egress=["api.example.com:443"], network=network))
    >>> [status_line(response.status) for _, response in hops]
    ['HTTP/1.1 200 OK']
    >>> body_bytes(hops[-1][1])
    b'hi /v1?x=1'
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
from collections.abc import Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from fake_server.filesystem import FileSystem, FsError
from fake_server.network import (
    DEFAULT_PORTS,
    Network,
    SimulatedRequest,
    SimulatedResponse,
    egress_allows,
    header_value,
)

if TYPE_CHECKING:
    # Only for annotations: shell.py imports the commands built on this module to register them.
    from fake_server.registered_commands import CommandContext
    from fake_server.streams import OutputSink

__all__ = [
    "Hops",
    "NetError",
    "TooManyRedirects",
    "UrlError",
    "UsageError",
    "basic_auth",
    "body_bytes",
    "build_request",
    "deliver",
    "encode",
    "fetch",
    "header_lines",
    "parse_options",
    "reason_phrase",
    "say",
    "set_header",
    "status_line",
]

#: Statuses whose ``Location`` ``curl -L`` and ``wget`` follow.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


# -- the transfer shared by curl and wget -------------------------------------------------------


class NetError(Exception):
    """No response: ``kind`` is ``refused`` (egress), ``unresolved`` (no responder) or ``reset``.

    Example:
        >>> import asyncio
        >>> from fake_server.network import Network
        >>> request = build_request("GET", "http://nobody.test/", {}, b"")
        >>> try:
        ...     asyncio.run(fetch(request, [], follow=False, max_redirects=0, keep_method=False,
        ...                       egress=None, network=Network()))
        ... except NetError as exc:
        ...     print(exc.kind, exc.request.host)
        unresolved nobody.test
    """

    def __init__(self, kind: str, request: SimulatedRequest, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.request, self.detail = kind, request, detail


class UrlError(Exception):
    """A URL the tools reject: ``kind`` is ``scheme``, ``port`` or ``host``.

    Example:
        >>> try:
        ...     build_request("GET", "ftp://files.example.com/a", {}, b"")
        ... except UrlError as exc:
        ...     print(exc.kind, exc.scheme)
        scheme ftp
    """

    def __init__(self, kind: str, url: str, scheme: str = "") -> None:
        super().__init__(kind)
        self.kind, self.url, self.scheme = kind, url, scheme


class TooManyRedirects(Exception):
    """:func:`fetch` followed more redirects than its ``max_redirects``.

    Example:
        >>> import asyncio
        >>> from fake_server.network import Network, SimulatedResponse
        >>> network = Network()
        >>> back = SimulatedResponse(302, headers={"Location": "/"})
        >>> network.register("loop.test", lambda req: back)
        >>> hops: Hops = []
        >>> try:
        ...     asyncio.run(fetch(build_request("GET", "loop.test", {}, b""), hops, follow=True,
        ...                       max_redirects=2, keep_method=False, egress=None, network=network))
        ... except TooManyRedirects:
        ...     print(len(hops), "hops")
        3 hops
    """


#: The requests :func:`fetch` sent and the answers it got, in order (redirects first).
Hops = list[tuple[SimulatedRequest, SimulatedResponse]]


def build_request(method: str, url: str, headers: dict[str, str], body: bytes) -> SimulatedRequest:
    """The request for ``url`` as both tools send it: ``http`` for a bare host, a ``Host``
    header, credentials in the URL as basic auth; :class:`UrlError` for a URL they reject.

    Example:
        >>> request = build_request("GET", "user:pw@api.example.com:8080/v1?x=1", {}, b"")
        >>> request.url, request.port, request.path
        ('http://api.example.com:8080/v1?x=1', 8080, '/v1?x=1')
        >>> request.headers
        {'Host': 'api.example.com:8080', 'Authorization': 'Basic dXNlcjpwdw=='}
    """
    if "://" not in url:
        url = "http://" + url  # both tools guess http for a bare host
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UrlError("host" if "IPv6" in str(exc) else "port", url) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise UrlError("scheme", url, scheme)
    if not parts.hostname:
        raise UrlError("host", url)
    netloc = parts.netloc.rpartition("@")[2]  # credentials become a header, never the URL
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    all_headers = {} if header_value(headers, "Host") else {"Host": netloc}
    if parts.username is not None and header_value(headers, "Authorization") is None:
        all_headers["Authorization"] = basic_auth(f"{parts.username}:{parts.password or ''}")
    all_headers.update(headers)
    port = port if port is not None else DEFAULT_PORTS[scheme]
    full = f"{scheme}://{netloc}{path}"
    return SimulatedRequest(method, full, scheme, parts.hostname, port, path, all_headers, body)


async def _exchange(
    request: SimulatedRequest, egress: Sequence[str] | None, network: Network
) -> SimulatedResponse:
    if not egress_allows(egress, request.host, request.port):
        raise NetError("refused", request)
    responder = network.responder_for(request.host, request.port)
    if responder is None:
        raise NetError("unresolved", request)
    try:
        result = responder(request)
        response = await result if inspect.isawaitable(result) else result
    except Exception as exc:
        # A buggy responder must look like a dropped connection, never crash the command.
        detail = f"responder raised {type(exc).__name__}: {exc}"
        raise NetError("reset", request, detail) from exc
    if not isinstance(response, SimulatedResponse):
        detail = f"responder returned {type(response).__name__}, not a SimulatedResponse"
        raise NetError("reset", request, detail)
    return response


async def fetch(
    request: SimulatedRequest,
    hops: Hops,
    *,
    follow: bool,
    max_redirects: int,
    keep_method: bool,
    egress: Sequence[str] | None,
    network: Network,
) -> None:
    """Send ``request`` (and, if ``follow``, its redirects), appending each answered hop.

    Raises :class:`NetError` when a request gets no answer, :class:`UrlError` for a
    ``Location`` the tools reject and :class:`TooManyRedirects` past ``max_redirects``; the
    hops answered so far are in ``hops`` either way. The module's example shows a fetch.
    """
    while True:
        response = await _exchange(request, egress, network)
        hops.append((request, response))
        location = header_value(response.headers, "Location")
        if not follow or location is None or response.status not in REDIRECT_STATUSES:
            return
        # A negative limit is curl's "unlimited"; still bounded, so a redirect loop ends.
        if len(hops) > (max_redirects if max_redirects >= 0 else 1000):
            raise TooManyRedirects
        request = _redirected(request, response.status, location, keep_method)


def _redirected(
    request: SimulatedRequest, status: int, location: str, keep_method: bool
) -> SimulatedRequest:
    method, body, headers = request.method, request.body, dict(request.headers)
    set_header(headers, "Host", None)
    # Like both tools: 303 turns anything but HEAD into GET, 301/302 turn POST into GET;
    # curl's explicit -X keeps its method whatever the status.
    to_get = (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST")
    if to_get and not keep_method:
        method, body = "GET", b""
        for name in ("Content-Type", "Content-Length"):
            set_header(headers, name, None)
    new = build_request(method, urljoin(request.url, location), headers, body)
    if new.host != request.host:
        # Credentials are never sent on to another host.
        for name in ("Authorization", "Cookie"):
            set_header(headers, name, None)
        new = dataclasses.replace(new, headers={"Host": new.headers["Host"], **headers})
    return new


# -- small helpers ------------------------------------------------------------------------------


def set_header(headers: dict[str, str], name: str, value: str | None) -> None:
    """Replace ``name`` case-insensitively, keeping the caller's spelling; ``None`` removes it.

    Example:
        >>> headers = {"accept": "*/*", "Host": "a"}
        >>> set_header(headers, "Accept", "text/plain")
        >>> set_header(headers, "host", None)
        >>> headers
        {'Accept': 'text/plain'}
    """
    for key in [k for k in headers if k.lower() == name.lower()]:
        del headers[key]
    if value is not None:
        headers[name] = value


def basic_auth(credentials: str) -> str:
    """The ``Authorization`` value for ``user:password``.

    Example:
        >>> basic_auth("user:pw")
        'Basic dXNlcjpwdw=='
    """
    return "Basic " + base64.b64encode(encode(credentials)).decode()


def encode(text: str) -> bytes:
    """``text`` as the bytes a command writes.

    Example:
        >>> encode("caf\\xe9 \\udcff")
        b'caf\\xc3\\xa9 \\xff'
    """
    # surrogateescape carries raw bytes from the shell's escapes through str, as shell.py does.
    return text.encode("utf-8", "surrogateescape")


def say(sink: OutputSink, text: str) -> None:
    """Write ``text`` and a line break to ``sink``.

    Example:
        >>> from fake_server.streams import BufferSink
        >>> err = BufferSink()
        >>> say(err, "curl: no URL specified!")
        >>> err.getvalue()
        b'curl: no URL specified!\\n'
    """
    sink.write(encode(text + "\n"))


def body_bytes(response: SimulatedResponse) -> bytes:
    """The body ``response`` sends, as bytes.

    Example:
        >>> body_bytes(SimulatedResponse(body="hi"))
        b'hi'
    """
    return response.body.encode() if isinstance(response.body, str) else response.body


def reason_phrase(status: int) -> str:
    """The standard reason phrase of ``status`` (empty for a status without one).

    Example:
        >>> reason_phrase(404), reason_phrase(599)
        ('Not Found', '')
    """
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def status_line(status: int) -> str:
    """The HTTP/1.1 status line of ``status``, as both tools print it.

    Example:
        >>> status_line(201)
        'HTTP/1.1 201 Created'
    """
    return f"HTTP/1.1 {status} {reason_phrase(status)}".rstrip()


def header_lines(response: SimulatedResponse) -> list[str]:
    """``response``'s header lines, with a ``Content-Length`` when it sets none.

    Example:
        >>> header_lines(SimulatedResponse(body="hi", headers={"Content-Type": "text/plain"}))
        ['Content-Type: text/plain', 'Content-Length: 2']
    """
    lines = [f"{name}: {value}" for name, value in response.headers.items()]
    if header_value(response.headers, "Content-Length") is None:
        lines.append(f"Content-Length: {len(body_bytes(response))}")  # as any real server sends
    return lines


def deliver(
    ctx: CommandContext, dest: str, data: bytes, *, append: bool = False, parents: bool = False
) -> FsError | None:
    """Write ``data`` to ``dest`` (``-`` and ``/dev/*`` as the shell sees them); the error.

    Example:
        >>> import asyncio
        >>> from fake_server.filesystem import FileSystem
        >>> from fake_server.registered_commands import CommandContext
        >>> from fake_server.shell import BufferSink, StdinReader
        >>> out = BufferSink()
        >>> ctx = CommandContext(FileSystem(), "/root", {}, StdinReader(), out, out, asyncio.sleep)
        >>> deliver(ctx, "-", b"hi") is None, out.getvalue()
        (True, b'hi')
        >>> deliver(ctx, "saved/page", b"hi", parents=True) is None, ctx.fs.read("/root/saved/page")
        (True, b'hi')
    """
    if dest == "-":
        ctx.stdout.write(data)
        return None
    try:
        path = FileSystem.normalize(dest, ctx.cwd)
        if path == "/dev/stdout":
            ctx.stdout.write(data)
        elif path == "/dev/stderr":
            ctx.stderr.write(data)
        elif path != "/dev/null":
            ctx.fs.write(path, data, append=append, make_parents=parents)
    except FsError as exc:
        return exc
    return None


class UsageError(Exception):
    """A command line the tools reject: ``kind`` is ``unknown`` (option), ``missing`` (its
    value) or ``number`` (not one); ``arg`` is the argument, ``letter`` the short option.

    Example:
        >>> try:
        ...     parse_options(["-o"], {}, {"output": "o"})
        ... except UsageError as exc:
        ...     print(exc.kind, exc.arg, exc.letter)
        missing -o o
    """

    def __init__(self, kind: str, arg: str, letter: str = "") -> None:
        super().__init__(kind)
        self.kind, self.arg, self.letter = kind, arg, letter


def parse_options(
    args: list[str], flags: dict[str, str], valued: dict[str, str]
) -> tuple[list[tuple[str, str | bool]], list[str]]:
    """Split argv getopt-style into ordered ``(long name, value)`` events and operands.

    ``flags``/``valued`` map long names to their short letter (``""`` for none). Short flags
    combine (``-sSL``), a value is attached or the next argument (``-ofile``, ``-o file``,
    ``--output=file``); a flag's value is ``True``, or ``False`` for ``--no-NAME``.

    Example:
        >>> flags, valued = {"silent": "s", "location": "L"}, {"output": "o"}
        >>> events, operands = parse_options(["-sLo", "page", "--no-silent", "x"], flags, valued)
        >>> events
        [('silent', True), ('location', True), ('output', 'page'), ('silent', False)]
        >>> operands
        ['x']
    """
    shorts = {letter: name for name, letter in (*flags.items(), *valued.items()) if letter}
    events: list[tuple[str, str | bool]] = []
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg, i = args[i], i + 1
        if arg == "--":
            operands.extend(args[i:])
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in valued:
                if not eq:
                    if i == len(args):
                        raise UsageError("missing", arg)
                    value, i = args[i], i + 1
                events.append((name, value))
            elif name in flags and not eq:
                events.append((name, True))
            elif name.startswith("no-") and name[3:] in flags and not eq:
                events.append((name[3:], False))
            else:
                raise UsageError("unknown", arg)
        elif arg.startswith("-") and arg != "-":
            for j in range(1, len(arg)):
                name = shorts.get(arg[j], "")
                if not name:
                    raise UsageError("unknown", arg, arg[j])
                if name in flags:
                    events.append((name, True))
                    continue
                value = arg[j + 1 :]
                if not value:
                    if i == len(args):
                        raise UsageError("missing", arg, arg[j])
                    value, i = args[i], i + 1
                events.append((name, value))
                break
        else:
            operands.append(arg)
    return events, operands
