"""A managed process's live stdin reaches every command that reads stdin (``wc``, ``sort``,
``sha256sum``, ``jq``...), over HTTP as a client sees it: input sent in pieces through
``POST …/input``, EOF through ``POST …/stdin/close``; a command given files, a pipe or a
redirection does not wait for that input."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable

import pytest

from fake_server import CommandContext, FakeCreateOS
from fake_server.processes import ManagedProcess
from fake_server.shell import RUN_OUTPUT_LIMIT
from tests.conftest import Client, ClientFactory, eventually
from tests.test_sandbox_runtime import (
    Follower,
    send,
    serve,
    start,
    start_script,
    view,
    wait_exit,
)

FIRST, SECOND = b"pear 2\nfig 10\n", b'{"a": [1, "x"]}\napple 3\n'
INPUT = FIRST + SECOND


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


#: (script, what bash prints for INPUT on its stdin)
READERS: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("wc -c", lambda data: f"{len(data)}\n".encode()),
    ("sort", lambda data: b"".join(sorted(lines(data)))),
    ("head -c 3", lambda data: data[:3]),
    ("sha256sum", lambda data: f"{hashlib.sha256(data).hexdigest()}  -\n".encode()),
    ("tr a-z A-Z", lambda data: data.upper()),
    ("grep -n p", lambda data: b"1:pear 2\n4:apple 3\n"),
    ("grep -e 1 -e 3", lambda data: b'fig 10\n{"a": [1, "x"]}\napple 3\n'),
    ("tee /tmp/copy; cat /tmp/copy", lambda data: data + data),
    ("base64 -w 0", lambda data: base64.b64encode(data)),
    ("cat -n", lambda data: b"".join(b"%6d\t%s" % item for item in enumerate(lines(data), 1))),
    # Named /dev/stdin: the input reaches it through a redirection, not a pipe, where
    # bashkit 0.20.1's /dev/stdin reads nothing.
    ("wc -c /dev/stdin", lambda data: f"{len(data)} /dev/stdin\n".encode()),
    ("cat /dev/stdin", lambda data: data),
    # Run by a command that runs another on the same stdin.
    ("command cat", lambda data: data),
    ("command -p sort", lambda data: b"".join(sorted(lines(data)))),
    ("env cat", lambda data: data),
    ("env -u HOME LC_ALL=C wc -l", lambda data: b"%d\n" % len(lines(data))),
    ("env command tr a-z A-Z", lambda data: data.upper()),
    # Named by its path, which no alias can name.
    ("/bin/cat", lambda data: data),
    ("/usr/bin/wc -c", lambda data: f"{len(data)}\n".encode()),
    ("/usr/bin/env /bin/sort", lambda data: b"".join(sorted(lines(data)))),
    # In a shell the script starts.
    ("bash -c 'cat'", lambda data: data),
    ("sh -ec 'wc -l' name", lambda data: b"%d\n" % len(lines(data))),
    ("/bin/bash -c 'tr a-z A-Z | cat -n' | cut -f2", lambda data: data.upper()),
    ("bash -c 'bash -c \"sort\"'", lambda data: b"".join(sorted(lines(data)))),
]


def process_of(fake: FakeCreateOS, sandbox_id: str, base: str) -> ManagedProcess:
    return fake.find_sandbox(sandbox_id).processes[base.rsplit("/", 1)[1]]


async def feed_in_two_pieces(
    fake: FakeCreateOS, client: Client, sandbox_id: str, base: str, first: bytes, second: bytes
) -> Follower:
    """Send ``first`` once the command waits on the process's stdin, then ``second``, then
    close stdin; the follower of the process's output."""
    process = process_of(fake, sandbox_id, base)
    await eventually(lambda: process.stdin.waiting)
    follower = await Follower.open(client, base)
    await send(client, base, first)
    assert (await view(client, base))["state"] == "running"  # the command wants all of it
    await send(client, base, second)
    closed = await client.post(f"{base}/stdin/close")
    assert closed.status == 200
    return follower


@pytest.mark.parametrize(("script", "expected"), READERS, ids=[script for script, _ in READERS])
async def test_a_stdin_reader_gets_the_input_sent_later(
    aiohttp_client: ClientFactory, script: str, expected: Callable[[bytes], bytes]
) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, script)
    follower = await feed_in_two_pieces(fake, client, sandbox_id, base, FIRST, SECOND)
    assert (await follower.to_end())["exit_code"] == 0
    assert follower.output("stdout") == expected(INPUT)
    assert follower.output("stderr") == b""


async def test_jq_filters_json_sent_later(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, "jq -c '.a'")
    follower = await feed_in_two_pieces(
        fake, client, sandbox_id, base, b'{"a": {"b"', b": [1, 2]}}\n"
    )
    assert (await follower.to_end())["exit_code"] == 0
    assert json.loads(follower.output("stdout")) == {"b": [1, 2]}


