"""The bash emulator: argv execution, the script language, builtins, registry and timing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from fake_server.clock import ManualClock
from fake_server.filesystem import FileSystem
from fake_server.shell import (
    BufferSink,
    CommandContext,
    CommandRegistry,
    Shell,
    StdinReader,
)

BASE_ENV = {"HOME": "/root", "PATH": "/usr/local/bin:/usr/bin:/bin"}


@dataclass
class Result:
    status: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode()

    @property
    def err(self) -> str:
        return self.stderr.decode()


class Harness:
    """One sandbox's filesystem and a shell; ``sleep`` records durations and returns at once."""

    def __init__(self) -> None:
        self.fs = FileSystem()
        self.registry = CommandRegistry.with_builtins()
        self.shell = Shell(self.registry)
        self.env = dict(BASE_ENV)
        self.sleeps: list[float] = []

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)

    def context(
        self, stdin: bytes | StdinReader = b"", cwd: str = "/root"
    ) -> tuple[CommandContext, BufferSink, BufferSink]:
        out, err = BufferSink(), BufferSink()
        reader = stdin if isinstance(stdin, StdinReader) else StdinReader(stdin)
        return CommandContext(self.fs, cwd, self.env, reader, out, err, self._sleep), out, err

    async def run(self, cmd: str, *args: str, stdin: bytes = b"", cwd: str = "/root") -> Result:
        ctx, out, err = self.context(stdin, cwd)
        status = await self.shell.run(cmd, args, ctx)
        return Result(status, out.getvalue(), err.getvalue())

    async def sh(self, script: str, *, stdin: bytes = b"", cwd: str = "/root") -> Result:
        ctx, out, err = self.context(stdin, cwd)
        status = await self.shell.run_script(script, ctx)
        return Result(status, out.getvalue(), err.getvalue())


@pytest.fixture
def h() -> Harness:
    return Harness()


async def settle() -> None:
    """Let every ready task run until it blocks (on the manual clock or on stdin)."""
    for _ in range(20):
        await asyncio.sleep(0)


# -- the exact calls a lease provider makes ------------------------------------------------------


async def test_provider_mkdir_through_login_shell(h: Harness) -> None:
    result = await h.run("/bin/bash", "-lc", "mkdir -p -- '/paperclip-workspace'")
    assert result == Result(0, b"", b"")
    assert h.fs.is_dir("/paperclip-workspace")


async def test_provider_cat_is_byte_exact(h: Harness) -> None:
    h.fs.write("/tmp/blob", b"\x00\xffno newline")
    assert await h.run("/bin/cat", "/tmp/blob") == Result(0, b"\x00\xffno newline", b"")


async def test_provider_rm_force_of_missing_path(h: Harness) -> None:
    assert await h.run("/bin/rm", "-f", "--", "/tmp/never-existed") == Result(0, b"", b"")


async def test_provider_echo_ready(h: Harness) -> None:
    result = await h.run("/bin/echo", "paperclip-createos-ready")
    assert result == Result(0, b"paperclip-createos-ready\n", b"")


async def test_provider_export_cd_exec_script(h: Harness) -> None:
    script = (
        "export A='x y'; cd /tmp && exec /bin/bash -lc 'printf %s \"$A\" > out.txt' "
        "< /dev/null; echo not-reached"
    )
    assert await h.run("/bin/bash", "-lc", script) == Result(0, b"", b"")
    assert h.fs.read("/tmp/out.txt") == b"x y"


async def test_provider_cat_from_redirected_stdin(h: Harness) -> None:
    h.fs.write("/tmp/stdin-file", b"payload")
    assert (await h.sh("cat < /tmp/stdin-file")).stdout == b"payload"


# -- run(): argv without a shell -----------------------------------------------------------------


@pytest.mark.parametrize("directory", ["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"])
async def test_bin_directories_resolve_by_basename(h: Harness, directory: str) -> None:
    assert (await h.run(f"{directory}/echo", "hi")).stdout == b"hi\n"


async def test_unknown_command_is_127(h: Harness) -> None:
    assert await h.run("nope", "x") == Result(127, b"", b"bash: nope: command not found\n")
    assert await h.run("/bin/nope") == Result(
        127, b"", b"bash: /bin/nope: No such file or directory\n"
    )
    assert await h.run("/x/y") == Result(127, b"", b"bash: /x/y: No such file or directory\n")


async def test_run_passes_args_verbatim_without_a_shell(h: Harness) -> None:
    result = await h.run("echo", "$HOME", "a  b", "'q'", ";", "&&")
    assert result.out == "$HOME a  b 'q' ; &&\n"


async def test_special_builtins_only_exist_inside_scripts(h: Harness) -> None:
    assert (await h.run("cd", "/tmp")).status == 127


