"""An in-memory fake of the CreateOS sandbox API, served by aiohttp.

Example::

    from fake_server import FakeCreateOS, ServerConfig, serve

    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    async with serve(fake) as url:
        api_key = fake.create_tenant()
"""

from fake_server.clock import Clock, ManualClock, RealClock
from fake_server.config import ServerConfig
from fake_server.errors import ApiError
from fake_server.fake import FakeCreateOS
from fake_server.journal import Entry, Journal, JournalAssertionError
from fake_server.lifecycle import Status
from fake_server.network import SimulatedRequest, SimulatedResponse
from fake_server.runner import BackgroundServer, serve
from fake_server.shell import CommandContext, CommandRegistry

__all__ = [
    "ApiError",
    "BackgroundServer",
    "Clock",
    "CommandContext",
    "CommandRegistry",
    "Entry",
    "FakeCreateOS",
    "Journal",
    "JournalAssertionError",
    "ManualClock",
    "RealClock",
    "ServerConfig",
    "SimulatedRequest",
    "SimulatedResponse",
    "Status",
    "serve",
]
