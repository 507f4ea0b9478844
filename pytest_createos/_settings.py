"""The plugin's settings: its command-line options and ini keys, read once per session.

Example::

    settings = read_settings(config)   # in pytest_configure
    settings.seed, settings.url, settings.leak_check
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

__all__ = ["LEAK_MODES", "PluginSettings", "read_settings"]

#: What a test that leaves sandboxes alive does: fails, warns, or nothing.
LEAK_MODES = ("fail", "warn", "off")


@dataclass(frozen=True)
class PluginSettings:
    """The effective settings, read once from options and ini."""

    seed: int
    url: str | None
    leak_check: str
    control_token: str | None = None


def read_settings(config: pytest.Config) -> PluginSettings:
    workerinput = getattr(config, "workerinput", None)
    raw_seed = config.getoption("createos_seed")
    if raw_seed is None and workerinput is not None:
        raw_seed = workerinput.get("createos_seed")
    if raw_seed is None and config.getini("createos_seed"):
        try:
            raw_seed = int(config.getini("createos_seed"))
        except ValueError:
            raise pytest.UsageError("createos_seed must be an integer") from None
    seed = raw_seed if raw_seed is not None else random.SystemRandom().randrange(2**31)
    if seed < 0:
        raise pytest.UsageError("--createos-seed must not be negative")
    url = config.getoption("createos_url") or config.getini("createos_url") or None
    if url is not None and not url.startswith(("http://", "https://")):
        raise pytest.UsageError(f"--createos-url must be an http(s) URL, not {url!r}")
    leak = config.getoption("createos_leak_check") or config.getini("createos_leak_check")
    if config.getoption("createos_no_leak_check"):
        leak = "off"
    if leak not in LEAK_MODES:
        raise pytest.UsageError(f"createos_leak_check must be one of {', '.join(LEAK_MODES)}")
    token = config.getoption("createos_control_token") or config.getini("createos_control_token")
    return PluginSettings(seed=seed, url=url, leak_check=leak, control_token=token or None)
