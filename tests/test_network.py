"""The simulated network: egress rules, responder lookup, and the ``curl``/``wget`` commands."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from fake_server.curl_command import curl
from fake_server.filesystem import FileSystem
from fake_server.network import (
    Network,
    Responder,
    SimulatedRequest,
    SimulatedResponse,
    egress_allows,
)
from fake_server.registered_commands import CommandContext
from fake_server.shell import BufferSink, StdinReader
from fake_server.wget_command import wget

API = "api.example.com"
CURL_UA = "curl/8.5.0"


@dataclass
class Result:
    status: int
    out: str
    err: str


class Box:
    """One sandbox's filesystem and the network its commands see; records every request."""

    def __init__(self) -> None:
        self.fs = FileSystem()
        self.network = Network()
        self.seen: list[SimulatedRequest] = []

    def serve(
        self, host: str = API, status: int = 200, body: bytes | str = "ok\n", **headers: str
    ) -> None:
        """Answer ``host`` with one fixed response (``_`` in header names becomes ``-``)."""
        fixed = {name.replace("_", "-"): value for name, value in headers.items()}
        self.route(host, lambda req: SimulatedResponse(status, body, dict(fixed)))

    def route(self, host: str, responder: Responder) -> None:
        def recording(request: SimulatedRequest) -> object:
            self.seen.append(request)
            return responder(request)

        self.network.register(host, recording)  # type: ignore[arg-type]

    async def run(
        self,
        tool: str,
        *args: str,
        egress: Sequence[str] | None = None,
        stdin: bytes = b"",
        cwd: str = "/root",
    ) -> Result:
        out, err = BufferSink(), BufferSink()
        ctx = CommandContext(self.fs, cwd, {}, StdinReader(stdin), out, err, asyncio.sleep)
        command = curl if tool == "curl" else wget
        status = await command(ctx, list(args), egress=egress, network=self.network)
        return Result(status, out.getvalue().decode(), err.getvalue().decode())

    async def curl(self, *args: str, **kwargs: object) -> Result:
        return await self.run("curl", *args, **kwargs)  # type: ignore[arg-type]

    async def wget(self, *args: str, **kwargs: object) -> Result:
        return await self.run("wget", *args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def box() -> Box:
    return Box()


def redirects(chain: dict[str, tuple[int, str]]) -> Responder:
    """A responder answering each path in ``chain`` with ``(status, Location)``, else 200."""

    def respond(request: SimulatedRequest) -> SimulatedResponse:
        if request.path in chain:
            status, location = chain[request.path]
            return SimulatedResponse(status, f"moved {request.path}\n", {"Location": location})
        return SimulatedResponse(200, f"final {request.method} {request.path}\n")

    return respond


# -- egress -------------------------------------------------------------------------------------


@pytest.mark.parametrize("egress", [None, [], ["*"], ["other.example.org", "*"]])
def test_allow_all_forms_allow_any_host_and_port(egress: list[str] | None) -> None:
    assert egress_allows(egress, "anything.example.net", 1234)
    assert egress_allows(egress, "10.1.2.3", 22)


@pytest.mark.parametrize(
    ("rules", "host", "port", "allowed"),
    [
        # host: every port, case-insensitive, exact
        (["api.example.com"], "api.example.com", 443, True),
        (["api.example.com"], "api.example.com", 8080, True),
        (["API.Example.com"], "api.EXAMPLE.com", 80, True),
        (["api.example.com"], "example.com", 443, False),
        (["api.example.com"], "v2.api.example.com", 443, False),
        (["api.example.com"], "api.example.com.evil.net", 443, False),
        # host:port
        (["api.example.com:443"], "api.example.com", 443, True),
        (["api.example.com:443"], "api.example.com", 80, False),
        (["api.example.com:https"], "api.example.com", 443, False),
        # wildcard: subdomains only
        (["*.example.com"], "a.example.com", 443, True),
        (["*.example.com"], "a.b.example.com", 443, True),
        (["*.example.com"], "example.com", 443, False),
        (["*.example.com"], "badexample.com", 443, False),
        (["*.example.com:443"], "a.example.com", 80, False),
        # ip and ip:port
        (["10.0.0.5"], "10.0.0.5", 22, True),
        (["10.0.0.5"], "10.0.0.6", 22, False),
        (["10.0.0.5:8080"], "10.0.0.5", 8080, True),
        (["10.0.0.5:8080"], "10.0.0.5", 80, False),
        # cidr and cidr:port
        (["240.0.0.0/4"], "250.1.2.3", 443, True),
        (["240.0.0.0/4"], "10.0.0.1", 443, False),
        (["10.0.0.0/8:8080"], "10.200.0.1", 8080, True),
        (["10.0.0.0/8:8080"], "10.200.0.1", 80, False),
        (["10.0.0.0/8:8080"], "11.0.0.1", 8080, False),
        # IPv6: bare, cidr, bracketed with a port; a v4 address never matches a v6 network
        (["fd00::/8"], "fd00::1", 443, True),
        (["::1"], "[::1]", 80, True),
        (["[::1]:8080"], "::1", 8080, True),
        (["[::1]:8080"], "::1", 80, False),
        (["::/0"], "10.0.0.1", 80, False),
        # no DNS: a hostname only matches host rules, an IP literal only ip/cidr rules
        (["10.0.0.0/8"], "ten.example.com", 80, False),
        (["localhost"], "127.0.0.1", 80, False),
        # the first matching rule of several wins
        (["nope.example.org", "api.example.com:443"], "api.example.com", 443, True),
    ],
)
def test_egress_rule_forms(rules: list[str], host: str, port: int, allowed: bool) -> None:
    assert egress_allows(rules, host, port) is allowed


# -- responder lookup ---------------------------------------------------------------------------


def _named(name: str) -> Responder:
    return lambda request: SimulatedResponse(body=name)


def test_lookup_prefers_host_port_then_host_then_closest_wildcard() -> None:
    network = Network()
    exact_port, exact, near, far = (_named(n) for n in ("port", "host", "near", "far"))
    network.register("api.example.com:8443", exact_port)
    network.register("API.example.com", exact)
    network.register("*.example.com", far)
    network.register("*.eu.example.com", near)
    assert network.responder_for("api.example.com", 8443) is exact_port
    assert network.responder_for("api.example.com", 443) is exact
    assert network.responder_for("Api.Example.Com", 443) is exact
    assert network.responder_for("x.eu.example.com", 443) is near
    assert network.responder_for("x.us.example.com", 443) is far
    assert network.responder_for("example.com", 443) is None


def test_wildcard_with_port_beats_wildcard_without() -> None:
    network = Network()
    plain, ported = _named("plain"), _named("ported")
    network.register("*.example.com", plain)
    network.register("*.example.com:8080", ported)
    assert network.responder_for("a.example.com", 8080) is ported
    assert network.responder_for("a.example.com", 80) is plain


def test_register_replaces_unregister_and_clear_forget() -> None:
    network = Network()
    first, second = _named("1"), _named("2")
    network.register(API, first)
    network.register(API.upper(), second)
    assert network.responder_for(API, 80) is second
    network.unregister("never-registered.example.com")
    network.unregister(API)
    assert network.responder_for(API, 80) is None
    network.register("a.example.com", first)
    network.register("[::1]", second)
    assert network.responder_for("::1", 80) is second
    network.clear()
    assert network.responder_for("a.example.com", 80) is None
    assert network.responder_for("::1", 80) is None


# -- curl: fetching -----------------------------------------------------------------------------


async def test_curl_get_writes_the_body_to_stdout(box: Box) -> None:
    box.serve(body="hello\n")
    result = await box.curl(f"https://{API}/v1/items?limit=2")
    assert result == Result(0, "hello\n", "")
    [request] = box.seen
    assert (request.method, request.scheme, request.host, request.port) == (
        "GET",
        "https",
        API,
        443,
    )
    assert request.path == "/v1/items?limit=2"
    assert request.url == f"https://{API}/v1/items?limit=2"
    assert request.headers == {"Host": API, "User-Agent": CURL_UA, "Accept": "*/*"}
    assert request.body == b""


async def test_curl_defaults_to_http_on_port_80_and_keeps_explicit_ports(box: Box) -> None:
    box.serve()
    await box.curl(API)
    await box.curl(f"http://{API}:8080/x")
    assert [(r.scheme, r.port, r.url) for r in box.seen] == [
        ("http", 80, f"http://{API}/"),
        ("http", 8080, f"http://{API}:8080/x"),
    ]
    assert box.seen[1].headers["Host"] == f"{API}:8080"


async def test_curl_awaits_async_responders_and_encodes_str_bodies(box: Box) -> None:
    async def respond(request: SimulatedRequest) -> SimulatedResponse:
        await asyncio.sleep(0)
        return SimulatedResponse(body="héllo ✓")

    box.network.register(API, respond)
    result = await box.curl("-s", API)
    assert result.status == 0
    assert result.out == "héllo ✓"


async def test_curl_fetches_every_url_in_turn(box: Box) -> None:
    box.route(API, lambda req: SimulatedResponse(body=req.path))
    result = await box.curl(f"{API}/a", f"{API}/b")
    assert result == Result(0, "/a/b", "")


# -- curl: request bodies -----------------------------------------------------------------------


async def test_curl_data_posts_form_and_joins_several_with_ampersand(box: Box) -> None:
    box.serve()
    result = await box.curl("-d", "a=1", "--data=b=2", "--data-raw", "@c", API)
    assert result.status == 0
    [request] = box.seen
    assert request.method == "POST"
    assert request.body == b"a=1&b=2&@c"
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert request.headers["Content-Length"] == "10"


async def test_curl_data_from_a_file_strips_newlines_but_data_binary_keeps_them(box: Box) -> None:
    box.serve()
    box.fs.write("/root/body.txt", b"x=1\ny=2\r\n")
    await box.curl("-d", "@body.txt", API)
    await box.curl("--data-binary", "@/root/body.txt", API)
    assert [r.body for r in box.seen] == [b"x=1y=2", b"x=1\ny=2\r\n"]


async def test_curl_data_from_stdin(box: Box) -> None:
    box.serve()
    await box.curl("--data-binary", "@-", API, stdin=b'{"a": 1}\n')
    assert box.seen[0].body == b'{"a": 1}\n'


async def test_curl_data_from_a_missing_file_warns_and_posts_nothing(box: Box) -> None:
    box.serve()
    result = await box.curl("-d", "@nope.txt", API)
    assert result.status == 0
    assert result.err == (
        'Warning: Couldn\'t read data from file "nope.txt", this makes an empty POST.\n'
    )
    assert (box.seen[0].method, box.seen[0].body) == ("POST", b"")


async def test_curl_json_sets_body_and_json_headers(box: Box) -> None:
    box.serve()
    await box.curl("--json", '{"k": "v"}', API)
    [request] = box.seen
    assert (request.method, request.body) == ("POST", b'{"k": "v"}')
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Accept"] == "application/json"


async def test_curl_request_method_attached_separate_and_long(box: Box) -> None:
    box.serve()
    await box.curl("-XPUT", "-d", "x", API)
    await box.curl("-X", "DELETE", API)
    await box.curl("--request=PATCH", API)
    assert [(r.method, r.body) for r in box.seen] == [
        ("PUT", b"x"),
        ("DELETE", b""),
        ("PATCH", b""),
    ]


async def test_curl_get_moves_data_into_the_query(box: Box) -> None:
    box.serve()
    await box.curl("-G", "-d", "q=1", "--data-urlencode", "name=a b&c", f"{API}/search")
    [request] = box.seen
    assert (request.method, request.path, request.body) == (
        "GET",
        "/search?q=1&name=a%20b%26c",
        b"",
    )


# -- curl: request headers ----------------------------------------------------------------------


async def test_curl_headers_reach_the_responder_with_their_case(box: Box) -> None:
    box.serve()
    await box.curl(
        "-H",
        "X-Trace-ID: abc 123",
        "--header=accept: text/plain",
        "-H",
        "User-Agent:",
        "-H",
        "X-Empty;",
        API,
    )
    [request] = box.seen
    assert request.headers == {
        "Host": API,
        "X-Trace-ID": "abc 123",
        "accept": "text/plain",
        "X-Empty": "",
    }
    assert request.header("x-trace-id") == "abc 123"


async def test_curl_user_agent_and_basic_auth(box: Box) -> None:
    box.serve()
    await box.curl("-A", "probe/1.0", "-u", "alice:s3cret", API)
    await box.curl(f"http://bob:pw@{API}/")
    first, second = box.seen
    assert first.headers["User-Agent"] == "probe/1.0"
    assert first.headers["Authorization"] == "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert second.headers["Authorization"] == "Basic " + base64.b64encode(b"bob:pw").decode()
    assert second.url == f"http://{API}/"


# -- curl: HTTP errors and -f -------------------------------------------------------------------


async def test_curl_without_fail_prints_an_error_body_and_succeeds(box: Box) -> None:
    box.serve(status=404, body="not here\n")
    assert await box.curl(API) == Result(0, "not here\n", "")


@pytest.mark.parametrize(
    ("flags", "stderr"),
    [
        (["-f"], "curl: (22) The requested URL returned error: 404\n"),
        (["-fsS"], "curl: (22) The requested URL returned error: 404\n"),
        (["-sSf"], "curl: (22) The requested URL returned error: 404\n"),
        (["-fs"], ""),
        (["--fail", "--silent"], ""),
    ],
)
async def test_curl_fail_exits_22_without_the_body(box: Box, flags: list[str], stderr: str) -> None:
    box.serve(status=404, body="not here\n")
    assert await box.curl(*flags, API) == Result(22, "", stderr)


async def test_curl_fail_does_not_create_the_output_file(box: Box) -> None:
    box.serve(status=500, body="boom")
    result = await box.curl("-fsS", "-o", "out.txt", API)
    assert result.status == 22
    assert result.err == "curl: (22) The requested URL returned error: 500\n"
    assert not box.fs.exists("/root/out.txt")


async def test_curl_fail_with_body_prints_the_body_and_exits_22(box: Box) -> None:
    box.serve(status=400, body="bad input")
    result = await box.curl("-s", "--fail-with-body", API)
    assert (result.status, result.out) == (22, "bad input")


async def test_curl_fail_accepts_success(box: Box) -> None:
    box.serve(status=201, body="made")
    assert await box.curl("-fsSL", API) == Result(0, "made", "")


# -- curl: redirects ----------------------------------------------------------------------------


async def test_curl_without_location_prints_the_redirect_itself(box: Box) -> None:
    box.route(API, redirects({"/a": (302, "/b")}))
    assert await box.curl(f"{API}/a") == Result(0, "moved /a\n", "")
    assert [r.path for r in box.seen] == ["/a"]


async def test_curl_location_follows_relative_and_absolute_redirects(box: Box) -> None:
    box.route(API, redirects({"/a": (301, "/b"), "/b": (307, f"https://{API}/c?x=1")}))
    result = await box.curl("-sL", "-w", "%{num_redirects} %{url_effective}", f"{API}/a")
    assert result == Result(0, f"final GET /c?x=1\n2 https://{API}/c?x=1", "")
    assert [(r.scheme, r.path) for r in box.seen] == [
        ("http", "/a"),
        ("http", "/b"),
        ("https", "/c?x=1"),
    ]


async def test_curl_redirect_turns_post_into_get_but_307_keeps_it(box: Box) -> None:
    box.route(API, redirects({"/303": (303, "/done"), "/307": (307, "/done")}))
    first = await box.curl("-L", "-d", "x=1", f"{API}/303")
    second = await box.curl("-L", "-d", "x=1", f"{API}/307")
    assert (first.out, second.out) == ("final GET /done\n", "final POST /done\n")
    assert box.seen[1].body == b""
    assert "Content-Type" not in box.seen[1].headers
    assert box.seen[3].body == b"x=1"


async def test_curl_follows_exactly_ten_redirects(box: Box) -> None:
    box.route(API, redirects({f"/{i}": (302, f"/{i + 1}") for i in range(10)}))
    result = await box.curl("-sSL", f"{API}/0")
    assert result == Result(0, "final GET /10\n", "")
    assert len(box.seen) == 11


async def test_curl_gives_up_after_ten_redirects(box: Box) -> None:
    box.route(API, redirects({f"/{i}": (302, f"/{i + 1}") for i in range(11)}))
    result = await box.curl("-L", "-w", "%{http_code}", f"{API}/0")
    assert result == Result(47, "302", "curl: (47) Maximum (10) redirects followed\n")
    assert len(box.seen) == 11


async def test_curl_max_redirs_lowers_the_limit(box: Box) -> None:
    box.route(API, redirects({"/0": (302, "/1"), "/1": (302, "/2"), "/2": (302, "/3")}))
    result = await box.curl("-L", "--max-redirs", "2", f"{API}/0")
    assert result == Result(47, "", "curl: (47) Maximum (2) redirects followed\n")


async def test_curl_redirect_to_a_host_outside_egress_is_refused(box: Box) -> None:
    box.route(API, redirects({"/": (302, "http://evil.example.net/steal")}))
    box.serve("evil.example.net")
    result = await box.curl("-sSL", API, egress=[API])
    assert result.status == 7
    assert result.err.startswith("curl: (7) Failed to connect to evil.example.net port 80")
    assert [r.host for r in box.seen] == [API]


async def test_curl_drops_credentials_on_a_cross_host_redirect(box: Box) -> None:
    box.route(API, redirects({"/": (302, "http://other.example.com/")}))
    box.serve("other.example.com")
    await box.curl("-L", "-u", "a:b", API)
    assert "Authorization" in box.seen[0].headers
    assert box.seen[1].headers == {
        "Host": "other.example.com",
        "User-Agent": CURL_UA,
        "Accept": "*/*",
    }


# -- curl: output -------------------------------------------------------------------------------


async def test_curl_output_writes_the_file_and_nothing_to_stdout(box: Box) -> None:
    box.serve(body=b"\x00binary\xff")
    result = await box.curl("-sSLo", "dl/../file.bin", API)
    assert result == Result(0, "", "")
    assert box.fs.read("/root/file.bin") == b"\x00binary\xff"
    assert (await box.curl("--output", "/tmp/x", API)).status == 0
    assert box.fs.read("/tmp/x") == b"\x00binary\xff"


async def test_curl_output_into_a_missing_directory_fails_23(box: Box) -> None:
    box.serve()
    result = await box.curl("-o", "/nope/file", API)
    assert result == Result(23, "", "curl: (23) Failure writing output to destination\n")
    assert (await box.curl("--create-dirs", "-o", "/made/here/file", API)).status == 0
    assert box.fs.read("/made/here/file") == b"ok\n"


async def test_curl_remote_name_saves_under_the_url_basename(box: Box) -> None:
    box.serve(body="tarball")
    result = await box.curl("-fsSLO", f"{API}/releases/v1.tar.gz?sig=1", cwd="/tmp")
    assert result == Result(0, "", "")
    assert box.fs.read("/tmp/v1.tar.gz") == b"tarball"
    nameless = await box.curl("-O", f"{API}/")
    assert nameless == Result(23, "", "curl: (23) Remote file name has no length!\n")


async def test_curl_write_out_http_code_to_dev_null(box: Box) -> None:
    box.serve(status=204, body="")
    result = await box.curl("-s", "-o", "/dev/null", "-w", "%{http_code}\\n", API)
    assert result == Result(0, "204\n", "")


async def test_curl_write_out_variables(box: Box) -> None:
    box.serve(body="12345", Content_Type="text/plain")
    template = "%{response_code}|%{url_effective}|%{size_download}|%{content_type}|100%%\\t."
    result = await box.curl("-s", "-w", template, f"{API}/p")
    assert result.out == f"12345200|http://{API}/p|5|text/plain|100%\t."


async def test_curl_write_out_reports_000_when_nothing_answered(box: Box) -> None:
    result = await box.curl("-s", "-w", "%{http_code} %{bogus}.", API, egress=["other.example.com"])
    assert result == Result(7, "000 .", "curl: unknown --write-out variable: 'bogus'\n")


async def test_curl_head_prints_only_the_headers(box: Box) -> None:
    box.serve(body="abc", Content_Type="text/plain")
    result = await box.curl("-I", API)
    assert result == Result(
        0, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n", ""
    )
    assert box.seen[0].method == "HEAD"


async def test_curl_include_prints_headers_then_body_for_every_hop(box: Box) -> None:
    box.route(API, redirects({"/": (302, "/next")}))
    result = await box.curl("-siL", API)
    assert result.out == (
        "HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 8\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\n"
        "final GET /next\n"
    )


async def test_curl_verbose_shows_request_and_response_lines(box: Box) -> None:
    box.serve(body="b")
    result = await box.curl("-sv", f"{API}/v")
    assert result.out == "b"
    assert result.err.splitlines() == [
        f"* Connected to {API} port 80 (simulated)",
        "> GET /v HTTP/1.1",
        f"> Host: {API}",
        f"> User-Agent: {CURL_UA}",
        "> Accept: */*",
        ">",
        "< HTTP/1.1 200 OK",
        "< Content-Length: 1",
        "<",
    ]


# -- curl: connection failures ------------------------------------------------------------------


async def test_curl_refused_by_egress_exits_7_without_asking_the_responder(box: Box) -> None:
    box.serve()
    result = await box.curl(f"https://{API}/", egress=[f"{API}:80"])
    assert result == Result(
        7,
        "",
        f"curl: (7) Failed to connect to {API} port 443 after 0 ms: Connection refused "
        "(blocked by the sandbox's egress rules)\n",
    )
    assert box.seen == []


async def test_curl_silent_hides_errors_unless_show_error(box: Box) -> None:
    quiet = await box.curl("-s", API, egress=["10.0.0.0/8"])
    shown = await box.curl("-sS", API, egress=["10.0.0.0/8"])
    assert (quiet.status, quiet.err) == (7, "")
    assert (shown.status, shown.err.startswith("curl: (7) ")) == (7, True)


async def test_curl_allowed_host_without_responder_exits_6(box: Box) -> None:
    result = await box.curl("-sS", "unknown.example.com")
    assert result == Result(
        6,
        "",
        "curl: (6) Could not resolve host: unknown.example.com "
        "(no responder is registered for it in the fake)\n",
    )


async def test_curl_raising_responder_is_a_reset_connection(box: Box) -> None:
    def explode(request: SimulatedRequest) -> SimulatedResponse:
        raise RuntimeError("responder bug")

    box.network.register(API, explode)
    result = await box.curl(API)
    assert result == Result(56, "", "curl: (56) Recv failure: Connection reset by peer\n")
    verbose = await box.curl("-v", API)
    assert "* responder raised RuntimeError: responder bug\n" in verbose.err


async def test_curl_responder_returning_the_wrong_type_is_a_reset_connection(box: Box) -> None:
    box.network.register(API, lambda req: "not a response")  # type: ignore[arg-type,return-value]
    assert (await box.curl("-s", API)).status == 56


# -- curl: usage errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (["--bogus", API], "curl: option --bogus: is unknown"),
        (["-sZ", API], "curl: option -sZ: is unknown"),
        (["-h"], "curl: option -h: is unknown"),
        (["--silent=yes", API], "curl: option --silent=yes: is unknown"),
        ([API, "-o"], "curl: option -o: requires parameter"),
        (["-m", "soon", API], "curl: option --max-time: expected a proper numerical parameter"),
        (["--retry", "1.5", API], "curl: option --retry: expected a proper numerical parameter"),
        ([], "curl: no URL specified!"),
        (["-sS"], "curl: no URL specified!"),
    ],
)
async def test_curl_usage_errors_exit_2(box: Box, args: list[str], first_line: str) -> None:
    box.serve()
    result = await box.curl(*args)
    assert result == Result(2, "", f"{first_line}\ncurl: try 'curl --help' for more information\n")
    assert box.seen == []


