"""``curl`` and ``wget`` inside a fake sandbox, over the simulated network of
:mod:`fake_server.network`: the options real scripts use, the real tools' exit codes and message
forms, and never a progress meter or a wall-clock time, so their output is deterministic.

Example:
    >>> import asyncio
    >>> from fake_server.filesystem import FileSystem
    >>> from fake_server.network import Network, SimulatedResponse
    >>> from fake_server.shell import BufferSink, CommandContext, StdinReader
    >>> network = Network()
    >>> network.register("api.example.com", lambda req: SimulatedResponse(body=f"hi {req.path}\\n"))
    >>> out, err = BufferSink(), BufferSink()
    >>> ctx = CommandContext(FileSystem(), "/root", {}, StdinReader(), out, err, asyncio.sleep)
    >>> argv = ["-fsS", "https://api.example.com/v1?x=1"]
    >>> asyncio.run(curl(ctx, argv, egress=["api.example.com:443"], network=network))
    0
    >>> out.getvalue()
    b'hi /v1?x=1\\n'
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import quote, urljoin, urlsplit

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
    # Only for annotations: shell.py imports this module to register curl and wget.
    from fake_server.shell import CommandContext, OutputSink

__all__ = ["curl", "wget"]

#: Statuses whose ``Location`` ``curl -L`` and ``wget`` follow.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CURL_MAX_REDIRECTS = 10
WGET_MAX_REDIRECTS = 20
CURL_USER_AGENT = "curl/8.5.0"
WGET_USER_AGENT = "Wget/1.21.4"
CURL_TRY_HELP = "curl: try 'curl --help' for more information"
REFUSED = "Connection refused (blocked by the sandbox's egress rules)"
NO_RESPONDER = "(no responder is registered for it in the fake)"


# -- the transfer shared by curl and wget -------------------------------------------------------


class _NetError(Exception):
    """No response: ``kind`` is ``refused`` (egress), ``unresolved`` (no responder) or ``reset``."""

    def __init__(self, kind: str, request: SimulatedRequest, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.request, self.detail = kind, request, detail


class _UrlError(Exception):
    """A URL the tools reject: ``kind`` is ``scheme``, ``port`` or ``host``."""

    def __init__(self, kind: str, url: str, scheme: str = "") -> None:
        super().__init__(kind)
        self.kind, self.url, self.scheme = kind, url, scheme


class _TooManyRedirects(Exception):
    pass


_Hops = list[tuple[SimulatedRequest, SimulatedResponse]]


def _build_request(method: str, url: str, headers: dict[str, str], body: bytes) -> SimulatedRequest:
    if "://" not in url:
        url = "http://" + url  # both tools guess http for a bare host
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _UrlError("host" if "IPv6" in str(exc) else "port", url) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise _UrlError("scheme", url, scheme)
    if not parts.hostname:
        raise _UrlError("host", url)
    netloc = parts.netloc.rpartition("@")[2]  # credentials become a header, never the URL
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    all_headers = {} if header_value(headers, "Host") else {"Host": netloc}
    if parts.username is not None and header_value(headers, "Authorization") is None:
        all_headers["Authorization"] = _basic(f"{parts.username}:{parts.password or ''}")
    all_headers.update(headers)
    port = port if port is not None else DEFAULT_PORTS[scheme]
    full = f"{scheme}://{netloc}{path}"
    return SimulatedRequest(method, full, scheme, parts.hostname, port, path, all_headers, body)


async def _exchange(
    request: SimulatedRequest, egress: Sequence[str] | None, network: Network
) -> SimulatedResponse:
    if not egress_allows(egress, request.host, request.port):
        raise _NetError("refused", request)
    responder = network.responder_for(request.host, request.port)
    if responder is None:
        raise _NetError("unresolved", request)
    try:
        result = responder(request)
        response = await result if inspect.isawaitable(result) else result
    except Exception as exc:
        # A buggy responder must look like a dropped connection, never crash the command.
        detail = f"responder raised {type(exc).__name__}: {exc}"
        raise _NetError("reset", request, detail) from exc
    if not isinstance(response, SimulatedResponse):
        detail = f"responder returned {type(response).__name__}, not a SimulatedResponse"
        raise _NetError("reset", request, detail)
    return response


async def _follow(
    request: SimulatedRequest,
    hops: _Hops,
    *,
    follow: bool,
    max_redirects: int,
    keep_method: bool,
    egress: Sequence[str] | None,
    network: Network,
) -> None:
    """Send ``request`` (and, if ``follow``, its redirects), appending each answered hop."""
    while True:
        response = await _exchange(request, egress, network)
        hops.append((request, response))
        location = header_value(response.headers, "Location")
        if not follow or location is None or response.status not in REDIRECT_STATUSES:
            return
        # A negative limit is curl's "unlimited"; still bounded, so a redirect loop ends.
        if len(hops) > (max_redirects if max_redirects >= 0 else 1000):
            raise _TooManyRedirects
        request = _redirected(request, response.status, location, keep_method)


def _redirected(
    request: SimulatedRequest, status: int, location: str, keep_method: bool
) -> SimulatedRequest:
    method, body, headers = request.method, request.body, dict(request.headers)
    _set_header(headers, "Host", None)
    # Like both tools: 303 turns anything but HEAD into GET, 301/302 turn POST into GET;
    # curl's explicit -X keeps its method whatever the status.
    to_get = (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST")
    if to_get and not keep_method:
        method, body = "GET", b""
        for name in ("Content-Type", "Content-Length"):
            _set_header(headers, name, None)
    new = _build_request(method, urljoin(request.url, location), headers, body)
    if new.host != request.host:
        # Credentials are never sent on to another host.
        for name in ("Authorization", "Cookie"):
            _set_header(headers, name, None)
        new = dataclasses.replace(new, headers={"Host": new.headers["Host"], **headers})
    return new


# -- small helpers ------------------------------------------------------------------------------


def _set_header(headers: dict[str, str], name: str, value: str | None) -> None:
    """Replace ``name`` case-insensitively, keeping the caller's spelling; ``None`` removes it."""
    for key in [k for k in headers if k.lower() == name.lower()]:
        del headers[key]
    if value is not None:
        headers[name] = value