@pytest.mark.parametrize(
    "argv",
    [
        ["bash", "-c", "echo $0-$1"],
        ["sh", "-c", "echo $0-$1"],
        ["/bin/sh", "-c", "echo $0-$1"],
        ["/usr/bin/bash", "-lc", "echo $0-$1"],
        ["/bin/bash", "-l", "-c", "echo $0-$1"],
        ["bash", "--login", "-c", "echo $0-$1"],
    ],
)
async def test_shell_invocations(h: Harness, argv: list[str]) -> None:
    result = await h.run(*argv, "name", "first")
    assert result == Result(0, b"name-first\n", b"")


async def test_bash_defaults_dollar_zero_and_counts_args(h: Harness) -> None:
    assert (await h.run("bash", "-c", 'echo "$0" $#')).out == "bash 0\n"
    result = await h.run("bash", "-c", 'printf "[%s]" "$@"; echo " $#"', "sh", "a b", "c")
    assert result.out == "[a b][c] 2\n"


async def test_bash_reads_script_from_stdin_or_file(h: Harness) -> None:
    assert (await h.run("bash", stdin=b"echo from-stdin\n")).out == "from-stdin\n"
    h.fs.write("/root/job.sh", b"#!/bin/bash\necho $0 $1\nexit 4\n")
    assert await h.run("bash", "job.sh", "arg") == Result(4, b"job.sh arg\n", b"")
    assert await h.run("./job.sh", "arg") == Result(4, b"/root/job.sh arg\n", b"")
    missing = await h.run("bash", "missing.sh")
    assert missing == Result(127, b"", b"bash: missing.sh: No such file or directory\n")


async def test_bash_usage_errors(h: Harness) -> None:
    assert await h.run("bash", "-c") == Result(2, b"", b"bash: -c: option requires an argument\n")
    assert (await h.run("bash", "-Z", "-c", "true")).status == 2


# -- quoting and words ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("echo 'a  $HOME \\n'", "a  $HOME \\n\n"),
        ('echo "a  $HOME"', "a  /root\n"),
        ('echo "q\\"q \\\\ \\$X \\` \\n"', 'q"q \\ $X ` \\n\n'),
        ("echo a\\ b \\$X \\'", "a b $X '\n"),
        ("echo 'a'\"b\"c${HOME}", "abc/root\n"),
        ("printf '[%s]' '' \"\"", "[][]"),
        ("echo -- a", "-- a\n"),
        ("echo a # a comment", "a\n"),
        ("echo a#b", "a#b\n"),
        ("echo a \\\n  b", "a b\n"),
        ('echo "multi\nline"', "multi\nline\n"),
        ("echo \\", "\\\n"),
    ],
)
async def test_quoting(h: Harness, script: str, expected: str) -> None:
    result = await h.sh(script)
    assert (result.status, result.out) == (0, expected)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ('A=1; echo $A ${A} "$A"', "1 1 1\n"),
        ("echo [$UNSET]", "[]\n"),
        ("echo ${UNSET:-dflt} ${UNSET-dflt}", "dflt dflt\n"),
        ("E=; echo [${E:-dflt}] [${E-dflt}]", "[dflt] []\n"),
        ("A='x  y'; printf '[%s]' $A", "[x  y]"),
        ("false; echo $?; true; echo $?", "1\n0\n"),
        ("echo ~ ~/x a~ '~'", "/root /root/x a~ ~\n"),
        ('echo $ a$ "$"', "$ a$ $\n"),
        ("echo $1 [$@] $#", " [] 0\n"),
    ],
)
async def test_expansion(h: Harness, script: str, expected: str) -> None:
    assert (await h.sh(script)).out == expected


async def test_assignments_and_export(h: Harness) -> None:
    script = "A=1; B=2 env; echo [$B]; export C=3; D=4; export D; env"
    result = await h.sh(script)
    lines = result.out.splitlines()
    assert "B=2" in lines[: lines.index("[]")]
    assert "A=1" not in lines  # unexported shell variable
    assert lines[lines.index("[]") + 1 :] == [
        "C=3",
        "D=4",
        "HOME=/root",
        "PATH=/usr/local/bin:/usr/bin:/bin",
    ]
    assert h.env == BASE_ENV  # the caller's environment is never mutated


async def test_assignment_to_exported_variable_stays_exported(h: Harness) -> None:
    assert (await h.sh("HOME=/srv; env")).out.splitlines()[0] == "HOME=/srv"


async def test_export_and_unset_edge_cases(h: Harness) -> None:
    bad = await h.sh("export 1a=x")
    assert bad == Result(1, b"", b"bash: export: `1a=x': not a valid identifier\n")
    assert (await h.sh("export")).out.startswith('declare -x HOME="/root"\n')
    assert (await h.sh("unset HOME; echo [$HOME]; A=1; unset A; echo [$A]")).out == "[]\n[]\n"


