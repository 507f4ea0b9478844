"""pytest fixtures, a reference lease provider and a conformance kit for CreateOS sandboxes.

The fixtures (``createos_server``, ``createos_aiohttp_server``, ``createos_faults``,
``createos_journal``, ``createos_config``, ``createos_lease_params``, ``createos_provider``,
``createos_kit``) are registered automatically through the ``pytest11`` entry point.
"""

from pytest_createos.errors import (
    CLEANUP_PENDING_MESSAGE,
    CleanupInProgressError,
    CleanupPendingError,
    CleanupUnconfirmedError,
    CreateosApiError,
    CreateosTransportError,
    LeaseError,
    LeaseOwnershipError,
    is_cleanup_pending,
)
from pytest_createos.host import LeaseHost
from pytest_createos.kit import (
    ConformanceError,
    ConformanceKit,
    Host,
    HostConformance,
    LeaseHostAdapter,
    ProviderConformance,
)
from pytest_createos.provider import (
    ConfigResult,
    ExecuteResult,
    Lease,
    LeaseProvider,
    ProbeResult,
    RealizedWorkspace,
    validate_config,
)
from pytest_createos.server import CreateosServer, GateHandle

__all__ = [
    "CLEANUP_PENDING_MESSAGE",
    "CleanupInProgressError",
    "CleanupPendingError",
    "CleanupUnconfirmedError",
    "ConfigResult",
    "ConformanceError",
    "ConformanceKit",
    "CreateosApiError",
    "CreateosServer",
    "CreateosTransportError",
    "ExecuteResult",
    "GateHandle",
    "Host",
    "HostConformance",
    "Lease",
    "LeaseError",
    "LeaseHost",
    "LeaseHostAdapter",
    "LeaseOwnershipError",
    "LeaseProvider",
    "ProbeResult",
    "ProviderConformance",
    "RealizedWorkspace",
    "is_cleanup_pending",
    "validate_config",
]