async def test_curl_accepts_the_options_it_ignores(box: Box) -> None:
    box.serve()
    args = ["-k", "--compressed", "--retry", "3", "--connect-timeout", "5", "-m2.5", "-g"]
    assert await box.curl(*args, "--no-progress-meter", "--", API) == Result(0, "ok\n", "")


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        ("ftp://files.example.com/a", 1, 'Protocol "ftp" not supported'),
        ("gopher://x/", 1, 'Protocol "gopher" not supported'),
        (
            f"http://{API}:99999/",
            3,
            "URL rejected: Port number was not a decimal number between 0 and 65535",
        ),
        ("http:///path", 3, "URL rejected: Malformed input to a URL function"),
    ],
)
async def test_curl_rejects_bad_urls(box: Box, url: str, code: int, message: str) -> None:
    assert await box.curl(url) == Result(code, "", f"curl: ({code}) {message}\n")


# -- wget ---------------------------------------------------------------------------------------


async def test_wget_quiet_to_stdout(box: Box) -> None:
    box.serve(body="payload")
    assert await box.wget("-qO-", f"{API}/x") == Result(0, "payload", "")
    assert await box.wget("-q", "-O", "-", f"{API}/x") == Result(0, "payload", "")
    assert [r.headers["User-Agent"] for r in box.seen] == ["Wget/1.21.4"] * 2


