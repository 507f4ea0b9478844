"""An interactive shell (a managed ``/bin/bash`` without a script) sent a script as its input:
each expected value is what GNU bash 5.2 answered given the same script on its stdin
(``bash --norc --noprofile -s``), sent in one piece and line by line."""

from __future__ import annotations

import asyncio
import threading

import bashkit
import pytest

from fake_server import gathering as gathering_module
from fake_server import repl
from fake_server.gathering import Gathering, Parse, Parser, needs_more
from fake_server.shell import ShellLimits, Terminal
from fake_server.streams import BufferSink, StdinReader
from tests.test_shell import Harness, Result


@pytest.fixture(params=["one piece", "line by line"])
def by_lines(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "line by line")


async def interactive(h: Harness, script: str, *, by_lines: bool) -> Result:
    """What an interactive shell answers when sent ``script`` and then the end of its input."""
    stdin, out, err = StdinReader(closed=False), BufferSink(), BufferSink()
    invocation = h.invocation("/bin/bash", stdin=stdin, stdout=out, stderr=err, live_stdin=True)
    run = asyncio.ensure_future(h.shell.run(invocation))
    for piece in script.splitlines(keepends=True) if by_lines else [script]:
        stdin.feed(piece.encode())
    stdin.close()
    status = await asyncio.wait_for(run, 10)
    return Result(status, out.getvalue().decode(), err.getvalue().decode())


async def on_a_terminal(h: Harness, script: str) -> tuple[int, bytes]:
    """What an interactive shell on a terminal answers when sent ``script`` and then the end
    of its input: its status, and its output without its prompts."""
    stdin, out = StdinReader(closed=False), BufferSink()
    invocation = h.invocation(
        "bash", stdin=stdin, stdout=out, stderr=out, live_stdin=True, terminal=Terminal()
    )
    run = asyncio.ensure_future(h.shell.run(invocation))
    stdin.feed(script.encode())
    stdin.close()
    status = await asyncio.wait_for(run, 10)
    return status, out.getvalue().replace(b"root@sandbox:~# ", b"")


@pytest.mark.parametrize(
    ("script", "status", "out"),
    [
        pytest.param(
            "X=world\ncat <<EOF\nhello $X\nEOF\necho after\n",
            0,
            "hello world\nafter\n",
            id="a here-document's body",
        ),
        pytest.param(
            "cat <<A; cat <<-B\nfirst\nA\n\tsecond\n\tB\necho $((1 << 2)) <<<x\n",
            0,
            "first\nsecond\n4\n",
            id="two here-documents, a shift and a here-string",
        ),
        pytest.param("echo a \\\n  b\n", 0, "a b\n", id="a continued line"),
        pytest.param(
            "cat <<EOF &&\na\\\nb\nEO\\\nF\necho $LINENO\necho $LINENO\n",
            0,
            "ab\n6\n7\n",
            id="a here-document's lines joined by a backslash-newline, its delimiter too",
        ),
        pytest.param(
            'arr=(\n  a\n  b\n)\ntrue &&\n  echo "${#arr[@]}"\n',
            0,
            "2\n",
            id="an array and a list across lines",
        ),
        pytest.param(
            'echo $LINENO\nread -r x\nskipped line\necho "$LINENO $x"\n',
            0,
            "1\n3 skipped line\n",
            id="LINENO counts the lines run",
        ),
        pytest.param("false\necho $?\n", 0, "1\n", id="the status carries over"),
        pytest.param("set -e\nfalse\necho no\n", 1, "", id="set -e ends the shell"),
        pytest.param(
            "set -o pipefail\nfalse | true\necho $?\n", 0, "1\n", id="set options carry over"
        ),
        pytest.param('set -u\necho "$nope"\necho no\n', 1, "", id="an unset variable ends it"),
        pytest.param(
            "(exit 3); echo $?\nx=$(exit 4); echo $?\necho still\n",
            0,
            "3\n4\nstill\n",
            id="exit in a subshell does not end it",
        ),
        pytest.param(
            "trap 'echo bye $?' EXIT\necho hi\nfalse\n",
            1,
            "hi\nbye 1\n",
            id="the EXIT trap runs at the end",
        ),
        pytest.param("trap 'echo bye $?' EXIT\nexit 3\necho no\n", 3, "bye 3\n", id="and at exit"),
        pytest.param(
            'seq 3 | while read -r n; do echo "got $n"; done\n',
            0,
            "got 1\ngot 2\ngot 3\n",
            id="a pipe into read gets every line",
        ),
        pytest.param(
            'false\necho $? | while read -r s; do echo "status $s"; done\n'
            'read -r x\nnext\necho "$x"\n',
            0,
            "status 1\nnext\n",
            id="and the status, and the next read the input",
        ),
        pytest.param("echo a\nif then\necho no\n", 2, "a\n", id="a syntax error ends it"),
        pytest.param("if true; then\necho a\n", 2, "", id="so does an unfinished command"),
    ],
)
async def test_an_interactive_shell_runs_its_input_as_bash_s_does(
    h: Harness, by_lines: bool, script: str, status: int, out: str
) -> None:
    result = await interactive(h, script, by_lines=by_lines)
    assert (result.status, result.out) == (status, out), result.err


