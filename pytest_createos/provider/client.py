"""The provider's calls to the CreateOS API, and what their answers mean for a lease.

``_SandboxApi`` owns the provider's ``aiohttp`` session and request pacer, builds a
:class:`~pytest_createos._client.CreateosClient` per configuration (the transport: URL, key,
pacing, timeouts, JSend envelopes, errors that carry only a status and a label), and makes the
sandbox calls the lifecycle is built from: read a sandbox's status, bring it to ``running`` or
``paused`` (polling until it gets there, submitting again after a 409), run a one-shot exec,
and delete it (a 404 counts as deleted). A missing sandbox or a terminal status is
``_SandboxGone``, which the lifecycle turns into an expired lease, a failed acquire, or a
release with nothing left to pause.

Everything here is internal: :class:`~pytest_createos.provider.LeaseProvider` is built on it.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import aiohttp

from .._client import CreateosClient, RequestPacer
from ..errors import CreateosTransportError, TransitionError
from .config import _Settings

__all__: list[str] = []

_INTERMEDIATE = frozenset({"creating", "pausing", "resuming", "forking"})
_TERMINAL = frozenset({"destroying", "destroyed", "failed"})


class _SandboxGone(Exception):
    """The sandbox answered 404 or reached a terminal state."""


class _SandboxApi:
    """The session, the pacer and the sandbox requests; ``LeaseProvider.__init__`` sets them."""

    _session: aiohttp.ClientSession | None
    _owns_session: bool
    _pacer: RequestPacer

    def _client(self, cfg: _Settings) -> CreateosClient:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return CreateosClient(
            self._session,
            self._pacer,
            api_url=cfg.api_url,
            api_key=cfg.api_key,
            spacing_s=cfg.request_spacing_ms / 1000,
            timeout_s=cfg.timeout_s,
        )

    # -- internals: requests -----------------------------------------------------------------

    async def _get_status(self, client: CreateosClient, sandbox_id: str) -> str:
        reply = await client.json(
            "GET", client.path("sandboxes", sandbox_id), "get sandbox", tolerate=frozenset({404})
        )
        if reply.data is None:
            raise _SandboxGone()
        status = reply.data.get("status")
        if reply.data.get("id") != sandbox_id or not isinstance(status, str):
            raise CreateosTransportError("get sandbox", "invalid response")
        return status

    async def _transition(
        self,
        client: CreateosClient,
        sandbox_id: str,
        desired: Literal["running", "paused"],
        cfg: _Settings,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + cfg.timeout_s
        action = "resume" if desired == "running" else "pause"
        submitted = False
        while True:
            status = await self._get_status(client, sandbox_id)
            if status == desired:
                return
            if status in _TERMINAL:
                raise _SandboxGone()
            submittable = (
                status in ("paused", "error") if desired == "running" else status == "running"
            )
            if submittable and not submitted:
                reply = await client.json(
                    "POST",
                    client.path("sandboxes", sandbox_id, action),
                    f"{action} sandbox",
                    body={},
                    tolerate=frozenset({404, 409}),
                )
                if reply.status == 404:
                    raise _SandboxGone()
                # A 409 means the sandbox was not in a state to accept it yet; poll and try
                # again rather than counting it as submitted.
                submitted = reply.ok
            elif not submittable and status not in _INTERMEDIATE:
                raise TransitionError(desired, status)
            # Otherwise: intermediate, or the old status still lingering after our submit.
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TransitionError(desired, status, retryable=True)
            await asyncio.sleep(min(cfg.poll_s, remaining))

    async def _exec(
        self, client: CreateosClient, sandbox_id: str, cmd: str, args: list[str], operation: str
    ) -> tuple[int, str]:
        reply = await client.json(
            "POST",
            client.path("sandboxes", sandbox_id, "exec"),
            operation,
            body={"cmd": cmd, "args": args},
            tolerate=frozenset({404}),
        )
        if reply.data is None:
            raise _SandboxGone()
        result = reply.data.get("result")
        if not isinstance(result, dict):
            raise CreateosTransportError(operation, "invalid response")
        code = result.get("exit_code")
        stdout = result.get("stdout", "")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(stdout, str):
            raise CreateosTransportError(operation, "invalid response")
        return code, stdout

    async def _delete(self, client: CreateosClient, sandbox_id: str) -> None:
        await client.json(
            "DELETE",
            client.path("sandboxes", sandbox_id),
            "delete sandbox",
            tolerate=frozenset({404}),
        )
