"""What a managed process's script sees of the fake's live-input wrappers: ``alias``, ``type``,
``shopt`` and ``unalias`` answer as bash does without them. Each expected value is what GNU bash
5.2 printed for the same script (``bash -c SCRIPT < /dev/null``, or given the input)."""

from __future__ import annotations

import asyncio

import pytest

from fake_server.shell import Terminal
from fake_server.streams import BufferSink, StdinReader
from tests.test_shell import Harness, Result


async def managed(h: Harness, script: str, stdin: bytes = b"") -> Result:
    """A managed process running ``script``, sent ``stdin`` and then its end."""
    return await h.run("/bin/bash", "-c", script, stdin=stdin, live_stdin=True)


#: (script, status, stdout, whether bash wrote to stderr)
SCRIPTS = [
    pytest.param("alias; alias -p; alias | wc -l", 0, "0\n", False, id="no aliases"),
    pytest.param("alias cat; echo $?", 0, "1\n", True, id="no alias named cat"),
    pytest.param("unalias cat; echo $?", 0, "1\n", True, id="none to remove"),
    pytest.param(
        "type -t cat wc read mapfile alias type shopt command env __fake_run; echo $?",
        0,
        "file\nfile\nbuiltin\nbuiltin\nbuiltin\nbuiltin\nbuiltin\nbuiltin\nfile\n1\n",
        False,
        id="type -t",
    ),
    pytest.param(
        "type cat read; type -a read | head -1; command -v cat",
        0,
        "cat is /usr/bin/cat\nread is a shell builtin\nread is a shell builtin\n/usr/bin/cat\n",
        False,
        id="type",
    ),
    pytest.param(
        "alias ll='echo aliased'\nll 2>/dev/null; echo $?; alias",
        0,
        "127\nalias ll='echo aliased'\n",
        False,
        id="a script's alias does not expand",
    ),
    pytest.param(
        "alias ll='echo one' x=\"it's\"; shopt -s expand_aliases\nll; alias x; unalias x; alias",
        0,
        "one\nalias x='it'\\''s'\nalias ll='echo one'\n",
        False,
        id="until it turns expand_aliases on",
    ),
    pytest.param(
        "shopt -s expand_aliases; alias ll='echo x'; shopt -u expand_aliases\n"
        "ll 2>/dev/null; echo $?; alias; shopt -s expand_aliases\nll",
        0,
        "127\nalias ll='echo x'\nx\n",
        False,
        id="and off again",
    ),
    pytest.param(
        "shopt expand_aliases; shopt -p expand_aliases extglob; shopt -q expand_aliases; echo $?"
        "; shopt -s expand_aliases; shopt expand_aliases; shopt -u | grep -c expand_aliases",
        1,
        "expand_aliases \toff\nshopt -u expand_aliases\nshopt -u extglob\n1\n"
        "expand_aliases \ton\n0\n",
        False,
        id="shopt shows the script's setting",
    ),
    pytest.param(
        "shopt | grep ^expand_; shopt -s | grep -c ^expand_; shopt -p | grep -w expand_aliases",
        0,
        "expand_aliases \toff\n0\nshopt -u expand_aliases\n",
        False,
        id="shopt lists the script's setting",
    ),
    pytest.param(
        "bash -c 'alias; type -t cat; shopt expand_aliases'",
        1,
        "file\nexpand_aliases \toff\n",
        False,
        id="in a shell the script starts",
    ),
]


@pytest.mark.parametrize(("script", "status", "out", "err"), SCRIPTS)
async def test_a_managed_process_sees_no_wrapper(
    h: Harness, script: str, status: int, out: str, err: bool
) -> None:
    result = await managed(h, script)
    assert (result.status, result.out, bool(result.err)) == (status, out, err), result.err


async def test_the_wrappers_feed_the_input_whatever_the_scripts_expand_aliases(
    h: Harness,
) -> None:
    result = await managed(h, "shopt -u expand_aliases; type -t cat; cat; wc -l", b"a\nb\n")
    assert result == Result(0, "file\na\nb\n0\n", "")


async def test_an_interactive_shell_on_a_terminal_expands_aliases(h: Harness) -> None:
    stdin, out = StdinReader(closed=False), BufferSink()
    invocation = h.invocation(
        "bash", stdin=stdin, stdout=out, stderr=out, live_stdin=True, terminal=Terminal()
    )
    run = asyncio.ensure_future(h.shell.run(invocation))
    stdin.feed(b"alias ll='echo aliased'\nll\nshopt expand_aliases\nexit\n")
    assert await asyncio.wait_for(run, 10) == 0
    prompt = b"root@sandbox:~# "
    assert (
        out.getvalue() == prompt * 2 + b"aliased\r\n" + prompt + b"expand_aliases \ton\r\n" + prompt
    )
