"""``fake-createos serve``: the fake as a standalone server for manual testing and for clients
in other languages. Also ``python -m fake_server``.

Example::

    $ fake-createos serve --port 0 --seed 7
    http://127.0.0.1:41234
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

from fake_server.config import ServerConfig
from fake_server.control_access import is_loopback
from fake_server.fake import FakeCreateOS
from fake_server.fault_rules import FaultError, rules_in
from fake_server.lifecycle import check_duration_ms
from fake_server.runner import LOOPBACK, start_site, stop_site

__all__ = ["build_parser", "main"]

REMOTE_REFUSED = (
    "refusing to listen on {host}: the fake has no real authentication. "
    "Pass --allow-remote if you really mean it."
)


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare source tree)."""
    from importlib import metadata

    try:
        return metadata.version("pytest-createos")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fake-createos", description="An in-memory fake of the CreateOS sandbox API."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the fake over HTTP until interrupted")
    serve.add_argument("--host", default=LOOPBACK, help="address to bind (default: %(default)s)")
    serve.add_argument(
        "--port",
        type=int,
        default=8080,
        help="port to bind; 0 picks a free one (default: %(default)s)",
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host that is not a loopback address, and control API requests"
        " addressed to any host or sent by web pages of any origin",
    )
    serve.add_argument(
        "--control-token",
        type=_nonempty,
        default=None,
        help="require this token in X-Control-Token on every control API request"
        " (the dashboard takes it as #token=... in its URL)",
    )
    serve.add_argument("--seed", type=int, default=None, help="seed for ids, names and faults")
    serve.add_argument(
        "--transition-ms",
        type=_duration_ms,
        default=ServerConfig.transition_ms,
        help="duration of pause/resume/fork/delete (default: %(default)s)",
    )
    serve.add_argument(
        "--create-ms",
        type=_duration_ms,
        default=ServerConfig.create_ms,
        help="how long a new sandbox stays 'creating' (default: %(default)s)",
    )
    serve.add_argument(
        "--api-key",
        type=_nonempty,
        action="append",
        default=[],
        metavar="KEY",
        help="register an API key (repeatable)",
    )
    serve.add_argument(
        "--strict", action="store_true", help="accept only registered API keys (see --api-key)"
    )
    serve.add_argument(
        "--manual-clock",
        action="store_true",
        help="time moves only through POST /_fake/clock/advance",
    )
    serve.add_argument(
        "--deleted",
        choices=("destroyed", "404"),
        default="destroyed",
        help="what a deleted sandbox becomes once destroyed: a destroyed row, or 404 (GET"
        " answers 404 and lists leave it out) (default: %(default)s)",
    )
    serve.add_argument(
        "--faults",
        metavar="FILE",
        default=None,
        help="load fault rules from a JSON or TOML file (the control API's schema)",
    )
    serve.add_argument(
        "--latency-ms", type=_duration_ms, default=0.0, help="add latency to every API request"
    )
    serve.add_argument(
        "--jitter-ms",
        type=_duration_ms,
        default=0.0,
        help="random +/- spread around --latency-ms",
    )
    defaults = ServerConfig()
    serve.add_argument(
        "--max-commands",
        type=_positive_int,
        default=defaults.max_commands,
        help="commands and loop iterations one exec or process may run (default: %(default)s)",
    )
    serve.add_argument(
        "--max-command-seconds",
        type=_positive_float,
        default=defaults.max_command_seconds,
        help="wall-clock seconds one exec or process may run (default: %(default)s)",
    )
    serve.add_argument(
        "--idle-tenant-s",
        type=_positive_float,
        default=IDLE_TENANT_S,
        help="drop a tenant an unknown key made after this long without a request, unless it"
        " has a sandbox not destroyed or a rule (default: %(default)s)",
    )
    serve.add_argument(
        "--header-timeout-s",
        type=_positive_float,
        default=defaults.header_timeout_s,
        help="close a connection that has not sent a complete request head this long after"
        " it opened or began its next request (default: %(default)s)",
    )
    serve.add_argument(
        "--body-timeout-s",
        type=_positive_float,
        default=defaults.body_timeout_s,
        help="answer 408 and close the connection when a request body being read makes no"
        " progress for this long (default: %(default)s)",
    )
    serve.add_argument(
        "--write-timeout-s",
        type=_positive_float,
        default=defaults.write_timeout_s,
        help="cut off a client that reads nothing of its answer for this long"
        " (default: %(default)s)",
    )
    serve.add_argument(
        "--exec-output-cap",
        type=_positive_int,
        default=defaults.exec_output_cap_bytes,
        metavar="BYTES",
        help="output one buffered exec may produce before it is stopped (default: %(default)s)",
    )
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _duration_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    try:
        return check_duration_ms(value)
    except ValueError as exc:  # NaN, infinite, negative or past an hour
        raise argparse.ArgumentTypeError(str(exc)) from None


