"""A robust-looking host that waits a fixed time for a pause instead of polling until paused.

Its release asks for the pause and returns once the pause is accepted (the lease's lock is free
again at once, so a release never blocks the scheduler); its resume, finding the sandbox still
``pausing``, sleeps a generous 0.2 s (four times what a pause takes on a quiet day) and then
sends the resume. Every scripted scenario passes: on the fake's real clock a pause ends within
50 ms. Yet nothing guarantees it does: when the pause is still in flight after the sleep, the
resume races it (``no-resume-during-cleanup``). Only an order where the pause ends *after* the
sleep shows it, which the explorer finds on ``release(L1) || resume(L1)``.

Example::

    host = FixedWaitHost(SandboxApi(url, api_key))
    lease = await host.acquire()
    await host.release(lease)          # returns while the sandbox is still pausing
    lease = await host.resume(lease)   # sleeps 0.2 s if still pausing, then resumes
"""

from __future__ import annotations

import asyncio

from example_hosts.robust import RobustHost

#: How long the resume trusts a pause to take at most: the bug.
PAUSE_ALLOWANCE_S = 0.2


class FixedWaitHost(RobustHost):
    """:class:`RobustHost` whose release does not wait for ``paused`` and whose resume waits
    a fixed time for a pause in flight.

    Example::

        host = FixedWaitHost(SandboxApi(url, api_key), seed=1)
    """

    async def release(self, lease: str) -> None:
        """Ask for the pause; return once it is accepted (the sandbox may still be pausing)."""
        async with self._lock(lease):
            if lease in self._unconfirmed or not self.keep_warm:
                await self._destroy(lease)
                return
            try:
                await self._retrying(lambda: self.api.call("POST", f"/v1/sandboxes/{lease}/pause"))
            except Exception:
                self._unconfirmed.add(lease)
                await self._destroy(lease)

    async def resume(self, lease: str) -> str:
        """Resume the lease, giving a pause in flight a fixed time to finish first."""
        async with self._lock(lease):
            if lease in self._unconfirmed:
                await self._destroy(lease)
            if lease in self._destroyed:
                return await self.acquire()
            status = await self._status(lease)
            if status == "pausing":
                await asyncio.sleep(PAUSE_ALLOWANCE_S)  # the bug: "surely paused by now"
                status = "paused"
            if status == "paused":
                await self._retrying(lambda: self.api.call("POST", f"/v1/sandboxes/{lease}/resume"))
                await self._wait_for(lease, "running")
                return lease
            if status == "running":
                return lease
            return await self.acquire()