# -- lists and exit statuses ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "out", "status"),
    [
        ("false || echo b && echo c", "b\nc\n", 0),
        ("true || echo no && echo yes", "yes\n", 0),
        ("true && false || echo rescued", "rescued\n", 0),
        ("false && echo no", "", 1),
        ("false; echo after", "after\n", 0),
        ("echo a\necho b\n\n", "a\nb\n", 0),
        ("true &&\n  echo continued", "continued\n", 0),
        ("! true; echo $?; ! false", "1\n", 0),
        ("echo hi | cat | wc -c", "3\n", 0),
        ("echo x | false", "", 1),
        ("exit 3 | true; echo still-here", "still-here\n", 0),
        ("false", "", 1),
        ("", "", 0),
        ("# only a comment", "", 0),
    ],
)
async def test_lists(h: Harness, script: str, out: str, status: int) -> None:
    result = await h.sh(script)
    assert (result.out, result.status) == (out, status)


@pytest.mark.parametrize(
    ("script", "status", "out"),
    [
        ("echo a; exit 3; echo b", 3, "a\n"),
        ("false; exit", 1, ""),
        ("exit 256", 0, ""),
        ("exec echo hi; echo never", 0, "hi\n"),
        ("exec false; echo never", 1, ""),
        ("set -e; echo a; false; echo never", 1, "a\n"),
        ("set -e; false || true; false && true; ! true; echo survived", 0, "survived\n"),
        ("set -e; set +e; false; echo off", 0, "off\n"),
        ("set -o errexit; true && false; echo never", 1, ""),
        ("set -euo pipefail; echo $#; false; echo never", 1, "0\n"),
    ],
)
async def test_ending_a_script(h: Harness, script: str, status: int, out: str) -> None:
    result = await h.sh(script)
    assert (result.status, result.out) == (status, out)


async def test_exit_and_exec_errors(h: Harness) -> None:
    assert await h.sh("exit abc") == Result(2, b"", b"bash: exit: abc: numeric argument required\n")
    assert await h.sh("exec nope; echo x") == Result(127, b"", b"bash: exec: nope: not found\n")
    assert (await h.run("bash", "-e", "-c", "false; echo never")).status == 1


async def test_set_dash_dash_replaces_positionals(h: Harness) -> None:
    assert (await h.sh("set -- a b; echo $# $2")).out == "2 b\n"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("&& echo", "syntax error near unexpected token `&&'"),
        ("echo a;;", "syntax error near unexpected token `;'"),
        ("| cat", "syntax error near unexpected token `|'"),
        ("echo >", "syntax error near unexpected token `newline'"),
        ("echo > ;", "syntax error near unexpected token `;'"),
        ("echo a &&", "syntax error: unexpected end of file"),
        ("echo a |", "syntax error: unexpected end of file"),
        ("echo a )", "syntax error near unexpected token `)'"),
        ("(echo)", "subshells ( ) is not supported by the fake shell"),
        ("echo a & echo b", "background jobs (&) is not supported by the fake shell"),
        ("cat <<EOF", "here-documents (<<) is not supported by the fake shell"),
        ("echo 'open", "unexpected EOF while looking for matching `''"),
        ('echo "open', "unexpected EOF while looking for matching `\"'"),
        ("echo ${open", "unexpected EOF while looking for matching `}'"),
        ("echo ${A/b}", "${A/b}: bad substitution"),
        ("echo $(date)", "command substitution is not supported by the fake shell"),
        ("echo `date`", "command substitution is not supported by the fake shell"),
        ("if true; then echo; fi", "`if' is not supported by the fake shell"),
    ],
)
async def test_syntax_errors_exit_2_and_run_nothing(h: Harness, script: str, message: str) -> None:
    result = await h.sh(f"echo first; {script}")
    assert result == Result(2, b"", f"bash: {message}\n".encode())


# -- redirections --------------------------------------------------------------------------------


async def test_output_redirections(h: Harness) -> None:
    result = await h.sh("echo a > f; echo b >> f; echo c >>f; cat f; echo d >f; cat /root/f")
    assert result.out == "a\nb\nc\nd\n"


async def test_stderr_redirections(h: Harness) -> None:
    result = await h.sh("cat /nope 2> err; cat err; cat /nope 2>&1; echo to-err >&2; echo x 1>&2")
    assert result.out == "cat: /nope: No such file or directory\n" * 2
    assert result.err == "to-err\nx\n"
    await h.sh("cat /nope 2>> err; echo out &> both; cat /nope &>> both")
    assert h.fs.read("/root/err") == b"cat: /nope: No such file or directory\n" * 2
    assert h.fs.read("/root/both") == b"out\ncat: /nope: No such file or directory\n"


async def test_redirection_order_matters(h: Harness) -> None:
    result = await h.sh("cat /nope 2>&1 > f; cat /nope > g 2>&1")
    assert result.out == "cat: /nope: No such file or directory\n"
    assert h.fs.read("/root/f") == b""
    assert h.fs.read("/root/g") == b"cat: /nope: No such file or directory\n"


async def test_virtual_devices(h: Harness) -> None:
    result = await h.sh(
        "echo gone > /dev/null; cat < /dev/null; cat /dev/null; echo e > /dev/stderr"
    )
    assert result == Result(0, b"", b"e\n")
    assert not h.fs.exists("/dev/null")
    assert (await h.sh("cat < /dev/stdin", stdin=b"in")).stdout == b"in"


