"""CreateOS lease hosts, written as a downstream project would.

:class:`NaiveHost` is the obvious first version and is wrong in the ways the pytest-createos
conformance kit exists to catch; :class:`RobustHost` is the same host done right.
:class:`FixedWaitHost`, :class:`StdinWindowHost` and :class:`CheckThenRunHost` pass every scripted
scenario yet each has an interleaving bug that only the kit's schedule explorer finds.

Example::

    api = SandboxApi(url, api_key)
    host = RobustHost(api)
    lease = await host.acquire()
    await host.release(lease)
    lease = await host.resume(lease)
"""

from example_hosts.api import ApiError, SandboxApi
from example_hosts.check_then_run import CheckThenRunHost
from example_hosts.fixed_wait import FixedWaitHost
from example_hosts.naive import NaiveHost
from example_hosts.robust import RobustHost
from example_hosts.stdin_window import StdinWindowHost

__all__ = [
    "ApiError",
    "CheckThenRunHost",
    "FixedWaitHost",
    "NaiveHost",
    "RobustHost",
    "SandboxApi",
    "StdinWindowHost",
]