def _nonempty(text: str) -> str:
    # An empty value is what an unset variable gives (`--control-token "$TOKEN"`): taken as
    # "no token", it would turn the check off without a word.
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


#: The largest ``--faults`` file read (rule files are a few KiB).
MAX_RULE_FILE_BYTES = 8 << 20


def load_rules(path: str) -> list[Any]:
    """Rules from a ``--faults`` file: JSON (a list, one rule, or ``{"rules": [...]}``) or TOML
    (``[[rules]]`` tables); raises ``ValueError`` saying what is wrong."""
    try:
        with open(path, "rb") as handle:
            # Bounded: `--faults /dev/zero` (or a log given by mistake) never ends.
            raw = handle.read(MAX_RULE_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > MAX_RULE_FILE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_RULE_FILE_BYTES >> 20} MiB: not a rule file")
    data: Any
    if path.endswith(".toml"):
        data = _parse_toml(raw, path)
    else:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from None
        except RecursionError:
            raise ValueError(f"{path} is not valid JSON: nested too deeply") from None
    try:
        return rules_in(data)
    except FaultError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _parse_toml(raw: bytes, path: str) -> Any:
    try:
        # Imported by name: Python 3.10 (still supported) has no tomllib.
        tomllib = importlib.import_module("tomllib")
    except ModuleNotFoundError:
        raise ValueError("TOML rule files need Python 3.11 or newer; use JSON") from None
    try:
        return tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ValueError(f"{path} is not valid TOML: nested too deeply") from None


def startup_rules(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rules ``--faults``, ``--latency-ms`` and ``--jitter-ms`` ask for."""
    rules = load_rules(args.faults) if args.faults else []
    if args.latency_ms or args.jitter_ms:
        latency = {"type": "latency", "ms": args.latency_ms, "jitter_ms": args.jitter_ms}
        rules.append({"match": {}, "action": latency})
    return rules


#: A standalone server meets keys from anywhere: tenants they make go after an idle hour.
IDLE_TENANT_S = 3600.0


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        seed=args.seed,
        transition_ms=args.transition_ms,
        create_ms=args.create_ms,
        api_keys=tuple(args.api_key),
        strict=args.strict,
        manual_clock=args.manual_clock,
        deleted=args.deleted,
        max_commands=args.max_commands,
        max_command_seconds=args.max_command_seconds,
        exec_output_cap_bytes=args.exec_output_cap,
        idle_tenant_s=args.idle_tenant_s,
        header_timeout_s=args.header_timeout_s,
        body_timeout_s=args.body_timeout_s,
        write_timeout_s=args.write_timeout_s,
        allow_remote=args.allow_remote,
        control_token=args.control_token,
    )


def freeze_startup_heap() -> None:
    """Move what start-up made (modules, the app, the catalog) out of the garbage collector's
    reach: a full collection then walks only what requests make, instead of holding the loop
    for 14 to 26 ms of CPU each time a stream's frames trigger one (``gc.freeze``). Only the
    standalone server does this; an in-process fake shares its process with the user's code.

    Example::

        runner, url = await start_site(fake, host, port)
        freeze_startup_heap()
    """
    gc.collect()
    gc.freeze()


async def _serve(fake: FakeCreateOS, host: str, port: int) -> None:
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Handlers first: whoever reads the URL below may signal us at once.
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    runner, url = await start_site(fake, host, port)
    freeze_startup_heap()
    print(url, flush=True)
    # The token itself stays out of the output (logs keep it); the page takes it after a #.
    token = "#token=<your --control-token>" if fake.config.control_token else ""
    print(f"seed={fake.seed} dashboard={url}/_fake/{token}", file=sys.stderr, flush=True)
    try:
        await stopped.wait()
    finally:
        await stop_site(fake, runner)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fake-createos``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not is_loopback(args.host) and not args.allow_remote:
        parser.error(REMOTE_REFUSED.format(host=args.host))
    if args.strict and not args.api_key:
        parser.error("--strict needs at least one --api-key")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be between 0 and 65535")
    fake = FakeCreateOS(config_from_args(args))
    try:
        fake.faults.add_all(startup_rules(args))
    except (ValueError, FaultError) as exc:
        parser.error(str(exc))
    try:
        asyncio.run(_serve(fake, args.host, args.port))
    except OSError as exc:
        print(
            f"fake-createos: cannot listen on {args.host}:{args.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return 1
    return 0
