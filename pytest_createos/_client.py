"""A small JSON client for the CreateOS API, with per-API-URL request pacing.

Private to the reference provider. It mirrors the Paperclip client mechanics (contract §11.1):
``apiUrl + "/v1" + path``, ``X-Api-Key``, no redirects, a per-request timeout, JSend envelopes
whose ``data`` must be an object, and errors that carry only an HTTP status and a fixed label. A
429 is sent again once its ``Retry-After`` is over, as the SDKs do (contract §1.7).

Example:
    >>> pacer = RequestPacer()
    >>> pacer.pending("https://api.sb.createos.sh")
    0
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import aiohttp

from .errors import CreateosApiError, CreateosTransportError

__all__ = ["CreateosClient", "Reply", "RequestPacer", "retry_after_s", "valid_id"]

#: How often a request answered 429 is sent again (the SDKs' default, contract §1.7).
RATE_LIMIT_RETRIES = 2
#: The wait after a 429 that names none (the SDKs' base delay).
RATE_LIMIT_DEFAULT_S = 0.5

# Ids go into URL paths; Paperclip refuses anything outside this alphabet, and so do we, so a
# hostile id from metadata or a response can never reshape a request path.
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,200}$")


def valid_id(value: object) -> bool:
    """Tell whether ``value`` is a sandbox/process id we are willing to put in a URL.

    Example:
        >>> valid_id("sb_123"), valid_id("../etc")
        (True, False)
    """
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for: whole (or decimal) seconds, or an HTTP date
    (``now`` defaults to the current UTC time); ``None`` when absent or unreadable.

    Example:
        >>> retry_after_s("2"), retry_after_s("soon"), retry_after_s(None)
        (2.0, None, None)
    """
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:  # an HTTP date is always GMT
            moment = moment.replace(tzinfo=timezone.utc)
        seconds = (moment - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


class RequestPacer:
    """Spaces requests to the same API URL at least ``spacing_s`` apart.

    The real API allows 300 requests per minute per caller IP, so Paperclip spaces its calls
    300 ms apart per ``apiUrl``; we do the same. Slots are reserved synchronously, so
    concurrent callers queue in arrival order without a lock.

    Example:
        >>> import asyncio
        >>> asyncio.run(RequestPacer().wait("http://127.0.0.1:1", 0))
    """

    def __init__(self) -> None:
        self._next_at: dict[str, float] = {}

    def pending(self, api_url: str) -> int:
        """Return 1 when a slot for ``api_url`` is reserved in the future, else 0.

        Example:
            >>> RequestPacer().pending("https://x")
            0
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return 0
        return int(self._next_at.get(api_url, 0.0) > loop.time())

    async def wait(self, api_url: str, spacing_s: float) -> None:
        """Wait for this request's slot; returns at once when ``spacing_s`` is 0.

        Example:
            >>> import asyncio
            >>> asyncio.run(RequestPacer().wait("https://x", 0.0))
        """
        if spacing_s <= 0:
            return
        now = asyncio.get_running_loop().time()
        slot = max(now, self._next_at.get(api_url, now))
        self._next_at[api_url] = slot + spacing_s
        if slot > now:
            await asyncio.sleep(slot - now)


@dataclass(frozen=True)
class Reply:
    """An HTTP status and, for a 2xx JSON reply, the envelope's ``data`` object.

    Example:
        >>> Reply(404, None).ok
        False
    """

    status: int
    data: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        """True for a 2xx reply.

        Example:
            >>> Reply(200, {}).ok
            True
        """
        return 200 <= self.status < 300


class CreateosClient:
    """Issues CreateOS requests for one API URL and key through a shared session and pacer.

    ``tolerate`` on each call lists the non-2xx statuses the caller handles itself (for example
    404 on DELETE); any other non-2xx raises :class:`CreateosApiError` with the body unread.

    Example:
        >>> async def demo(session: aiohttp.ClientSession) -> None:
        ...     client = CreateosClient(session, RequestPacer(), api_url="http://127.0.0.1:8080",
        ...                             api_key="k", spacing_s=0, timeout_s=30)
        ...     reply = await client.json("GET", "/sandboxes/sb_1", "get sandbox")
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        pacer: RequestPacer,
        *,
        api_url: str,
        api_key: str,
        spacing_s: float,
        timeout_s: float,
    ) -> None:
        self._session = session
        self._pacer = pacer
        self.api_url = api_url
        self._api_key = api_key
        self._spacing_s = spacing_s
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        # Never show the key, even in a debugger or a log of locals.
        return f"CreateosClient(api_url={self.api_url!r})"

    @staticmethod
    def path(*segments: str) -> str:
        """Build a ``/v1``-relative path with every segment percent-escaped.

        Example:
            >>> CreateosClient.path("sandboxes", "sb 1")
            '/sandboxes/sb%201'
        """
        return "/" + "/".join(quote(s, safe="") for s in segments)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"X-Api-Key": self._api_key, "Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    async def json(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        raw: bytes | None = None,
        tolerate: frozenset[int] = frozenset(),
        timeout_s: float | None = None,
    ) -> Reply:
        """Send one request and return its :class:`Reply`.

        ``path`` is relative to ``/v1`` and already escaped (build it with :meth:`path`).
        ``raw`` sends an octet-stream body instead of JSON.

        Example:
            >>> async def demo(client: CreateosClient) -> None:
            ...     reply = await client.json("DELETE", "/sandboxes/sb_1", "delete sandbox",
            ...                               tolerate=frozenset({404}))
        """
        if raw is not None:
            headers = self._headers("application/octet-stream")
            data: bytes | None = raw
        elif body is not None:
            headers = self._headers("application/json")
            data = json.dumps(body).encode()
        else:
            headers = self._headers(None)
            data = None
        total = timeout_s if timeout_s is not None else self._timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + total
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            await self._pacer.wait(self.api_url, self._spacing_s)
            try:
                async with self._session.request(
                    method,
                    self.api_url + "/v1" + path,
                    params=params,
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=total),
                ) as response:
                    status = response.status
                    # A 429 was refused before anything happened: the same request may go
                    # again once the wait the service asks for is over (contract §1.7).
                    wait = self._rate_limit_wait(response, attempt)
                    if wait is None or loop.time() + wait >= deadline:
                        if not 200 <= status < 300:
                            if status in tolerate:
                                return Reply(status, None)
                            raise CreateosApiError(status, operation)
                        return Reply(status, _parse_envelope(await response.read(), operation))
            except asyncio.TimeoutError:
                raise CreateosTransportError(operation, "timeout") from None
            except aiohttp.ClientError:
                # aiohttp's messages include the URL (path and query); drop the chain on purpose.
                raise CreateosTransportError(operation, "connection error") from None
            await asyncio.sleep(wait)  # outside the response: its connection goes back first
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _rate_limit_wait(self, response: aiohttp.ClientResponse, attempt: int) -> float | None:
        """How long to wait before sending a request answered ``response`` again: the
        ``Retry-After`` of a 429 (or the base delay when it names none), while attempts are
        left; ``None`` when it must not go again."""
        if response.status != 429 or attempt >= RATE_LIMIT_RETRIES:
            return None
        wait = retry_after_s(response.headers.get("Retry-After"))
        return RATE_LIMIT_DEFAULT_S if wait is None else wait

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        operation: str,
        *,
        params: Mapping[str, str],
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Open a streaming GET; the caller checks the status and reads lines.

        No total timeout: the caller bounds the whole read with its own deadline.

        Example:
            >>> async def demo(client: CreateosClient) -> None:
            ...     async with client.stream("/sandboxes/sb_1/processes/p/connect", "connect",
            ...                              params={"after": "0"}) as response:
            ...         line = await response.content.readline()
        """
        await self._pacer.wait(self.api_url, self._spacing_s)
        headers = self._headers(None)
        headers["Accept"] = "application/x-ndjson"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout_s)
        try:
            async with self._session.get(
                self.api_url + "/v1" + path,
                params=params,
                headers=headers,
                allow_redirects=False,
                timeout=timeout,
            ) as response:
                yield response
        except asyncio.TimeoutError:
            raise CreateosTransportError(operation, "timeout") from None
        except aiohttp.ClientError:
            raise CreateosTransportError(operation, "connection error") from None


def _parse_envelope(payload: bytes, operation: str) -> dict[str, Any]:
    # Paperclip requires a JSend success envelope whose data is an object; anything else is a
    # protocol error, reported without echoing the payload.
    try:
        envelope = json.loads(payload)
    except ValueError:
        raise CreateosTransportError(operation, "invalid response") from None
    if not isinstance(envelope, dict) or envelope.get("status") != "success":
        raise CreateosTransportError(operation, "unsuccessful response")
    data = envelope.get("data")
    if not isinstance(data, dict):
        raise CreateosTransportError(operation, "invalid response")
    return data