async def test_input_redirection_errors(h: Harness) -> None:
    result = await h.sh("cat < missing; echo $?")
    assert result == Result(0, b"1\n", b"bash: missing: No such file or directory\n")


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo x > /nope/f", "bash: /nope/f: No such file or directory\n"),
        ("echo x > /tmp", "bash: /tmp: Is a directory\n"),
        ("echo x 3> f", "bash: 3: Bad file descriptor\n"),
        ("echo x 2>&7", "bash: 7: Bad file descriptor\n"),
        ("echo x 2>&f", "bash: f: ambiguous redirect\n"),
    ],
)
async def test_redirection_failures_skip_the_command(h: Harness, script: str, message: str) -> None:
    assert await h.sh(script) == Result(1, b"", message.encode())


async def test_redirect_relative_to_current_cwd_and_bare_redirect(h: Harness) -> None:
    await h.sh("cd /tmp; echo x > rel; > empty")
    assert h.fs.read("/tmp/rel") == b"x\n"
    assert h.fs.read("/tmp/empty") == b""


async def test_exec_without_command_redirects_the_rest_of_the_script(h: Harness) -> None:
    result = await h.sh("exec > log 2>&1; echo out; cat /nope; exit 0")
    assert result == Result(0, b"", b"")
    assert h.fs.read("/root/log") == b"out\ncat: /nope: No such file or directory\n"


async def test_write_over_a_size_cap_reports_efbig(h: Harness) -> None:
    h.fs = FileSystem(max_file_bytes=4)
    result = await h.sh("echo toolong > f; echo more >> f; echo $?")
    assert result.out == "0\n"  # like a write error bash's echo ignores
    assert result.err == "bash: f: File too large\nbash: f: File too large\n"
    assert h.fs.read("/root/f") == b""


# -- cd and paths --------------------------------------------------------------------------------


async def test_cd(h: Harness) -> None:
    result = await h.sh("cd /tmp; pwd; mkdir d; cd d; pwd; cd ..; pwd; cd; pwd; echo $PWD")
    assert result.out == "/tmp\n/tmp/d\n/tmp\n/root\n/root\n"


async def test_cd_errors_and_isolation(h: Harness) -> None:
    h.fs.write("/tmp/f", b"")
    result = await h.sh("cd /nope; echo $?; cd /tmp/f; cd a b")
    assert result.out == "1\n"
    assert result.err == (
        "bash: cd: /nope: No such file or directory\n"
        "bash: cd: /tmp/f: Not a directory\n"
        "bash: cd: too many arguments\n"
    )
    assert (await h.sh("pwd", cwd="/tmp")).out == "/tmp\n"


# -- builtins ------------------------------------------------------------------------------------


async def test_mkdir(h: Harness) -> None:
    assert (await h.sh("mkdir -p a/b/c && mkdir -p -- a/b && mkdir x")).status == 0
    assert h.fs.is_dir("/root/a/b/c")
    assert h.fs.is_dir("/root/x")
    result = await h.sh("mkdir x q/r; echo $?")
    assert result.out == "1\n"
    assert result.err == (
        "mkdir: cannot create directory 'x': File exists\n"
        "mkdir: cannot create directory 'q/r': No such file or directory\n"
    )
    assert await h.sh("mkdir") == Result(1, b"", b"mkdir: missing operand\n")
    assert await h.sh("mkdir -z d") == Result(1, b"", b"mkdir: invalid option -- 'z'\n")


async def test_cat(h: Harness) -> None:
    h.fs.write("/root/a", b"A")
    result = await h.sh("cat a missing - a; echo $?", stdin=b"IN")
    assert result.out == "AINA1\n"
    assert result.err == "cat: missing: No such file or directory\n"
    assert (await h.sh("cat /tmp")).err == "cat: /tmp: Is a directory\n"
    assert (await h.sh("cat -- a", stdin=b"")).out == "A"
    assert (await h.sh("cat --bogus")).err == "cat: unrecognized option '--bogus'\n"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("echo", "\n"),
        ("echo -n a b", "a b"),
        ("echo -e 'a\\tb\\n'", "a\tb\n\n"),
        ("echo -ne 'x\\n'", "x\n"),
        ("echo -e 'stop\\chere'", "stop"),
        ("echo -e '\\x41\\0102\\e' | wc -c", "4\n"),
        ("echo 'a\\tb'", "a\\tb\n"),
        ("echo -eE 'a\\tb'", "a\\tb\n"),
        ("echo -x", "-x\n"),
        ("echo -n", ""),
    ],
)
async def test_echo(h: Harness, script: str, expected: str) -> None:
    assert (await h.sh(script)).out == expected


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("printf %s 'a b'", "a b"),
        ("printf '%s\\n' a b c", "a\nb\nc\n"),
        ("printf '%s=%d\\n' a 1 b", "a=1\nb=0\n"),
        ("printf '100%%\\t\\\\\\n'", "100%\t\\\n"),
        ("printf 'no args %s|'", "no args |"),
        ("printf 'static\\n' extra ignored", "static\n"),
        ("printf '[%5s][%-3s][%03d][%x][%.2f]' ab c 7 255 1.5", "[   ab][c  ][007][ff][1.50]"),
        ("printf '%i %d %c' 0x10 010 word", "16 8 w"),
        ("printf %d \\'A", "65"),
        ("printf '%b|%s' 'a\\tb' 'a\\tb'", "a\tb|a\\tb"),
        ("printf '%b' 'x\\cy'; printf after", "xafter"),
        ("printf -- '-%s-' x", "-x-"),
        ("printf '\\101\\x42\\\"'", 'AB"'),
    ],
)
async def test_printf(h: Harness, script: str, expected: str) -> None:
    result = await h.sh(script)
    assert (result.status, result.out) == (0, expected)


