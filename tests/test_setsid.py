"""``setsid``, as util-linux's runs its program (its messages and statuses checked against
util-linux 2.38 on a Linux host), and the daemon start of the TypeScript SDK's example 14."""

from __future__ import annotations

import base64
import json

import pytest

from fake_server import FakeCreateOS
from fake_server.registered_commands import CommandContext
from fake_server.shell import ShellLimits, Terminal
from tests.conftest import Client, create_sandbox, data_of
from tests.test_shell import Harness

TRY_HELP = "Try 'setsid --help' for more information.\n"


@pytest.mark.parametrize(
    ("script", "status", "out", "err"),
    [
        ("setsid echo hi", 0, "hi\n", ""),
        ("setsid -- echo hi", 0, "hi\n", ""),
        ("setsid /bin/echo by path", 0, "by path\n", ""),
        ("setsid sh -c 'exit 3'", 3, "", ""),
        ("setsid -w sh -c 'exit 3'", 3, "", ""),
        ("setsid --wait sh -c 'exit 3'", 3, "", ""),
        # A fork's parent answers 0 (the fake waits for the program all the same).
        ("setsid -f sh -c 'echo child; exit 3'", 0, "child\n", ""),
        ("setsid --fork -w sh -c 'exit 4'", 4, "", ""),
        ("setsid -fw sh -c 'exit 4'", 4, "", ""),
        ("setsid -V", 0, "setsid from util-linux 2.39.3\n", ""),
        # getopt_long: a long option's unique prefix names it; options end at the program.
        ("setsid --ver", 0, "setsid from util-linux 2.39.3\n", ""),
        ("setsid echo -w --fork", 0, "-w --fork\n", ""),
        (
            "setsid nosuch arg",
            127,
            "",
            "setsid: failed to execute nosuch: No such file or directory\n",
        ),
        (
            "setsid /nope/x",
            127,
            "",
            "setsid: failed to execute /nope/x: No such file or directory\n",
        ),
        (
            "setsid /etc/passwd",
            126,
            "",
            "setsid: failed to execute /etc/passwd: Permission denied\n",
        ),
        ("setsid /tmp", 126, "", "setsid: failed to execute /tmp: Permission denied\n"),
        ("setsid", 1, "", "setsid: no command specified\n" + TRY_HELP),
        ("setsid -x true", 1, "", "setsid: invalid option -- 'x'\n" + TRY_HELP),
        ("setsid --bogus true", 1, "", "setsid: unrecognized option '--bogus'\n" + TRY_HELP),
        (
            "setsid --fork=x true",
            1,
            "",
            "setsid: option '--fork' doesn't allow an argument\n" + TRY_HELP,
        ),
        (
            "setsid -c true",
            1,
            "",
            "setsid: failed to set the controlling terminal: Inappropriate ioctl for device\n",
        ),
        # A program sees no function of the script (a function is no program).
        (
            "f() { echo fn; }; setsid f",
            127,
            "",
            "setsid: failed to execute f: No such file or directory\n",
        ),
    ],
)
async def test_setsid_runs_its_program_as_util_linux_does(
    h: Harness,
    script: str,
    status: int,
    out: str,
    err: str,
) -> None:
    result = await h.sh(f'{script}; echo "status $?" >&2')
    assert (result.out, result.err) == (out, f"{err}status {status}\n")


async def test_the_program_has_the_callers_directory_variables_and_input(
    h: Harness,
) -> None:
    h.fs.write("/opt/run.sh", b"#!/bin/sh\necho script ran\n")
    script = (
        "export X=1; cd /opt; setsid sh -c 'echo \"$X $(pwd)\"'; "
        "echo piped | setsid cat; chmod +x run.sh; setsid ./run.sh; setsid -h | head -3"
    )
    result = await h.sh(script)
    assert result.out == (
        "1 /opt\npiped\nscript ran\n\nUsage:\n setsid [options] <program> [arguments ...]\n"
    )
    assert (result.status, result.err) == (0, "")


async def test_setsid_takes_the_terminal_on_a_pty(h: Harness) -> None:
    result = await h.sh("setsid -c echo ok", terminal=Terminal())
    assert (result.status, result.out) == (0, "ok\r\n")


async def test_each_setsid_counts_against_the_nesting_limit() -> None:
    harness = Harness(ShellLimits(max_nesting=1))
    result = await harness.sh("setsid setsid true")
    assert result.status == 126
    assert result.err == (
        "setsid: cannot run 'true': more than 1 nested commands (a limit of the fake)\n"
    )
    await harness.shell.wait_idle()


async def test_a_managed_process_feeds_setsids_program_its_live_input(client: Client) -> None:
    sandbox = (await create_sandbox(client))["id"]
    base = f"/v1/sandboxes/{sandbox}/processes"
    process = await data_of(
        await client.post(base, json={"cmd": "bash", "args": ["-c", "setsid cat"]})
    )
    base = f"{base}/{process['process_id']}"
    typed = base64.b64encode(b"typed later\n").decode()
    await data_of(await client.post(f"{base}/input", json={"data_base64": typed}))
    await data_of(await client.post(f"{base}/stdin/close"))
    assert (await data_of(await client.get(f"{base}/wait")))["exit_code"] == 0
    frames = [
        json.loads(line)
        for line in (await (await client.get(f"{base}/connect")).text()).splitlines()
    ]
    out = b"".join(base64.b64decode(f["data_base64"]) for f in frames if f["type"] == "data")
    assert out == b"typed later\n"


async def test_the_typescript_sdks_kernel_daemon_starts(client: Client, fake: FakeCreateOS) -> None:
    # Example 14 (jupyter-singleton) boots its daemon so, then polls for the daemon's marker.
    async def daemon(ctx: CommandContext, args: list[str]) -> int:
        ctx.stdout.write(f"kernel {args[0]} up\n".encode())
        ctx.fs.write("/tmp/kernel.ready", b"")
        return 0

    fake.register_command("python3", daemon)
    sandbox = (await create_sandbox(client))["id"]
    boot = (
        "set -e; rm -f /tmp/kernel.ready /tmp/kernel.sock; "
        "nohup setsid python3 /tmp/kernel_daemon.py </dev/null >/tmp/kernel.log 2>&1 & "
        "for i in $(seq 1 50); do "
        "  if [ -f /tmp/kernel.ready ]; then exit 0; fi; "
        "  sleep 0.2; "
        "done; "
        "echo 'kernel never became ready'; tail -100 /tmp/kernel.log; exit 1"
    )
    ran = await data_of(
        await client.post(
            f"/v1/sandboxes/{sandbox}/exec", json={"cmd": "bash", "args": ["-lc", boot]}
        )
    )
    assert ran["result"] == {"stdout": "", "stderr": "", "exit_code": 0}
    log = await client.get(f"/v1/sandboxes/{sandbox}/files?path=/tmp/kernel.log")
    assert await log.read() == b"kernel /tmp/kernel_daemon.py up\n"
