"""A robust-looking host with a window between a process's start and its stdin close.

Its ``run`` starts the command as a managed process, closes the process's stdin in a second
request, and then waits for it; a cancelled wait terminates the process, and a cancelled start
makes the lease unconfirmed (``shutdown`` destroys it). The close of stdin in between is covered
by neither: ``shutdown()`` landing exactly there cancels the run and leaves the process running
(``no-orphan-process``). The scripted ``shutdown-during-run`` holds the start's answer, so it
lands in the covered start; the explorer finds the window on ``run(L1, cat) || shutdown()``.

Example::

    host = StdinWindowHost(SandboxApi(url, api_key))
    lease = await host.acquire()
    await host.run(lease, "cat")       # stdin closed at once: cat ends
"""

from __future__ import annotations

import asyncio

from example_hosts.api import ApiError
from example_hosts.robust import RobustHost


class StdinWindowHost(RobustHost):
    """:class:`RobustHost` whose ``run`` closes the process's stdin between the start and the
    guarded wait.

    Example::

        host = StdinWindowHost(SandboxApi(url, api_key), seed=1)
    """

    async def run(self, lease: str, command: str) -> int:
        """Start ``command``, close its stdin, wait for it; its exit code."""
        task = asyncio.current_task()
        assert task is not None
        self._commands.add(task)  # so that shutdown() can stop it
        try:
            pid = await self._start(lease, command)
            process = f"/v1/sandboxes/{lease}/processes/{pid}"
            try:
                await self.api.call("POST", f"{process}/stdin/close")  # the bug: unguarded
            except ApiError as error:
                # 409: the command already ended (a short one can, before this request) or
                # its stdin is closed; real clients take it as done, and so does this host.
                if error.status != 409:
                    raise
            try:
                finished = await self.api.call("GET", f"{process}/wait", timeout_ms="60000")
            except BaseException:
                await asyncio.shield(self._terminate(lease, pid))
                raise
            return int(finished["exit_code"])
        finally:
            self._commands.discard(task)
