"""The same host done right: cleanup finishes before resume.

- Lifecycle calls are serialised per lease (one lock each), so a resume waits for the
  release of the same lease instead of racing it, and two resumes never send two requests.
- Transitions are waited out (poll until ``paused`` / ``running``), so nothing is attached to
  a sandbox that is still going away.
- Refusals are retried with jittered exponential backoff, bounded in attempts.
- Anything that cannot be confirmed -- a pause whose answer was lost, a process start whose
  answer was lost, a command abandoned on shutdown -- makes the lease *unconfirmed*: it is
  destroyed, and the next resume acquires a fresh lease instead.

Example::

    host = RobustHost(SandboxApi(url, api_key))
    lease = await host.acquire()
    await host.release(lease)          # paused, and confirmed paused
    lease = await host.resume(lease)   # the same sandbox running again, or a fresh one
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp

from example_hosts.api import SHAPE, ApiError, SandboxApi

T = TypeVar("T")

_GONE = frozenset({"destroying", "destroyed", "failed"})


class RobustHost:
    """Leases are sandbox ids; ``keep_warm`` pauses released leases instead of deleting them.

    Example::

        host = RobustHost(SandboxApi(url, api_key), keep_warm=False, seed=1)
    """

    def __init__(
        self,
        api: SandboxApi,
        *,
        keep_warm: bool = True,
        seed: int = 0,
        base_delay_s: float = 0.05,
        max_delay_s: float = 1.0,
        max_attempts: int = 6,
        poll_s: float = 0.01,
        timeout_s: float = 10.0,
    ) -> None:
        self.api = api
        self.keep_warm = keep_warm
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self._random = random.Random(seed)
        self._locks: dict[str, asyncio.Lock] = {}
        self._unconfirmed: set[str] = set()
        self._destroyed: set[str] = set()
        self._commands: set[asyncio.Task[Any]] = set()

    # -- the Host protocol ----------------------------------------------------------------------

    async def acquire(self) -> str:
        """A new sandbox, once it is running."""
        sandbox = await self.api.call("POST", "/v1/sandboxes", {"shape": SHAPE})
        lease = str(sandbox["id"])
        await self._wait_for(lease, "running")
        return lease

    async def release(self, lease: str) -> None:
        """Pause the lease and wait until it is paused (or destroy it, if it cannot be kept)."""
        async with self._lock(lease):
            if lease in self._unconfirmed or not self.keep_warm:
                await self._destroy(lease)
                return
            try:
                await self._retrying(lambda: self.api.call("POST", f"/v1/sandboxes/{lease}/pause"))
                await self._wait_for(lease, "paused")
            except (aiohttp.ClientError, ApiError):
                # The pause may or may not have happened: we cannot vouch for this sandbox.
                self._unconfirmed.add(lease)
                await self._destroy(lease)

    async def resume(self, lease: str) -> str:
        """The same sandbox running again once its cleanup finished, or a fresh lease."""
        async with self._lock(lease):
            if lease in self._unconfirmed:
                await self._destroy(lease)
            if lease in self._destroyed:
                return await self.acquire()
            status = await self._settled_status(lease)
            if status == "paused":
                await self._retrying(lambda: self.api.call("POST", f"/v1/sandboxes/{lease}/resume"))
                await self._wait_for(lease, "running")
                return lease
            if status == "running":
                return lease
            if status not in _GONE:
                await self._destroy(lease)  # error or unknown: not worth keeping
            return await self.acquire()

    async def run(self, lease: str, command: str) -> int:
        """Run ``command`` as a managed process; its exit code. Cancelling it terminates it."""
        task = asyncio.current_task()
        assert task is not None
        self._commands.add(task)  # so that shutdown() can stop it
        try:
            pid = await self._start(lease, command)
            try:
                path = f"/v1/sandboxes/{lease}/processes/{pid}/wait"
                finished = await self.api.call("GET", path, timeout_ms="60000")
            except BaseException:
                await asyncio.shield(self._terminate(lease, pid))
                raise
            return int(finished["exit_code"])
        finally:
            self._commands.discard(task)

    async def destroy(self, lease: str) -> None:
        """Destroy a lease for good (a lost answer is asked again; 404 counts as done)."""
        async with self._lock(lease):
            await self._destroy(lease)

    async def shutdown(self) -> None:
        """Stop every command, destroy every lease that cannot be vouched for, disconnect."""
        for task in list(self._commands):
            task.cancel()
        await asyncio.gather(*self._commands, return_exceptions=True)
        for lease in list(self._unconfirmed):
            with contextlib.suppress(aiohttp.ClientError, ApiError):
                await self._destroy(lease)
        await self.api.close()

    # -- internals ------------------------------------------------------------------------------

    def _lock(self, lease: str) -> asyncio.Lock:
        return self._locks.setdefault(lease, asyncio.Lock())

    async def _start(self, lease: str, command: str) -> str:
        body = {"cmd": "/bin/bash", "args": ["-lc", command]}
        try:
            process = await self.api.call("POST", f"/v1/sandboxes/{lease}/processes", body)
        except ApiError as error:
            if error.status >= 500:
                self._unconfirmed.add(lease)  # it may have started: nobody knows its id
            raise
        except (aiohttp.ClientError, asyncio.CancelledError):
            self._unconfirmed.add(lease)
            raise
        return str(process["process_id"])

    async def _terminate(self, lease: str, pid: str) -> None:
        try:
            process = await self.api.call(
                "DELETE", f"/v1/sandboxes/{lease}/processes/{pid}", grace_ms="1000"
            )
        except (aiohttp.ClientError, ApiError):
            self._unconfirmed.add(lease)
            return
        if process.get("tree_exited") is not True:
            self._unconfirmed.add(lease)

    async def _destroy(self, lease: str) -> None:
        async def delete() -> None:
            try:
                await self.api.call("DELETE", f"/v1/sandboxes/{lease}")
            except ApiError as error:
                if error.status != 404:  # already gone counts as destroyed
                    raise

        # A delete is idempotent, so a lost answer is simply asked again.
        await self._retrying(delete, transport_too=True)
        self._unconfirmed.discard(lease)
        self._destroyed.add(lease)

    async def _retrying(
        self, attempt: Callable[[], Awaitable[T]], *, transport_too: bool = False
    ) -> T:
        """``attempt()``, retried with jittered exponential backoff while it fails transiently."""
        for number in range(1, self.max_attempts + 1):
            try:
                return await attempt()
            except ApiError as error:
                if not error.transient or number == self.max_attempts:
                    raise
            except aiohttp.ClientError:
                if not transport_too or number == self.max_attempts:
                    raise
            ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (number - 1))
            await asyncio.sleep(self._random.uniform(ceiling / 2, ceiling))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _status(self, lease: str) -> str:
        try:
            sandbox = await self.api.call("GET", f"/v1/sandboxes/{lease}")
        except ApiError as error:
            if error.status == 404:
                return "destroyed"
            raise
        return str(sandbox["status"])

    async def _settled_status(self, lease: str) -> str:
        """The sandbox's status once no transition is in flight."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        status = await self._status(lease)
        while status in ("creating", "pausing", "resuming") and loop.time() < deadline:
            await asyncio.sleep(self.poll_s)
            status = await self._status(lease)
        return status

    async def _wait_for(self, lease: str, wanted: str) -> None:
        status = await self._settled_status(lease)
        if status != wanted:
            raise ApiError(409, f"sandbox {lease} is {status}, not {wanted}")
