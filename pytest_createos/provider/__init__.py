"""The reference CreateOS lease provider (being split into modules; see ``lifecycle``)."""

from .lifecycle import (
    API_KEY_ENV,
    DEFAULT_API_URL,
    LEASE_MARKER_PATH,
    PROBE_TOKEN,
    STDIN_PATH_PREFIX,
    WORKSPACE_DIR,
    ConfigResult,
    ExecuteResult,
    Lease,
    LeaseProvider,
    ProbeResult,
    RealizedWorkspace,
    validate_config,
)
from .lifecycle import DEFAULT_TIMEOUT_MS as DEFAULT_TIMEOUT_MS

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
