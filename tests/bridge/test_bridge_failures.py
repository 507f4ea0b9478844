"""A program that breaks the bridge protocol gets a clear failure, never a hang: each way of
breaking it, driven by ``program.py <mode>`` (which answers only when a request comes, so
nothing here waits on time except the bounded timeouts under test)."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_createos.bridge import (
    BridgeError,
    BridgeTimeoutError,
    ProgramError,
    SubprocessHost,
    SubprocessProvider,
)
from pytest_createos.errors import (
    CLEANUP_PENDING_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CommandCancelledError,
    LeaseError,
    LeaseOwnershipError,
    ProviderShutDownError,
    is_cleanup_pending,
)
from pytest_createos.kit import ConformanceKit
from pytest_createos.provider import Lease
from pytest_createos.server import CreateosServer

PROGRAM = str(Path(__file__).with_name("program.py"))


@pytest.fixture
async def host(createos_server: CreateosServer) -> AsyncIterator[Callable[..., SubprocessHost]]:
    """``host(mode, **options)``: a ``SubprocessHost`` running ``program.py <mode>``, named
    ``program.py <mode>``, closed at teardown (if the test did not)."""
    made: list[SubprocessHost] = []

    def make(mode: str, **options: Any) -> SubprocessHost:
        options.setdefault("name", f"program.py {mode}")
        command = [sys.executable, PROGRAM, mode]
        made.append(SubprocessHost(command, server=createos_server, **options))
        return made[-1]

    yield make
    for program in made:
        await program.close()


# -- what reaches the program ------------------------------------------------------------------


async def test_the_fakes_url_and_key_reach_the_program(
    host: Any, createos_server: CreateosServer
) -> None:
    async with host("echo") as program:
        env = await program.run("lease", "true")
    assert env == {"url": createos_server.url, "key": createos_server.api_key}
    assert program.returncode == 0  # it exited by itself once its stdin closed


async def test_answers_out_of_order_reach_their_own_calls(host: Any) -> None:
    async with host("out-of-order") as program:
        first = asyncio.ensure_future(program.resume("a"))
        second = asyncio.ensure_future(program.resume("b"))
        # The program holds the first until the second arrives, then answers b before a.
        assert await asyncio.gather(first, second) == ["a", "b"]
        assert await program.release("c") is None  # and it goes on serving


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        (
            {
                "message": CLEANUP_PENDING_MESSAGE,
                "kind": "CleanupPendingError",
                "reason": "unconfirmed",
            },
            CleanupPendingError,
            True,
        ),
        ({"message": "busy", "kind": "CleanupInProgressError"}, CleanupInProgressError, True),
        ({"message": "nope", "kind": "LeaseError", "retryable": True}, LeaseError, True),
        ({"message": "x is undefined", "kind": "TypeError"}, ProgramError, False),
        ({"message": "lost", "kind": "CleanupUnconfirmedError"}, CleanupUnconfirmedError, False),
        ({"message": "not yours", "kind": "LeaseOwnershipError"}, LeaseOwnershipError, False),
        ({"message": "stopped", "kind": "ProviderShutDownError"}, ProviderShutDownError, False),
        ({"message": "cancelled", "kind": "CommandCancelledError"}, CommandCancelledError, False),
        ({"message": "no kind at all"}, ProgramError, False),
    ],
)
async def test_error_answers_map_back_to_the_kits_types(
    host: Any, error: dict[str, Any], kind: type[LeaseError], retryable: bool
) -> None:
    async with host("refuse") as program:
        with pytest.raises(kind) as raised:
            await program.resume(error)
    assert type(raised.value) is kind
    assert raised.value.retryable is retryable
    assert error["message"] in str(raised.value)


async def test_the_cleanup_refusal_keeps_its_reason_and_text(host: Any) -> None:
    refusal = {
        "message": CLEANUP_PENDING_MESSAGE,
        "kind": "CleanupPendingError",
        "reason": "unconfirmed",
    }
    async with host("refuse") as program:
        with pytest.raises(CleanupPendingError) as raised:
            await program.resume(refusal)
        with pytest.raises(ProgramError) as unknown:
            await program.resume({"message": "HTTP 409: sandbox is pausing", "kind": "ApiError"})
    assert raised.value.reason == "unconfirmed"
    assert is_cleanup_pending(raised.value)
    assert str(unknown.value) == "ApiError: HTTP 409: sandbox is pausing"
    assert unknown.value.kind == "ApiError"


# -- a program that breaks the protocol --------------------------------------------------------


def tail(*lines: str) -> str:
    """How a failure quotes the end of the program's stderr."""
    return "; its stderr ended with:\n" + "\n".join(f"  {line}" for line in lines)