async def test_the_state_it_restores_is_not_traced(h: Harness, by_lines: bool) -> None:
    result = await interactive(h, "set -x\nfalse\necho hi\n", by_lines=by_lines)
    assert result == Result(0, "hi\n", "+ false\n+ echo hi\n")


async def test_a_pipe_into_read_is_traced_as_it_is_written(h: Harness, by_lines: bool) -> None:
    result = await interactive(h, "set -x\nprintf 'a\\n' | read -r x\n", by_lines=by_lines)
    assert result.status == 0
    assert sorted(result.err.splitlines()) == ["+ printf 'a\\n'", "+ read -r x"]


async def test_dollar_dash_says_the_shell_reads_its_input(h: Harness, by_lines: bool) -> None:
    # The interpreter runs each command as bash -c does: its $- ended in c (hBc).
    script = "echo $-\nset -e\necho \"$-\" '$-'\nset +e -ux\necho ${-}\n"
    result = await interactive(h, script, by_lines=by_lines)
    assert result == Result(0, "hBs\nehBs $-\nhuxBs\n", "+ echo huxBs\n")


async def test_dollar_dash_on_a_terminal_is_an_interactive_shells(h: Harness) -> None:
    # As bash -i on a terminal: himBHs (the interpreter said hBc).
    script = "echo $-\nset -e; echo $-\nset -uC; echo $-\n"
    assert await on_a_terminal(h, script) == (0, b"himBHs\r\nehimBHs\r\nehimuBCHs\r\n")


@pytest.mark.parametrize(
    ("script", "out"),
    [
        pytest.param(
            "set -e; f() { :; }; alias g=:; x=1; export y=2\nexec bash\nfalse; f; g\n"
            'echo "$? x=$x y=$y $LINENO $SHLVL"\n',
            "127 x= y=2 2 1\n",
            id="exec bash: a new shell reads the rest",
        ),
        pytest.param(
            'cd /tmp && exec "$SHELL" -l\npwd\n', "/tmp\n", id="exec of the shell by its path"
        ),
        pytest.param(
            'x=1\nbash\necho "child x=$x $LINENO $SHLVL"\nexit 3\necho "x=$x $? $LINENO"\n',
            "child x= 1 2\nx=1 3 3\n",
            id="bash: a shell that reads the rest, until it exits",
        ),
        pytest.param(
            "trap 'echo outer $?' EXIT\nbash\ntrap 'echo inner $?' EXIT\nfalse\ntrue\n",
            "inner 0\nouter 0\n",
            id="at the end of the input each exits, running its EXIT trap",
        ),
        pytest.param(
            "trap 'echo no' EXIT\nexec sh\necho after\n",
            "after\n",
            id="exec runs no EXIT trap",
        ),
        pytest.param("echo a\nexec cat\necho b\n", "a\necho b\n", id="exec cat reads the rest"),
        pytest.param(
            "bash -c 'echo c $0' z; echo 'echo piped' | bash; bash <<< 'echo here'\n",
            "c z\npiped\nhere\n",
            id="a shell that reads no input of the interactive shell",
        ),
    ],
)
async def test_a_shell_started_from_the_input_reads_the_rest_of_it(
    h: Harness, by_lines: bool, script: str, out: str
) -> None:
    # The interpreter's own bash read none of the input, and exec'd ended the shell.
    result = await interactive(h, script, by_lines=by_lines)
    assert (result.status, result.out) == (0, out), result.err


