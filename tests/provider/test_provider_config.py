"""validate_config: URL rules, defaults, key fallback, and messages that never echo values."""

from __future__ import annotations

import pytest

from pytest_createos.provider import (
    DEFAULT_API_URL,
    DEFAULT_TIMEOUT_MS,
    LeaseProvider,
    validate_config,
)

BASE = {"apiKey": "skp_secret", "shape": "s-1vcpu-1gb"}


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        ("https://api.sb.createos.sh", "https://api.sb.createos.sh"),
        ("https://api.sb.createos.sh/", "https://api.sb.createos.sh"),
        ("https://api.sb.createos.sh/v1", "https://api.sb.createos.sh"),
        ("https://api.sb.createos.sh/v1/", "https://api.sb.createos.sh"),
        ("HTTPS://API.example.com:8443/v1", "https://api.example.com:8443"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.5:1/v1", "http://127.0.0.5:1"),
        ("http://localhost:9000", "http://localhost:9000"),
        ("http://[::1]:9000/", "http://[::1]:9000"),
    ],
)
def test_api_url_is_normalised_to_an_origin(given: str, normalized: str) -> None:
    result = validate_config({**BASE, "apiUrl": given})
    assert result.ok, result.errors
    assert result.normalized_config is not None
    assert result.normalized_config["apiUrl"] == normalized


@pytest.mark.parametrize(
    "url",
    [
        "http://api.sb.createos.sh",  # plain http off loopback
        "http://10.0.0.1:8080",
        "https://user:hunter2@api.sb.createos.sh",  # user info
        "https://hunter2@api.sb.createos.sh",
        "https://api.sb.createos.sh?token=hunter2",  # query
        "https://api.sb.createos.sh/#hunter2",  # fragment
        "https://api.sb.createos.sh/v2",  # a path other than /v1
        "https://api.sb.createos.sh/v1/sandboxes",
        "ftp://api.sb.createos.sh",
        "https://",
        "https://api.sb.createos.sh:99999",
        "",
        "   ",
        42,
    ],
)
def test_unsafe_api_urls_are_rejected_without_echoing_them(url: object) -> None:
    result = validate_config({**BASE, "apiUrl": url})
    assert not result.ok
    assert result.normalized_config is None
    assert result.errors
    assert all("hunter2" not in error for error in result.errors)
    assert all("apiUrl" in error for error in result.errors)


def test_defaults_are_filled_in() -> None:
    result = validate_config(BASE)
    assert result.ok
    assert result.normalized_config == {
        "apiUrl": DEFAULT_API_URL,
        "apiKey": "skp_secret",
        "shape": "s-1vcpu-1gb",
        "rootfs": None,
        "region": None,
        "timeoutMs": DEFAULT_TIMEOUT_MS,
        "reuseLease": False,
        "requestSpacingMs": 300,
        "pollIntervalMs": 250,
    }


def test_optional_fields_are_kept() -> None:
    result = validate_config(
        {
            **BASE,
            "rootfs": "devbox:1",
            "region": "eu",
            "timeoutMs": 1,
            "reuseLease": True,
            "requestSpacingMs": 0,
            "pollIntervalMs": 5,
        }
    )
    assert result.ok
    assert result.normalized_config is not None
    assert result.normalized_config["rootfs"] == "devbox:1"
    assert result.normalized_config["region"] == "eu"
    assert result.normalized_config["timeoutMs"] == 1
    assert result.normalized_config["reuseLease"] is True
    assert result.normalized_config["requestSpacingMs"] == 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("timeoutMs", 0),
        ("timeoutMs", 86_400_001),
        ("timeoutMs", True),
        ("timeoutMs", "300000"),
        ("timeoutMs", 1.5),
        ("reuseLease", "yes"),
        ("reuseLease", 1),
        ("requestSpacingMs", -1),
        ("pollIntervalMs", 0),
        ("shape", ""),
        ("shape", None),
        ("rootfs", 3),
    ],
)
def test_invalid_values_are_rejected(key: str, value: object) -> None:
    result = validate_config({**BASE, key: value})
    assert not result.ok
    assert any(key in error for error in result.errors)


def test_timeout_bounds_are_inclusive() -> None:
    assert validate_config({**BASE, "timeoutMs": 86_400_000}).ok
    assert validate_config({**BASE, "timeoutMs": 300_000.0}).ok


def test_shape_is_required() -> None:
    result = validate_config({"apiKey": "k"})
    assert result.errors == ["shape is required"]


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
@pytest.mark.parametrize("key", ["apiKey", "shape", "rootfs", "region", "apiUrl"])
def test_newlines_and_nul_are_rejected(key: str, bad: str) -> None:
    result = validate_config({**BASE, key: bad})
    assert not result.ok
    assert result.errors == [f"{key} must not contain newlines or NUL characters"]


def test_api_key_falls_back_to_the_environment() -> None:
    result = validate_config({"shape": "s"}, environ={"CREATEOS_API_KEY": "skp_env"})
    assert result.ok
    assert result.normalized_config is not None
    assert result.normalized_config["apiKey"] == "skp_env"


def test_explicit_api_key_wins_over_the_environment() -> None:
    result = validate_config(BASE, environ={"CREATEOS_API_KEY": "skp_env"})
    assert result.normalized_config is not None
    assert result.normalized_config["apiKey"] == "skp_secret"


def test_missing_api_key_is_reported() -> None:
    assert validate_config({"shape": "s"}, environ={}).errors == [
        "apiKey is required (or set CREATEOS_API_KEY)"
    ]
    assert not validate_config({"shape": "s", "apiKey": "  "}, environ={}).ok


def test_environment_key_with_newline_is_rejected() -> None:
    result = validate_config({"shape": "s"}, environ={"CREATEOS_API_KEY": "k\n"})
    assert not result.ok


def test_process_environment_is_the_default_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CREATEOS_API_KEY", "skp_from_os")
    result = validate_config({"shape": "s"})
    assert result.normalized_config is not None
    assert result.normalized_config["apiKey"] == "skp_from_os"


def test_repr_hides_the_key() -> None:
    result = validate_config(BASE)
    assert "skp_secret" not in repr(result)


def test_errors_never_contain_the_key() -> None:
    result = validate_config({"apiKey": "skp_secret", "timeoutMs": "skp_secret"})
    assert not result.ok
    assert all("skp_secret" not in error for error in result.errors)


def test_non_mapping_config_is_rejected() -> None:
    assert not validate_config(["shape"]).ok  # type: ignore[arg-type]


def test_provider_method_uses_its_environ() -> None:
    provider = LeaseProvider(environ={"CREATEOS_API_KEY": "skp_p"})
    result = provider.validate_config({"shape": "s"})
    assert result.normalized_config is not None
    assert result.normalized_config["apiKey"] == "skp_p"
