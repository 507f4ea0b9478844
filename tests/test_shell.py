"""The sandbox shell: real bash scripts of the kind clients send, the fake's own commands (clock,
terminal, image), live stdin, registered commands and the bounds."""

from __future__ import annotations

import asyncio
import gc
import re
from dataclasses import dataclass

import pytest

from fake_server.clock import ManualClock
from fake_server.filesystem import FileSystem
from fake_server.registered_commands import UNSHADOWED, CommandContext, CommandRegistry
from fake_server.shell import (
    RUN_OUTPUT_LIMIT,
    Invocation,
    Shell,
    ShellLimits,
    Terminal,
)
from fake_server.streams import BufferSink, StdinReader


@dataclass
class Result:
    status: int
    out: str
    err: str


class Harness:
    """One sandbox's filesystem and a shell on a manual clock."""

    def __init__(self, limits: ShellLimits | None = None) -> None:
        self.fs = FileSystem()
        self.clock = ManualClock()
        self.registry = CommandRegistry()
        self.shell = Shell(self.registry, clock=self.clock, limits=limits)

    def invocation(self, cmd: str, *args: str, **options: object) -> Invocation:
        return Invocation(cmd, list(args), fs=self.fs, **options)  # type: ignore[arg-type]

    async def run(self, cmd: str, *args: str, stdin: bytes = b"", **options: object) -> Result:
        out, err = BufferSink(), BufferSink()
        invocation = self.invocation(
            cmd, *args, stdin=StdinReader(stdin), stdout=out, stderr=err, **options
        )
        status = await self.shell.run(invocation)
        return Result(status, out.getvalue().decode(), err.getvalue().decode())

    async def sh(self, script: str, **options: object) -> Result:
        return await self.run("/bin/bash", "-lc", script, **options)