async def test_wget_output_file_with_its_summary(box: Box) -> None:
    box.serve(body="12345", Content_Type="text/plain")
    result = await box.wget("-O", "/tmp/page.txt", f"http://{API}/page")
    assert box.fs.read("/tmp/page.txt") == b"12345"
    assert result == Result(
        0,
        "",
        f"Connecting to {API}:80... connected.\n"
        "HTTP request sent, awaiting response... 200 OK\n"
        "Length: 5 [text/plain]\n"
        "Saving to: '/tmp/page.txt'\n"
        "\n"
        "'/tmp/page.txt' saved [5/5]\n",
    )


async def test_wget_default_name_is_the_basename_and_never_clobbers(box: Box) -> None:
    box.serve(body="v")
    await box.wget("-q", f"{API}/dist/tool.sh")
    second = await box.wget(f"{API}/dist/tool.sh")
    await box.wget("-q", f"https://{API}/")
    assert box.fs.read("/root/tool.sh") == b"v"
    assert box.fs.read("/root/tool.sh.1") == b"v"
    assert box.fs.read("/root/index.html") == b"v"
    assert second.err.endswith("'tool.sh.1' saved [1/1]\n")


async def test_wget_headers_and_post_data_reach_the_responder(box: Box) -> None:
    box.serve()
    headers = ["--header=X-Token: t1", "--header", "Accept: text/csv"]
    await box.wget("-q", *headers, "--post-data", "a=1", API)
    [request] = box.seen
    assert (request.method, request.body) == ("POST", b"a=1")
    assert request.headers == {
        "Host": API,
        "User-Agent": "Wget/1.21.4",
        "Accept": "text/csv",
        "X-Token": "t1",
        "Content-Type": "application/x-www-form-urlencoded",
        "Content-Length": "3",
    }


