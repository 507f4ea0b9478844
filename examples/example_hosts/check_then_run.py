"""A robust-looking host that checks a lease's status before running on it, then runs.

Its ``run`` asks the API whether the sandbox is ``running`` and refuses work on a lease that is
not, a check meant to keep commands off leases being released. But the check and the command
are two requests: a release's pause can land between them, and the command then reaches a
sandbox that is pausing (``no-work-on-closing-sandbox``). No scripted scenario runs a command
while a release is in flight; the explorer finds it on ``release(L1) || resume(L1) ||
run(L1)``.

Example::

    host = CheckThenRunHost(SandboxApi(url, api_key))
    lease = await host.acquire()
    await host.run(lease, "echo hi")   # GET (running?), then the command
"""

from __future__ import annotations

from example_hosts.api import ApiError
from example_hosts.robust import RobustHost


class CheckThenRunHost(RobustHost):
    """:class:`RobustHost` whose ``run`` checks the status first (check, then act).

    Example::

        host = CheckThenRunHost(SandboxApi(url, api_key), seed=1)
    """

    async def run(self, lease: str, command: str) -> int:
        """Run ``command`` if the sandbox is running now; its exit code."""
        status = await self._status(lease)
        if status != "running":
            raise ApiError(409, f"sandbox {lease} is {status}: not running commands on it")
        return await super().run(lease, command)  # the bug: the status may have changed