async def test_printf_errors(h: Harness) -> None:
    assert await h.sh("printf %d x") == Result(1, b"0", b"bash: printf: x: invalid number\n")
    usage = await h.sh("printf")
    assert usage == Result(2, b"", b"printf: usage: printf [-v var] format [arguments]\n")


async def test_printf_raw_bytes(h: Harness) -> None:
    assert (await h.sh("printf '\\377\\0'")).stdout == b"\xff\x00"


async def test_rm(h: Harness) -> None:
    h.fs.write("/root/d/f", b"", make_parents=True)
    h.fs.write("/root/f", b"")
    missing = await h.sh("rm nope f; echo $?")
    assert missing.out == "1\n"
    assert missing.err == "rm: cannot remove 'nope': No such file or directory\n"
    assert not h.fs.exists("/root/f")
    directory = await h.sh("rm d")
    assert directory == Result(1, b"", b"rm: cannot remove 'd': Is a directory\n")
    assert await h.sh("rm -rf d nope && rm -f && rm -r -f -- gone") == Result(0, b"", b"")
    assert not h.fs.exists("/root/d")
    assert await h.sh("rm") == Result(1, b"", b"rm: missing operand\n")
    h.fs.write("/root/e/f", b"", make_parents=True)
    assert (await h.sh("rm -R e")).status == 0


async def test_env(h: Harness) -> None:
    assert (await h.sh("env")).out == "HOME=/root\nPATH=/usr/local/bin:/usr/bin:/bin\n"
    assert (await h.run("/usr/bin/env", "-i", "B=2", "A=1")).out == "A=1\nB=2\n"
    result = await h.run("env", "-u", "PATH", "X=1", "bash", "-c", 'echo "$X $PATH"')
    assert result.out == "1 \n"
    assert (await h.run("env", "--", "echo", "-n", "k")).out == "k"
    missing = await h.run("env", "X=1", "nope")
    assert missing == Result(127, b"", b"env: 'nope': No such file or directory\n")
    assert (await h.run("env", "-q")).status == 125


async def test_true_false_colon_pwd(h: Harness) -> None:
    result = await h.sh("true x; echo $?; false x; echo $?; : anything; echo $?; pwd", cwd="/tmp")
    assert result.out == "0\n1\n0\n/tmp\n"


async def test_sleep_uses_the_injected_clock(h: Harness) -> None:
    assert (await h.sh("sleep 1.5; sleep 2m; sleep 1 1h 0.5s; sleep 0")).status == 0
    assert h.sleeps == [1.5, 120.0, 3601.5, 0.0]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("sleep", "sleep: missing operand\n"),
        ("sleep abc", "sleep: invalid time interval 'abc'\n"),
        ("sleep -1", "sleep: invalid time interval '-1'\n"),
        ("sleep nan", "sleep: invalid time interval 'nan'\n"),
        ("sleep 1x", "sleep: invalid time interval '1x'\n"),
    ],
)
async def test_sleep_errors(h: Harness, script: str, message: str) -> None:
    assert await h.sh(script) == Result(1, b"", message.encode())
    assert h.sleeps == []


async def test_touch(h: Harness) -> None:
    h.fs.write("/root/keep", b"content")
    assert (await h.sh("touch new keep")).status == 0
    assert h.fs.read("/root/new") == b""
    assert h.fs.read("/root/keep") == b"content"
    result = await h.sh("touch /nope/x")
    assert result.err == "touch: cannot touch '/nope/x': No such file or directory\n"
    assert (await h.sh("touch")).status == 1


async def test_ls(h: Harness) -> None:
    h.fs.write("/root/b", b"")
    h.fs.write("/root/a/x", b"", make_parents=True)
    assert (await h.sh("ls")).out == "a\nb\n"
    assert (await h.sh("ls -1 a /root/b")).out == "x\n/root/b\n"
    missing = await h.sh("ls nope")
    assert missing == Result(2, b"", b"ls: cannot access 'nope': No such file or directory\n")