async def test_wget_follows_redirects_and_prints_server_headers(box: Box) -> None:
    box.route(API, redirects({"/old": (301, "/new")}))
    result = await box.wget("-S", "-T", "5", "-O-", f"{API}/old")
    assert result.out == "final GET /new\n"
    assert result.err.splitlines()[:9] == [
        f"Connecting to {API}:80... connected.",
        "HTTP request sent, awaiting response... 301 Moved Permanently",
        "  HTTP/1.1 301 Moved Permanently",
        "  Location: /new",
        "  Content-Length: 11",
        "Location: /new [following]",
        f"Connecting to {API}:80... connected.",
        "HTTP request sent, awaiting response... 200 OK",
        "  HTTP/1.1 200 OK",
    ]
    assert result.err.endswith("Saving to: 'STDOUT'\n\nwritten to stdout [15/15]\n")


async def test_wget_refused_by_egress_exits_4(box: Box) -> None:
    box.serve()
    result = await box.wget("-O-", API, egress=["*.internal"])
    assert result == Result(4, "", f"Connecting to {API}:80... failed: Connection refused.\n")
    assert box.seen == []


async def test_wget_without_responder_exits_4(box: Box) -> None:
    result = await box.wget("-O-", "nobody.example.com")
    assert result.status == 4
    assert (
        result.err.splitlines()[-1] == "wget: unable to resolve host address 'nobody.example.com'"
    )


