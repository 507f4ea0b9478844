"""``wget`` inside a fake sandbox, over the simulated network of :mod:`fake_server.network`: the
options real scripts use, wget's exit codes and log lines, and never a progress bar or a
wall-clock time, so its output is deterministic. The request, redirect and output plumbing it
shares with ``curl`` is in :mod:`fake_server.http_tools`.

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
    >>> argv = ["-qO-", "https://api.example.com/v1?x=1"]
    >>> asyncio.run(wget(ctx, argv, egress=["api.example.com:443"], network=network))
    0
    >>> out.getvalue()
    b'hi /v1?x=1\\n'
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fake_server.filesystem import FileSystem, FsError
from fake_server.http_tools import (
    Hops,
    NetError,
    TooManyRedirects,
    UrlError,
    UsageError,
    body_bytes,
    build_request,
    deliver,
    encode,
    fetch,
    header_lines,
    parse_options,
    reason_phrase,
    say,
    set_header,
    status_line,
)
from fake_server.network import Network, SimulatedRequest, header_value

if TYPE_CHECKING:
    # Only for annotations: shell.py imports this module (via sandbox_commands) to register wget.
    from fake_server.registered_commands import CommandContext

__all__ = ["wget"]

WGET_MAX_REDIRECTS = 20
WGET_USER_AGENT = "Wget/1.21.4"


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
    events, operands = parse_options(args, _WGET_FLAGS, _WGET_VALUES)
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
            opts.post = encode(value)
        elif name == "user-agent":
            opts.user_agent = value
        elif name == "max-redirect":
            if not (value.isascii() and value.isdigit()):
                raise UsageError("number", f"--{name}", value)
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
    except UsageError as exc:
        if exc.kind == "number":
            say(ctx.stderr, f"wget: {exc.arg}: Invalid number '{exc.letter}'.")
            return 2
        short, long = ("option requires an argument", "requires an argument")
        if exc.kind == "unknown":
            short, long = ("invalid option", "unrecognized option")
        text = f"{short} -- '{exc.letter}'" if exc.letter else f"{long} '{exc.arg}'"
        if exc.kind == "missing" and not exc.letter:
            text = f"option '{exc.arg}' requires an argument"
        for line in (f"wget: {text}", "Usage: wget [OPTION]... [URL]...", ""):
            say(ctx.stderr, line)
        say(ctx.stderr, "Try `wget --help' for more options.")
        return 2
    if not opts.urls:
        for line in ("wget: missing URL", "Usage: wget [OPTION]... [URL]...", ""):
            say(ctx.stderr, line)
        say(ctx.stderr, "Try `wget --help' for more options.")
        return 1
    if opts.output is not None and (err := deliver(ctx, opts.output, b"")) is not None:
        say(ctx.stderr, f"wget: {opts.output}: {err}")
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
            say(ctx.stderr, text)

    headers = {"User-Agent": opts.user_agent, "Accept": "*/*"}
    for raw in opts.headers:
        name, colon, value = raw.partition(":")
        if colon:
            set_header(headers, name.strip(), value.strip())
    if opts.post is not None:
        if header_value(headers, "Content-Type") is None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        headers["Content-Length"] = str(len(opts.post))
    hops: Hops = []
    failure: Exception | None = None
    try:
        method = "GET" if opts.post is None else "POST"
        request = build_request(method, url, headers, opts.post or b"")
        await fetch(
            request,
            hops,
            follow=True,
            max_redirects=opts.max_redirects,
            keep_method=False,
            egress=egress,
            network=network,
        )
    except (UrlError, NetError, TooManyRedirects) as exc:
        failure = exc
    for index, (request, response) in enumerate(hops):
        log(f"Connecting to {request.host}:{request.port}... connected.")
        status = response.status
        log(f"HTTP request sent, awaiting response... {status} {reason_phrase(status)}".rstrip())
        if opts.server_response:
            for line in [status_line(status), *header_lines(response)]:
                log(f"  {line}")
        if index + 1 < len(hops) or isinstance(failure, TooManyRedirects):
            log(f"Location: {header_value(response.headers, 'Location')} [following]")
    if isinstance(failure, UrlError):
        problem = {"scheme": "Unsupported scheme", "port": "Bad port number"}
        log(f"{failure.url}: {problem.get(failure.kind, 'Invalid host name')}.")
        return 1
    if isinstance(failure, NetError):
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
        log(f"ERROR {response.status}: {reason_phrase(response.status)}.")
        return 8
    body = body_bytes(response)
    content_type = header_value(response.headers, "Content-Type")
    log(f"Length: {len(body)}" + (f" [{content_type}]" if content_type else ""))
    dest = opts.output if opts.output is not None else _wget_name(ctx, hops[0][0])
    shown = "STDOUT" if dest == "-" else dest
    log(f"Saving to: '{shown}'")
    err = deliver(ctx, dest, body, append=opts.output is not None)
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