@pytest.mark.parametrize(
    ("expression", "status"),
    [
        ("test -e /tmp", 0),
        ("test -e /nope", 1),
        ("test -f /root/file", 0),
        ("test -f /tmp", 1),
        ("test -d /tmp", 0),
        ("test -d /root/file", 1),
        ("test -s /root/file", 0),
        ("test -s /root/empty", 1),
        ("test -n x", 0),
        ("test -n ''", 1),
        ("test -z ''", 0),
        ("test -z x", 1),
        ("test a = a", 0),
        ("test a == b", 1),
        ("test a != b", 0),
        ("test 2 -lt 10", 0),
        ("test 2 -ge 10", 1),
        ("test 3 -eq 3", 0),
        ("test ! -e /nope", 0),
        ("test ! a = a", 1),
        ("test x", 0),
        ("test ''", 1),
        ("test", 1),
        ("test !", 0),
        ("test -e ''", 1),
        ("[ -d /tmp ]", 0),
        ("[ a = b ]", 1),
        ("[ ]", 1),
    ],
)
async def test_test_and_bracket(h: Harness, expression: str, status: int) -> None:
    h.fs.write("/root/file", b"x")
    h.fs.write("/root/empty", b"")
    assert await h.sh(expression) == Result(status, b"", b"")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("[ -d /tmp", "bash: [: missing `]'\n"),
        ("test a b", "bash: test: a: unary operator expected\n"),
        ("test a -x b", "bash: test: -x: binary operator expected\n"),
        ("test a b c d", "bash: test: too many arguments\n"),
        ("[ 1 -lt x ]", "bash: [: x: integer expression expected\n"),
    ],
)
async def test_test_errors_exit_2(h: Harness, expression: str, message: str) -> None:
    assert await h.sh(expression) == Result(2, b"", message.encode())


async def test_head_and_tail(h: Harness) -> None:
    h.fs.write("/root/f", b"".join(f"{i}\n".encode() for i in range(1, 13)))
    assert (await h.sh("head f")).out == "".join(f"{i}\n" for i in range(1, 11))
    assert (await h.sh("head -n 2 f; head -3 f; head -n1 f")).out == "1\n2\n1\n2\n3\n1\n"
    assert (await h.sh("tail -n 2 f; tail -1 f")).out == "11\n12\n12\n"
    assert (await h.sh("tail -n +11 f; tail -n 0 f")).out == "11\n12\n"
    assert (await h.sh("head -c 3 f; tail -c 3 f")).out == "1\n212\n"
    assert (await h.sh("printf 'a\\nb\\nc' | tail -n 1")).out == "c"
    assert (await h.sh("head -n 2", stdin=b"x\ny\nz\n")).out == "x\ny\n"
    missing = await h.sh("tail nope")
    assert missing.err == "tail: cannot open 'nope' for reading: No such file or directory\n"
    assert (await h.sh("head -n x f")).err == "head: invalid number of lines: 'x'\n"
    assert (await h.sh("head -n")).err == "head: option requires an argument -- 'n'\n"


async def test_wc(h: Harness) -> None:
    h.fs.write("/root/f", b"one two\nthree\n")
    assert (await h.sh("wc -l f; wc -c < f; wc -w f; wc f")).out == ("2 f\n14\n3 f\n2 3 14 f\n")
    assert (await h.sh("wc -l nope")).err == "wc: nope: No such file or directory\n"


async def test_mv(h: Harness) -> None:
    h.fs.write("/root/a", b"A")
    h.fs.write("/root/b", b"B")
    h.fs.mkdir("/root/dir")
    assert (await h.sh("mv a c && mv c b dir")).status == 0
    assert h.fs.read("/root/dir/c") == b"A"
    assert h.fs.read("/root/dir/b") == b"B"
    assert not h.fs.exists("/root/a")
    missing = await h.sh("mv nope x")
    assert missing == Result(1, b"", b"mv: cannot stat 'nope': No such file or directory\n")
    assert (await h.sh("mv dir/b dir/c x")).err == "mv: target 'x' is not a directory\n"
    assert (await h.sh("mv one")).err == "mv: missing operand\n"
    failed = await h.sh("mv dir dir/sub")
    assert failed.err == "mv: cannot move 'dir' to '/root/dir/sub': Invalid argument\n"


async def test_cp(h: Harness) -> None:
    h.fs.write("/root/src/sub/f", b"F", make_parents=True)
    h.fs.write("/root/a", b"A")
    assert (await h.sh("cp a b && cp -r src copy && mkdir d && cp a b d")).status == 0
    assert h.fs.read("/root/b") == b"A"
    assert h.fs.read("/root/a") == b"A"
    assert h.fs.read("/root/copy/sub/f") == b"F"
    assert h.fs.listdir("/root/d") == ["a", "b"]
    result = await h.sh("cp src x; cp nope x; cp -r src src/sub; cp a /nope/x")
    assert result.err == (
        "cp: -r not specified; omitting directory 'src'\n"
        "cp: cannot stat 'nope': No such file or directory\n"
        "cp: cannot copy a directory, 'src', into itself\n"
        "cp: cannot create '/nope/x': No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("basename /a/b/c.txt", "c.txt\n"),
        ("basename /a/b/c.txt .txt", "c\n"),
        ("basename .txt .txt", ".txt\n"),
        ("basename /a/b/", "b\n"),
        ("basename /", "/\n"),
        ("dirname /a/b/c", "/a/b\n"),
        ("dirname /a/b/", "/a\n"),
        ("dirname file", ".\n"),
        ("dirname /", "/\n"),
        ("dirname /a a/b", "/\na\n"),
    ],
)
async def test_basename_dirname(h: Harness, script: str, expected: str) -> None:
    assert (await h.sh(script)).out == expected


