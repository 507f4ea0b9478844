"""The fake's configuration: one frozen object, shared by the Python API, the CLI and the plugin."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from fake_server.catalog import DEFAULT_REGION
from fake_server.lifecycle import Durations, check_duration_ms

__all__ = ["ServerConfig"]


@dataclass(frozen=True)
class ServerConfig:
    """How a fake behaves.

    Example::

        ServerConfig(seed=7, transition_ms=0, manual_clock=True, api_keys=("skp_test",))
    """

    #: Seed for ids, names and probability faults; ``None`` draws one (readable as ``fake.seed``).
    seed: int | None = None
    #: Duration of pause, resume, fork and delete transitions.
    transition_ms: float = 50.0
    #: Duration of ``creating`` (0: the create call answers with a running sandbox, as the real
    #: service does).
    create_ms: float = 0.0
    #: Use a :class:`~fake_server.clock.ManualClock` that only moves when told to.
    manual_clock: bool = False
    #: Keys registered at start (each its own tenant).
    api_keys: tuple[str, ...] = ()
    #: Only registered keys are accepted (otherwise any non-empty key is a fresh tenant).
    strict: bool = False
    #: What a deleted sandbox becomes: a ``destroyed`` row that GET and lists show, or, with
    #: ``"404"``, nothing (GET answers 404, lists leave it out) once it is destroyed.
    deleted: Literal["destroyed", "404"] = "destroyed"
    #: Destroyed sandboxes each tenant keeps readable (as ``destroyed``); older ones answer 404.
    destroyed_kept: int = 1000
    #: How a ``connect`` cursor older than the retained output is answered.
    eviction: Literal["http", "frame"] = "http"
    region: str = DEFAULT_REGION
    journal_capacity: int = 10_000
    #: Per-process output journal size (the real service keeps 1 MiB).
    output_cap_bytes: int = 1 << 20
    #: Input a managed process may hold unread (sent with ``POST …/input``, not read yet);
    #: more is refused (409) until it reads, as a full pipe stops its writer.
    stdin_cap_bytes: int = 8 << 20
    #: Largest upload; the sandbox shell's own filesystem caps a file at 10 MB too.
    max_file_bytes: int = 10_000_000
    #: Output one buffered ``/exec`` may produce before it is stopped (its answer says so). A
    #: ``?stream=true`` exec streams all of its output and keeps at most this much of what the
    #: client has not read yet: a client that falls further behind gets an eviction error frame.
    exec_output_cap_bytes: int = 1 << 20
    #: Step budget of one command (an exec or a process): commands and loop iterations.
    max_commands: int = 1_000_000
    #: Wall-clock seconds one command may run (``None``: no limit).
    max_command_seconds: float | None = 600.0
    max_json_bytes: int = 256 << 10
    #: Drop a tenant made by an unknown key (open mode) after this long (on the fake's clock)
    #: without a request, unless it still has a sandbox that is not destroyed or a fault rule;
    #: ``None``: keep every tenant. Registered keys (``api_keys``, ``/_fake/tenants``) stay.
    idle_tenant_s: float | None = None
    #: Answer the control API and dashboard for any ``Host``/``Origin`` (not only loopback).
    allow_remote: bool = False
    #: When set, every control API request must carry it in ``X-Control-Token``.
    control_token: str | None = None
    #: A connection that has not sent a complete request head this long after it opened (or
    #: after the first bytes of its next request) is closed; ``None``: no deadline.
    header_timeout_s: float | None = 15.0
    #: A request whose body makes no progress (none of it arrives) for this long while a route
    #: reads it is answered 408 and its connection closed; ``None``: no deadline.
    body_timeout_s: float | None = 15.0
    #: A client that reads nothing of its answer for this long is cut off; ``None``: never.
    write_timeout_s: float | None = 30.0
    heartbeat_s: float = 5.0
    #: Upper bound for ``wait?timeout_ms=`` and the default when absent.
    max_wait_ms: int = 60_000

    def __post_init__(self) -> None:
        # Checked here, where every way in meets (Python, the CLI, the plugin): a NaN or an
        # endless duration would leave every transition unfinished, and NaN is not JSON.
        for name in ("transition_ms", "create_ms"):
            try:
                check_duration_ms(getattr(self, name))
            except ValueError as exc:
                raise ValueError(f"{name} {exc}") from None
        # Neither can ever be presented: an empty header is no key, and an empty token would
        # let through every request that sends none (None is how to ask for no token).
        if self.control_token == "":
            raise ValueError("control_token must not be empty (None: no token)")
        if "" in self.api_keys:
            raise ValueError("api_keys must not hold an empty key")

    def durations(self) -> Durations:
        return Durations.uniform(self.transition_ms / 1000, create=self.create_ms / 1000)

    def with_changes(self, **changes: object) -> ServerConfig:
        """A copy with some fields changed, e.g. ``config.with_changes(seed=3)``."""
        return replace(self, **changes)  # type: ignore[arg-type]
