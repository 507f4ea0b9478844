"""The reference CreateOS lease provider: the lease lifecycle, with cleanup before resume.

A faithful asyncio port of the Paperclip CreateOS provider (contract §11). A *lease* is one
sandbox bound to a company and an environment. Hosts drive it through the hooks
:meth:`LeaseProvider.acquire`, :meth:`~LeaseProvider.resume`, :meth:`~LeaseProvider.release`,
:meth:`~LeaseProvider.destroy`, :meth:`~LeaseProvider.execute`,
:meth:`~LeaseProvider.realize_workspace`, :meth:`~LeaseProvider.probe`,
:meth:`~LeaseProvider.validate_config` and :meth:`~LeaseProvider.shutdown`.

The guard this module exists for: while a lease is being released or destroyed, or after a
cleanup that could not be confirmed, ``resume`` raises :class:`CleanupPendingError` with the
message ``CreateOS lease cleanup must finish before resume.``

Example:
    >>> import asyncio
    >>> async def main(url: str, key: str) -> None:
    ...     config = {"apiUrl": url, "apiKey": key, "shape": "s-1vcpu-1gb", "reuseLease": True}
    ...     async with LeaseProvider() as provider:
    ...         ids = {"company_id": "co", "environment_id": "env", "config": config}
    ...         lease = await provider.acquire(**ids)
    ...         result = await provider.execute(**ids, lease=lease, command="echo", args=["hi"])
    ...         assert result.stdout == "hi\\n"
    ...         await provider.release(**ids, provider_lease_id=lease.provider_lease_id,
    ...                                lease_metadata=lease.metadata)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import contextlib
import ipaddress
import json
import os
import re
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar
from urllib.parse import urlsplit

import aiohttp

from .._client import CreateosClient, RequestPacer, valid_id
from ..errors import (
    EXPIRED_LEASE_MESSAGE,
    GUARANTEED_EXPIRY_MESSAGE,
    LEASE_CLOSING_MESSAGE,
    PROCESS_CREATION_UNCONFIRMED_MESSAGE,
    SETUP_CLEANUP_UNCONFIRMED_MESSAGE,
    TERMINATION_UNCONFIRMED_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CommandCancelledError,
    CommandStreamError,
    CreateosApiError,
    CreateosTransportError,
    LeaseConfigError,
    LeaseError,
    LeaseOwnershipError,
    ProviderShutDownError,
    TransitionError,
)

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_API_URL",
    "LEASE_MARKER_PATH",
    "PROBE_TOKEN",
    "STDIN_PATH_PREFIX",
    "WORKSPACE_DIR",
    "ConfigResult",
    "ExecuteResult",
    "Lease",
    "LeaseProvider",
    "ProbeResult",
    "RealizedWorkspace",
    "validate_config",
]

T = TypeVar("T")

#: Where every lease's work happens inside the sandbox.
WORKSPACE_DIR: Final = "/paperclip-workspace"
#: The random marker file that proves, on resume, that the sandbox is the one we prepared.
LEASE_MARKER_PATH: Final = "/paperclip-workspace/.paperclip-runtime/.paperclip-createos-lease"
#: Per-command stdin is uploaded here (plus a UUID) and removed after the command.
STDIN_PATH_PREFIX: Final = "/tmp/paperclip-stdin-"
#: What :meth:`LeaseProvider.probe` echoes and expects back.
PROBE_TOKEN: Final = "paperclip-createos-ready"
DEFAULT_API_URL: Final = "https://api.sb.createos.sh"
#: Documented fallback for ``apiKey``; read only in :func:`validate_config`.
API_KEY_ENV: Final = "CREATEOS_API_KEY"

DEFAULT_TIMEOUT_MS: Final = 300_000
MAX_TIMEOUT_MS: Final = 86_400_000
DEFAULT_REQUEST_SPACING_MS: Final = 300
DEFAULT_POLL_INTERVAL_MS: Final = 250
# Paperclip reconnects to a process output stream at most three times.
MAX_RECONNECTS: Final = 3
TERMINATE_GRACE_MS: Final = 1000

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SIGNAL_RE = re.compile(r"^SIG[A-Z0-9]+$")
_MARKER_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_FORBIDDEN_CHARS = ("\r", "\n", "\0")
# One stream line larger than this is treated as malformed rather than buffered forever.
_MAX_FRAME_BYTES = 8 * 1024 * 1024

_INTERMEDIATE = frozenset({"creating", "pausing", "resuming", "forking"})
_TERMINAL = frozenset({"destroying", "destroyed", "failed"})

LeaseKey = tuple[str, str]


# --------------------------------------------------------------------------------------------
# Configuration


@dataclass
class ConfigResult:
    """The outcome of :func:`validate_config`.

    ``normalized_config`` (camelCase, defaults filled in, ``apiUrl`` reduced to its origin) is
    set only when ``ok``; ``errors`` lists every problem otherwise. Its ``repr`` hides the key.

    Example:
        >>> result = validate_config({"apiUrl": "https://api.sb.createos.sh/v1/",
        ...                           "apiKey": "k", "shape": "s-1vcpu-1gb"})
        >>> result.ok, result.normalized_config["apiUrl"]
        (True, 'https://api.sb.createos.sh')
    """

    ok: bool
    normalized_config: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        shown = None
        if self.normalized_config is not None:
            shown = {**self.normalized_config, "apiKey": "***"}
        return f"ConfigResult(ok={self.ok!r}, normalized_config={shown!r}, errors={self.errors!r})"


@dataclass(frozen=True)
class _Settings:
    api_url: str
    api_key: str = field(repr=False)
    shape: str
    rootfs: str | None
    region: str | None
    timeout_ms: int
    reuse_lease: bool
    request_spacing_ms: int
    poll_interval_ms: int

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000

    @property
    def poll_s(self) -> float:
        return self.poll_interval_ms / 1000


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _normalize_api_url(value: object, errors: list[str]) -> str | None:
    # Messages never echo the value: a URL can carry credentials in its user info or query.
    if not isinstance(value, str) or not value.strip():
        errors.append("apiUrl must be a non-empty string")
        return None
    value = value.strip()
    if "?" in value or "#" in value:
        errors.append("apiUrl must not contain a query or fragment")
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        errors.append("apiUrl must be a valid URL")
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        errors.append("apiUrl must be an https URL")
        return None
    if "@" in parts.netloc:
        errors.append("apiUrl must not contain user info")
        return None
    host = parts.hostname
    if not host:
        errors.append("apiUrl must name a host")
        return None
    if scheme == "http" and not _is_loopback(host):
        errors.append("apiUrl must use https (plain http is allowed only on loopback)")
        return None
    if parts.path.rstrip("/") not in ("", "/v1"):
        errors.append("apiUrl must be an origin, optionally ending in /v1")
        return None
    shown_host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown_host}" + (f":{port}" if port is not None else "")


def _optional_text(config: Mapping[str, Any], key: str, errors: list[str]) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        errors.append(f"{key} must be a string")
        return None
    value = value.strip()
    return value or None


def _integer(
    config: Mapping[str, Any], key: str, default: int, low: int, high: int, errors: list[str]
) -> int:
    value = config.get(key)
    if value is None:
        return default
    # bool is an int subclass; a JSON ``true`` must not become 1 ms.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors.append(f"{key} must be an integer from {low} to {high}")
        return default
    return value


def validate_config(
    config: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> ConfigResult:
    """Validate and normalise a provider configuration (camelCase keys, as Paperclip's).

    Keys: ``apiUrl`` (https origin, optionally ending in ``/v1``; plain http only on
    loopback; no user info, query or fragment; default the public API), ``apiKey`` (else the
    ``CREATEOS_API_KEY`` environment variable), ``shape`` (required), ``rootfs``, ``region``,
    ``timeoutMs`` (1..86 400 000, default 300 000), ``reuseLease`` (default false),
    ``requestSpacingMs`` (0..60 000, default 300; 0 disables pacing) and ``pollIntervalMs``
    (1..60 000, default 250). Newlines and NUL are rejected in every string. Unknown keys are
    ignored. No message ever contains a submitted value.

    Example:
        >>> validate_config({"shape": "s"}, environ={}).errors
        ['apiKey is required (or set CREATEOS_API_KEY)']
        >>> validate_config({"shape": "s"}, environ={"CREATEOS_API_KEY": "k"}).ok
        True
    """
    errors: list[str] = []
    if not isinstance(config, Mapping):
        return ConfigResult(False, None, ["config must be a mapping"])
    for key, value in config.items():
        if isinstance(value, str) and any(c in value for c in _FORBIDDEN_CHARS):
            errors.append(f"{key} must not contain newlines or NUL characters")
    if errors:
        return ConfigResult(False, None, errors)

    raw_url = config.get("apiUrl")
    api_url = _normalize_api_url(DEFAULT_API_URL if raw_url is None else raw_url, errors)

    api_key = config.get("apiKey")
    if api_key is None:
        env = os.environ if environ is None else environ
        api_key = env.get(API_KEY_ENV)
        if api_key is not None and any(c in api_key for c in _FORBIDDEN_CHARS):
            errors.append(f"{API_KEY_ENV} must not contain newlines or NUL characters")
            api_key = None
    if api_key is None or (isinstance(api_key, str) and not api_key.strip()):
        errors.append(f"apiKey is required (or set {API_KEY_ENV})")
    elif not isinstance(api_key, str):
        errors.append("apiKey must be a string")

    shape = config.get("shape")
    if not isinstance(shape, str) or not shape.strip():
        errors.append("shape is required")
    rootfs = _optional_text(config, "rootfs", errors)
    region = _optional_text(config, "region", errors)
    timeout_ms = _integer(config, "timeoutMs", DEFAULT_TIMEOUT_MS, 1, MAX_TIMEOUT_MS, errors)
    spacing = _integer(config, "requestSpacingMs", DEFAULT_REQUEST_SPACING_MS, 0, 60_000, errors)
    poll = _integer(config, "pollIntervalMs", DEFAULT_POLL_INTERVAL_MS, 1, 60_000, errors)
    reuse = config.get("reuseLease", False)
    if reuse is None:
        reuse = False
    if not isinstance(reuse, bool):
        errors.append("reuseLease must be a boolean")

    if errors:
        return ConfigResult(False, None, errors)
    assert isinstance(api_key, str)
    assert isinstance(shape, str)
    assert api_url is not None
    normalized: dict[str, Any] = {
        "apiUrl": api_url,
        "apiKey": api_key.strip(),
        "shape": shape.strip(),
        "rootfs": rootfs,
        "region": region,
        "timeoutMs": timeout_ms,
        "reuseLease": reuse,
        "requestSpacingMs": spacing,
        "pollIntervalMs": poll,
    }
    return ConfigResult(True, normalized, [])


def _settings(config: Mapping[str, Any], environ: Mapping[str, str] | None) -> _Settings:
    result = validate_config(config, environ=environ)
    if not result.ok or result.normalized_config is None:
        raise LeaseConfigError(result.errors)
    c = result.normalized_config
    return _Settings(
        api_url=c["apiUrl"],
        api_key=c["apiKey"],
        shape=c["shape"],
        rootfs=c["rootfs"],
        region=c["region"],
        timeout_ms=c["timeoutMs"],
        reuse_lease=c["reuseLease"],
        request_spacing_ms=c["requestSpacingMs"],
        poll_interval_ms=c["pollIntervalMs"],
    )


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Lease:
    """A lease handle: the sandbox id (``None`` once expired) and its binding metadata.

    Example:
        >>> Lease(None, {"expired": True}).expired
        True
    """

    provider_lease_id: str | None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def expired(self) -> bool:
        """True for the expired lease that ``resume`` returns when a lease cannot be kept.

        Example:
            >>> Lease("sb_1", {}).expired
            False
        """
        return self.provider_lease_id is None


def _expired() -> Lease:
    return Lease(None, {"expired": True})


@dataclass(frozen=True)
class ExecuteResult:
    """The outcome of :meth:`LeaseProvider.execute`.

    ``exit_code`` is ``None`` when the command was killed by ``signal`` or timed out; on a
    timeout ``stdout``/``stderr`` hold the output received before the deadline.

    Example:
        >>> ExecuteResult(0, None, False, "hi\\n", "", {}).exit_code
        0
    """

    exit_code: int | None
    signal: str | None
    timed_out: bool
    stdout: str
    stderr: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RealizedWorkspace:
    """Where a lease's work runs inside the sandbox (no request is needed to know it).

    Example:
        >>> RealizedWorkspace(WORKSPACE_DIR, {}).cwd
        '/paperclip-workspace'
    """

    cwd: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of :meth:`LeaseProvider.probe`: ``ok`` and a one-line summary.

    Example:
        >>> ProbeResult(True, "ok").ok
        True
    """

    ok: bool
    summary: str


# --------------------------------------------------------------------------------------------
# Shell quoting


def _shell_quote(value: str) -> str:
    # Always single-quote, even "safe" words: the script is data, not something to prettify.
    return "'" + value.replace("'", "'\\''") + "'"


def _validate_command(
    command: str, args: Sequence[str], cwd: str | None, env: Mapping[str, str] | None
) -> None:
    if not isinstance(command, str) or not command:
        raise LeaseError("CreateOS command must be a non-empty string")
    if isinstance(args, str):
        # A bare string would be split into characters; that is never what the caller meant.
        raise LeaseError("CreateOS command args must be a sequence of strings")
    if any(not isinstance(arg, str) for arg in args):
        raise LeaseError("CreateOS command args must be a sequence of strings")
    if any("\0" in text for text in (command, *args)):
        raise LeaseError("CreateOS command and args must not contain NUL characters")
    if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
        raise LeaseError("CreateOS command cwd must be a non-empty string without NUL")
    for name, value in (env or {}).items():
        if not isinstance(name, str) or _ENV_NAME_RE.fullmatch(name) is None:
            raise LeaseError("CreateOS command env names must match ^[A-Za-z_][A-Za-z0-9_]*$")
        if not isinstance(value, str) or "\0" in value:
            raise LeaseError("CreateOS command env values must be strings without NUL")


def _build_script(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    stdin_path: str | None,
) -> str:
    # Env goes into the script, never the request: the API refuses env keys that were not
    # declared at sandbox creation. ``exec`` makes the command the process leader, so signals
    # and exit status are its own.
    parts = [f"export {name}={_shell_quote(value)};" for name, value in (env or {}).items()]
    line = "exec " + " ".join(_shell_quote(word) for word in (command, *args))
    if stdin_path is not None:
        line += " < " + _shell_quote(stdin_path)
    parts.append(line)
    return " ".join(parts)


# --------------------------------------------------------------------------------------------
# Process output


class _Output:
    """Output gathered from a managed process, decoded incrementally per stream."""

    def __init__(self) -> None:
        self.cursor = 0
        self.reconnects = 0
        self._text: dict[str, list[str]] = {"stdout": [], "stderr": []}
        # Incremental decoders keep a UTF-8 character that is split across frames intact.
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")(errors="replace")
            for name in ("stdout", "stderr")
        }

    def add(self, stream: str, data: bytes) -> None:
        name = "stderr" if stream == "stderr" else "stdout"
        self._text[name].append(self._decoders[name].decode(data))

    def text(self, name: Literal["stdout", "stderr"]) -> str:
        tail = self._decoders[name].decode(b"", final=True)
        if tail:
            self._text[name].append(tail)
        return "".join(self._text[name])

    def handle(self, line: bytes) -> tuple[int | None, str | None] | None:
        """Apply one NDJSON line; return ``(exit_code, signal)`` on the exit frame."""
        line = line.strip()
        if not line:
            return None
        try:
            frame = json.loads(line)
        except ValueError:
            raise CommandStreamError("malformed output frame") from None
        if not isinstance(frame, dict):
            raise CommandStreamError("malformed output frame")
        kind = frame.get("type")
        if kind == "heartbeat":
            return None
        if kind == "data":
            self._data(frame)
            return None
        if kind == "exit":
            code = frame.get("exit_code")
            sig = frame.get("signal")
            code_ok = isinstance(code, int) and not isinstance(code, bool)
            sig_ok = isinstance(sig, str) and _SIGNAL_RE.fullmatch(sig) is not None
            if not code_ok and not sig_ok:
                raise CommandStreamError("exit status is missing")
            return (code if code_ok else None, sig if sig_ok else None)
        if kind == "error":
            if frame.get("error") == "output_offset_expired":
                raise CommandStreamError("output was evicted")
            raise CommandStreamError("output stream reported an error")
        raise CommandStreamError("malformed output frame")

    def _data(self, frame: dict[str, Any]) -> None:
        seq = frame.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise CommandStreamError("malformed output frame")
        if seq <= self.cursor:
            return  # a replayed frame we already have
        if seq != self.cursor + 1:
            raise CommandStreamError("output sequence gap")
        stream = frame.get("stream")
        payload = frame.get("data_base64")
        if stream not in ("stdout", "stderr", "pty") or not isinstance(payload, str):
            raise CommandStreamError("malformed output frame")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise CommandStreamError("malformed output frame") from None
        self.add(stream, data)
        self.cursor = seq


