"""State faults applied to one sandbox: a transition stuck or ending in ``error``/``failed``,
the sandbox destroyed behind the client's back, and the lease marker wiped, replaced or garbled.

Rules (``{"type": "stuck"}``...), the control API (``POST /_fake/sandboxes/{id}/state`` and
``/marker``) and the Python API all end here.

Example::

    fake.state_faults.marker(sandbox, "replace")     # resume must now expire the lease
    fake.state_faults.stick(sandbox)                  # the next/current transition never ends
"""

from __future__ import annotations

import uuid

from fake_server.fault_rules import DEFAULT_MARKER_PATH
from fake_server.faults import FaultEngine
from fake_server.filesystem import FileSystem, FsError
from fake_server.lifecycle import Lifecycle, Status
from fake_server.sandbox import Sandbox

__all__ = ["StateFaults"]


class StateFaults:
    """State faults over one fake's lifecycle, drawing randomness from the fault generator."""

    def __init__(self, lifecycle: Lifecycle, faults: FaultEngine) -> None:
        self.lifecycle = lifecycle
        #: Whose generator the draws come from (it is made on the first draw).
        self._faults = faults

    def stick(self, sandbox: Sandbox) -> None:
        """Hold the sandbox's transition in flight (or its next one) until :meth:`unstick`."""
        self.lifecycle.hold(sandbox)

    def unstick(self, sandbox: Sandbox) -> None:
        """Let a stuck transition finish."""
        self.lifecycle.release(sandbox)

    def fail_transition(self, sandbox: Sandbox, status: Status = Status.ERROR) -> None:
        """Make the sandbox's transition in flight (or its next one) end in ``status``."""
        if status not in (Status.ERROR, Status.FAILED):
            raise ValueError("a transition can only be made to fail into 'error' or 'failed'")
        self.lifecycle.redirect(sandbox, status)

    def set_status(self, sandbox: Sandbox, status: Status) -> None:
        """Put the sandbox into ``status`` at once ("destroyed behind the client's back")."""
        self.lifecycle.force(sandbox, status)

    def change(
        self,
        sandbox: Sandbox,
        *,
        status: str | None = None,
        fail_to: str | None = None,
        stuck: bool | None = None,
    ) -> None:
        """Apply several state faults at once (the control API's ``/state`` body); raises
        ``ValueError`` naming a bad status."""
        if status is None and fail_to is None and stuck is None:
            raise ValueError("give at least one of status, stuck, fail_to")
        if status is not None:
            self.set_status(sandbox, Status(status))
        if fail_to is not None:
            self.fail_transition(sandbox, Status(fail_to))
        if stuck is True:
            self.stick(sandbox)
        elif stuck is False:
            self.unstick(sandbox)

    def finish(self, sandbox: Sandbox) -> bool:
        """End the sandbox's transition in flight now, as its clock would have (not a stuck
        one); returns whether one ended. What a schedule explorer over HTTP steps with.

        Example::

            state_faults.finish(sandbox)   # pausing -> paused, journaled as the pause's end
        """
        return self.lifecycle.finish_now(sandbox)

    def marker(self, sandbox: Sandbox, mode: str, path: str = DEFAULT_MARKER_PATH) -> None:
        """Wipe, replace (with another random marker) or garble the lease marker file; raises
        ``ValueError`` for a bad mode or a path no file can live at."""
        if mode not in ("wipe", "replace", "garble"):
            raise ValueError(f"marker mode must be wipe, replace or garble, not {mode!r}")
        fs = sandbox.fs
        try:
            path = FileSystem.normalize(path)
            if mode == "wipe":
                fs.remove(path, force=True)
            elif mode == "replace":
                marker = str(uuid.UUID(int=self._faults.random.getrandbits(128))).encode()
                fs.write(path, marker, make_parents=True)
            else:
                current = fs.read(path) if fs.is_file(path) else b"marker"
                # Same length, different bytes: what a torn or corrupted read looks like.
                fs.write(path, bytes((byte ^ 0x5A) or 0x3F for byte in current), make_parents=True)
        except FsError as exc:
            raise ValueError(f"no marker file can live at {path}: {exc}") from None
