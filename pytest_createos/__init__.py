"""pytest fixtures, a reference lease provider and a conformance kit for CreateOS sandboxes.

The fixtures (``createos_server``, ``createos_aiohttp_server``, ``createos_faults``,
``createos_journal``, ``createos_config``, ``createos_lease_params``, ``createos_provider``,
``createos_kit``) are registered automatically through the ``pytest11`` entry point.
``SubprocessHost`` and ``SubprocessProvider`` run the kit against a program in any language.
The errors a test may meet are importable from here too (``ControlError``, ``GateTimeout``,
``JournalAssertionError``, ``BlockingCallError``, ``ConformanceError``...).
"""

from typing import TYPE_CHECKING

from fake_server._lazy import lazy_exports

if TYPE_CHECKING:  # what the names are; they are imported on first use (see fake_server._lazy)
    from fake_server.gates import GateTimeout
    from fake_server.journal import JournalAssertionError
    from pytest_createos.bridge import BridgeError, SubprocessHost, SubprocessProvider
    from pytest_createos.channel import ControlError
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
    from pytest_createos.server import (
        BlockingCallError,
        CreateosServer,
        GateHandle,
        HeldRequestInfo,
        UnknownGateError,
    )

__all__ = [
    "CLEANUP_PENDING_MESSAGE",
    "BlockingCallError",
    "BridgeError",
    "CleanupInProgressError",
    "CleanupPendingError",
    "CleanupUnconfirmedError",
    "ConfigResult",
    "ConformanceError",
    "ConformanceKit",
    "ControlError",
    "CreateosApiError",
    "CreateosServer",
    "CreateosTransportError",
    "ExecuteResult",
    "GateHandle",
    "GateTimeout",
    "HeldRequestInfo",
    "Host",
    "HostConformance",
    "JournalAssertionError",
    "Lease",
    "LeaseError",
    "LeaseHost",
    "LeaseHostAdapter",
    "LeaseOwnershipError",
    "LeaseProvider",
    "ProbeResult",
    "ProviderConformance",
    "RealizedWorkspace",
    "SubprocessHost",
    "SubprocessProvider",
    "UnknownGateError",
    "is_cleanup_pending",
    "validate_config",
]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "GateTimeout": "fake_server.gates",
        "JournalAssertionError": "fake_server.journal",
        "BridgeError": "pytest_createos.bridge",
        "SubprocessHost": "pytest_createos.bridge",
        "SubprocessProvider": "pytest_createos.bridge",
        "ControlError": "pytest_createos.channel",
        "CLEANUP_PENDING_MESSAGE": "pytest_createos.errors",
        "CleanupInProgressError": "pytest_createos.errors",
        "CleanupPendingError": "pytest_createos.errors",
        "CleanupUnconfirmedError": "pytest_createos.errors",
        "CreateosApiError": "pytest_createos.errors",
        "CreateosTransportError": "pytest_createos.errors",
        "LeaseError": "pytest_createos.errors",
        "LeaseOwnershipError": "pytest_createos.errors",
        "is_cleanup_pending": "pytest_createos.errors",
        "LeaseHost": "pytest_createos.host",
        "ConformanceError": "pytest_createos.kit",
        "ConformanceKit": "pytest_createos.kit",
        "Host": "pytest_createos.kit",
        "HostConformance": "pytest_createos.kit",
        "LeaseHostAdapter": "pytest_createos.kit",
        "ProviderConformance": "pytest_createos.kit",
        "ConfigResult": "pytest_createos.provider",
        "ExecuteResult": "pytest_createos.provider",
        "Lease": "pytest_createos.provider",
        "LeaseProvider": "pytest_createos.provider",
        "ProbeResult": "pytest_createos.provider",
        "RealizedWorkspace": "pytest_createos.provider",
        "validate_config": "pytest_createos.provider",
        "BlockingCallError": "pytest_createos.server",
        "CreateosServer": "pytest_createos.server",
        "GateHandle": "pytest_createos.server",
        "HeldRequestInfo": "pytest_createos.server",
        "UnknownGateError": "pytest_createos.server",
    },
)