async def test_a_command_given_a_file_does_not_wait_for_stdin(
    aiohttp_client: ClientFactory,
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(
        client, sandbox_id, "grep -c PRETTY_NAME /etc/os-release; wc -l /etc/os-release"
    )
    done = await wait_exit(client, base)  # stdin is never closed
    assert (done["state"], done["exit_code"]) == ("exited", 0)
    follower = await Follower.open(client, base)
    await follower.to_end()
    out = follower.output("stdout").split(b"\n")
    assert out[0] == b"1"
    assert out[1].endswith(b" /etc/os-release")


async def test_a_shell_the_script_starts_reads_the_input_as_it_comes(
    aiohttp_client: ClientFactory,
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    script = 'bash -c \'read -r x; echo "child [$x] $0 $1"\' name one; read -r y; echo "<$y>"'
    base = await start_script(client, sandbox_id, script)
    await send(client, base, b"first\nsecond\n")
    done = await wait_exit(client, base)  # stdin is never closed: each read takes one line
    follower = await Follower.open(client, base)
    await follower.to_end()
    expected = b"child [first] name one\n<second>\n"
    assert (follower.output("stdout"), follower.output("stderr")) == (expected, b"")
    assert (done["state"], done["exit_code"]) == ("exited", 0)


async def test_a_process_whose_script_takes_arguments_reads_its_input(
    aiohttp_client: ClientFactory,
) -> None:
    # bash -c SCRIPT NAME ARGS...: $0 is NAME, $1... the rest; the script reads the input.
    _, client, sandbox_id = await serve(aiohttp_client)
    script = 'read -r x; echo "$0 $1 $# $x"; wc -l'
    base = await start(client, sandbox_id, cmd="bash", args=["-c", script, "name", "one"])
    await send(client, base, b"first\nsecond\n")
    assert (await client.post(f"{base}/stdin/close")).status == 200
    follower = await Follower.open(client, base)
    assert (await follower.to_end())["exit_code"] == 0
    assert (follower.output("stdout"), follower.output("stderr")) == (b"name one 1 first\n1\n", b"")


@pytest.mark.parametrize("shell", ["sh -s", "bash", "/bin/bash -s"])
async def test_a_shell_the_script_starts_reads_its_commands_from_the_input(
    aiohttp_client: ClientFactory, shell: str
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, f"{shell}; echo after")
    await send(client, base, b"echo from-input; x=2\necho $((x * 3))\n")
    assert (await client.post(f"{base}/stdin/close")).status == 200
    follower = await Follower.open(client, base)
    assert (await follower.to_end())["exit_code"] == 0
    assert follower.output("stdout") == b"from-input\n6\nafter\n"


async def test_a_traced_shell_the_script_starts_traces_its_own_script_only(
    aiohttp_client: ClientFactory,
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, "bash -xc 'echo hi'; sh -exc 'echo ho'")
    follower = await Follower.open(client, base)
    assert (await follower.to_end())["exit_code"] == 0
    # What bash prints: the fake's functions ahead of the script are not traced.
    expected = (b"hi\nho\n", b"+ echo hi\n+ echo ho\n")
    assert (follower.output("stdout"), follower.output("stderr")) == expected


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # A runner that runs no reader does not wait for the process's stdin.
        ("command -v cat; env -i A=1 env; command echo hi; env true && echo ok",
         b"/usr/bin/cat\nA=1\nhi\nok\n"),
        # A pipe or a redirection wins over the process's stdin.
        ("echo abc | wc -c; wc -c <<< hello; printf 'b\\na\\n' > /tmp/in; sort < /tmp/in",
         b"4\n6\na\nb\n"),
    ],
    ids=["a runner without a reader", "a pipe or a redirection"],
)  # fmt: skip
async def test_a_command_that_reads_no_live_stdin_does_not_wait_for_it(
    aiohttp_client: ClientFactory, script: str, expected: bytes
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, script)
    done = await wait_exit(client, base)  # stdin is never closed
    assert (done["state"], done["exit_code"]) == ("exited", 0)
    follower = await Follower.open(client, base)
    await follower.to_end()
    assert follower.output("stdout") == expected


async def test_a_registered_command_keeps_its_own_live_stdin(aiohttp_client: ClientFactory) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client)

    async def jq(ctx: CommandContext, args: list[str]) -> int:
        ctx.stdout.write(b"registered:" + await ctx.stdin.read())
        return 0

    fake.register_command("jq", jq)
    base = await start_script(client, sandbox_id, "jq .")
    follower = await feed_in_two_pieces(fake, client, sandbox_id, base, b"a", b"b")
    assert (await follower.to_end())["exit_code"] == 0
    assert follower.output("stdout") == b"registered:ab"