async def test_basename_dirname_need_an_operand(h: Harness) -> None:
    assert (await h.sh("basename")).err == "basename: missing operand\n"
    assert (await h.sh("dirname")).err == "dirname: missing operand\n"


async def test_tee(h: Harness) -> None:
    h.fs.write("/root/log", b"old\n")
    result = await h.sh("echo new | tee out | tee -a log; tee /nope/x < /dev/null")
    assert result.out == "new\n"
    assert result.err == "tee: /nope/x: No such file or directory\n"
    assert h.fs.read("/root/out") == b"new\n"
    assert h.fs.read("/root/log") == b"old\nnew\n"


# -- registry ------------------------------------------------------------------------------------


async def test_registered_sync_and_async_handlers(h: Harness) -> None:
    seen: list[tuple[str, list[str], str | None]] = []

    def sync_handler(ctx: CommandContext, args: list[str]) -> int:
        seen.append((ctx.cwd, args, ctx.env.get("TOKEN")))
        ctx.stdout.write(b"sync\n")
        return 5

    async def async_handler(ctx: CommandContext, args: list[str]) -> int:
        data = await ctx.stdin.read()
        ctx.stdout.write(data.upper())
        return 0

    h.registry.register("tool", sync_handler)
    h.registry.register("upper", async_handler)
    result = await h.sh("cd /tmp; TOKEN=t tool a 'b c'; echo $?; echo hi | upper")
    assert result.out == "sync\n5\nHI\n"
    assert seen == [("/tmp", ["a", "b c"], "t")]
    assert (await h.run("/usr/local/bin/tool")).status == 5


async def test_user_handlers_shadow_builtins_until_unregistered(h: Harness) -> None:
    h.registry.register("echo", lambda ctx, args: 42)
    assert (await h.run("/bin/echo", "x")).status == 42
    h.registry.unregister("echo")
    assert (await h.run("echo", "x")).out == "x\n"
    h.registry.unregister("echo")  # now removes the builtin itself
    assert (await h.run("echo")).status == 127
    h.registry.unregister("never-registered")


async def test_registry_copy_is_independent(h: Harness) -> None:
    copy = h.registry.copy()
    copy.register("extra", lambda ctx, args: 0)
    copy.unregister("cat")
    assert h.registry.get("extra") is None
    assert h.registry.get("cat") is not None
    assert CommandRegistry().get("echo") is None


async def test_full_path_registration_and_user_bash(h: Harness) -> None:
    h.registry.register("/opt/app/run", lambda ctx, args: 7)
    assert (await h.run("/opt/app/run")).status == 7
    assert (await h.sh("/opt/app/run")).status == 7
    h.registry.register("bash", lambda ctx, args: 9)
    assert (await h.run("/bin/bash", "-c", "true")).status == 9


async def test_handler_exceptions_propagate(h: Harness) -> None:
    def broken(ctx: CommandContext, args: list[str]) -> int:
        raise RuntimeError("boom")

    h.registry.register("broken", broken)
    with pytest.raises(RuntimeError, match="boom"):
        await h.sh("echo a; broken")


