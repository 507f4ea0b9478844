"""On Python 3.10, the asyncio backport's patch of ``contextvars.copy_context`` (made while it
creates a test's task) must not reach the background fake's thread: there, a handle made in
that window ran in the test's own context, and the test's first step, entering it too, failed
and left the test hanging."""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pytest_createos import _context_shield

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 11), reason="the backport runs tests on Python 3.10 only"
)


@pytest.fixture
def patch_object(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Callable[..., Any]]:
    """The backport runner module's ``_patch_object``, as its ``Runner.run`` finds it, starting
    unshielded (an earlier test's background fake may have shielded this process already); the
    module and ``contextvars`` are restored afterwards."""
    runner = pytest.importorskip("backports.asyncio.runner.runner")
    original = pytest.importorskip("backports.asyncio.runner._patch")._patch_object
    monkeypatch.setattr(runner, "_patch_object", original)
    monkeypatch.setattr(contextvars, "copy_context", _context_shield._copy_context)
    return lambda: runner._patch_object


def seen_from_another_thread() -> contextvars.Context:
    seen: list[contextvars.Context] = []
    thread = threading.Thread(target=lambda: seen.append(contextvars.copy_context()))
    thread.start()
    thread.join()
    return seen[0]


def test_unshielded_the_patch_reaches_every_thread(patch_object: Callable[..., Any]) -> None:
    test_context = contextvars.copy_context()
    # As the backport's Runner.run patches it: by the attribute its function is named.
    with patch_object()(contextvars, contextvars.copy_context.__name__, lambda: test_context):
        assert seen_from_another_thread() is test_context  # the bug the shield is for


def test_shielded_the_patch_stays_in_its_thread(patch_object: Callable[..., Any]) -> None:
    _context_shield.shield()
    _context_shield.shield()  # idempotent: the patcher is wrapped once
    test_context = contextvars.copy_context()
    with patch_object()(contextvars, contextvars.copy_context.__name__, lambda: test_context):
        assert contextvars.copy_context() is test_context  # the backport still gets its own
        assert seen_from_another_thread() is not test_context
    assert contextvars.copy_context() is not test_context  # and the patch ends with the block
