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

__all__ = ["WORKER_THREADS", "runtime_started"]

#: Threads of the runtime (tokio has one per CPU core unless told otherwise). A builtin that
#: computes without end holds its thread until the command's deadline and ignores a stop
#: (bashkit 0.20.1's ``jq``: see docs/shell.md), so one thread per core let that many runaway
#: commands of one tenant hold up every command of every tenant. An idle thread only waits,
#: with its stack's address space reserved (below); busy ones share the cores.
WORKER_THREADS = 32 + (os.cpu_count() or 1)
#: The runtime's settings. The stack: bashkit runs scripts on threads with the platform's
#: default 2 MiB stack, where a script that evals itself or runs itself by path overflows it (a
#: crash of the whole process) after ~30-50 levels; with 1 GiB of (reserved, not committed)
#: stack the interpreter's own limits end such a recursion first.
_SETTINGS = {"RUST_MIN_STACK": str(1 << 30), "TOKIO_WORKER_THREADS": str(WORKER_THREADS)}
#: Those set here and not taken back yet.
_SET_HERE = [name for name in _SETTINGS if name not in os.environ]
for _name in _SET_HERE:
    os.environ[_name] = _SETTINGS[_name]


def runtime_started() -> None:
    """Take back the settings made here: the runtime has started, and its threads keep them."""
    while _SET_HERE:
        os.environ.pop(_SET_HERE.pop(), None)
