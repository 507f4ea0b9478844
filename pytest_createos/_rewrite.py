"""Keep pytest's assertion rewriting off the fake's own modules.

pytest rewrites the asserts of every module of a distribution that registers a plugin, and so
all of ``fake_server`` (~65 modules) as a test first imports it. The rewritten code has a cache
of its own, which nothing writes where bytecode is not written (``PYTHONDONTWRITEBYTECODE=1``,
common in container images): there every run parsed and compiled the whole fake again (measured
on Python 3.13: 0.77 s of CPU for a one-test run, 0.62 s without the rewriting). ``fake_server``
has no assert a test could fail on, so the rewriting gains nothing; the plugin's own modules are
left as pytest makes them.
"""

from __future__ import annotations

import pytest

__all__ = ["leave_the_fake_unrewritten"]

#: The package the rewriting is kept off.
FAKE_PACKAGE = "fake_server"


def leave_the_fake_unrewritten(config: pytest.Config) -> None:
    """Take :data:`FAKE_PACKAGE` off the modules pytest's import hook rewrites; nothing changes
    under ``--assert=plain`` or on a pytest whose hook keeps its marks elsewhere.

    Example::

        leave_the_fake_unrewritten(early_config)  # before anything imports fake_server
    """
    # Private names of pytest's AssertionRewritingHook (the set that register_assert_rewrite
    # adds to, and its per-module answers): pytest has no public way to take a mark back.
    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if not isinstance(marked, set):
        return
    marked.discard(FAKE_PACKAGE)
    answers = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(answers, dict):
        for name in [name for name in answers if name.partition(".")[0] == FAKE_PACKAGE]:
            del answers[name]
