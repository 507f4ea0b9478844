"""Two CreateOS lease hosts, written as a downstream project would.

:class:`NaiveHost` is the obvious first version and is wrong in the ways the pytest-createos
conformance kit exists to catch; :class:`RobustHost` is the same host done right.

Example::

    api = SandboxApi(url, api_key)
    host = RobustHost(api)
    lease = await host.acquire()
    await host.release(lease)
    lease = await host.resume(lease)
"""

from example_hosts.api import ApiError, SandboxApi
from example_hosts.naive import NaiveHost
from example_hosts.robust import RobustHost

__all__ = ["ApiError", "NaiveHost", "RobustHost", "SandboxApi"]
