"""``curl`` inside a fake sandbox, over the simulated network of :mod:`fake_server.network`: the
options real scripts use, curl's exit codes and message forms, and never a progress meter or a
wall-clock time, so its output is deterministic. The request, redirect and output plumbing it
shares with ``wget`` is in :mod:`fake_server.http_tools`.

Example:
    >>> import asyncio
    >>> from fake_server.filesystem import FileSystem
    >>> from fake_server.network import Network, SimulatedResponse
    >>> from fake_server.registered_commands import CommandContext
    >>> from fake_server.shell import BufferSink, StdinReader
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

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from fake_server.filesystem import FileSystem, FsError
from fake_server.http_tools import (
    Hops,
    NetError,
    TooManyRedirects,
    UrlError,
    UsageError,
    basic_auth,
    body_bytes,
    build_request,
    deliver,
    encode,
    fetch,
    header_lines,
    parse_options,
    say,
    set_header,
    status_line,
)
from fake_server.network import Network, header_value

if TYPE_CHECKING:
    # Only for annotations: shell.py imports this module (via sandbox_commands) to register curl.
    from fake_server.registered_commands import CommandContext

__all__ = ["curl"]

CURL_MAX_REDIRECTS = 10
CURL_USER_AGENT = "curl/8.5.0"
CURL_TRY_HELP = "curl: try 'curl --help' for more information"
REFUSED = "Connection refused (blocked by the sandbox's egress rules)"
NO_RESPONDER = "(no responder is registered for it in the fake)"

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
    events, operands = parse_options(args, _CURL_FLAGS, _CURL_VALUES)
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
                raise UsageError("number", f"--{name}") from None
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
    except UsageError as exc:
        say(ctx.stderr, f"curl: option {exc.arg}: {_CURL_USAGE[exc.kind]}")
        say(ctx.stderr, CURL_TRY_HELP)
        return 2
    if not opts.urls:
        say(ctx.stderr, "curl: no URL specified!")
        say(ctx.stderr, CURL_TRY_HELP)
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
            raw = encode(text)
        elif "@" in value:
            key, _, path = value.partition("@")
            raw = await _read_source(ctx, opts, path)
        else:
            key, raw = "", encode(value)
        escaped = quote(raw, safe="").encode()
        return f"{key}=".encode() + escaped if key else escaped
    if name == "data-raw" or not value.startswith("@"):
        return encode(value)
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
            say(ctx.stderr, f"Warning: {warning}")
        return b""


def _curl_headers(opts: _Curl, body: bytes | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if "user" in opts.values:
        user, _, password = opts.values["user"].partition(":")
        headers["Authorization"] = basic_auth(f"{user}:{password}")
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
            set_header(headers, name.strip(), value.strip() or None)
        elif raw.endswith(";"):  # "Name;" sends it empty
            set_header(headers, raw[:-1].strip(), "")
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
    hops: Hops = []
    code, error = 0, ""
    failure: NetError | None = None
    try:
        request = build_request(method, url, _curl_headers(opts, body), body or b"")
        url = request.url
        await fetch(
            request,
            hops,
            follow="location" in flags,
            max_redirects=max_redirects,
            keep_method="request" in opts.values,
            egress=egress,
            network=network,
        )
    except UrlError as exc:
        code, error = 3, "URL rejected: Malformed input to a URL function"
        if exc.kind == "scheme":
            code, error = 1, f'Protocol "{exc.scheme}" not supported'
        elif exc.kind == "port":
            error = "URL rejected: Port number was not a decimal number between 0 and 65535"
    except NetError as exc:
        failure, host, port = exc, exc.request.host, exc.request.port
        if exc.kind == "refused":
            code, error = 7, f"Failed to connect to {host} port {port} after 0 ms: {REFUSED}"
        elif exc.kind == "unresolved":
            code, error = 6, f"Could not resolve host: {host} {NO_RESPONDER}"
        else:
            code, error = 56, "Recv failure: Connection reset by peer"
    except TooManyRedirects:
        code, error = 47, f"Maximum ({max_redirects}) redirects followed"
    if "verbose" in flags:
        _curl_verbose(ctx, hops, failure)
    size = 0
    if hops and not code:
        final = hops[-1][1]
        data = bytearray()
        if flags & {"include", "head"}:
            for _, response in hops:
                lines = [status_line(response.status), *header_lines(response), "", ""]
                data += encode("\r\n".join(lines))
        if "head" not in flags:
            size = len(body_bytes(final))
            data += body_bytes(final)
        failed = final.status >= 400 and bool(flags & {"fail", "fail-with-body"})
        if failed:
            code, error = 22, f"The requested URL returned error: {final.status}"
        if not failed or "fail-with-body" in flags:
            dest = output if output is not None else posixpath.basename(urlsplit(url).path)
            if not dest:
                code, error = 23, "Remote file name has no length!"
            elif deliver(ctx, dest, bytes(data), parents="create-dirs" in flags) is not None:
                code, error = 23, "Failure writing output to destination"
    if error and ("silent" not in flags or "show-error" in flags):
        say(ctx.stderr, f"curl: ({code}) {error}")
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
        ctx.stdout.write(encode(await _write_out(ctx, opts, variables)))
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
            say(ctx.stderr, f"curl: unknown --write-out variable: '{name}'")
        return variables.get(name, "")

    return _WRITE_OUT.sub(expand, template)


def _curl_verbose(ctx: CommandContext, hops: Hops, failure: NetError | None) -> None:
    lines: list[str] = []
    for request, response in hops:
        lines += [f"* Connected to {request.host} port {request.port} (simulated)"]
        lines += [f"> {request.method} {request.path} HTTP/1.1"]
        lines += [f"> {name}: {value}" for name, value in request.headers.items()] + [">"]
        lines += [f"< {line}" for line in [status_line(response.status), *header_lines(response)]]
        lines += ["<"]
    if failure is not None and failure.detail:
        lines.append(f"* {failure.detail}")
    for line in lines:
        say(ctx.stderr, line)
