"""A minimal CreateOS sandbox API client (JSend envelopes over aiohttp), shared by both hosts.

Example::

    api = SandboxApi("http://127.0.0.1:8080", "skp_me")
    sandbox = await api.call("POST", "/v1/sandboxes", {"shape": "s-1vcpu-1gb"})
    await api.close()
"""

from __future__ import annotations

import asyncio
import math
from email.utils import parsedate_to_datetime
from time import time
from typing import Any

import aiohttp

SHAPE = "s-1vcpu-1gb"
#: How often a request answered 429 is sent again, and the wait when it names none.
RATE_LIMIT_RETRIES = 2
RATE_LIMIT_DEFAULT_S = 0.5


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
        Transport failures (a reset, a lost answer) raise ``aiohttp.ClientError``. A 429 was
        refused before anything happened: it is sent again once its ``Retry-After`` is over,
        at most :data:`RATE_LIMIT_RETRIES` times (as the SDKs do)."""
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            async with self._session.request(method, path, json=body, params=query) as response:
                envelope = await response.json()
                if response.status == 429 and attempt < RATE_LIMIT_RETRIES:
                    wait = _retry_after_s(response.headers.get("Retry-After"))
                elif response.status >= 400:
                    raise ApiError(response.status, str(envelope.get("message")))
                else:
                    data: dict[str, Any] = envelope["data"]
                    return data
            await asyncio.sleep(RATE_LIMIT_DEFAULT_S if wait is None else wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def close(self) -> None:
        await self._session.close()


def _retry_after_s(value: str | None) -> float | None:
    """The wait a ``Retry-After`` header asks for: seconds or an HTTP date (``None``: none)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None