async def test_wget_http_error_exits_8_and_saves_nothing(box: Box) -> None:
    box.serve(status=404, body="missing")
    result = await box.wget(f"{API}/gone.txt")
    assert result == Result(
        8,
        "",
        f"Connecting to {API}:80... connected.\n"
        "HTTP request sent, awaiting response... 404 Not Found\n"
        "ERROR 404: Not Found.\n",
    )
    assert not box.fs.exists("/root/gone.txt")


async def test_wget_output_file_is_truncated_even_when_the_fetch_fails(box: Box) -> None:
    box.serve(status=500)
    box.fs.write("/root/out", b"old")
    assert (await box.wget("-qO", "out", API)).status == 8
    assert box.fs.read("/root/out") == b""


async def test_wget_quiet_silences_errors_but_keeps_the_status(box: Box) -> None:
    def explode(request: SimulatedRequest) -> SimulatedResponse:
        raise ValueError("nope")

    box.network.register(API, explode)
    assert await box.wget("-q", API) == Result(4, "", "")


async def test_wget_lowest_nonzero_status_wins(box: Box) -> None:
    box.serve(status=404)
    assert (await box.wget("-qO-", API, "nobody.example.com")).status == 4


async def test_wget_unopenable_output_document_exits_3_before_fetching(box: Box) -> None:
    box.serve()
    # Like wget, which opens -O's file at start-up, this is reported even with -q.
    result = await box.wget("-q", "-O", "/no/such/dir/f", API)
    assert result == Result(3, "", "wget: /no/such/dir/f: No such file or directory\n")
    assert box.seen == []


