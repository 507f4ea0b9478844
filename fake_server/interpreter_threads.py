"""The threads every sandbox command runs on: settings of the interpreter's one runtime.

bashkit runs each script (``await Bash.execute``) as a task of a tokio runtime that the whole
process shares, started by its first run, which reads its settings from the environment then.
Importing this module sets them (each unless the user set it); :func:`runtime_started` takes
back what it set, so that nothing else in the process sees them.

Example::

    interpreter_threads.runtime_started()   # after the first ``Bash.execute`` call
"""

from __future__ import annotations

import os

__all__ = ["STACK_BYTES", "WORKER_THREADS", "runtime_started", "worker_threads"]

#: Each thread's stack: bashkit runs scripts on threads with the platform's default 2 MiB
#: stack, where a script that evals itself or runs itself by path overflows it (a crash of the
#: whole process) after ~30-50 levels; with 1 GiB of (reserved, not committed) stack the
#: interpreter's own limits end such a recursion first.
STACK_BYTES = 1 << 30


def worker_threads(cores: int, address_space: int | None) -> int:
    """How many threads the runtime gets on ``cores`` CPU cores under an address-space limit
    of ``address_space`` bytes (``None``: none, as without ``ulimit -v``).

    tokio has one per core unless told otherwise. A builtin that computes without end holds
    its thread until the command's deadline and ignores a stop (bashkit 0.20.1's ``jq``: see
    docs/shell.md), so one thread per core let that many runaway commands of one tenant hold
    up every command of every tenant: 32 more. An idle thread only waits, but reserves its
    stack's address space; under a limit the stacks get at most half of it (a runtime whose
    threads cannot all start never runs a command: every command of the process would hang).

    Example:
        >>> worker_threads(2, None), worker_threads(2, 16 << 30), worker_threads(8, 1 << 30)
        (34, 8, 1)
    """
    wanted = 32 + cores
    if address_space is None:
        return wanted
    return max(1, min(wanted, address_space // 2 // STACK_BYTES))


def _address_space() -> int | None:
    try:
        import resource
    except ImportError:  # not on this platform (Windows): no such limit
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


#: Threads of the runtime (see :func:`worker_threads`).
WORKER_THREADS = worker_threads(os.cpu_count() or 1, _address_space())
#: The runtime's settings.
_SETTINGS = {"RUST_MIN_STACK": str(STACK_BYTES), "TOKIO_WORKER_THREADS": str(WORKER_THREADS)}
#: Those set here and not taken back yet.
_SET_HERE = [name for name in _SETTINGS if name not in os.environ]
for _name in _SET_HERE:
    os.environ[_name] = _SETTINGS[_name]


def runtime_started() -> None:
    """Take back the settings made here: the runtime has started, and its threads keep them."""
    while _SET_HERE:
        os.environ.pop(_SET_HERE.pop(), None)
