"""A minimal CreateOS sandbox API client (JSend envelopes over aiohttp), shared by both hosts.

Example::

    api = SandboxApi("http://127.0.0.1:8080", "skp_me")
    sandbox = await api.call("POST", "/v1/sandboxes", {"shape": "s-1vcpu-1gb"})
    await api.close()
"""

from __future__ import annotations

from typing import Any

import aiohttp

SHAPE = "s-1vcpu-1gb"


class ApiError(Exception):
    """The API answered with an error status.

    Example:
        >>> ApiError(409, "sandbox is pausing").status
        409
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status

    @property
    def transient(self) -> bool:
        """Worth retrying later: the sandbox was busy (409), or the service was (429, 5xx)."""
        return self.status in (409, 429) or self.status >= 500


class SandboxApi:
    """One aiohttp session speaking to one API URL with one key.

    Example::

        api = SandboxApi(createos_server.url, createos_server.api_key)
    """

    def __init__(self, url: str, api_key: str) -> None:
        self._session = aiohttp.ClientSession(url, headers={"X-Api-Key": api_key})

    async def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, **query: str
    ) -> dict[str, Any]:
        """The ``data`` of a successful answer; :class:`ApiError` for an error answer.
        Transport failures (a reset, a lost answer) raise ``aiohttp.ClientError``."""
        async with self._session.request(method, path, json=body, params=query) as response:
            envelope = await response.json()
            if response.status >= 400:
                raise ApiError(response.status, str(envelope.get("message")))
            data: dict[str, Any] = envelope["data"]
            return data

    async def close(self) -> None:
        await self._session.close()
