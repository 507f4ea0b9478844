"""One tenant's runaway commands do not hold up anyone else's.

The interpreter runs every script on one shared pool of threads. A builtin that computes without
end holds its thread until the command's deadline (``max_command_seconds``) and does not stop
when told to (bashkit 0.20.1's ``jq`` checks its deadline, not a stop), so when the pool had one
thread per CPU core, that many such commands of one tenant held up every other command of every
tenant — also after their sandbox was deleted or the fake reset — until the deadline.

Each test starts as many runaways as the machine has cores and, once they compute, runs an
``echo`` in another tenant's sandbox: it must be answered before their deadline. That deadline
is the test's whole cost (seconds): nothing can stop them earlier.

``timeout`` does end one: its command runs with a deadline of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from fake_server import FakeCreateOS, ServerConfig
from tests.conftest import Client, ClientFactory, data_of, eventually

#: A builtin that computes for ever, never reaching a point where it checks for a stop.
RUNAWAY = "jq -n 'last(range(1e12))'"
#: As many runaways as the interpreter's pool used to have threads (it has more now).
RUNAWAYS = os.cpu_count() or 1
#: Their deadline: the test's cost, and ample time for an ``echo`` that is not held up (1 s
#: was not, on a machine loaded enough that the runaways took most of it to get going).
DEADLINE_S = 3.0
#: CPU time (clock ticks, 10 ms each as a rule) that says a thread computes: far more than a
#: thread spends running a script up to its ``jq``.
BUSY_TICKS = 5
TASKS = Path("/proc/self/task")
OWNER = {"X-Api-Key": "skp_runaway_owner"}
VICTIM = {"X-Api-Key": "skp_runaway_victim"}


def _cpu_ticks() -> dict[str, int]:
    """CPU time (user and system, in clock ticks) of each thread of this process, by id."""
    ticks = {}
    for task in TASKS.iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            # After the name (in parentheses, which may hold anything): utime and stime are
            # the 12th and 13th fields.
            fields = (task / "stat").read_text().rpartition(")")[2].split()
            ticks[task.name] = int(fields[11]) + int(fields[12])
    return ticks


def _computing(before: dict[str, int]) -> int:
    """How many threads but this one (the event loop's, busy serving) computed for BUSY_TICKS
    since ``before``."""
    this = str(threading.get_native_id())
    return sum(
        1
        for thread, now in _cpu_ticks().items()
        if thread != this and now - before.get(thread, 0) >= BUSY_TICKS
    )


async def _sandbox(client: Client, tenant: dict[str, str]) -> str:
    body = {"shape": "s-1vcpu-1gb"}
    return str((await data_of(await client.post("/v1/sandboxes", json=body, headers=tenant)))["id"])


async def _start_runaways(client: Client, sandbox_id: str) -> None:
    """Start the runaways in the owner's sandbox; returns once each is computing (none can stop
    from then on): the threads of that many computed for a while."""
    before = _cpu_ticks()
    body = {"cmd": "/bin/bash", "args": ["-c", RUNAWAY]}
    for _ in range(RUNAWAYS):
        await data_of(
            await client.post(f"/v1/sandboxes/{sandbox_id}/processes", json=body, headers=OWNER)
        )
    await eventually(lambda: _computing(before) >= RUNAWAYS)


async def _nothing(fake: FakeCreateOS, client: Client, sandbox_id: str) -> None:
    """The runaways go on computing."""


async def _delete_sandbox(fake: FakeCreateOS, client: Client, sandbox_id: str) -> None:
    await data_of(await client.delete(f"/v1/sandboxes/{sandbox_id}", headers=OWNER))


async def _drop_tenant(fake: FakeCreateOS, client: Client, sandbox_id: str) -> None:
    fake.drop_tenant(OWNER["X-Api-Key"])


Abandon = Callable[[FakeCreateOS, Client, str], Awaitable[None]]


@pytest.mark.skipif(not TASKS.is_dir(), reason="reads threads' CPU time in /proc")
@pytest.mark.parametrize(
    "abandon",
    [_nothing, _delete_sandbox, _drop_tenant],
    # A dropped tenant is what the plugin's teardown leaves, and what a reset does to each.
    ids=["running", "sandbox-deleted", "tenant-dropped"],
)
async def test_an_exec_is_answered_while_another_tenants_runaways_compute(
    aiohttp_client: ClientFactory, abandon: Abandon
) -> None:
    fake = FakeCreateOS(ServerConfig(seed=7, transition_ms=0, max_command_seconds=DEADLINE_S))
    client = await aiohttp_client(fake.app())
    victim = await _sandbox(client, VICTIM)
    owned = await _sandbox(client, OWNER)
    loop = asyncio.get_running_loop()
    # Taken before they start: no runaway ends before it (told to stop or not).
    runaways_end = loop.time() + DEADLINE_S
    await _start_runaways(client, owned)
    await abandon(fake, client, owned)
    body = {"cmd": "/bin/bash", "args": ["-c", "echo hi"]}
    answer = await data_of(
        await client.post(f"/v1/sandboxes/{victim}/exec", json=body, headers=VICTIM)
    )
    assert answer["result"] == {"stdout": "hi\n", "stderr": "", "exit_code": 0}
    # Before the fix, it was answered only once they had ended.
    assert loop.time() < runaways_end, "answered only once the runaways had ended"


async def test_timeout_ends_a_runaway_builtin_soon_after_its_duration(
    aiohttp_client: ClientFactory,
) -> None:
    # Its stop reaches the child only between commands; the child's deadline ends the builtin.
    limit_s = 3.0
    fake = FakeCreateOS(ServerConfig(seed=7, transition_ms=0, max_command_seconds=limit_s))
    client = await aiohttp_client(fake.app())
    sandbox = await _sandbox(client, OWNER)
    loop = asyncio.get_running_loop()
    limit = loop.time() + limit_s
    body = {"cmd": "/bin/bash", "args": ["-c", f"timeout 0.1 {RUNAWAY}; echo $?"]}
    answer = await data_of(
        await client.post(f"/v1/sandboxes/{sandbox}/exec", json=body, headers=OWNER)
    )
    assert answer["result"] == {"stdout": "124\n", "stderr": "", "exit_code": 0}
    # Before, the builtin went on until the command's own limit, and the command ended there.
    assert loop.time() < limit


#: A command in a fresh process whose address space is limited as by ``ulimit -v``.
_UNDER_A_LIMIT = """
import asyncio, resource
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from tests.test_shell import Harness
async def main():
    result = await Harness().sh("echo hi")
    print(result.status, result.out, end="")
asyncio.run(main())
"""


@pytest.mark.skipif(not TASKS.exists(), reason="address-space limits as on Linux")
def test_a_command_runs_under_an_address_space_limit() -> None:
    # 34 threads' 1 GiB stacks did not fit in 16 GiB: the runtime never ran a command, and
    # every command of the process hung.
    import subprocess
    import sys

    script = _UNDER_A_LIMIT.format(limit=16 << 30)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[1],
        env={k: v for k, v in os.environ.items() if k != "TOKIO_WORKER_THREADS"},
    )
    assert (done.returncode, done.stdout) == (0, "0 hi\n"), done.stderr
