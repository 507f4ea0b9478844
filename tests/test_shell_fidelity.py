"""Scripts whose answer the fake's own plumbing could change — how it feeds an ``/exec``'s stdin,
turns ``bash -ec`` flags into ``set``, merges a terminal's streams and hands a managed process's
live input to builtins — against GNU bash 5.2's answers: each expected value is what ``bash``
printed for the same script and stdin."""

from __future__ import annotations

import pytest

from fake_server.shell import Terminal
from fake_server.streams import BufferSink, StdinReader
from tests.test_shell import Harness

# -- an /exec's stdin ----------------------------------------------------------------------------


async def test_an_exec_with_stdin_runs_its_exit_trap(h: Harness) -> None:
    result = await h.sh("trap 'echo bye' EXIT; read -r x; echo got $x", stdin=b"hi\n")
    assert (result.status, result.out) == (0, "got hi\nbye\n")


async def test_an_exec_without_stdin_runs_its_exit_trap(h: Harness) -> None:
    result = await h.sh("trap 'echo bye' EXIT; read -r x; echo got=$x")
    assert (result.status, result.out) == (0, "got=\nbye\n")


@pytest.mark.parametrize("stdin", [None, b""], ids=["no stdin", "empty stdin"])
async def test_an_exec_without_input_gives_its_readers_an_empty_stdin(
    h: Harness, stdin: bytes | None
) -> None:
    # As /dev/null: bashkit 0.20.1's wc with no stdin at all printed nothing.
    options = {} if stdin is None else {"stdin": stdin}
    result = await h.sh('wc -l; wc -c; read -r x; echo "read $?"; cat; echo "$LINENO"', **options)
    assert (result.status, result.out, result.err) == (0, "0\n0\nread 1\n1\n", "")


async def test_an_exec_with_stdin_keeps_line_numbers_and_goes_on_after_an_error(
    h: Harness,
) -> None:
    script = 'read -r x\necho "$LINENO $x"\nreadonly R=1\nR=2\necho "after $?"'
    result = await h.sh(script, stdin=b"hi\n")
    assert (result.status, result.out) == (0, "2 hi\nafter 1\n")
    assert "R: readonly variable" in result.err


async def test_an_exec_with_stdin_parses_later_lines_with_extglob_on(h: Harness) -> None:
    script = "shopt -s extglob\nmkdir -p /w && cd /w && touch a.js b.md\necho !(*.md)"
    result = await h.sh(script, stdin=b"x\n")
    assert (result.status, result.out, result.err) == (0, "a.js\n", "")


# -- bash's flags and a terminal -------------------------------------------------------------


@pytest.mark.parametrize("flags", ["-c", "-lc", "-ec", "-xc", "-euc"])
async def test_bash_flags_leave_the_scripts_line_numbers_alone(h: Harness, flags: str) -> None:
    result = await h.run("bash", flags, 'echo "$LINENO"\necho "$LINENO"')
    assert (result.status, result.out) == (0, "1\n2\n")


async def test_an_option_cluster_with_a_value_runs_the_script_in_the_shell_itself(
    h: Harness,
) -> None:
    # `-eo pipefail` read as -e, -o and an operand "pipefail" ran the script in a nested shell,
    # which dropped its `exec 2>&1`: the "err" went nowhere.
    script = "exec 2>&1; echo err >&2; false | true; echo $?"
    result = await h.run("bash", "-eo", "pipefail", "-c", script)
    assert (result.status, result.out, result.err) == (1, "err\n", "")


@pytest.mark.parametrize(
    ("args", "out"),
    [
        (["-euo", "pipefail", "-c", "echo $-; false | true || echo failed"], "ehuBc\nfailed\n"),
        (["-O", "extglob", "-c", "mkdir /w && cd /w && touch a b.md; echo !(*.md)"], "a\n"),
        (["--rcfile", "/dev/null", "-c", "echo hi"], "hi\n"),
        (["-c", 'echo "$0 $1"', "job", "one"], "job one\n"),
    ],
)
async def test_bash_options_with_values(h: Harness, args: list[str], out: str) -> None:
    result = await h.run("bash", *args)
    assert (result.status, result.out, result.err) == (0, out, "")


async def test_a_terminal_leaves_the_scripts_line_numbers_alone(h: Harness) -> None:
    out = BufferSink()
    terminal = Terminal()
    invocation = h.invocation("bash", "-c", 'echo "$LINENO"', stdout=out, terminal=terminal)
    assert await h.shell.run(invocation) == 0
    assert out.getvalue() == b"1\r\n"


# -- a managed process's live input --------------------------------------------------------------


@pytest.mark.parametrize("builtin", ["mapfile", "readarray"])
async def test_array_readers_read_a_processs_live_input(h: Harness, builtin: str) -> None:
    out = BufferSink()
    stdin = StdinReader(closed=False)
    script = f'{builtin} -t lines; echo "${{#lines[@]}} ${{lines[1]}}"'
    invocation = h.invocation("bash", "-c", script, stdin=stdin, stdout=out, live_stdin=True)
    stdin.feed(b"a\nb\n")
    stdin.close()
    assert await h.shell.run(invocation) == 0
    assert out.getvalue() == b"2 b\n"


async def test_an_array_reader_given_a_here_string_leaves_the_live_input_alone(
    h: Harness,
) -> None:
    out = BufferSink()
    script = 'mapfile -t lines <<< q; read -r x; echo "${#lines[@]} $x"'
    invocation = h.invocation(
        "bash", "-c", script, stdin=StdinReader(b"a\nb\n"), stdout=out, live_stdin=True
    )
    assert await h.shell.run(invocation) == 0
    assert out.getvalue() == b"1 a\n"


async def test_read_and_mapfile_from_fd_0_read_a_processs_live_input(h: Harness) -> None:
    # `read -u 0` is plain `read`: it read nothing of the input sent to the process.
    out = BufferSink()
    stdin = StdinReader(closed=False)
    script = (
        "read -r -u 0 a; read -ru0 b; exec 3<<< three; read -r -u 3 c; mapfile -t -u 0 rest\n"
        'echo "$a $b $c ${rest[*]}"'
    )
    invocation = h.invocation("bash", "-c", script, stdin=stdin, stdout=out, live_stdin=True)
    stdin.feed(b"one\ntwo\nfour\nfive\n")
    stdin.close()
    assert await h.shell.run(invocation) == 0
    assert out.getvalue() == b"one two three four five\n"


async def test_timeouts_command_reads_what_timeout_was_given(h: Harness) -> None:
    # Its command ran in a child interpreter with no stdin at all: each of these printed nothing.
    script = "echo piped | timeout 5 cat; printf 'a\\nb\\n' > f; timeout 5 wc -l < f"
    assert (await h.sh(script)).out == "piped\n2\n"
    assert (await h.sh("timeout 5 cat", stdin=b"exec input\n")).out == "exec input\n"
    out = BufferSink()
    stdin = StdinReader(closed=False)
    invocation = h.invocation(
        "bash", "-c", "timeout 5 sort -r", stdin=stdin, stdout=out, live_stdin=True
    )
    stdin.feed(b"a\nb\n")
    stdin.close()
    assert await h.shell.run(invocation) == 0
    assert out.getvalue() == b"b\na\n"