async def test_shells_nest_as_deep_as_the_limit(by_lines: bool) -> None:
    h = Harness(ShellLimits(max_nesting=2))
    try:
        script = 'bash\nbash\nbash\necho "$? $SHLVL"\n'
        result = await interactive(h, script, by_lines=by_lines)
    finally:
        await h.shell.wait_idle()
    message = "bash: cannot start a shell: more than 2 nested shells (a limit of the fake)\n"
    assert result == Result(0, "126 3\n", message)


async def test_on_a_terminal_a_started_shell_prompts_and_exec_ends_the_shell(
    h: Harness,
) -> None:
    # bash -i: a started shell ends at its exit, and the shell an exec replaced at the end of
    # the command it execs.
    script = "exec bash\nbash\nexit 4\necho $?\nexec echo gone\necho no\n"
    assert await on_a_terminal(h, script) == (0, b"4\r\ngone\r\n")


async def test_a_terminal_shell_outlives_errors_and_a_subshell_exit(h: Harness) -> None:
    # As an interactive bash: ${v:?} and a syntax error end the command, not the shell.
    stdin, out = StdinReader(closed=False), BufferSink()
    invocation = h.invocation(
        "bash", stdin=stdin, stdout=out, stderr=out, live_stdin=True, terminal=Terminal()
    )
    run = asyncio.ensure_future(h.shell.run(invocation))
    stdin.feed(b'echo ${nope:?gone}\nif then\n(exit 3); echo "status $?"\nexit 5\necho no\n')
    assert await asyncio.wait_for(run, 10) == 5
    assert b"status 3\r\n" in out.getvalue()
    assert b"no\r\n" not in out.getvalue()


@pytest.mark.parametrize(
    ("text", "more"),
    [
        ("cat <<'E' # <<X\nbody\nE\n", False),
        ("cat <<\\E\nbody\n", True),
        ("echo '<<X'\n", False),
        ("echo a # \\\n", False),
        ("echo a |\n", True),
        ("echo a &\n", False),
        ("case x in a) echo;; esac\n", False),
        ("x=$'a\\'<<b'\n", False),
        ("cat <<EOF\nEO\\\n", True),
        ("cat <<EOF\nEO\\\nF\n", False),
        ("cat <<EOF\nx\\\nEOF\n", True),
        ("cat <<EOF\nx\\\\\nEOF\n", False),
        ("cat <<'EOF'\nx\\\nEOF\n", False),
        ("cat <<\\EOF\nx\\\nEOF\n", False),
        ("cat <<-EOF\n\tEO\\\n\tF\n", True),
    ],
)
def test_what_needs_more_lines(text: str, more: bool) -> None:
    assert needs_more(bashkit.Bash(), text) is more


@pytest.mark.parametrize(
    ("text", "edited"),
    [
        ('echo $- ${-} "$-" "${x:-$-}"\n', 'echo F F "F" "${x:-F}"\n'),
        ("echo '$-' $'$-' \\$- \"\\$-\" $$- $((1 - 1)) # $-\n", None),
        (
            "cat <<E\n$- \\$- \\\\$-\nE\ncat <<'E'\n$-\nE\n",
            "cat <<E\nF \\$- \\\\F\nE\ncat <<'E'\n$-\nE\n",
        ),
        ("x=$(echo $-) y=`echo $-`\n", "x=$(echo F) y=`echo F`\n"),
    ],
)
def test_where_dollar_dash_expands_it_is_edited(text: str, edited: str | None) -> None:
    gathering = Gathering("F")
    assert gathering.parse(bashkit.Bash(), text) is Parse.COMPLETE
    assert gathering.edited(text) == (text if edited is None else edited)


class CountingBash:
    """A parser that counts how often it reads a whole text."""

    def __init__(self) -> None:
        self.bash = bashkit.Bash()
        self.analyzed = 0

    def analyze(self, text: str) -> object:
        self.analyzed += 1
        return self.bash.analyze(text)