class RecordingSink:
    """Remembers each write separately, so tests can see output arrive over time."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)


async def test_streaming_handler_output_arrives_in_order_over_time(h: Harness) -> None:
    clock = ManualClock()

    async def stream(ctx: CommandContext, args: list[str]) -> int:
        for word in args:
            ctx.stdout.write(word.encode())
            await ctx.sleep(1)
        return 0

    h.registry.register("stream", stream)
    sink = RecordingSink()
    ctx = CommandContext(h.fs, "/", {}, StdinReader(), sink, sink, clock.sleep)
    task = asyncio.create_task(h.shell.run_script("echo start; stream a b; echo end", ctx))
    await settle()
    assert sink.chunks == [b"start\n", b"a"]
    clock.advance(1)
    await settle()
    assert sink.chunks == [b"start\n", b"a", b"b"]
    clock.advance(1)
    assert await task == 0
    assert sink.chunks == [b"start\n", b"a", b"b", b"end\n"]


# -- timeout -------------------------------------------------------------------------------------


async def test_timeout_cancels_a_slow_command(h: Harness) -> None:
    clock = ManualClock()
    cancelled: list[bool] = []

    async def slow(ctx: CommandContext, args: list[str]) -> int:
        try:
            await ctx.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return 0

    h.registry.register("slow", slow)
    out = BufferSink()
    ctx = CommandContext(h.fs, "/", {}, StdinReader(), out, out, clock.sleep)
    task = asyncio.create_task(h.shell.run_script("timeout 5 slow; echo $?", ctx))
    await settle()
    clock.advance(4.9)
    await settle()
    assert not task.done()
    clock.advance(0.1)
    assert await task == 0
    assert out.getvalue() == b"124\n"
    assert cancelled == [True]
    assert clock.pending == 0


async def test_timeout_returns_the_commands_status_when_it_finishes(h: Harness) -> None:
    clock = ManualClock()
    out = BufferSink()
    ctx = CommandContext(h.fs, "/", {}, StdinReader(), out, out, clock.sleep)
    assert await h.shell.run("timeout", ["5", "bash", "-c", "echo hi; exit 3"], ctx) == 3
    assert out.getvalue() == b"hi\n"
    assert clock.pending == 0  # the timer was cancelled


@pytest.mark.parametrize(
    ("options", "status"),
    [
        (["-s", "KILL"], 137),
        (["--signal=SIGKILL"], 137),
        (["-sTERM", "-k", "2"], 124),
        (["--kill-after=1s", "--foreground"], 124),
    ],
)
async def test_timeout_signal_options(h: Harness, options: list[str], status: int) -> None:
    clock = ManualClock()
    ctx, _, _ = h.context()
    ctx.sleep = clock.sleep
    task = asyncio.create_task(h.shell.run("timeout", [*options, "1", "sleep", "9"], ctx))
    await settle()
    clock.advance(1)
    assert await task == status


async def test_timeout_zero_disables_it(h: Harness) -> None:
    assert (await h.run("timeout", "0", "sleep", "3")).status == 0
    assert h.sleeps == [3.0]


@pytest.mark.parametrize(
    ("args", "result"),
    [
        (["5"], Result(125, b"", b"timeout: missing operand\n")),
        (["x", "true"], Result(125, b"", b"timeout: invalid time interval 'x'\n")),
        (["-k", "y", "1", "true"], Result(125, b"", b"timeout: invalid time interval 'y'\n")),
        (["--bogus", "1", "true"], Result(125, b"", b"timeout: unrecognized option '--bogus'\n")),
        (
            ["1", "nope"],
            Result(127, b"", b"timeout: failed to run command 'nope': No such file or directory\n"),
        ),
    ],
)
async def test_timeout_errors(h: Harness, args: list[str], result: Result) -> None:
    assert await h.run("timeout", *args) == result


async def test_timeout_stops_at_the_command_operand(h: Harness) -> None:
    assert (await h.run("timeout", "5", "echo", "-n", "-s")).out == "-s"


# -- stdin and cancellation ----------------------------------------------------------------------


async def test_stdin_reader_waits_for_close() -> None:
    reader = StdinReader(b"a", closed=False)
    task = asyncio.create_task(reader.read())
    await settle()
    reader.feed(b"b")
    await settle()
    assert not task.done()
    assert not reader.closed
    reader.close()
    assert await task == b"ab"
    assert reader.closed
    assert await reader.read() == b""
    with pytest.raises(ValueError, match="stdin is closed"):
        reader.feed(b"late")


async def test_stdin_reader_chunks() -> None:
    reader = StdinReader(closed=False)
    task = asyncio.create_task(reader.read_chunk())
    await settle()
    assert not task.done()
    reader.feed(b"x")
    assert await task == b"x"
    reader.feed(b"y")
    reader.close()
    assert await reader.read_chunk() == b"y"
    assert await reader.read_chunk() == b""
    assert await StdinReader(b"done").read() == b"done"


async def test_cat_echoes_interactive_input_as_it_arrives(h: Harness) -> None:
    reader = StdinReader(closed=False)
    sink = RecordingSink()
    ctx = CommandContext(h.fs, "/", {}, reader, sink, sink, h._sleep)
    task = asyncio.create_task(h.shell.run("cat", [], ctx))
    reader.feed(b"line 1\n")
    await settle()
    assert sink.chunks == [b"line 1\n"]
    reader.feed(b"line 2\n")
    reader.close()
    assert await task == 0
    assert sink.chunks == [b"line 1\n", b"line 2\n"]


@pytest.mark.parametrize("script", ["echo a; sleep 100; echo b", "timeout 50 sleep 100"])
async def test_cancellation_propagates(h: Harness, script: str) -> None:
    clock = ManualClock()
    out = BufferSink()
    ctx = CommandContext(h.fs, "/", {}, StdinReader(), out, out, clock.sleep)
    task = asyncio.create_task(h.shell.run("bash", ["-c", script], ctx))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert b"b" not in out.getvalue()
    assert clock.pending == 0  # every sleeper (command and timer) was cancelled


async def test_cancelling_a_handler_waiting_for_stdin(h: Harness) -> None:
    ctx, _, _ = h.context(StdinReader(closed=False))
    task = asyncio.create_task(h.shell.run("cat", [], ctx))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