def _basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(_encode(credentials)).decode()


def _encode(text: str) -> bytes:
    # surrogateescape carries raw bytes from the shell's escapes through str, as shell.py does.
    return text.encode("utf-8", "surrogateescape")


def _say(sink: OutputSink, text: str) -> None:
    sink.write(_encode(text + "\n"))


def _body(response: SimulatedResponse) -> bytes:
    return response.body.encode() if isinstance(response.body, str) else response.body


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _status_line(status: int) -> str:
    return f"HTTP/1.1 {status} {_reason(status)}".rstrip()


def _header_lines(response: SimulatedResponse) -> list[str]:
    lines = [f"{name}: {value}" for name, value in response.headers.items()]
    if header_value(response.headers, "Content-Length") is None:
        lines.append(f"Content-Length: {len(_body(response))}")  # as any real server sends
    return lines


def _deliver(
    ctx: CommandContext, dest: str, data: bytes, *, append: bool = False, parents: bool = False
) -> FsError | None:
    """Write ``data`` to ``dest`` (``-`` and ``/dev/*`` as the shell sees them); the error."""
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


class _Usage(Exception):
    def __init__(self, kind: str, arg: str, letter: str = "") -> None:
        super().__init__(kind)
        self.kind, self.arg, self.letter = kind, arg, letter


