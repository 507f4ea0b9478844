"""Provider configuration: what a host passes as ``config``, validated and normalised.

:func:`validate_config` checks a camelCase configuration (as Paperclip's) and fills in the
defaults; the other modules work from ``_Settings``, the validated form that ``_settings``
builds (raising :class:`~pytest_createos.errors.LeaseConfigError` when the configuration is
invalid). ``apiKey`` falls back to the ``CREATEOS_API_KEY`` environment variable, read only
here.

Example:
    >>> validate_config({"shape": "s-1vcpu-1gb"}, environ={"CREATEOS_API_KEY": "k"}).ok
    True
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from ..errors import LeaseConfigError

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_API_URL",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_REQUEST_SPACING_MS",
    "DEFAULT_TIMEOUT_MS",
    "MAX_TIMEOUT_MS",
    "ConfigResult",
    "validate_config",
]

DEFAULT_API_URL: Final = "https://api.sb.createos.sh"
#: Documented fallback for ``apiKey``; read only in :func:`validate_config`.
API_KEY_ENV: Final = "CREATEOS_API_KEY"

DEFAULT_TIMEOUT_MS: Final = 300_000
MAX_TIMEOUT_MS: Final = 86_400_000
DEFAULT_REQUEST_SPACING_MS: Final = 300
DEFAULT_POLL_INTERVAL_MS: Final = 250

_FORBIDDEN_CHARS = ("\r", "\n", "\0")


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
