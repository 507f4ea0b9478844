"""The schedule explorer: every interleaving of a few concurrent host calls, searched.

The fake holds every request of the test's tenant on arrival; the explorer decides which held
request goes on next, and when a sandbox's transition ends. Each run is judged by the kit's
checks; a failing run is shrunk to a short schedule that :func:`replay` reproduces exactly.
:class:`~pytest_createos.kit.ConformanceKit` offers it as ``explore`` and ``replay``.
"""

from pytest_createos._explore.explorer import (
    DEFAULT_MAX_SCHEDULES,
    DEFAULT_MAX_STEPS,
    STRATEGIES,
    ExploreReport,
    RunReport,
    explore,
    replay,
)
from pytest_createos._explore.quiescence import ExploreError
from pytest_createos._explore.runner import HostFactory
from pytest_createos._explore.workloads import (
    WORKLOADS,
    Op,
    Workload,
    acquire,
    find_workload,
    release,
    resume,
    run,
    shutdown,
)

__all__ = [
    "DEFAULT_MAX_SCHEDULES",
    "DEFAULT_MAX_STEPS",
    "STRATEGIES",
    "WORKLOADS",
    "ExploreError",
    "ExploreReport",
    "HostFactory",
    "Op",
    "RunReport",
    "Workload",
    "acquire",
    "explore",
    "find_workload",
    "release",
    "replay",
    "resume",
    "run",
    "shutdown",
]