async def test_errors_name_the_scripts_own_line(aiohttp_client: ClientFactory) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    # The functions that feed stdin run ahead of the script on its first line.
    base = await start_script(client, sandbox_id, "true\nwc -c < /nonexistent")
    assert (await wait_exit(client, base))["exit_code"] == 1
    follower = await Follower.open(client, base)
    await follower.to_end()
    assert follower.output("stderr") == b"bash: line 2: /nonexistent: No such file or directory\n"


async def test_a_command_given_files_writes_up_to_the_run_limit(
    aiohttp_client: ClientFactory,
) -> None:
    fake, client, sandbox_id = await serve(aiohttp_client)
    # 2.5 times what one run passes on: run as `command cat`, the interpreter held the whole
    # output to hand it over at the end, went past its cap on bytes held, and the process
    # failed with no output at all.
    fake.find_sandbox(sandbox_id).fs.write("/tmp/part", b"x" * (RUN_OUTPUT_LIMIT // 4))
    base = await start_script(client, sandbox_id, "cat" + " /tmp/part" * 10)
    assert (await wait_exit(client, base))["exit_code"] == 0
    output = process_of(fake, sandbox_id, base).output
    last = output.since(output.newest_seq - 1)[0]
    assert output.appended_bytes == RUN_OUTPUT_LIMIT + len(last.data)
    assert last.stream == "stderr"
    assert last.data.startswith(b"fake-createos: stdout stopped at 10 MiB")


#: (script, what bash prints): a pipe's input reaches a reader at its end whatever writes it.
#: bashkit 0.20.1 gave a function named cat, grep or tr there no input when the pipe began
#: with a group, a function, a subshell or a builtin such as seq or cat, and the fake's
#: wrappers were such functions: each of these printed nothing in a managed process.
PIPES = [
    ("seq 3 | grep 2", b"2\n"),
    ("printf 'a\\nb\\n' > /tmp/f; cat /tmp/f | grep b", b"b\n"),
    ("{ echo x; echo y; } | grep y", b"y\n"),
    ("f() { echo hi; }; f | tr a-z A-Z", b"HI\n"),
    ("(echo one) | cat", b"one\n"),
    ("seq 3 | cat -n | tr -d ' '", b"1\t1\n2\t2\n3\t3\n"),
    # And a pipe into read: behind the fake's live-input read (a function), bashkit 0.20.1 lost
    # all but the pipe's first line when its writer wrote in pieces.
    ('seq 3 | while read -r l; do echo "[$l]"; done', b"[1]\n[2]\n[3]\n"),
    ("printf '1\\n2\\n' > /tmp/f; sort /tmp/f | while IFS= read -r l; do echo $l; done", b"1\n2\n"),
    ("f() { echo a; echo b; }; f | { read -r x; read -r y; echo $x$y; }", b"ab\n"),
]


#: (script, what bash prints): shells a managed process's script starts, which agents run all the
#: time, with the commands that have live-input wrappers in the script's own shell.
NESTED_SHELLS: list[tuple[str, bytes]] = [
    ("echo hi > f; bash -c 'cat f'", b"hi\n"),
    ("echo hi > f; sh -c 'grep h f'", b"hi\n"),
    ("printf 'a\\nb\\n' > f; find . -name f -exec sh -c 'wc -l < \"$1\"' _ {} \\;", b"2\n"),
    ("echo x | bash -c 'cat'", b"x\n"),
    ("printf 'b\\na\\n' | sh -c 'sort | head -n 1'", b"a\n"),
]


@pytest.mark.parametrize(
    ("script", "expected"),
    [*PIPES, *NESTED_SHELLS],
    ids=[script for script, _ in [*PIPES, *NESTED_SHELLS]],
)
async def test_a_pipe_or_a_shell_the_script_starts_gets_what_bash_gives_it(
    aiohttp_client: ClientFactory, script: str, expected: bytes
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, script)
    # Closed, so that a reader fed the process's input instead ends too (with nothing).
    assert (await client.post(f"{base}/stdin/close")).status == 200
    follower = await Follower.open(client, base)
    assert (await follower.to_end())["exit_code"] == 0
    assert (follower.output("stdout"), follower.output("stderr")) == (expected, b"")


async def test_the_wrappers_leave_the_scripts_line_numbers_alone(
    aiohttp_client: ClientFactory,
) -> None:
    _, client, sandbox_id = await serve(aiohttp_client)
    base = await start_script(client, sandbox_id, 'echo "$LINENO"\nnope\necho "$LINENO"')
    follower = await Follower.open(client, base)
    await follower.to_end()
    assert follower.output("stdout") == b"1\n3\n"
    assert follower.output("stderr") == b"bash: line 2: nope: command not found\n"
