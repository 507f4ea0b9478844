"""The shell's result cache: probes that depend on nothing but their text replay what bash
answered the first time; anything that could read the sandbox, the clock or the environment
always runs."""

from __future__ import annotations

import pytest

from fake_server.registered_commands import CommandContext, CommandRegistry
from fake_server.result_cache import Recorder, ResultCache
from fake_server.shell import (
    _PLANS_KEPT,
    ShellLimits,
    _kept_plan,
)
from fake_server.streams import BufferSink
from tests.test_shell import Harness


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.mark.parametrize(
    ("script", "out", "status"),
    [
        ("echo ok", "ok\n", 0),
        ("printf 'ready %s\\n' a b", "ready a\nready b\n", 0),
        ("true", "", 0),
        ("echo 'it''s'; exit 3", "its\n", 3),
        ("false || echo fallback", "fallback\n", 0),
    ],
)
async def test_a_probe_replays_what_bash_answered(
    h: Harness, script: str, out: str, status: int
) -> None:
    first = await h.sh(script)
    second = await h.sh(script)
    assert (first.status, first.out, first.err) == (status, out, "")
    assert second == first
    assert h.shell.results.hits == 1


@pytest.mark.parametrize(
    ("setup", "script", "before", "after"),
    [
        # A variable, a file, a glob, a command substitution, a redirection: each reads or
        # writes the sandbox, so the second run must see what changed in between.
        ("export", "echo $STAGE", "\n", "\n"),
        ("echo two > /tmp/f", "cat /tmp/f", "", "two\n"),
        ("touch /tmp/g1 /tmp/g2", "cd /tmp && echo g*", "g*\n", "g1 g2\n"),
        ("echo x > /tmp/s", "echo $(ls /tmp)", "\n", "s\n"),
        ("rm -f /tmp/r", "echo hi > /tmp/r; echo ok", "ok\n", "ok\n"),
    ],
)
async def test_scripts_that_read_or_write_state_always_run(
    h: Harness, setup: str, script: str, before: str, after: str
) -> None:
    assert (await h.sh(script)).out == before
    await h.sh(setup)
    assert (await h.sh(script)).out == after
    assert h.shell.results.hits == 0


async def test_printf_of_the_clock_is_not_replayed(h: Harness) -> None:
    await h.sh("printf '%(%s)T\\n' -1")
    await h.sh("printf '%(%s)T\\n' -1")
    assert h.shell.results.hits == 0


async def test_a_registered_command_shadowing_echo_always_runs(h: Harness) -> None:
    calls: list[list[str]] = []

    def echo(ctx: CommandContext, args: list[str]) -> int:
        calls.append(args)
        ctx.stdout.write(b"mine\n")
        return 0

    h.registry.register("echo", echo)
    assert (await h.sh("echo ok")).out == "mine\n"
    assert (await h.sh("echo ok")).out == "mine\n"
    assert calls == [["ok"], ["ok"]]
    assert h.shell.results.hits == 0


async def test_a_command_registered_after_a_probe_replayed_stops_the_replay(h: Harness) -> None:
    assert (await h.sh("echo ok")).out == "ok\n"
    assert (await h.sh("echo ok")).out == "ok\n"
    assert h.shell.results.hits == 1
    # The script's text was scanned once; whether echo is still the builtin is asked each time.
    h.registry.register("echo", lambda ctx, args: ctx.stdout.write(b"mine\n") or 0)
    assert (await h.sh("echo ok")).out == "mine\n"
    assert h.shell.results.hits == 1


async def test_a_refused_run_is_not_replayed() -> None:
    h = Harness(ShellLimits(max_commands=2))
    script = "echo a; echo b; echo c; echo d"
    first = await h.sh(script)
    assert first.status != 0
    assert "bash:" in first.err
    second = await h.sh(script)
    assert second.status == first.status
    assert h.shell.results.hits == 0


async def test_large_output_is_not_kept(h: Harness) -> None:
    h.shell.results.max_output = 8
    script = "echo 0123456789"
    assert (await h.sh(script)).out == "0123456789\n"
    assert (await h.sh(script)).out == "0123456789\n"
    assert h.shell.results.hits == 0


async def test_the_environment_is_part_of_the_key(h: Harness) -> None:
    await h.sh("echo ok", env={"A": "1"})
    await h.sh("echo ok", env={"A": "2"})
    assert h.shell.results.hits == 0
    await h.sh("echo ok", env={"A": "2"})
    assert h.shell.results.hits == 1


def test_the_cache_keeps_the_most_recent_entries() -> None:
    cache = ResultCache(CommandRegistry().names(), entries=2)
    keys = [cache.key(f"echo {n}", {}) for n in range(3)]
    for key in keys:
        assert key is not None
        cache.put(key, Recorder(BufferSink(), 64), Recorder(BufferSink(), 64), 0)
    first, _, last = keys
    assert first is not None
    assert last is not None
    assert cache.get(first) is None
    assert cache.get(last) is not None


def test_long_or_unparsable_scripts_do_not_qualify() -> None:
    cache = ResultCache(CommandRegistry().names(), max_script=16)
    assert cache.key("echo " + "x" * 20, {}) is None
    assert cache.key("echo 'unterminated", {}) is None
    assert cache.key("echo fine", {}) is not None


async def test_a_buffered_exec_finds_the_result_until_a_command_shadows_the_probe(
    h: Harness,
) -> None:
    await h.sh("echo ok")
    known = h.shell.known_result("/bin/bash", ["-lc", "echo ok"], {})
    assert known is not None
    assert (known.stdout, known.stderr, known.status) == (b"ok\n", b"", 0)
    # The registry is read live: a command registered later is seen by the next look-up.
    h.registry.register("echo", lambda ctx, args: 0)
    assert h.shell.known_result("/bin/bash", ["-lc", "echo ok"], {}) is None


def test_an_argv_is_planned_once_while_short_enough_to_key(h: Harness) -> None:
    assert h.shell._plan_of("echo", ["hi"]) is h.shell._plan_of("echo", ["hi"])
    long = "x" * h.shell.results.max_script
    first, again = h.shell._plan_of("echo", [long]), h.shell._plan_of("echo", [long])
    assert first == again
    assert first is not again  # too long to key: never kept


def test_kept_plans_are_bounded(h: Harness) -> None:
    for n in range(_PLANS_KEPT + 1):
        h.shell._plan_of("echo", [str(n)])
    assert 0 < _kept_plan.cache_info().currsize <= _PLANS_KEPT
