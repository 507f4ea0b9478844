"""An in-memory fake of the CreateOS sandbox API, served by aiohttp.

Example::

    from fake_server import FakeCreateOS, ServerConfig, serve

    fake = FakeCreateOS(ServerConfig(seed=1, transition_ms=0))
    async with serve(fake) as url:
        api_key = fake.create_tenant()
"""

from typing import TYPE_CHECKING

from fake_server._lazy import lazy_exports

if TYPE_CHECKING:  # what the names are; they are imported on first use (see _lazy)
    from fake_server.clock import Clock, ManualClock, RealClock
    from fake_server.config import ServerConfig
    from fake_server.errors import ApiError
    from fake_server.fake import FakeCreateOS
    from fake_server.journal import Entry, Journal, JournalAssertionError
    from fake_server.lifecycle import Status
    from fake_server.network import SimulatedRequest, SimulatedResponse
    from fake_server.registered_commands import CommandContext, CommandRegistry
    from fake_server.runner import BackgroundServer, serve

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

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "Clock": "fake_server.clock",
        "ManualClock": "fake_server.clock",
        "RealClock": "fake_server.clock",
        "ServerConfig": "fake_server.config",
        "ApiError": "fake_server.errors",
        "FakeCreateOS": "fake_server.fake",
        "Entry": "fake_server.journal",
        "Journal": "fake_server.journal",
        "JournalAssertionError": "fake_server.journal",
        "Status": "fake_server.lifecycle",
        "SimulatedRequest": "fake_server.network",
        "SimulatedResponse": "fake_server.network",
        "BackgroundServer": "fake_server.runner",
        "serve": "fake_server.runner",
        "CommandContext": "fake_server.registered_commands",
        "CommandRegistry": "fake_server.registered_commands",
    },
)