def _parse(
    args: list[str], flags: dict[str, str], valued: dict[str, str]
) -> tuple[list[tuple[str, str | bool]], list[str]]:
    """Split argv getopt-style into ordered ``(long name, value)`` events and operands.

    ``flags``/``valued`` map long names to their short letter (``""`` for none). Short flags
    combine (``-sSL``), a value is attached or the next argument (``-ofile``, ``-o file``,
    ``--output=file``); a flag's value is ``True``, or ``False`` for ``--no-NAME``.
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
                        raise _Usage("missing", arg)
                    value, i = args[i], i + 1
                events.append((name, value))
            elif name in flags and not eq:
                events.append((name, True))
            elif name.startswith("no-") and name[3:] in flags and not eq:
                events.append((name[3:], False))
            else:
                raise _Usage("unknown", arg)
        elif arg.startswith("-") and arg != "-":
            for j in range(1, len(arg)):
                name = shorts.get(arg[j], "")
                if not name:
                    raise _Usage("unknown", arg, arg[j])
                if name in flags:
                    events.append((name, True))
                    continue
                value = arg[j + 1 :]
                if not value:
                    if i == len(args):
                        raise _Usage("missing", arg, arg[j])
                    value, i = args[i], i + 1
                events.append((name, value))
                break
        else:
            operands.append(arg)
    return events, operands


# -- curl ---------------------------------------------------------------------------------------

_CURL_FLAGS = {
    **dict.fromkeys(["compressed", "create-dirs", "fail-with-body", "no-progress-meter"], ""),
    **{"silent": "s", "show-error": "S", "fail": "f", "location": "L", "remote-name": "O"},
    **{"head": "I", "include": "i", "insecure": "k", "verbose": "v", "get": "G", "globoff": "g"},
}
_CURL_VALUES = {
    **dict.fromkeys(["data-raw", "data-binary", "data-urlencode", "json", "url"], ""),
    **dict.fromkeys(["connect-timeout", "retry", "retry-delay", "max-redirs"], ""),
    **{"output": "o", "request": "X", "header": "H", "data": "d", "user-agent": "A"},
    **{"user": "u", "write-out": "w", "max-time": "m", "referer": "e"},
}
_CURL_NUMBERS: dict[str, Callable[[str], object]] = {
    **dict.fromkeys(["max-time", "connect-timeout", "retry-delay"], float),
    **dict.fromkeys(["retry", "max-redirs"], int),
}
_CURL_USAGE = {
    "unknown": "is unknown",
    "missing": "requires parameter",
    "number": "expected a proper numerical parameter",
}
_WRITE_OUT = re.compile(r"%\{(\w+)\}|%%|\\[nrt]")
_WRITE_OUT_ESCAPES = {"%%": "%", "\\n": "\n", "\\r": "\r", "\\t": "\t"}


@dataclass
class _Curl:
    urls: list[str]
    flags: set[str] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)  # last one wins, as in curl
    headers: list[str] = field(default_factory=list)
    data: list[tuple[str, str]] = field(default_factory=list)
    outputs: list[str | None] = field(default_factory=list)  # None: -O, the remote name


def _curl_options(args: list[str]) -> _Curl:
    events, operands = _parse(args, _CURL_FLAGS, _CURL_VALUES)
    opts = _Curl(urls=operands)
    for name, value in events:
        if isinstance(value, bool):
            if name == "remote-name":
                opts.outputs.extend([None] if value else [])
            elif value:
                opts.flags.add(name)
            else:
                opts.flags.discard(name)
            continue
        if name in _CURL_NUMBERS:
            try:
                _CURL_NUMBERS[name](value)
            except ValueError:
                raise _Usage("number", f"--{name}") from None
        if name.startswith("data") or name == "json":
            opts.data.append((name, value))
        elif name == "output":
            opts.outputs.append(value)
        elif name in ("header", "url"):
            (opts.headers if name == "header" else opts.urls).append(value)
        else:
            opts.values[name] = value
    return opts


async def curl(
    ctx: CommandContext, args: list[str], *, egress: Sequence[str] | None, network: Network
) -> int:
    """Run ``curl ARGS`` against the simulated network; returns curl's exit status.

    0 success, 1 unsupported protocol, 2 usage, 3 malformed URL, 6 no responder, 7 refused by
    egress, 22 ``-f`` and HTTP >= 400, 23 output write failure, 47 too many redirects, 56 the
    responder raised. Every URL is fetched in turn; the status is the last failure.
    """
    try:
        opts = _curl_options(args)
    except _Usage as exc:
        _say(ctx.stderr, f"curl: option {exc.arg}: {_CURL_USAGE[exc.kind]}")
        _say(ctx.stderr, CURL_TRY_HELP)
        return 2
    if not opts.urls:
        _say(ctx.stderr, "curl: no URL specified!")
        _say(ctx.stderr, CURL_TRY_HELP)
        return 2
    body: bytes | None = None
    if opts.data:
        pieces = [await _curl_data(ctx, opts, name, value) for name, value in opts.data]
        body = (b"" if all(name == "json" for name, _ in opts.data) else b"&").join(pieces)
    status = 0
    for index, url in enumerate(opts.urls):
        output = opts.outputs[index] if index < len(opts.outputs) else "-"
        status = await _curl_transfer(ctx, opts, url, output, body, egress, network) or status
    return status


async def _curl_data(ctx: CommandContext, opts: _Curl, name: str, value: str) -> bytes:
    if name == "data-urlencode":
        key, eq, text = value.partition("=")
        if eq:
            raw = _encode(text)
        elif "@" in value:
            key, _, path = value.partition("@")
            raw = await _read_source(ctx, opts, path)
        else:
            key, raw = "", _encode(value)
        escaped = quote(raw, safe="").encode()
        return f"{key}=".encode() + escaped if key else escaped
    if name == "data-raw" or not value.startswith("@"):
        return _encode(value)
    data = await _read_source(ctx, opts, value[1:])
    # Plain -d strips line breaks from a file, as curl does; --data-binary and --json do not.
    return data.replace(b"\r", b"").replace(b"\n", b"") if name == "data" else data


async def _read_source(ctx: CommandContext, opts: _Curl, path: str) -> bytes:
    if path == "-":
        return await ctx.stdin.read()
    try:
        return ctx.fs.read(FileSystem.normalize(path, ctx.cwd))
    except FsError:
        if "silent" not in opts.flags:
            warning = f'Couldn\'t read data from file "{path}", this makes an empty POST.'
            _say(ctx.stderr, f"Warning: {warning}")
        return b""


def _curl_headers(opts: _Curl, body: bytes | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if "user" in opts.values:
        user, _, password = opts.values["user"].partition(":")
        headers["Authorization"] = _basic(f"{user}:{password}")
    headers["User-Agent"] = opts.values.get("user-agent", CURL_USER_AGENT)
    is_json = any(name == "json" for name, _ in opts.data)
    headers["Accept"] = "application/json" if is_json else "*/*"
    if "referer" in opts.values:
        headers["Referer"] = opts.values["referer"]
    if body is not None:
        form = "application/x-www-form-urlencoded"
        headers["Content-Type"] = "application/json" if is_json else form
    for raw in opts.headers:
        name, colon, value = raw.partition(":")
        if colon:  # "Name:" with no value removes the header, like curl
            _set_header(headers, name.strip(), value.strip() or None)
        elif raw.endswith(";"):  # "Name;" sends it empty
            _set_header(headers, raw[:-1].strip(), "")
    if body is not None and header_value(headers, "Content-Length") is None:
        headers["Content-Length"] = str(len(body))
    return headers


async def _curl_transfer(
    ctx: CommandContext,
    opts: _Curl,
    url: str,
    output: str | None,
    body: bytes | None,
    egress: Sequence[str] | None,
    network: Network,
) -> int:
    flags = opts.flags
    if body is not None and "get" in flags:
        url, body = f"{url}{'&' if '?' in url else '?'}{body.decode('utf-8', 'replace')}", None
    method = opts.values.get("request") or (
        "HEAD" if "head" in flags else "GET" if body is None else "POST"
    )
    max_redirects = int(opts.values.get("max-redirs", CURL_MAX_REDIRECTS))
    hops: _Hops = []
    code, error = 0, ""
    failure: _NetError | None = None
    try:
        request = _build_request(method, url, _curl_headers(opts, body), body or b"")
        url = request.url
        await _follow(
            request,
            hops,
            follow="location" in flags,
            max_redirects=max_redirects,
            keep_method="request" in opts.values,
            egress=egress,
            network=network,
        )
    except _UrlError as exc:
        code, error = 3, "URL rejected: Malformed input to a URL function"
        if exc.kind == "scheme":
            code, error = 1, f'Protocol "{exc.scheme}" not supported'
        elif exc.kind == "port":
            error = "URL rejected: Port number was not a decimal number between 0 and 65535"
    except _NetError as exc:
        failure, host, port = exc, exc.request.host, exc.request.port
        if exc.kind == "refused":
            code, error = 7, f"Failed to connect to {host} port {port} after 0 ms: {REFUSED}"
        elif exc.kind == "unresolved":
            code, error = 6, f"Could not resolve host: {host} {NO_RESPONDER}"
        else:
            code, error = 56, "Recv failure: Connection reset by peer"
    except _TooManyRedirects:
        code, error = 47, f"Maximum ({max_redirects}) redirects followed"
    if "verbose" in flags:
        _curl_verbose(ctx, hops, failure)
    size = 0
    if hops and not code:
        final = hops[-1][1]
        data = bytearray()
        if flags & {"include", "head"}:
            for _, response in hops:
                lines = [_status_line(response.status), *_header_lines(response), "", ""]
                data += _encode("\r\n".join(lines))
        if "head" not in flags:
            size = len(_body(final))
            data += _body(final)
        failed = final.status >= 400 and bool(flags & {"fail", "fail-with-body"})
        if failed:
            code, error = 22, f"The requested URL returned error: {final.status}"
        if not failed or "fail-with-body" in flags:
            dest = output if output is not None else posixpath.basename(urlsplit(url).path)
            if not dest:
                code, error = 23, "Remote file name has no length!"
            elif _deliver(ctx, dest, bytes(data), parents="create-dirs" in flags) is not None:
                code, error = 23, "Failure writing output to destination"
    if error and ("silent" not in flags or "show-error" in flags):
        _say(ctx.stderr, f"curl: ({code}) {error}")
    if "write-out" in opts.values:
        status = hops[-1][1].status if hops else 0
        variables = {
            "http_code": f"{status:03d}",
            "response_code": f"{status:03d}",
            "url_effective": hops[-1][0].url if hops else url,
            "size_download": str(size),
            "content_type": (header_value(hops[-1][1].headers, "Content-Type") or "")
            if hops
            else "",
            "num_redirects": str(max(len(hops) - 1, 0)),
            "method": hops[-1][0].method if hops else method,
            "exitcode": str(code),
            "errormsg": error,
        }
        ctx.stdout.write(_encode(await _write_out(ctx, opts, variables)))
    return code


async def _write_out(ctx: CommandContext, opts: _Curl, variables: dict[str, str]) -> str:
    template = opts.values["write-out"]
    if template.startswith("@"):
        template = (await _read_source(ctx, opts, template[1:])).decode("utf-8", "replace")

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return _WRITE_OUT_ESCAPES[match.group(0)]
        if name not in variables:
            _say(ctx.stderr, f"curl: unknown --write-out variable: '{name}'")
        return variables.get(name, "")

    return _WRITE_OUT.sub(expand, template)


def _curl_verbose(ctx: CommandContext, hops: _Hops, failure: _NetError | None) -> None:
    lines: list[str] = []
    for request, response in hops:
        lines += [f"* Connected to {request.host} port {request.port} (simulated)"]
        lines += [f"> {request.method} {request.path} HTTP/1.1"]
        lines += [f"> {name}: {value}" for name, value in request.headers.items()] + [">"]
        lines += [f"< {line}" for line in [_status_line(response.status), *_header_lines(response)]]
        lines += ["<"]
    if failure is not None and failure.detail:
        lines.append(f"* {failure.detail}")
    for line in lines:
        _say(ctx.stderr, line)


# -- wget ---------------------------------------------------------------------------------------

_WGET_FLAGS = {"quiet": "q", "server-response": "S", "no-check-certificate": "", "verbose": "v"}
_WGET_VALUES = {
    **{"output-document": "O", "timeout": "T", "tries": "t", "user-agent": "U"},
    **dict.fromkeys(["header", "post-data", "max-redirect"], ""),
}


@dataclass
class _Wget:
    urls: list[str]
    quiet: bool = False
    server_response: bool = False
    output: str | None = None
    headers: list[str] = field(default_factory=list)
    post: bytes | None = None
    user_agent: str = WGET_USER_AGENT
    max_redirects: int = WGET_MAX_REDIRECTS


def _wget_options(args: list[str]) -> _Wget:
    events, operands = _parse(args, _WGET_FLAGS, _WGET_VALUES)
    opts = _Wget(urls=operands)
    for name, value in events:
        if name == "quiet" or name == "server-response":
            setattr(opts, name.replace("-", "_"), value is True)
        elif isinstance(value, bool):
            continue  # accepted and meaningless here: certificates, verbosity
        elif name == "output-document":
            opts.output = value
        elif name == "header":
            opts.headers.append(value)
        elif name == "post-data":
            opts.post = _encode(value)
        elif name == "user-agent":
            opts.user_agent = value
        elif name == "max-redirect":
            if not (value.isascii() and value.isdigit()):
                raise _Usage("number", f"--{name}", value)
            opts.max_redirects = int(value)
    return opts


async def wget(
    ctx: CommandContext, args: list[str], *, egress: Sequence[str] | None, network: Network
) -> int:
    """Run ``wget ARGS`` against the simulated network; returns wget's exit status.

    0 success, 1 bad URL, 2 usage, 3 file I/O error, 4 network failure (refused by egress, no
    responder, the responder raised), 8 HTTP >= 400 or too many redirects; the lowest non-zero
    status of all URLs wins. ``-O FILE`` is truncated first and gets every body, as in wget.
    """
    try:
        opts = _wget_options(args)
    except _Usage as exc:
        if exc.kind == "number":
            _say(ctx.stderr, f"wget: {exc.arg}: Invalid number '{exc.letter}'.")
            return 2
        short, long = ("option requires an argument", "requires an argument")
        if exc.kind == "unknown":
            short, long = ("invalid option", "unrecognized option")
        text = f"{short} -- '{exc.letter}'" if exc.letter else f"{long} '{exc.arg}'"
        if exc.kind == "missing" and not exc.letter:
            text = f"option '{exc.arg}' requires an argument"
        for line in (f"wget: {text}", "Usage: wget [OPTION]... [URL]...", ""):
            _say(ctx.stderr, line)
        _say(ctx.stderr, "Try `wget --help' for more options.")
        return 2
    if not opts.urls:
        for line in ("wget: missing URL", "Usage: wget [OPTION]... [URL]...", ""):
            _say(ctx.stderr, line)
        _say(ctx.stderr, "Try `wget --help' for more options.")
        return 1
    if opts.output is not None and (err := _deliver(ctx, opts.output, b"")) is not None:
        _say(ctx.stderr, f"wget: {opts.output}: {err}")
        return 3
    status = 0
    for url in opts.urls:
        code = await _wget_transfer(ctx, opts, url, egress, network)
        status = min(status or code, code or status)
    return status


async def _wget_transfer(
    ctx: CommandContext, opts: _Wget, url: str, egress: Sequence[str] | None, network: Network
) -> int:
    def log(text: str) -> None:
        if not opts.quiet:
            _say(ctx.stderr, text)

    headers = {"User-Agent": opts.user_agent, "Accept": "*/*"}
    for raw in opts.headers:
        name, colon, value = raw.partition(":")
        if colon:
            _set_header(headers, name.strip(), value.strip())
    if opts.post is not None:
        if header_value(headers, "Content-Type") is None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        headers["Content-Length"] = str(len(opts.post))
    hops: _Hops = []
    failure: Exception | None = None
    try:
        method = "GET" if opts.post is None else "POST"
        request = _build_request(method, url, headers, opts.post or b"")
        await _follow(
            request,
            hops,
            follow=True,
            max_redirects=opts.max_redirects,
            keep_method=False,
            egress=egress,
            network=network,
        )
    except (_UrlError, _NetError, _TooManyRedirects) as exc:
        failure = exc
    for index, (request, response) in enumerate(hops):
        log(f"Connecting to {request.host}:{request.port}... connected.")
        status = response.status
        log(f"HTTP request sent, awaiting response... {status} {_reason(status)}".rstrip())
        if opts.server_response:
            for line in [_status_line(status), *_header_lines(response)]:
                log(f"  {line}")
        if index + 1 < len(hops) or isinstance(failure, _TooManyRedirects):
            log(f"Location: {header_value(response.headers, 'Location')} [following]")
    if isinstance(failure, _UrlError):
        problem = {"scheme": "Unsupported scheme", "port": "Bad port number"}
        log(f"{failure.url}: {problem.get(failure.kind, 'Invalid host name')}.")
        return 1
    if isinstance(failure, _NetError):
        host, port = failure.request.host, failure.request.port
        if failure.kind == "refused":
            log(f"Connecting to {host}:{port}... failed: Connection refused.")
        elif failure.kind == "unresolved":
            log(f"Resolving {host} ({host})... failed: Name or service not known.")
            log(f"wget: unable to resolve host address '{host}'")
        else:
            log(f"Connecting to {host}:{port}... connected.")
            log("HTTP request sent, awaiting response... Read error (Connection reset by peer).")
        return 4
    if failure is not None:
        log(f"{opts.max_redirects} redirections exceeded.")
        return 8
    response = hops[-1][1]
    if response.status >= 400:
        log(f"ERROR {response.status}: {_reason(response.status)}.")
        return 8
    body = _body(response)
    content_type = header_value(response.headers, "Content-Type")
    log(f"Length: {len(body)}" + (f" [{content_type}]" if content_type else ""))
    dest = opts.output if opts.output is not None else _wget_name(ctx, hops[0][0])
    shown = "STDOUT" if dest == "-" else dest
    log(f"Saving to: '{shown}'")
    err = _deliver(ctx, dest, body, append=opts.output is not None)
    if err is not None:
        log(f"Cannot write to '{shown}' ({err}).")
        return 3
    log("")
    size = f"[{len(body)}/{len(body)}]"
    log(f"written to stdout {size}" if dest == "-" else f"'{shown}' saved {size}")
    return 0


def _wget_name(ctx: CommandContext, request: SimulatedRequest) -> str:
    """Where wget saves: the URL's basename (query kept) or ``index.html``, never clobbering."""
    path, question, query = request.path.partition("?")
    name = (posixpath.basename(path) or "index.html") + question + query
    candidate, n = name, 0
    try:
        while ctx.fs.exists(FileSystem.normalize(candidate, ctx.cwd)):
            n += 1
            candidate = f"{name}.{n}"
    except FsError:
        pass  # an unusable name fails when written, with wget's message
    return candidate