async def settle() -> None:
    """Let every ready task run until it blocks (on the manual clock or on stdin)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def wait_for_sleepers(clock: ManualClock, count: int) -> None:
    """Yield until ``count`` sleeps wait on the manual clock (the interpreter runs on threads,
    so a few loop turns are not enough to know it got there)."""
    for _ in range(5000):
        if clock.pending >= count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{clock.pending} sleeper(s), expected {count}")


async def wait_for_output(sink: BufferSink, text: bytes) -> None:
    """Yield to the loop until ``text`` shows in ``sink`` (the interpreter runs on threads)."""
    for _ in range(2000):
        if text in sink.getvalue():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{text!r} never appeared in {sink.getvalue()!r}")


# -- what real clients send ------------------------------------------------------------------


async def test_cd_or_exit_then_exec_env(h: Harness) -> None:
    h.fs.mkdir("/work space")
    script = "cd -- '/work space' || exit\nexec env GREETING='hi there' printenv GREETING"
    assert await h.sh(script) == Result(0, "hi there\n", "")
    missing = await h.sh("cd -- /nope || exit 3\necho unreachable")
    assert missing.status == 3
    assert "unreachable" not in missing.out
    assert "/nope" in missing.err


async def test_mkdir_of_a_dirname_substitution_and_realpath(h: Harness) -> None:
    script = (
        'dst=/srv/app/conf/settings.ini\nmkdir -p -- "$(dirname -- "$dst")"\n'
        'echo x > "$dst"\nrealpath /srv/app/../app/conf/./settings.ini'
    )
    assert await h.sh(script) == Result(0, "/srv/app/conf/settings.ini\n", "")
    assert h.fs.read("/srv/app/conf/settings.ini") == b"x\n"


async def test_case_for_while_until_functions_and_arithmetic(h: Harness) -> None:
    script = """
    set -e
    kind() { case "$1" in *.py) echo python;; *.sh|*.bash) echo shell;; *) echo other;; esac; }
    for f in a.py b.sh c.txt; do kind "$f"; done
    i=0; while [ $i -lt 3 ]; do i=$((i + 1)); done; echo "i=$i"
    n=5; until [ $n -le 2 ]; do n=$((n - 1)); done; echo "n=$n"
    echo $(( (7 * 6) % 10 ))
    """
    assert await h.sh(script) == Result(0, "python\nshell\nother\ni=3\nn=2\n2\n", "")


async def test_set_e_stops_at_the_first_failure(h: Harness) -> None:
    result = await h.sh("set -e\necho one\nfalse\necho two")
    assert (result.status, result.out) == (1, "one\n")


async def test_here_documents(h: Harness) -> None:
    script = "name=world\ncat <<EOF\nhello $name\nEOF\ncat <<'RAW'\n$name stays\nRAW"
    assert await h.sh(script) == Result(0, "hello world\n$name stays\n", "")


async def test_command_v_probes(h: Harness) -> None:
    script = (
        "command -v tar >/dev/null 2>&1 || exit 127\n"
        "command -v nosuch-tool >/dev/null 2>&1 || echo missing"
    )
    assert await h.sh(script) == Result(0, "missing\n", "")
    guard = "command -v nosuch-tool >/dev/null 2>&1 || exit 127\necho unreachable"
    assert await h.sh(guard) == Result(127, "", "")
    assert (await h.sh("command -v tar")).out == "/usr/bin/tar\n"


async def test_chmod_and_a_script_run_by_path(h: Harness) -> None:
    h.fs.write("/root/job.sh", b'#!/bin/bash\necho "job $1"\nexit 4\n')
    denied = await h.sh("/root/job.sh x")
    assert denied.status == 126
    ran = await h.sh("chmod 755 /root/job.sh && /root/job.sh arg")
    assert (ran.status, ran.out) == (4, "job arg\n")


async def test_tar_round_trip_of_a_directory(h: Harness) -> None:
    h.fs.write("/src/a.txt", b"alpha", make_parents=True)
    h.fs.write("/src/sub/b.txt", b"beta", make_parents=True)
    made = await h.sh("tar -cf /tmp/src.tar -C / src && rm -rf /src")
    assert made.status == 0
    assert not h.fs.exists("/src")
    archive = h.fs.read("/tmp/src.tar")
    other = Harness()
    other.fs.write("/in/src.tar", archive, make_parents=True)
    assert (await other.sh("tar -xf /in/src.tar -C /in && cat /in/src/sub/b.txt")).out == "beta"


async def test_background_jobs_and_wait(h: Harness) -> None:
    script = "(echo one > /tmp/1) & (echo two > /tmp/2) & wait\ncat /tmp/1 /tmp/2"
    assert await h.sh(script) == Result(0, "one\ntwo\n", "")


async def test_a_background_job_runs_alongside_until_wait(h: Harness) -> None:
    # The job sleeps on the manual clock: the script goes on past `&` at once, and `wait`
    # holds it until the job ends.
    out = BufferSink()
    script = "(sleep 5; echo late) & echo early; wait; echo done"
    run = asyncio.ensure_future(h.shell.run(h.invocation("/bin/bash", "-c", script, stdout=out)))
    await wait_for_output(out, b"early\n")
    await wait_for_sleepers(h.clock, 1)
    await settle()
    assert not run.done()
    assert out.getvalue() == b"early\n"
    h.clock.advance(5)
    assert await run == 0
    assert out.getvalue() == b"early\nlate\ndone\n"


async def test_argv_is_not_a_shell(h: Harness) -> None:
    result = await h.run("echo", "$HOME", "a  b", "; rm -rf /")
    assert result == Result(0, "$HOME a  b ; rm -rf /\n", "")


async def test_unknown_commands_exit_127_with_bash_wording(h: Harness) -> None:
    result = await h.run("nosuch", "x")
    assert result.status == 127
    assert result.err == "bash: line 1: nosuch: command not found\n"
    assert (await h.run("/usr/bin/python9", "-c", "1")).status == 127


async def test_unknown_commands_say_only_command_not_found(h: Harness) -> None:
    # The interpreter adds a word on what the sandbox lacks (package managers, compilers,
    # editors, ssh...) to its "command not found"; bash says nothing more.
    names = ["cargo", "pip", "vim", "docker", "rsync", "su", "ssh", "info"]
    result = await h.sh("\n".join(f"{name} x" for name in names))
    assert result.status == 127
    assert result.err.splitlines() == [
        f"bash: line {line}: {name}: command not found" for line, name in enumerate(names, 1)
    ]


async def test_exec_stdin_reaches_every_reader(h: Harness) -> None:
    assert (await h.run("cat", stdin=b"payload")).out == "payload"
    assert (await h.run("wc", "-c", stdin=b"12345")).out.strip() == "5"
    read = await h.sh("read first; read second; echo $second-$first", stdin=b"a\nb\n")
    assert read.out == "b-a\n"


# -- the image ---------------------------------------------------------------------------------


async def test_uname_and_os_release_describe_a_linux_image(h: Harness) -> None:
    result = await h.sh(
        "uname -a; uname -s; uname -m; . /etc/os-release; echo $ID $VERSION_ID", hostname="web-1"
    )
    lines = result.out.splitlines()
    assert lines[0].startswith("Linux web-1 6.8.0")
    assert lines[0].endswith("x86_64 GNU/Linux")
    assert lines[1:] == ["Linux", "x86_64", "ubuntu 24.04"]
    assert (await h.run("uname", "-q")).status == 1


async def test_identity_and_home(h: Harness) -> None:
    result = await h.sh("whoami; echo $HOME; pwd; hostname", hostname="web-1")
    assert result.out == "root\n/root\n/root\nweb-1\n"


async def test_id_says_root_as_whoami_does(h: Harness) -> None:
    # The interpreter's own id said uid=1000(root): a script that checks `id -u` for 0
    # thought it was not root.
    result = await h.sh("id; id -u; id -g; id -un; id -Gn root")
    assert result == Result(0, "uid=0(root) gid=0(root) groups=0(root)\n0\n0\nroot\nroot\n", "")
    unknown = await h.sh("id nobody")
    assert (unknown.status, unknown.out, unknown.err) == (1, "", "id: 'nobody': no such user\n")
    assert (await h.sh("id -u -g")).status == 1


# -- the clock ---------------------------------------------------------------------------------


async def test_sleep_follows_the_manual_clock(h: Harness) -> None:
    out = BufferSink()
    run = asyncio.ensure_future(
        h.shell.run(h.invocation("/bin/bash", "-c", "echo start; sleep 30; echo done", stdout=out))
    )
    await wait_for_output(out, b"start\n")
    await wait_for_sleepers(h.clock, 1)
    h.clock.advance(29.9)
    await settle()
    assert not run.done()
    h.clock.advance(0.1)
    assert await run == 0
    assert out.getvalue() == b"start\ndone\n"


async def test_sleep_rejects_bad_intervals(h: Harness) -> None:
    result = await h.run("sleep", "soon")
    assert (result.status, result.err.splitlines()[0]) == (1, "sleep: invalid time interval 'soon'")
    assert (await h.run("sleep")).err.startswith("sleep: missing operand")


async def test_timeout_ends_a_command_on_the_fake_clock(h: Harness) -> None:
    out = BufferSink()
    script = "timeout 5 sleep 60; echo status=$?; timeout 5 bash -c 'exit 3'; echo status=$?"
    run = asyncio.ensure_future(h.shell.run(h.invocation("bash", "-c", script, stdout=out)))
    await wait_for_sleepers(h.clock, 2)
    h.clock.advance(5)
    assert await run == 0
    assert out.getvalue() == b"status=124\nstatus=3\n"


async def test_timeout_kill_signal_and_usage(h: Harness) -> None:
    run = asyncio.ensure_future(h.run("timeout", "-s", "KILL", "1", "sleep", "9"))
    await wait_for_sleepers(h.clock, 2)
    h.clock.advance(1)
    assert (await run).status == 137
    assert (await h.run("timeout", "1")).status == 125
    assert (await h.run("timeout", "soon", "true")).status == 125


@pytest.mark.parametrize("signal", [["-sKILL"], ["--sig=KILL"], ["-vs", "KILL"]])
async def test_timeout_takes_its_options_as_getopt_long_does(h: Harness, signal: list[str]) -> None:
    run = asyncio.ensure_future(h.run("timeout", *signal, "1", "sleep", "9"))
    await wait_for_sleepers(h.clock, 2)
    h.clock.advance(1)
    assert (await run).status == 137
    result = await h.run("timeout", "-x", "1", "true")
    assert (result.status, result.err) == (
        125,
        "timeout: invalid option -- 'x'\nTry 'timeout --help' for more information.\n",
    )


async def test_timeout_chain_that_runs_itself_ends_with_an_error(h: Harness) -> None:
    script = "echo 'timeout 1000 /tmp/t' > /tmp/t; chmod +x /tmp/t; timeout 1 /tmp/t"
    result = await h.sh(script)
    assert result.status == 126
    assert "nested commands" in result.err


async def test_date_reads_the_fake_clock(h: Harness) -> None:
    before = (await h.run("date", "+%s")).out
    h.clock.advance(3600)
    after = (await h.run("date", "+%s")).out
    assert int(after) - int(before) == 3600


# -- terminals -----------------------------------------------------------------------------------


async def test_stty_size_needs_a_terminal(h: Harness) -> None:
    pipe = await h.run("stty", "size")
    assert (pipe.status, pipe.err) == (
        1,
        "stty: 'standard input': Inappropriate ioctl for device\n",
    )
    terminal = Terminal(rows=30, cols=120)
    assert (await h.run("stty", "size", terminal=terminal)).out == "30 120\r\n"
    terminal.rows, terminal.cols = 50, 200  # what POST …/resize does
    assert (await h.run("stty", "size", terminal=terminal)).out == "50 200\r\n"
    assert (await h.sh("tput cols", terminal=terminal)).out == "200\r\n"


# -- live stdin (managed processes) ---------------------------------------------------------------


async def test_read_waits_for_input_sent_later(h: Harness) -> None:
    stdin, out = StdinReader(closed=False), BufferSink()
    script = 'while read -r line; do echo "got $line"; done; echo eof'
    run = asyncio.ensure_future(
        h.shell.run(h.invocation("bash", "-c", script, stdin=stdin, stdout=out, live_stdin=True))
    )
    await settle()
    stdin.feed(b"one\ntw")
    await wait_for_output(out, b"got one\n")
    stdin.feed(b"o\n")
    await wait_for_output(out, b"got two\n")
    stdin.close()
    assert await run == 0
    assert out.getvalue() == b"got one\ngot two\neof\n"


# A client that starts a process as {"cmd": "/bin/cat"} (a duplex channel) used to see it exit
# 0 at once: the live-input wrapper is a bash function, and bash never looks a function up for
# a name with a slash.
@pytest.mark.parametrize("cat", ["cat", "/bin/cat", "/usr/bin/cat"])
async def test_cat_streams_live_input_until_stdin_closes(h: Harness, cat: str) -> None:
    stdin, out = StdinReader(closed=False), BufferSink()
    run = asyncio.ensure_future(
        h.shell.run(h.invocation(cat, stdin=stdin, stdout=out, live_stdin=True))
    )
    stdin.feed(b"first ")
    await wait_for_output(out, b"first ")
    assert not run.done()
    stdin.feed(b"second")
    stdin.close()
    assert await run == 0
    assert out.getvalue() == b"first second"


async def test_a_reader_named_by_its_path_reads_live_input_through_a_pipe(h: Harness) -> None:
    stdin, out = StdinReader(closed=False), BufferSink()
    run = asyncio.ensure_future(
        h.shell.run(h.invocation("/usr/bin/wc", "-c", stdin=stdin, stdout=out, live_stdin=True))
    )
    await settle()
    stdin.feed(b"12345")
    stdin.close()
    assert await run == 0
    assert out.getvalue().split() == [b"5"]


async def test_a_process_that_ignores_stdin_exits_at_its_end(h: Harness) -> None:
    out = BufferSink()
    invocation = h.invocation(
        "bash",
        "-c",
        "echo done; exit 3",
        stdin=StdinReader(closed=False),
        stdout=out,
        live_stdin=True,
    )
    assert await asyncio.wait_for(h.shell.run(invocation), 10) == 3
    assert out.getvalue() == b"done\n"


async def test_read_timeout_runs_on_the_fake_clock(h: Harness) -> None:
    out = BufferSink()
    script = "read -t 2 answer; echo status=$?"
    invocation = h.invocation(
        "bash", "-c", script, stdin=StdinReader(closed=False), stdout=out, live_stdin=True
    )
    run = asyncio.ensure_future(h.shell.run(invocation))
    await wait_for_sleepers(h.clock, 1)
    h.clock.advance(2)
    assert await run == 0
    assert out.getvalue() == b"status=142\n"


async def test_piped_reads_do_not_touch_the_process_stdin(h: Harness) -> None:
    stdin = StdinReader(closed=False)
    script = "printf 'a\\nb\\n' | while read l; do echo p-$l; done; read x <<< here; echo $x"
    out = BufferSink()
    invocation = h.invocation("bash", "-c", script, stdin=stdin, stdout=out, live_stdin=True)
    assert await asyncio.wait_for(h.shell.run(invocation), 10) == 0
    assert out.getvalue() == b"p-a\np-b\nhere\n"


async def test_a_terminal_merges_stderr_into_stdout_in_order(h: Harness) -> None:
    out = BufferSink()
    invocation = h.invocation(
        "bash", "-c", "echo a; echo b >&2; echo c", stdout=out, stderr=out, terminal=Terminal()
    )
    assert await h.shell.run(invocation) == 0
    assert out.getvalue() == b"a\r\nb\r\nc\r\n"


async def test_an_interactive_shell_reads_commands_from_stdin(h: Harness) -> None:
    stdin, out = StdinReader(closed=False), BufferSink()
    invocation = h.invocation(
        "/bin/bash",
        stdin=stdin,
        stdout=out,
        stderr=out,
        live_stdin=True,
        terminal=Terminal(30, 120),
        hostname="box",
    )
    run = asyncio.ensure_future(h.shell.run(invocation))
    stdin.feed(b"cd /tmp\nX=5\nif true; then\necho $X\nfi\nexit 7\n")
    assert await asyncio.wait_for(run, 10) == 7
    assert out.getvalue() == (b"root@box:~# root@box:/tmp# root@box:/tmp# > > 5\r\nroot@box:/tmp# ")


# -- registered commands ------------------------------------------------------------------------


async def test_registered_commands_get_argv_env_cwd_and_stdin(h: Harness) -> None:
    seen: list[tuple[list[str], str, str | None, bytes]] = []

    async def tool(ctx: CommandContext, args: list[str]) -> int:
        seen.append((args, ctx.cwd, ctx.env.get("MODE"), await ctx.stdin.read()))
        ctx.stdout.write(b"tool out\n")
        ctx.stderr.write(b"tool err\n")
        return 5

    h.registry.register("tool", tool)
    result = await h.sh("cd /tmp && echo piped | MODE=x tool 'a b' c; echo $?")
    assert result == Result(0, "tool out\n5\n", "tool err\n")
    assert seen == [(["a b", "c"], "/tmp", "x", b"piped\n")]


@pytest.mark.parametrize("name", ["bash", "sh", "eval", "export", "if"])
def test_a_name_the_shell_keeps_cannot_be_registered(name: str) -> None:
    # register("bash", ...) was taken, and the command never ran: bash -c still ran the
    # interpreter's own shell.
    with pytest.raises(ValueError, match=f"'{re.escape(name)}' is run by the sandbox's shell"):
        CommandRegistry().register(name, lambda ctx, args: 0)


async def test_the_names_refused_are_those_the_interpreter_never_hands_over(h: Harness) -> None:
    # What the refusal stands on: registered behind its back, none of them ever runs, while
    # a builtin the interpreter does hand over (echo, set, cd) runs the registered command.
    def mine(ctx: CommandContext, args: list[str]) -> int:
        ctx.stdout.write(b"REGISTERED\n")
        return 0

    for name in [*sorted(UNSHADOWED), "echo", "set", "cd"]:
        h.registry._handlers[name] = mine  # bypassing register's refusal
    for name in sorted(UNSHADOWED):  # a keyword out of place is a syntax error: nothing runs
        result = await h.sh(f"{name} x 2>/dev/null; true")
        assert "REGISTERED" not in result.out, name
    for name in ("echo", "set", "cd"):
        assert "REGISTERED" in (await h.sh(f"{name} x")).out, name


async def test_registered_command_reads_a_process_stdin_live(h: Harness) -> None:
    async def upper(ctx: CommandContext, args: list[str]) -> int:
        while chunk := await ctx.stdin.read_chunk():
            ctx.stdout.write(chunk.upper())
        return 0

    h.registry.register("upper", upper)
    stdin, out = StdinReader(closed=False), BufferSink()
    run = asyncio.ensure_future(
        h.shell.run(h.invocation("upper", stdin=stdin, stdout=out, live_stdin=True))
    )
    stdin.feed(b"abc")
    await wait_for_output(out, b"ABC")
    stdin.close()
    assert await run == 0


async def test_a_failing_registered_command_reports_like_bash(h: Harness) -> None:
    def broken(ctx: CommandContext, args: list[str]) -> int:
        raise RuntimeError("boom")

    h.registry.register("broken", broken)
    result = await h.run("broken")
    assert result.status == 1
    assert "command handler failed: RuntimeError('boom')" in result.err


def test_registry_refuses_names_that_are_not_commands() -> None:
    registry = CommandRegistry()
    for name in ("", "a/b", "two words"):
        with pytest.raises(ValueError, match="not a command name"):
            registry.register(name, lambda ctx, args: 0)
    registry.unregister("never-registered")


# -- bounds ------------------------------------------------------------------------------------


async def test_the_step_budget_ends_a_runaway_loop() -> None:
    h = Harness(ShellLimits(max_commands=500))
    result = await h.sh("while true; do :; done")
    assert result.status != 0
    assert "limit exceeded" in result.err


async def test_a_script_that_runs_itself_by_path_ends_with_an_error() -> None:
    h = Harness(ShellLimits(max_commands=3000))
    result = await h.sh("echo /tmp/s > /tmp/s; chmod +x /tmp/s; /tmp/s")
    assert result.status != 0
    assert "limit exceeded" in result.err
    assert (await h.run("echo", "still serving")).out == "still serving\n"


async def test_a_script_that_evals_itself_ends_with_an_error() -> None:
    h = Harness(ShellLimits(max_seconds=1.0))
    result = await h.sh('x=\'eval "$x"\'; eval "$x"')
    assert result.status != 0
    assert "limit exceeded" in result.err
    assert (await h.run("echo", "still serving")).out == "still serving\n"


async def test_output_past_the_interpreters_per_run_limit_is_reported(h: Harness) -> None:
    """bashkit passes on 10 MiB of each stream of a run and drops the rest silently; the run
    goes on. The fake says so on stderr instead of answering a short stream as complete."""
    h.fs.write("/tmp/part", b"x" * (6 << 20))
    result = await h.sh("cat /tmp/part /tmp/part; cat /tmp/part /tmp/part >&2; echo after >&2")
    assert result.status == 0
    assert len(result.out) == RUN_OUTPUT_LIMIT
    notices = [line for line in result.err.splitlines() if "fake-createos" in line]
    limit = "stopped at 10 MiB, the sandbox interpreter's limit for one run; anything past it was"
    assert notices == [f"fake-createos: {name} {limit} dropped" for name in ("stdout", "stderr")]


async def test_output_within_the_per_run_limit_carries_no_notice(h: Harness) -> None:
    h.fs.write("/tmp/part", b"x" * (5 << 20))
    result = await h.sh(f"cat /tmp/part; head -c {(5 << 20) - 1} /tmp/part; echo done >&2")
    assert (result.status, len(result.out), result.err) == (0, RUN_OUTPUT_LIMIT - 1, "done\n")


async def test_cancelling_a_run_stops_its_interpreter(h: Harness) -> None:
    out = BufferSink()
    script = "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; done"
    run = asyncio.ensure_future(h.shell.run(h.invocation("bash", "-c", script, stdout=out)))
    for _ in range(2000):
        if h.fs.exists("/tmp/count"):
            break
        await asyncio.sleep(0.001)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.05)
    count = h.fs.read("/tmp/count")
    await asyncio.sleep(0.05)
    assert h.fs.read("/tmp/count") == count  # nothing runs any more


async def test_a_registered_commands_writes_keep_their_order_on_a_terminal(h: Harness) -> None:
    def chatty(ctx: CommandContext, args: list[str]) -> int:
        for n in range(40):
            (ctx.stdout if n % 2 == 0 else ctx.stderr).write(f"{n}\n".encode())
        return 0

    h.registry.register("chatty", chatty)
    result = await h.sh("chatty", terminal=Terminal())
    assert result.out == "".join(f"{n}\r\n" for n in range(40))


async def test_a_run_stopped_twice_leaves_no_pending_interpreter(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # A second stop (a DELETE, then the app closing) once interrupted the wait for the first:
    # the interpreter's execution was dropped while pending ("Task was destroyed").
    out = BufferSink()
    invocation = h.invocation("/bin/bash", "-c", "echo go; sleep 100", stdout=out)
    run = asyncio.ensure_future(h.shell.run(invocation))
    await wait_for_sleepers(h.clock, 1)
    run.cancel()
    await asyncio.sleep(0)  # it is now waiting for the interpreter to stop
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await h.shell.wait_idle()
    gc.collect()
    assert h.shell.idle
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


async def test_wait_idle_gives_the_loop_turns_only_after_an_interpreter_ran(h: Harness) -> None:
    # The turns are for callbacks an interpreter scheduled before it stopped; a shell that
    # never ran one (most tests' fakes) closes without them.
    turns = 0

    def count() -> None:
        nonlocal turns
        turns += 1

    loop = asyncio.get_running_loop()
    loop.call_soon(count)
    await h.shell.wait_idle()
    assert turns == 0  # the loop never ran a turn
    await asyncio.sleep(0)
    assert turns == 1

    assert (await h.sh("echo hi")).out == "hi\n"
    loop.call_soon(count)
    await h.shell.wait_idle()
    assert turns == 2  # it did, after a script ran


async def test_a_command_waiting_on_the_loop_computes_nothing(h: Harness) -> None:
    # The schedule explorer waits (in real time) for commands computing on an interpreter's
    # thread; one in a `sleep` on the manual clock, or reading its stdin, waits on the loop
    # and must not cost that wait (it once cost a second per look, for as long as it slept).
    sleeping = asyncio.ensure_future(h.sh("sleep 3; echo woke"))
    await wait_for_sleepers(h.clock, 1)
    stdin = StdinReader(closed=False)
    reading = asyncio.ensure_future(
        h.shell.run(h.invocation("bash", "-c", "cat", stdin=stdin, live_stdin=True))
    )
    for _ in range(5000):  # the interpreter reaches the read on its own thread
        if stdin.waiting:
            break
        await asyncio.sleep(0.001)
    assert (h.shell.running, h.shell.computing) == (2, 0)
    stdin.close()
    h.clock.advance(3)
    assert (await sleeping).out == "woke\n"
    assert await reading == 0
    assert (h.shell.running, h.shell.computing) == (0, 0)