async def test_garbage_on_stdout_fails_the_call_and_every_later_one(host: Any) -> None:
    async with host("garbage") as program:
        with pytest.raises(BridgeError) as raised:
            await program.resume("a")
        expected = (
            "program.py garbage wrote a line to stdout that is not a bridge message: "
            "'resuming lease now...' (stdout carries only the protocol; write logs to stderr)"
            + tail("resume: about to misbehave")
        )
        assert str(raised.value) == expected
        with pytest.raises(BridgeError) as later:
            await program.run("a", "true")
        assert str(later.value) == expected
    assert program.returncode == -signal.SIGKILL  # stopped: it cannot be trusted any more


async def test_a_crash_mid_call_names_the_call_and_shows_stderr(host: Any) -> None:
    async with host("crash") as program:
        with pytest.raises(BridgeError) as raised:
            await program.resume("a")
    assert str(raised.value) == (
        "program.py crash exited with code 3 while resume() #1 was in flight"
        + tail("resume: something went badly wrong")
    )


async def test_a_call_that_is_never_answered_times_out_and_the_program_serves_on(
    host: Any,
) -> None:
    async with host("hang", call_timeout_s=0.2) as program:
        with pytest.raises(BridgeTimeoutError) as raised:
            await program.resume("a")
        assert str(raised.value) == (
            "program.py hang did not answer resume() #1 within 0.2 s"
            + tail("resume #1: holding it")
        )
        assert await program.release("a") is None


async def test_a_program_that_stops_reading_times_out_too(host: Any) -> None:
    async with host("deaf", call_timeout_s=0.2, close_timeout_s=0.2) as program:
        with pytest.raises(BridgeTimeoutError, match=re.escape("did not answer run() #1")):
            await program.run("a", "x" * 2**21)  # more than any pipe buffers
    assert program.returncode == -signal.SIGKILL


async def test_a_late_answer_to_an_abandoned_call_is_dropped(host: Any) -> None:
    async with host("late", call_timeout_s=0.2) as program:
        with pytest.raises(BridgeTimeoutError):
            await program.resume("a")
        # The kit told it (cancel), it answered "too late" for #1: dropped, not an unknown id.
        assert await program.release("a") is None


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("unknown-id", "program.py unknown-id answered id 101, which no call is waiting for: "),
        ("no-result", 'program.py no-result answered with \'{"id": 1, "answer": "a"}\', which has'),
    ],
)
async def test_an_answer_that_fits_no_call_is_a_protocol_failure(
    host: Any, mode: str, message: str
) -> None:
    async with host(mode) as program:
        with pytest.raises(BridgeError) as raised:
            await program.resume("a")
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        (
            "silent",
            {"start_timeout_s": 0.2},
            "program.py silent did not announce itself within 0.2 s: its first line on stdout "
            'must be {"bridge": 1, "methods": [...]}; it wrote nothing to stderr',
        ),
        (
            "bad-hello",
            {},
            'program.py bad-hello announced itself with \'{"bridge": 2, "methods": ["acquire", '
            '"release", "resume", "run", "shutdown"]}\', not {"bridge": 1, "methods": [<method '
            "names>]} (this kit speaks bridge protocol 1)",
        ),
        (
            "provider-hello",
            {},
            "program.py provider-hello does not offer release, run (it offers: acquire, resume)",
        ),
        (
            "exit-at-start",
            {},
            "program.py exit-at-start exited with code 1" + tail("cannot load my configuration"),
        ),
    ],
)
async def test_a_program_that_cannot_start_says_why(
    host: Any, mode: str, options: dict[str, Any], message: str
) -> None:
    program = host(mode, **options)
    with pytest.raises(BridgeError) as raised:
        await program.start()
    assert str(raised.value).startswith(message)
    with pytest.raises(BridgeError, match=r"^program\.py"):
        await program.acquire()  # and every later call fails at once, the same way
    await program.close()


def test_a_command_names_a_program() -> None:
    with pytest.raises(ValueError, match="command must name a program to run"):
        SubprocessProvider([])


