"""The host everybody writes first. It works on a quiet day, and it has four bugs:

1. ``release`` asks for the pause and returns; nothing stops a ``resume`` (or a command) from
   racing that pause, and nothing waits for it to finish.
2. ``resume`` retries a refused resume at once, as fast as the API answers (a hot loop).
3. ``resume`` has no notion of a lease whose process cleanup is unconfirmed, and hands the
   lease back whatever happened.
4. ``shutdown`` drops the connection and leaves the command it was running running.

Example::

    host = NaiveHost(SandboxApi(url, api_key))
    lease = await host.acquire()
    await host.release(lease)
    lease = await host.resume(lease)   # may race the pause: see tests/test_naive_host.py
"""

from __future__ import annotations

from example_hosts.api import SHAPE, ApiError, SandboxApi

#: How often ``resume`` asks before giving up (and handing the lease back anyway).
RESUME_ATTEMPTS = 100


class NaiveHost:
    """Leases are sandbox ids.

    Example::

        host = NaiveHost(SandboxApi(url, api_key))
        exit_code = await host.run(await host.acquire(), "echo hi")
    """

    def __init__(self, api: SandboxApi) -> None:
        self.api = api

    async def acquire(self) -> str:
        sandbox = await self.api.call("POST", "/v1/sandboxes", {"shape": SHAPE})
        return str(sandbox["id"])

    async def release(self, lease: str) -> None:
        await self.api.call("POST", f"/v1/sandboxes/{lease}/pause")  # bug 1

    async def resume(self, lease: str) -> str:
        for _ in range(RESUME_ATTEMPTS):
            try:
                await self.api.call("POST", f"/v1/sandboxes/{lease}/resume")
                return lease
            except ApiError:
                continue  # bug 2: no pause between attempts
        return lease  # bug 3: whatever happened, unconfirmed or not

    async def run(self, lease: str, command: str) -> int:
        process = await self.api.call(
            "POST",
            f"/v1/sandboxes/{lease}/processes",
            {"cmd": "/bin/bash", "args": ["-lc", command]},
        )
        path = f"/v1/sandboxes/{lease}/processes/{process['process_id']}/wait"
        finished = await self.api.call("GET", path, timeout_ms="60000")
        return int(finished["exit_code"])

    async def shutdown(self) -> None:
        await self.api.close()  # bug 4