@pytest.mark.parametrize(
    ("first", "body", "last"),
    [
        ("if true; then\n", '  echo "line {n}"\n', "fi\n"),
        ("f() {\n", "  printf '%s\\n' {n}\n", "}\n"),
        ("cat > f <<'EOF'\n", "line {n} $(not run)\n", "EOF\n"),
        ('echo "start\n', "line {n} ( ) fi done }}\n", 'end"\n'),
        ("while true; do\n", '  x=$(echo {n}) && echo "$x `date`"\n', "done\n"),
        ("x=$(\n", "  echo {n}; y=`date`\n", ")\n"),
    ],
    ids=["if", "function", "here-document", "a quote", "substitutions", "in a substitution"],
)
def test_a_long_command_is_parsed_once_it_may_have_ended_not_at_every_line(
    first: str, body: str, last: str
) -> None:
    # Parsed whole at every line, a 1,000-line if held the event loop for 8 s.
    bash, gathering = CountingBash(), Gathering()
    text = first
    assert gathering.parse(bash, text) is Parse.INCOMPLETE
    for n in range(200):
        text += body.format(n=n)
        assert gathering.parse(bash, text) is Parse.INCOMPLETE
    assert bash.analyzed <= 1
    text += last
    assert gathering.parse(bash, text) is Parse.COMPLETE


@pytest.mark.parametrize("name", ["__fake_repl_status", "__fake_repl_trap"])
async def test_a_command_that_takes_the_shells_own_names_does_not_end_it(
    h: Harness, by_lines: bool, name: str
) -> None:
    # A readonly status once raised ValueError in the shell: its process never ended. What
    # the trailer can no longer keep (a status, a trap) is lost; the commands still run.
    script = f"readonly {name}=abc\nfalse\necho next $?\n"
    result = await interactive(h, script, by_lines=by_lines)
    assert (result.out, result.err) == ("next 1\n", "")


@pytest.mark.parametrize(
    "script",
    [
        "echo " + "x " * (64 << 10) + "\n",
        "if true; then\n" + "  echo line\n" * (8 << 10) + "fi\n",
    ],
    ids=["a long line", "a long command of short lines"],
)
async def test_a_long_command_is_parsed_off_the_event_loop(
    h: Harness, by_lines: bool, script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On the loop, the parse of an 8 MiB line held it for 8 s (its scan for 3 s).
    # The threads that parsed a text too long for the loop.
    threads: list[int] = []
    parse = gathering_module._analyzed

    def analyzed(bash: Parser, text: str) -> Parse:
        if len(text) > gathering_module.ON_LOOP:
            threads.append(threading.get_ident())
        return parse(bash, text)

    monkeypatch.setattr(gathering_module, "_analyzed", analyzed)
    result = await interactive(h, script, by_lines=by_lines)
    assert result.status == 0, result.err
    assert threads
    assert threading.get_ident() not in threads


async def test_a_command_longer_than_the_limit_ends_the_shell_as_a_syntax_error(
    h: Harness, by_lines: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Gathered without end, a never-closed quote or here-document grew the fake's memory with
    # every line sent, and the parser's with ~350 bytes for each of its bytes.
    monkeypatch.setattr(repl, "MAX_COMMAND_BYTES", 200)
    body = "".join(f"line {n}\n" for n in range(40))  # 270 bytes
    script = f"echo before\ncat <<'EOF'\n{body}EOF\necho after\n"
    result = await interactive(h, script, by_lines=by_lines)
    message = "bash: a command longer than 200 bytes: the fake's limit for one command of an"
    assert (result.status, result.out) == (2, "before\n")
    assert result.err.startswith(message)
    shorter = "".join(f"line {n}\n" for n in range(20))  # the command: 166 bytes
    short = await interactive(h, f"cat <<'EOF'\n{shorter}EOF\necho after\n", by_lines=by_lines)
    assert (short.status, short.out) == (0, shorter + "after\n")


async def test_a_long_input_is_gathered_in_turns_of_the_event_loop(h: Harness) -> None:
    # Reading buffered lines never waits: 256 KiB of empty lines inside an open quote, sent in
    # one piece, held the loop for 0.3 s. What is left to read, sampled at every turn of the
    # loop, shows the shell reading the input a part at a time.
    script = "echo '" + "\n" * 5000 + "'\n"
    stdin, out = StdinReader(script.encode(), closed=True), BufferSink()
    invocation = h.invocation("/bin/bash", stdin=stdin, stdout=out, live_stdin=True)
    left: set[int] = set()

    async def sample() -> None:
        while True:
            left.add(stdin.buffered)
            await asyncio.sleep(0)

    sampler = asyncio.ensure_future(sample())
    try:
        assert await asyncio.wait_for(h.shell.run(invocation), 10) == 0
    finally:
        sampler.cancel()
    assert out.getvalue() == b"\n" * 5001
    assert any(0 < size < len(script) - 1000 for size in left)