async def test_a_missing_program_cannot_be_started(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-program"
    with pytest.raises(BridgeError, match=r"could not be started: .*No such file"):
        await SubprocessHost([str(missing)]).start()


async def test_calls_before_start_and_after_close_fail_clearly(host: Any) -> None:
    program = host("echo")
    with pytest.raises(BridgeError, match=re.escape("program.py echo was not started")):
        await program.acquire()
    async with program:
        pass
    with pytest.raises(BridgeError, match=r"^program\.py echo was closed"):
        await program.release("a")


async def test_a_program_that_outlives_its_stdin_is_killed(host: Any) -> None:
    async with host("linger", close_timeout_s=0.2) as program:
        assert await program.resume("a") == "a"
    assert program.returncode == -signal.SIGKILL


async def test_what_cannot_be_json_is_refused_before_sending(host: Any) -> None:
    async with host("echo") as program:
        with pytest.raises(TypeError, match="accepts no JSON for resume"):
            await program.resume(object())
        assert await program.resume("still fine") == "still fine"


async def test_a_report_keeps_the_last_lines_of_stderr_each_cut_short(host: Any) -> None:
    program = host("chatty")
    async with program:
        mark = program.output_mark()
        await program.run("a", "true")
    # Closed: everything it wrote has been read. 151 lines; the last 100 are kept.
    lines = program.output_since(mark).splitlines()
    assert lines[:2] == ["... 51 earlier line(s) not shown", "line 52"]
    assert lines[-2:] == ["line 150", "x" * 997 + "..."]
    assert len(lines) == 101


async def test_lines_beyond_the_limit_are_refused_on_stdout_and_cut_on_stderr(
    host: Any,
) -> None:
    program = host("huge")
    async with program:
        mark = program.output_mark()
        with pytest.raises(BridgeError) as raised:
            await program.run("a", "true")
    assert str(raised.value).startswith(
        f"program.py huge wrote a line longer than {2**24} bytes to stdout; its stderr ended"
    )
    lines = program.output_since(mark).splitlines()
    assert lines[0] == f"[a line longer than {2**24} bytes, not kept]"
    assert lines[-1] == "after the long line"


async def test_a_program_is_started_once(host: Any) -> None:
    async with host("echo") as program:
        with pytest.raises(BridgeError, match="was started already"):
            await program.start()
        assert await program.resume("a") == "a"


# -- the provider side --------------------------------------------------------------------------


async def test_provider_hooks_send_their_keyword_arguments(createos_server: CreateosServer) -> None:
    when = datetime(2026, 1, 2, tzinfo=timezone.utc)
    command = [sys.executable, PROGRAM, "provider"]
    async with SubprocessProvider(command, server=createos_server) as provider:
        lease = await provider.acquire(
            company_id="co", environment_id="env", config={}, requested_expires_at=when
        )
        assert lease == Lease(
            "sb_1",
            {
                "company_id": "co",
                "environment_id": "env",
                "config": {},
                "run_id": None,
                "requested_expires_at": "2026-01-02T00:00:00+00:00",
            },
        )
        answer = {"exit_code": 0, "stdout": "hi\n", "stderr": "", "timed_out": False}
        result = await provider.execute(
            company_id="co",
            environment_id="env",
            config={"answer": answer},
            lease=lease,
            command="echo",
            args=["hi"],
        )
        assert (result.exit_code, result.stdout, result.signal) == (0, "hi\n", None)


@pytest.mark.parametrize(
    ("hook", "answer", "message"),
    [
        ("acquire", "sb_1", "answered acquire() with 'sb_1', not a lease"),
        ("execute", [0], "answered execute() with [0], not an execute result"),
    ],
)
async def test_provider_answers_of_the_wrong_shape_are_refused(
    createos_server: CreateosServer, hook: str, answer: object, message: str
) -> None:
    params: dict[str, Any] = {
        "company_id": "co",
        "environment_id": "env",
        "config": {"answer": answer},
    }
    if hook == "execute":
        params.update(lease=Lease("sb_1", {}), command="true")
    command = [sys.executable, PROGRAM, "provider"]
    async with SubprocessProvider(command, server=createos_server) as provider:
        with pytest.raises(BridgeError, match=re.escape(message)):
            await getattr(provider, hook)(**params)


# -- in the kit's report ------------------------------------------------------------------------


async def test_a_host_without_shutdown_skips_that_scenario(
    host: Any, createos_kit: ConformanceKit
) -> None:
    async with host("no-shutdown") as program:
        assert getattr(program, "shutdown", None) is None
        report = await createos_kit.run("shutdown-during-run", program)
    assert (report.ok, report.skipped) == (True, "the host has no async shutdown() method")


async def test_a_hung_program_is_reported_with_its_stderr(
    host: Any, createos_kit: ConformanceKit
) -> None:
    async with host("hang", call_timeout_s=0.3) as program:
        report = await createos_kit.run("concurrent-resumes", program)
    # Both resumes time out; the sandbox they leave behind is a leak.
    assert report.failed_checks == {"resumed-or-replaced", "no-leaked-sandbox"}, report.format()
    for violation in report.violations[:2]:
        assert re.search(
            r"resume\(\) gave back no usable lease: resume\(\) raised BridgeTimeoutError: "
            r"program.py hang did not answer resume\(\) #\d within 0.3 s",
            violation.what,
        ), violation.what
    output = report.output["program.py hang"].splitlines()
    assert sorted(output) == ["resume #3: holding it", "resume #4: holding it"]
    assert report.format().endswith(
        "what program.py hang wrote to stderr:\n" + "\n".join(f"  {line}" for line in output)
    )


async def test_a_crash_in_a_scenario_is_reported_as_the_hosts_failure(
    host: Any, createos_kit: ConformanceKit
) -> None:
    async with host("crash") as program:
        report = await createos_kit.run("concurrent-resumes", program)
    assert report.failed_checks == {"resumed-or-replaced", "no-leaked-sandbox"}, report.format()
    assert re.search(
        r"resume\(\) raised BridgeError: program.py crash exited with code 3 while resume\(\) #\d",
        report.format(),
    )
    assert report.output == {"program.py crash": "resume: something went badly wrong"}