async def test_wget_write_failure_of_the_default_name_exits_3(box: Box) -> None:
    box.serve(body="x")
    result = await box.wget(f"{API}/f.txt", cwd="/gone")
    assert result.status == 3
    assert result.err.endswith(
        "Saving to: 'f.txt'\nCannot write to 'f.txt' (No such file or directory).\n"
    )


@pytest.mark.parametrize(
    ("args", "status", "first_line"),
    [
        (["--bogus", API], 2, "wget: unrecognized option '--bogus'"),
        (["-qZ", API], 2, "wget: invalid option -- 'Z'"),
        ([API, "-O"], 2, "wget: option requires an argument -- 'O'"),
        ([API, "--header"], 2, "wget: option '--header' requires an argument"),
        (["-q"], 1, "wget: missing URL"),
    ],
)
async def test_wget_usage_errors(box: Box, args: list[str], status: int, first_line: str) -> None:
    result = await box.wget(*args)
    assert result == Result(
        status,
        "",
        f"{first_line}\nUsage: wget [OPTION]... [URL]...\n\nTry `wget --help' for more options.\n",
    )


async def test_wget_rejects_unsupported_schemes(box: Box) -> None:
    assert await box.wget("ftp://files.example.com/a") == Result(
        1, "", "ftp://files.example.com/a: Unsupported scheme.\n"
    )


async def test_wget_max_redirect_bounds_the_chain(box: Box) -> None:
    box.route(API, redirects({"/0": (302, "/1"), "/1": (302, "/2")}))
    result = await box.wget("-O-", "--max-redirect=1", f"{API}/0")
    assert result.status == 8
    assert result.err.splitlines()[-2:] == ["Location: /2 [following]", "1 redirections exceeded."]
    assert [r.path for r in box.seen] == ["/0", "/1"]
    invalid = await box.wget("--max-redirect", "many", API)
    assert invalid == Result(2, "", "wget: --max-redirect: Invalid number 'many'.\n")


async def test_async_raising_responder_is_a_reset_for_both_tools(box: Box) -> None:
    async def explode(request: SimulatedRequest) -> SimulatedResponse:
        await asyncio.sleep(0)
        raise OSError("down")

    box.network.register(API, explode)
    assert (await box.curl("-sS", API)).err == "curl: (56) Recv failure: Connection reset by peer\n"
    assert (await box.wget("-O-", API)).err.splitlines() == [
        f"Connecting to {API}:80... connected.",
        "HTTP request sent, awaiting response... Read error (Connection reset by peer).",
    ]
