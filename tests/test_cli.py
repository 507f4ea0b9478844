"""``fake-createos serve`` / ``python -m fake_server`` as a user runs them."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fake_server.cli import build_parser, config_from_args, load_rules, startup_rules
from fake_server.config import ServerConfig


class Served:
    """A running ``python -m fake_server serve`` and the URL it printed."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url

    def get(self, path: str, key: str = "skp_cli") -> tuple[int, Any]:
        request = urllib.request.Request(self.url + path, headers={"X-Api-Key": key})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def first_line(process: subprocess.Popen[str], timeout: float = 20.0) -> str:
    """The first stdout line, or a failure naming stderr if none comes in time."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not lines or not lines[0]:
        process.kill()
        stderr = process.communicate()[1]
        pytest.fail(f"the server printed no URL; stderr:\n{stderr}")
    return lines[0].strip()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> Served:
        process = subprocess.Popen(
            [sys.executable, "-m", "fake_server", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return Served(process, first_line(process))

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_prints_its_url_first_and_stops_cleanly_on_sigterm(serve: Any) -> None:
    served = serve("--seed", "3")
    assert served.url.startswith("http://127.0.0.1:")
    assert served.get("/healthz") == (200, {"status": "success", "data": {"up": True}})
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(10) == 0


def test_ctrl_c_stops_cleanly(serve: Any) -> None:
    served = serve()
    served.process.send_signal(signal.SIGINT)
    assert served.process.wait(10) == 0
    stderr = served.process.communicate()[1]
    assert "Traceback" not in stderr
    assert f"dashboard={served.url}/_fake/\n" in stderr


def test_the_dashboards_address_says_where_a_control_token_goes(serve: Any) -> None:
    # The page answers nothing without the token, and the line did not say how to give it.
    served = serve("--control-token", "s3cret-t0k")
    served.process.send_signal(signal.SIGINT)
    assert served.process.wait(10) == 0
    stderr = served.process.communicate()[1]
    assert f"dashboard={served.url}/_fake/#token=<your --control-token>" in stderr
    assert "s3cret-t0k" not in stderr


def _post(served: Served, path: str, body: Any) -> Any:
    connection = http.client.HTTPConnection(urlsplit(served.url).netloc, timeout=10)
    try:
        connection.request("POST", path, json.dumps(body), {"X-Api-Key": "skp_cli"})
        return json.loads(connection.getresponse().read())["data"]
    finally:
        connection.close()


def _until_held(served: Served, gate: str) -> None:
    """Wait until ``gate`` holds a request (the control API answers once it does)."""
    status, body = served.get(f"/_fake/gates/{gate}?held=1&timeout_ms=4000")
    assert status == 200, body


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_at_once_and_ends_what_clients_wait_on(serve: Any, signum: int) -> None:
    served = serve()
    sandbox = _post(served, "/v1/sandboxes", {"shape": "s-1vcpu-1gb"})["id"]
    host = urlsplit(served.url).netloc
    stream = http.client.HTTPConnection(host, timeout=10)
    body = {"cmd": "/bin/bash", "args": ["-c", "echo up; sleep 100000"]}
    path = f"/v1/sandboxes/{sandbox}/exec?stream=true"
    stream.request("POST", path, json.dumps(body), {"X-Api-Key": "skp_cli"})
    frames = stream.getresponse()
    assert json.loads(frames.readline()) == {"stdout": "up\n"}
    gate = {"match": {"route": "GET /v1/sandboxes/{id}"}, "action": {"type": "gate", "name": "g"}}
    _post(served, "/_fake/faults", gate)
    held = http.client.HTTPConnection(host, timeout=10)
    held.request("GET", f"/v1/sandboxes/{sandbox}", headers={"X-Api-Key": "skp_cli"})
    _until_held(served, "g")
    served.process.send_signal(signum)
    assert served.process.wait(10) == 0
    # Both clients see their connection end: neither waits on a server that is gone.
    with pytest.raises(http.client.IncompleteRead):
        frames.read()
    with pytest.raises(http.client.RemoteDisconnected):
        held.getresponse()
    stream.close()
    held.close()
    stderr = served.process.communicate()[1]
    assert [line for line in stderr.splitlines() if not line.startswith("seed=")] == []


def test_fault_file_and_latency_flags_load_rules(serve: Any, tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": {"route": "GET /v1/whoami"},
                        "action": {"type": "error", "status": 503},
                    }
                ]
            }
        )
    )
    served = serve("--faults", str(rules), "--latency-ms", "1", "--jitter-ms", "0.5")
    status, body = served.get("/v1/whoami")
    assert (status, body["message"]) == (503, "injected error")
    _, faults = served.get("/_fake/faults")
    assert [r["action"]["type"] for r in faults["data"]["rules"]] == ["error", "latency"]


def test_strict_keys(serve: Any) -> None:
    served = serve("--strict", "--api-key", "skp_only")
    assert served.get("/v1/whoami", key="skp_only")[0] == 200
    assert served.get("/v1/whoami", key="skp_other")[0] == 401


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--allow-remote"),
        (["--strict"], "--strict needs at least one --api-key"),
        (["--transition-ms", "-1"], "must not be negative"),
        (["--port", "70000"], "--port must be between 0 and 65535"),
        (["--faults", "/nonexistent/rules.json"], "cannot read"),
        (["--max-commands", "0"], "must be at least 1"),
        (["--max-command-seconds", "nan"], "must be a positive number"),
        (["--exec-output-cap", "lots"], "not an integer"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fake_server", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--transition-ms", "nan"], "argument --transition-ms: must be finite (got nan)"),
        (["--create-ms", "inf"], "argument --create-ms: must be finite (got inf)"),
        (["--transition-ms", "1e400"], "argument --transition-ms: must be finite (got inf)"),
        (["--transition-ms", "soon"], "argument --transition-ms: not a number: 'soon'"),
        (["--latency-ms", "nan"], "argument --latency-ms: must be finite (got nan)"),
        (["--jitter-ms", "7200000"], "argument --jitter-ms: must be at most 3600000"),
        # What `--control-token "$TOKEN"` gives with TOKEN unset: it turned the check off.
        (["--control-token", ""], "argument --control-token: must not be empty"),
        (["--api-key", ""], "argument --api-key: must not be empty"),
    ],
)
def test_values_no_server_could_honour_are_refused_by_the_parser(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"control_token": ""}, "control_token must not be empty"),
        ({"api_keys": ("skp_a", "")}, "api_keys must not hold an empty key"),
    ],
)
def test_the_python_api_refuses_what_no_request_can_present(
    changes: dict[str, Any], problem: str
) -> None:
    # An empty token let through every control request that sent none.
    with pytest.raises(ValueError, match=problem):
        ServerConfig(**changes)


def test_the_parsers_bounds_let_every_sensible_value_through() -> None:
    args = build_parser().parse_args(
        ["serve", "--transition-ms", "0", "--create-ms", "3600000", "--latency-ms", "2.5",
         "--control-token", "t0ken", "--api-key", "skp_a"]
    )  # fmt: skip
    config = config_from_args(args)
    assert (config.transition_ms, config.create_ms, config.control_token) == (0, 3_600_000, "t0ken")
    assert config.api_keys == ("skp_a",)
    assert startup_rules(args)[0]["action"]["ms"] == 2.5


def test_rule_files_in_every_accepted_shape(tmp_path: Path) -> None:
    one = {"match": {"route": "/v1/whoami"}, "action": {"type": "reset"}}
    for name, content in (
        ("list.json", [one]),
        ("one.json", one),
        ("wrapped.json", {"rules": [one]}),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(content))
        assert load_rules(str(path)) == [one]
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_rules(str(bad))
    neither = tmp_path / "neither.json"
    neither.write_text('{"colour": 1}')
    assert load_rules(str(neither)) == [{"colour": 1}]  # one rule, refused when it is added


def test_rule_files_no_parser_could_read_are_refused_cleanly(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # a RecursionError traceback once
    with pytest.raises(ValueError, match="nested too deeply"):
        load_rules(str(deep))
    # /dev/zero was read until memory ran out.
    with pytest.raises(ValueError, match="larger than 8 MiB"):
        load_rules("/dev/zero")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib arrived in Python 3.11")
def test_toml_rule_files(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        '[[rules]]\nmatch = { route = "DELETE /v1/sandboxes/{id}" }\n'
        'action = { type = "gate", name = "release" }\ntimes = 1\n'
    )
    assert load_rules(str(path)) == [
        {
            "match": {"route": "DELETE /v1/sandboxes/{id}"},
            "action": {"type": "gate", "name": "release"},
            "times": 1,
        }
    ]
    args = build_parser().parse_args(["serve", "--faults", str(path), "--latency-ms", "5"])
    assert [r["action"]["type"] for r in startup_rules(args)] == ["gate", "latency"]


def test_shell_bounds_reach_the_config() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--max-commands",
            "500",
            "--max-command-seconds",
            "2.5",
            "--exec-output-cap",
            "64",
        ]
    )
    config = config_from_args(args)
    assert (config.max_commands, config.max_command_seconds, config.exec_output_cap_bytes) == (
        500,
        2.5,
        64,
    )


def test_connection_deadlines_reach_the_config() -> None:
    args = build_parser().parse_args(
        ["serve", "--header-timeout-s", "2", "--body-timeout-s", "3", "--write-timeout-s", "7.5"]
    )
    config = config_from_args(args)
    assert (config.header_timeout_s, config.body_timeout_s, config.write_timeout_s) == (
        2.0,
        3.0,
        7.5,
    )
    defaults = config_from_args(build_parser().parse_args(["serve"]))
    assert (defaults.header_timeout_s, defaults.body_timeout_s, defaults.write_timeout_s) == (
        15.0,
        15.0,
        30.0,
    )


def test_a_fault_file_naming_no_served_route_is_refused_as_the_control_api_does(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps([{"match": {"route": "GIT /v1/whoami"}, "action": {"type": "reset"}}])
    )
    result = subprocess.run(
        [sys.executable, "-m", "fake_server", "serve", "--port", "0", "--faults", str(rules)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "invalid fault rule: match: no method 'GIT'; use DELETE, GET" in result.stderr


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    with pytest.raises(SystemExit) as ended:
        build_parser().parse_args(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out == f"fake-createos {metadata.version('pytest-createos')}\n"
