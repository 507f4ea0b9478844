"""A tenant's sandboxes in creation order, by position, overall and per status: what
``GET /v1/sandboxes?offset=&limit=&status=`` reads.

A page costs O(page) (plus a bisection), whatever its offset and however many sandboxes the
tenant holds: slicing the tenant's dict from an offset, or filtering every sandbox by status,
cost O(offset) and O(sandboxes) per page before.

The listing follows its sandboxes by itself: :class:`~fake_server.tenants.Tenant` adds and
drops them, and a sandbox reports each status change (``Sandbox.__setattr__``), whoever makes it
(a lifecycle timer, a state fault, a test setting ``status``).

Example::

    listing = tenant.listing                      # a, b, c created in that order, all running
    b.status = Status.PAUSED                      # the sandbox tells its listing
    listing.page(None, offset=1, limit=5)         # ([b, c], 3)
    listing.page(Status.RUNNING, offset=0, limit=5)   # ([a, c], 2)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from operator import attrgetter
from typing import TYPE_CHECKING

from fake_server.lifecycle import Status

if TYPE_CHECKING:
    from fake_server.sandbox import Sandbox

__all__ = ["Ranked", "SandboxListing"]

#: Sandboxes per block: a block splits past twice this. Large enough that the positional
#: prefix sums (one per block) stay short, small enough that an insertion into a block (a
#: memmove) stays cheap.
BLOCK = 512

_ORDER = attrgetter("_order")


class Ranked:
    """Sandboxes sorted by creation order (``Sandbox._order``), with positional slices.

    A list of sorted blocks, as in ``sortedcontainers`` (which the fake does not depend on):
    a block is found by bisecting the blocks' last orders (insert, discard) or the blocks'
    prefix counts (a slice), so no operation walks the sandboxes before the ones it touches.
    The prefix counts are recomputed (in C, one number per block) on the first slice after a
    change.

    Example::

        ranked = Ranked()
        for sandbox in reversed(sandboxes):       # orders 0..4, added in any order
            ranked.add(sandbox)
        ranked.discard(sandboxes[1])              # True
        [s._order for s in ranked.slice(1, 2)]    # [2, 3]
    """

    __slots__ = ("_blocks", "_lasts", "_len", "_starts")

    def __init__(self) -> None:
        self._blocks: list[list[Sandbox]] = []
        #: The order of each block's last sandbox (what insert and discard bisect).
        self._lasts: list[int] = []
        #: Where each block starts, by position (``None``: changed since the last slice).
        self._starts: list[int] | None = None
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(self, sandbox: Sandbox) -> None:
        """Insert ``sandbox`` at its place by creation order (it must not be here already)."""
        order = sandbox._order
        blocks, lasts = self._blocks, self._lasts
        if not lasts or order > lasts[-1]:
            # The usual case, a new sandbox: appended, no bisection.
            if not blocks or len(blocks[-1]) >= BLOCK:
                blocks.append([sandbox])
                lasts.append(order)
            else:
                blocks[-1].append(sandbox)
                lasts[-1] = order
        else:
            i = bisect_left(lasts, order)
            block = blocks[i]
            block.insert(bisect_left(block, order, key=_ORDER), sandbox)
            if len(block) > 2 * BLOCK:
                blocks[i : i + 1] = [block[:BLOCK], block[BLOCK:]]
                lasts.insert(i, block[BLOCK - 1]._order)
        self._len += 1
        self._starts = None

    def discard(self, sandbox: Sandbox) -> bool:
        """Remove ``sandbox``; whether it was here."""
        order = sandbox._order
        blocks, lasts = self._blocks, self._lasts
        i = bisect_left(lasts, order)
        if i == len(lasts):
            return False
        block = blocks[i]
        j = bisect_left(block, order, key=_ORDER)
        if j == len(block) or block[j] is not sandbox:
            return False
        del block[j]
        if not block:
            del blocks[i]
            del lasts[i]
        elif j == len(block):
            lasts[i] = block[-1]._order
        self._len -= 1
        self._starts = None
        return True

    def slice(self, offset: int, limit: int) -> list[Sandbox]:
        """The sandboxes at positions ``offset`` to ``offset + limit`` (fewer at the end)."""
        if offset >= self._len or limit <= 0:
            return []
        blocks = self._blocks
        starts = self._starts
        if starts is None:
            starts = self._starts = list(accumulate(map(len, blocks), initial=0))
        i = bisect_right(starts, offset) - 1
        skip = offset - starts[i]
        page = blocks[i][skip : skip + limit]
        while len(page) < limit and i + 1 < len(blocks):
            i += 1
            page += blocks[i][: limit - len(page)]
        return page


class SandboxListing:
    """One tenant's sandboxes in creation order: all of them, and those in each status.

    ``Tenant`` calls :meth:`add` and :meth:`remove`; a sandbox calls :meth:`restatus` before
    its status changes.
    """

    __slots__ = ("_all", "_by_status", "_next")

    def __init__(self) -> None:
        self._all = Ranked()
        #: Made for a status when a sandbox first takes it: most tenants (one per test) never
        #: see most statuses, and ten empty ones cost ~2 µs and ~2 KB a tenant.
        self._by_status: dict[Status, Ranked] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._all)

    def add(self, sandbox: Sandbox) -> None:
        """List a new sandbox after every other one."""
        sandbox._order = self._next
        self._next += 1
        self._all.add(sandbox)
        self._of_status(sandbox.status).add(sandbox)
        sandbox._listing = self

    def remove(self, sandbox: Sandbox) -> None:
        """Stop listing ``sandbox`` (and following its status)."""
        if self._all.discard(sandbox):
            self._of_status(sandbox.status).discard(sandbox)
        if sandbox._listing is self:
            sandbox._listing = None

    def restatus(self, sandbox: Sandbox, status: Status) -> None:
        """``sandbox`` is about to go from its current status into ``status``."""
        before = sandbox.status
        if before is not status and self._of_status(before).discard(sandbox):
            self._of_status(status).add(sandbox)

    def page(self, status: Status | None, *, offset: int, limit: int) -> tuple[list[Sandbox], int]:
        """``limit`` sandboxes from ``offset`` (in creation order), of ``status`` or of any,
        and how many there are in all."""
        ranked = self._all if status is None else self._of_status(status)
        return ranked.slice(offset, limit), len(ranked)

    def count(self, status: Status) -> int:
        """How many listed sandboxes are in ``status`` (``len()`` counts them all).

        Example::

            listing.count(Status.RUNNING)   # 3
        """
        ranked = self._by_status.get(status)
        return len(ranked) if ranked is not None else 0

    def _of_status(self, status: Status) -> Ranked:
        ranked = self._by_status.get(status)
        if ranked is None:
            ranked = self._by_status[status] = Ranked()
        return ranked