class _StreamRetry(Exception):
    """The stream ended or failed transiently; reconnect from the cursor."""


class _SandboxGone(Exception):
    """The sandbox answered 404 or reached a terminal state."""


# --------------------------------------------------------------------------------------------
# The provider


class LeaseProvider:
    """The reference CreateOS lease provider (one per worker).

    It keeps, per lease, whether a release/destroy is in flight (``closing``) and whether a
    cleanup could not be confirmed (``unconfirmed``), plus the lease's in-flight operations so
    that a release can cancel and await them. All methods take keyword arguments only.

    Construction options: ``session`` (an ``aiohttp.ClientSession`` to reuse; otherwise one is
    created on first use and closed by :meth:`shutdown`), ``environ`` (where the
    ``CREATEOS_API_KEY`` fallback is read; default ``os.environ``), ``terminate_timeout_ms``
    (the fresh deadline for terminating a process tree) and ``reconnect_delay_ms`` (the pause
    before reconnecting to a process output stream).

    Example:
        >>> async def main(config: dict[str, object]) -> None:
        ...     async with LeaseProvider() as provider:
        ...         lease = await provider.acquire(company_id="co", environment_id="env",
        ...                                        config=config)
    """

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession | None = None,
        environ: Mapping[str, str] | None = None,
        terminate_timeout_ms: int = 10_000,
        reconnect_delay_ms: int = 250,
    ) -> None:
        self._session = session
        self._owns_session = session is None
        self._environ = environ
        self._terminate_timeout_s = terminate_timeout_ms / 1000
        self._reconnect_delay_s = reconnect_delay_ms / 1000
        self._pacer = RequestPacer()
        self._closing: set[LeaseKey] = set()
        self._unconfirmed: set[LeaseKey] = set()
        self._ops: dict[LeaseKey, set[asyncio.Task[Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._shut_down = False

    async def __aenter__(self) -> LeaseProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- state, for hosts and tests ----------------------------------------------------------

    def is_closing(self, provider_lease_id: str) -> bool:
        """True while a release or destroy of that lease is in flight.

        Example:
            >>> LeaseProvider().is_closing("sb_1")
            False
        """
        return any(key[1] == provider_lease_id for key in self._closing)

    def is_cleanup_unconfirmed(self, provider_lease_id: str) -> bool:
        """True when a cleanup of that lease could not be confirmed (destroy it).

        Example:
            >>> LeaseProvider().is_cleanup_unconfirmed("sb_1")
            False
        """
        return any(key[1] == provider_lease_id for key in self._unconfirmed)

    # -- hooks -------------------------------------------------------------------------------

    def validate_config(self, config: Mapping[str, Any]) -> ConfigResult:
        """Validate ``config`` as :func:`validate_config` does, with this provider's environ.

        Example:
            >>> LeaseProvider(environ={}).validate_config({"shape": "s", "apiKey": "k"}).ok
            True
        """
        return validate_config(config, environ=self._environ)

    async def acquire(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        run_id: str | None = None,
        requested_expires_at: object | None = None,
    ) -> Lease:
        """Create a sandbox, prepare the workspace and marker, and return its lease.

        Refuses a guaranteed-expiry request before sending anything. If any step after the
        sandbox exists fails, the sandbox is deleted; if that delete fails too, a
        :class:`CleanupUnconfirmedError` names the sandbox. The metadata never holds the key.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object]) -> None:
            ...     lease = await provider.acquire(company_id="co", environment_id="env",
            ...                                    config=config, run_id="run-1")
            ...     assert lease.metadata["marker"]
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        if requested_expires_at is not None:
            raise LeaseError(GUARANTEED_EXPIRY_MESSAGE)
        return await self._tracked(
            None, self._acquire(cfg, company_id, environment_id, run_id), cancel_error=None
        )

    async def resume(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> Lease:
        """Resume a lease, or return an expired lease when it cannot be kept.

        Raises :class:`LeaseOwnershipError` (nothing sent) for another company's or
        environment's lease, and :class:`CleanupPendingError` while the lease is closing or
        after an unconfirmed cleanup. Returns an expired lease for a bad marker, a changed
        shape/rootfs/region or API URL, a missing or terminal sandbox, or a marker that does not
        read back identically. Transient errors (5xx, timeouts) propagate unchanged.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     lease = await provider.resume(company_id="co", environment_id="env",
            ...                                   config=config,
            ...                                   provider_lease_id=lease.provider_lease_id,
            ...                                   lease_metadata=lease.metadata)
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        _check_owner(lease_metadata, company_id, environment_id)
        if provider_lease_id is None or not valid_id(provider_lease_id):
            return _expired()
        key = (cfg.api_url, provider_lease_id)
        self._check_cleanup(key)
        if not _metadata_matches(lease_metadata, cfg, provider_lease_id):
            return _expired()
        return await self._tracked(
            key,
            self._resume(cfg, key, lease_metadata),
            cancel_error=lambda: CleanupPendingError(reason="closing"),
        )

    async def release(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None:
        """Release a lease: pause it for reuse (``reuseLease``) or delete it.

        Cancels and awaits the lease's in-flight operations first. A 404 counts as deleted.
        Refuses to pause a lease whose process cleanup is unconfirmed
        (:class:`CleanupUnconfirmedError`) and a second concurrent cleanup of the same lease
        (:class:`CleanupInProgressError`).

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     await provider.release(company_id="co", environment_id="env", config=config,
            ...                            provider_lease_id=lease.provider_lease_id,
            ...                            lease_metadata=lease.metadata)
        """
        await self._cleanup(
            company_id, environment_id, config, provider_lease_id, lease_metadata, destroy=False
        )

    async def destroy(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        lease_metadata: Mapping[str, Any],
    ) -> None:
        """Delete the lease's sandbox (404 counts as deleted) and clear unconfirmed state.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     await provider.destroy(company_id="co", environment_id="env", config=config,
            ...                            provider_lease_id=lease.provider_lease_id,
            ...                            lease_metadata=lease.metadata)
        """
        await self._cleanup(
            company_id, environment_id, config, provider_lease_id, lease_metadata, destroy=True
        )

    async def execute(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        lease: Lease,
        command: str,
        args: Sequence[str] = (),
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
        timeout_ms: int | None = None,
    ) -> ExecuteResult:
        """Run one command as a managed process and collect its output.

        The command runs through ``/bin/bash -lc`` with every word single-quoted; ``env`` is
        exported inside the script (names validated before anything is sent); ``stdin`` is
        staged as a file and removed afterwards. On timeout the partial output comes back with
        ``timed_out=True``. On a timeout, an untrustworthy stream or cancellation the process
        tree is terminated; if that cannot be confirmed the lease is marked unconfirmed.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     result = await provider.execute(company_id="co", environment_id="env",
            ...                                     config=config, lease=lease, command="cat",
            ...                                     stdin="hello", timeout_ms=5_000)
            ...     assert result.stdout == "hello"
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        _validate_command(command, args, cwd, env)
        if timeout_ms is not None and (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, int)
            or not 1 <= timeout_ms <= MAX_TIMEOUT_MS
        ):
            raise LeaseError(f"CreateOS command timeout_ms must be from 1 to {MAX_TIMEOUT_MS}")
        sandbox_id = self._owned_sandbox(lease, company_id, environment_id, cfg)
        key = (cfg.api_url, sandbox_id)
        if key in self._closing:
            raise LeaseError(LEASE_CLOSING_MESSAGE, retryable=False)
        if key in self._unconfirmed:
            raise CleanupUnconfirmedError(sandbox_id=sandbox_id)
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else stdin
        timeout_s = (timeout_ms if timeout_ms is not None else cfg.timeout_ms) / 1000
        return await self._tracked(
            key,
            self._execute(cfg, key, command, args, cwd, env, stdin_bytes, timeout_s),
            cancel_error=CommandCancelledError,
        )

    async def realize_workspace(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        lease: Lease,
    ) -> RealizedWorkspace:
        """Return where the lease's work runs; no request is sent.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object],
            ...                lease: Lease) -> None:
            ...     workspace = await provider.realize_workspace(
            ...         company_id="co", environment_id="env", config=config, lease=lease)
            ...     assert workspace.cwd == WORKSPACE_DIR
        """
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        sandbox_id = self._owned_sandbox(lease, company_id, environment_id, cfg)
        return RealizedWorkspace(WORKSPACE_DIR, {"sandboxId": sandbox_id, "cwd": WORKSPACE_DIR})

    async def probe(
        self,
        *,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
    ) -> ProbeResult:
        """Acquire a throwaway lease, run one echo command, and always delete the sandbox.

        Example:
            >>> async def main(provider: LeaseProvider, config: dict[str, object]) -> None:
            ...     result = await provider.probe(company_id="co", environment_id="env",
            ...                                   config=config)
            ...     print(result.summary)
        """
        self._check_open()
        try:
            cfg = _settings(config, self._environ)
        except LeaseConfigError as exc:
            return ProbeResult(False, str(exc))
        try:
            lease = await self.acquire(
                company_id=company_id, environment_id=environment_id, config=config
            )
        except LeaseError as exc:
            return ProbeResult(False, str(exc))
        sandbox_id = lease.provider_lease_id
        assert sandbox_id is not None
        outcome: ProbeResult
        try:
            result = await self.execute(
                company_id=company_id,
                environment_id=environment_id,
                config=config,
                lease=lease,
                command="/bin/echo",
                args=[PROBE_TOKEN],
                cwd=WORKSPACE_DIR,
            )
            if result.exit_code == 0 and PROBE_TOKEN in result.stdout:
                outcome = ProbeResult(True, f"CreateOS sandbox {sandbox_id} ran a command")
            else:
                outcome = ProbeResult(False, "CreateOS probe command did not succeed")
        except LeaseError as exc:
            outcome = ProbeResult(False, str(exc))
        finally:
            try:
                await self._delete(self._client(cfg), sandbox_id)
                self._unconfirmed.discard((cfg.api_url, sandbox_id))
            except LeaseError:
                self._unconfirmed.add((cfg.api_url, sandbox_id))
                outcome = ProbeResult(
                    False, SETUP_CLEANUP_UNCONFIRMED_MESSAGE.format(sandbox_id=sandbox_id)
                )
        return outcome

    async def shutdown(self) -> None:
        """Cancel and await every in-flight operation; refuse all later calls.

        Example:
            >>> import asyncio
            >>> asyncio.run(LeaseProvider().shutdown())
        """
        if self._shut_down:
            return
        self._shut_down = True
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    # -- internals: bookkeeping --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._shut_down:
            raise ProviderShutDownError()

    def _check_cleanup(self, key: LeaseKey) -> None:
        if key in self._closing:
            raise CleanupPendingError(reason="closing")
        if key in self._unconfirmed:
            raise CleanupPendingError(reason="unconfirmed")

    def _owned_sandbox(
        self, lease: Lease, company_id: str, environment_id: str, cfg: _Settings
    ) -> str:
        sandbox_id = lease.provider_lease_id
        if sandbox_id is None:
            raise LeaseError(EXPIRED_LEASE_MESSAGE)
        _check_owner(lease.metadata, company_id, environment_id)
        if lease.metadata.get("apiUrl") != cfg.api_url or lease.metadata.get("sandboxId") != (
            sandbox_id
        ):
            raise LeaseOwnershipError()
        if not valid_id(sandbox_id):
            raise LeaseOwnershipError()
        return sandbox_id

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

    async def _tracked(
        self,
        key: LeaseKey | None,
        coro: Coroutine[Any, Any, T],
        *,
        cancel_error: Callable[[], LeaseError] | None,
    ) -> T:
        # Each operation runs in its own task so that a release (or shutdown) can cancel
        # exactly that operation -- not the caller's whole task -- and await its cleanup.
        task: asyncio.Task[T] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        if key is not None and cancel_error is not None:
            self._ops.setdefault(key, set()).add(task)
        try:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.done() and task.cancelled():
                    # Cancelled from inside the provider: by a release of this lease or by
                    # shutdown. Tell the caller why instead of a bare CancelledError.
                    if self._shut_down:
                        raise ProviderShutDownError() from None
                    if cancel_error is not None:
                        raise cancel_error() from None
                    raise
                # The caller itself was cancelled: stop the operation and let it clean up.
                task.cancel()
                await asyncio.wait({task})
                raise
        finally:
            self._tasks.discard(task)
            if key is not None:
                ops = self._ops.get(key)
                if ops is not None:
                    ops.discard(task)
                    if not ops:
                        del self._ops[key]

    async def _cancel_ops(self, key: LeaseKey) -> None:
        tasks = [task for task in self._ops.get(key, ()) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

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

    # -- internals: lifecycle ----------------------------------------------------------------

    async def _acquire(
        self, cfg: _Settings, company_id: str, environment_id: str, run_id: str | None
    ) -> Lease:
        client = self._client(cfg)
        body: dict[str, Any] = {"shape": cfg.shape}
        if cfg.rootfs is not None:
            body["rootfs"] = cfg.rootfs
        if cfg.region is not None:
            body["region"] = cfg.region
        body["ingress_enabled"] = False
        reply = await client.json("POST", "/sandboxes", "create sandbox", body=body)
        assert reply.data is not None
        sandbox_id = reply.data.get("id")
        if not valid_id(sandbox_id):
            raise CreateosTransportError("create sandbox", "invalid response")
        assert isinstance(sandbox_id, str)
        try:
            try:
                await self._transition(client, sandbox_id, "running", cfg)
            except _SandboxGone:
                raise TransitionError("running", "gone") from None
            code, _ = await self._exec(
                client,
                sandbox_id,
                "/bin/bash",
                ["-lc", f"mkdir -p -- {_shell_quote(WORKSPACE_DIR)}"],
                "prepare workspace",
            )
            if code != 0:
                raise LeaseError(f"CreateOS workspace preparation failed: exit {code}")
            marker = str(uuid.uuid4())
            await client.json(
                "PUT",
                client.path("sandboxes", sandbox_id, "files"),
                "write lease marker",
                params={"path": LEASE_MARKER_PATH},
                raw=marker.encode(),
            )
        except _SandboxGone:
            await self._discard_failed(client, cfg, sandbox_id, None)
            raise TransitionError("running", "gone") from None
        except BaseException as exc:
            await self._discard_failed(client, cfg, sandbox_id, exc)
            raise
        metadata: dict[str, Any] = {
            "provider": "createos",
            "companyId": company_id,
            "environmentId": environment_id,
            "apiUrl": cfg.api_url,
            "sandboxId": sandbox_id,
            "shape": cfg.shape,
            "rootfs": cfg.rootfs,
            "region": cfg.region,
            "reuseLease": cfg.reuse_lease,
            "marker": marker,
            "workspace": WORKSPACE_DIR,
        }
        if run_id is not None:
            metadata["runId"] = run_id
        return Lease(sandbox_id, metadata)

    async def _discard_failed(
        self,
        client: CreateosClient,
        cfg: _Settings,
        sandbox_id: str,
        cause: BaseException | None,
    ) -> None:
        try:
            await self._delete(client, sandbox_id)
        except asyncio.CancelledError:
            self._unconfirmed.add((cfg.api_url, sandbox_id))
            raise
        except LeaseError as delete_error:
            self._unconfirmed.add((cfg.api_url, sandbox_id))
            if isinstance(cause, Exception) or cause is None:
                raise CleanupUnconfirmedError(
                    SETUP_CLEANUP_UNCONFIRMED_MESSAGE.format(sandbox_id=sandbox_id),
                    sandbox_id=sandbox_id,
                ) from (cause or delete_error)
            # The caller was cancelled: keep the cancellation; the state above records it.

    async def _resume(self, cfg: _Settings, key: LeaseKey, metadata: Mapping[str, Any]) -> Lease:
        sandbox_id = key[1]
        client = self._client(cfg)
        try:
            status = await self._get_status(client, sandbox_id)
            if status in _TERMINAL:
                return _expired()
            await self._transition(client, sandbox_id, "running", cfg)
            code, stdout = await self._exec(
                client, sandbox_id, "/bin/cat", [LEASE_MARKER_PATH], "read lease marker"
            )
        except _SandboxGone:
            return _expired()
        if code != 0 or stdout != metadata.get("marker"):
            return _expired()
        return Lease(sandbox_id, {**metadata, "resumedLease": True})

    async def _cleanup(
        self,
        company_id: str,
        environment_id: str,
        config: Mapping[str, Any],
        provider_lease_id: str | None,
        metadata: Mapping[str, Any],
        *,
        destroy: bool,
    ) -> None:
        self._check_open()
        cfg = _settings(config, self._environ)
        _check_ids(company_id, environment_id)
        if provider_lease_id is None:
            return  # an expired lease has nothing left to clean up
        _check_owner(metadata, company_id, environment_id)
        if (
            not valid_id(provider_lease_id)
            or metadata.get("sandboxId") != provider_lease_id
            or metadata.get("apiUrl") != cfg.api_url
        ):
            raise LeaseOwnershipError()
        key = (cfg.api_url, provider_lease_id)
        if key in self._closing:
            raise CleanupInProgressError()
        self._closing.add(key)
        try:
            reuse = cfg.reuse_lease and metadata.get("reuseLease") is True and not destroy
            await self._tracked(None, self._cleanup_lease(cfg, key, reuse), cancel_error=None)
        finally:
            self._closing.discard(key)

    async def _cleanup_lease(self, cfg: _Settings, key: LeaseKey, reuse: bool) -> None:
        # In-flight work goes first: its process-tree cleanup must finish (or be recorded as
        # unconfirmed) before we decide between pausing and deleting.
        await self._cancel_ops(key)
        client = self._client(cfg)
        sandbox_id = key[1]
        if not reuse:
            try:
                await self._delete(client, sandbox_id)
            except BaseException:
                # The sandbox may or may not be going away; nobody may resume it blindly.
                self._unconfirmed.add(key)
                raise
            self._unconfirmed.discard(key)
            return
        if key in self._unconfirmed:
            raise CleanupUnconfirmedError(sandbox_id=sandbox_id)
        try:
            await self._transition(client, sandbox_id, "paused", cfg)
        except _SandboxGone:
            return  # nothing left to keep warm; the next resume expires the lease

    async def _execute(
        self,
        cfg: _Settings,
        key: LeaseKey,
        command: str,
        args: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str] | None,
        stdin: bytes | None,
        timeout_s: float,
    ) -> ExecuteResult:
        client = self._client(cfg)
        sandbox_id = key[1]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        stdin_path: str | None = None
        output = _Output()
        try:
            if stdin is not None:
                stdin_path = f"{STDIN_PATH_PREFIX}{uuid.uuid4()}"
                await client.json(
                    "PUT",
                    client.path("sandboxes", sandbox_id, "files"),
                    "upload stdin",
                    params={"path": stdin_path},
                    raw=stdin,
                    timeout_s=max(deadline - loop.time(), 0.001),
                )
            script = _build_script(command, args, env, stdin_path)
            pid = await self._create_process(client, key, script, cwd)
            try:
                exit_code, signal = await asyncio.wait_for(
                    self._follow(client, sandbox_id, pid, output),
                    timeout=max(deadline - loop.time(), 0.001),
                )
            except asyncio.TimeoutError:
                await self._terminate(client, key, pid, None)
                return ExecuteResult(
                    exit_code=None,
                    signal=None,
                    timed_out=True,
                    stdout=output.text("stdout"),
                    stderr=output.text("stderr"),
                    metadata=_exec_metadata(sandbox_id, pid, output),
                )
            except BaseException as exc:
                await self._terminate(client, key, pid, exc)
                raise
            return ExecuteResult(
                exit_code=exit_code,
                signal=signal,
                timed_out=False,
                stdout=output.text("stdout"),
                stderr=output.text("stderr"),
                metadata=_exec_metadata(sandbox_id, pid, output),
            )
        finally:
            if stdin_path is not None:
                await self._remove_stdin(client, sandbox_id, stdin_path)

    async def _create_process(
        self, client: CreateosClient, key: LeaseKey, script: str, cwd: str | None
    ) -> str:
        body: dict[str, Any] = {"cmd": "/bin/bash", "args": ["-lc", script]}
        if cwd is not None:
            body["cwd"] = cwd
        request = asyncio.ensure_future(
            client.json(
                "POST", client.path("sandboxes", key[1], "processes"), "create process", body=body
            )
        )
        detail: str
        cause: LeaseError
        try:
            reply = await asyncio.shield(request)
        except asyncio.CancelledError:
            await self._settle_cancelled_creation(client, key, request)
            raise
        except CreateosApiError as exc:
            if exc.status < 500:
                raise  # a 4xx answer means the process definitely was not created
            detail, cause = f"HTTP {exc.status}", exc
        except CreateosTransportError as exc:
            detail, cause = exc.kind, exc
        else:
            pid = reply.data.get("process_id") if reply.data is not None else None
            if isinstance(pid, str) and valid_id(pid):
                return pid
            detail = "invalid response"
            cause = CreateosTransportError("create process", detail)
        self._unconfirmed.add(key)
        raise CleanupUnconfirmedError(
            PROCESS_CREATION_UNCONFIRMED_MESSAGE.format(detail=detail), sandbox_id=key[1]
        ) from cause

    async def _settle_cancelled_creation(
        self, client: CreateosClient, key: LeaseKey, request: asyncio.Future[Any]
    ) -> None:
        # Cancelled while the create request was in flight. Let it finish (briefly) so that we
        # learn the process id and can terminate it; only if that fails is the state unknown.
        try:
            done, _ = await asyncio.wait({request}, timeout=self._terminate_timeout_s)
        except asyncio.CancelledError:
            request.cancel()
            self._unconfirmed.add(key)
            raise
        if not done:
            request.cancel()
            self._unconfirmed.add(key)
            return
        error = None if request.cancelled() else request.exception()
        if isinstance(error, CreateosApiError) and error.status < 500:
            return  # definitely not created
        pid = None
        if error is None and not request.cancelled():
            data = request.result().data
            pid = data.get("process_id") if data is not None else None
        if not (isinstance(pid, str) and valid_id(pid)):
            self._unconfirmed.add(key)
            return
        await self._terminate(client, key, pid, asyncio.CancelledError())

    async def _follow(
        self, client: CreateosClient, sandbox_id: str, pid: str, output: _Output
    ) -> tuple[int | None, str | None]:
        process_path = ("sandboxes", sandbox_id, "processes", pid)
        await client.json(
            "POST",
            client.path(*process_path, "stdin", "close"),
            "close stdin",
            body={},
            tolerate=frozenset({409}),
        )
        connect_path = client.path(*process_path, "connect")
        while True:
            try:
                async with client.stream(
                    connect_path, "connect process", params={"after": str(output.cursor)}
                ) as response:
                    if response.status == 410:
                        raise CommandStreamError("output was evicted")
                    if response.status == 429 or response.status >= 500:
                        raise _StreamRetry()
                    if response.status != 200:
                        raise CreateosApiError(response.status, "connect process")
                    exit_status = await _read_stream(response, output)
                    if exit_status is not None:
                        return exit_status
            except (_StreamRetry, CreateosTransportError):
                pass
            # Disconnects do not stop the process: reconnect from the cursor, a few times.
            output.reconnects += 1
            if output.reconnects > MAX_RECONNECTS:
                raise CommandStreamError("output stream ended without an exit status")
            await asyncio.sleep(self._reconnect_delay_s)

    async def _terminate(
        self,
        client: CreateosClient,
        key: LeaseKey,
        pid: str,
        cause: BaseException | None,
    ) -> None:
        """Terminate the process tree; mark the lease unconfirmed unless ``tree_exited``."""
        confirmed = False
        try:
            # A fresh deadline: the command's own deadline has usually passed by now.
            reply = await asyncio.wait_for(
                client.json(
                    "DELETE",
                    client.path("sandboxes", key[1], "processes", pid),
                    "terminate process",
                    params={"grace_ms": str(TERMINATE_GRACE_MS)},
                    tolerate=frozenset({404}),
                ),
                timeout=self._terminate_timeout_s,
            )
            confirmed = reply.status == 404 or (
                reply.data is not None and reply.data.get("tree_exited") is True
            )
        except (LeaseError, asyncio.TimeoutError):
            confirmed = False
        except asyncio.CancelledError:
            self._unconfirmed.add(key)
            raise
        if confirmed:
            return
        self._unconfirmed.add(key)
        if isinstance(cause, asyncio.CancelledError):
            return  # keep the cancellation; the unconfirmed state is recorded
        raise CleanupUnconfirmedError(TERMINATION_UNCONFIRMED_MESSAGE, sandbox_id=key[1]) from cause

    async def _remove_stdin(self, client: CreateosClient, sandbox_id: str, path: str) -> None:
        # Best effort: a leftover file under /tmp is harmless and must not mask the result.
        with contextlib.suppress(LeaseError, asyncio.TimeoutError):
            await asyncio.wait_for(
                client.json(
                    "POST",
                    client.path("sandboxes", sandbox_id, "exec"),
                    "remove stdin",
                    body={"cmd": "/bin/rm", "args": ["-f", "--", path]},
                    tolerate=frozenset({404, 409}),
                ),
                timeout=self._terminate_timeout_s,
            )


# --------------------------------------------------------------------------------------------
# Helpers


async def _read_stream(
    response: aiohttp.ClientResponse, output: _Output
) -> tuple[int | None, str | None] | None:
    # Split lines ourselves: aiohttp's readline caps line length below a large data frame.
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            exit_status = output.handle(line)
            if exit_status is not None:
                return exit_status
        if len(buffer) > _MAX_FRAME_BYTES:
            raise CommandStreamError("malformed output frame")
    if buffer.strip():
        return output.handle(buffer)
    return None


def _exec_metadata(sandbox_id: str, pid: str, output: _Output) -> dict[str, Any]:
    return {
        "sandboxId": sandbox_id,
        "processId": pid,
        "lastSeq": output.cursor,
        "reconnects": output.reconnects,
    }


def _check_ids(company_id: object, environment_id: object) -> None:
    if not isinstance(company_id, str) or not company_id:
        raise LeaseError("company_id must be a non-empty string")
    if not isinstance(environment_id, str) or not environment_id:
        raise LeaseError("environment_id must be a non-empty string")


def _check_owner(metadata: Mapping[str, Any], company_id: str, environment_id: str) -> None:
    if not isinstance(metadata, Mapping) or (
        metadata.get("companyId") != company_id or metadata.get("environmentId") != environment_id
    ):
        raise LeaseOwnershipError()


def _metadata_matches(metadata: Mapping[str, Any], cfg: _Settings, sandbox_id: str) -> bool:
    marker = metadata.get("marker")
    return (
        metadata.get("sandboxId") == sandbox_id
        and metadata.get("apiUrl") == cfg.api_url
        and isinstance(marker, str)
        and _MARKER_RE.fullmatch(marker) is not None
        and metadata.get("shape") == cfg.shape
        and metadata.get("rootfs") == cfg.rootfs
        and metadata.get("region") == cfg.region
    )
