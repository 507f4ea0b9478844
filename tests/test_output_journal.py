"""A process's output journal: ``since()`` looks frames up by number instead of scanning the
window, and must answer exactly what a scan of the retained frames answers, evictions included.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_server.processes import OutputEvicted, OutputFrame, OutputJournal

STREAMS = ("stdout", "stderr", "pty")


class ScannedJournal:
    """The reference: every frame ever written, the retained ones a suffix that the cap rule
    shortens, and ``since()`` a scan of that suffix (the journal's behaviour before it was
    indexed)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.written: list[OutputFrame] = []
        self.first_retained = 0

    @property
    def retained(self) -> list[OutputFrame]:
        return self.written[self.first_retained :]

    def append(self, stream: str, data: bytes) -> None:
        self.written.append(OutputFrame(len(self.written) + 1, stream, data))
        while sum(len(f.data) for f in self.retained) > self.cap and len(self.retained) > 1:
            self.first_retained += 1

    def since(self, after: int, limit: int | None) -> list[OutputFrame]:
        newest = len(self.written)
        if after + 1 <= newest and (not self.retained or after + 1 < self.retained[0].seq):
            raise OutputEvicted(self.retained[0].seq if self.retained else newest + 1)
        return [frame for frame in self.retained if frame.seq > after][:limit]

    def window(self) -> dict[str, int]:
        retained = self.retained
        return {
            "oldest_seq": retained[0].seq if retained else len(self.written),
            "newest_seq": len(self.written),
            "bytes": sum(len(frame.data) for frame in retained),
        }


def answer(
    journal: OutputJournal | ScannedJournal, after: int, limit: int | None
) -> list[OutputFrame] | tuple[str, int]:
    """What ``since`` answers: the frames, or the eviction and its oldest available seq."""
    try:
        return journal.since(after, limit)
    except OutputEvicted as evicted:
        return ("evicted", evicted.oldest_available_seq)


@settings(max_examples=300, deadline=None)
@given(
    cap=st.integers(min_value=0, max_value=64),
    sizes=st.lists(st.integers(min_value=0, max_value=80), max_size=40),
)
def test_since_answers_what_a_scan_of_the_retained_frames_answers(
    cap: int, sizes: list[int]
) -> None:
    journal, reference = OutputJournal(cap), ScannedJournal(cap)
    for index, size in enumerate(sizes):
        stream, data = STREAMS[index % 3], bytes([index % 256]) * size
        frame = journal.append(stream, data)
        reference.append(stream, data)
        assert frame == reference.written[-1]
        assert journal.window() == reference.window()
        assert journal.oldest_seq == reference.window()["oldest_seq"]
        for after in range(journal.newest_seq + 2):
            for limit in (None, 0, 1, 3):
                assert answer(journal, after, limit) == answer(reference, after, limit)


def test_an_empty_journal_answers_nothing_after_any_cursor() -> None:
    journal = OutputJournal(cap=8)
    assert journal.since(0) == []
    assert journal.since(5) == []
    assert journal.window() == {"oldest_seq": 0, "newest_seq": 0, "bytes": 0}


def test_the_cap_evicts_the_oldest_frames_and_keeps_the_newest_however_large() -> None:
    journal = OutputJournal(cap=8)
    for data in (b"aaaa", b"bbbb", b"cccc"):
        journal.append("stdout", data)
    assert journal.window() == {"oldest_seq": 2, "newest_seq": 3, "bytes": 8}
    journal.append("stderr", b"x" * 20)  # alone over the cap: kept, everything older goes
    assert journal.window() == {"oldest_seq": 4, "newest_seq": 4, "bytes": 20}
    assert [(f.seq, f.stream) for f in journal.since(3)] == [(4, "stderr")]


def test_a_cursor_behind_the_window_is_told_the_oldest_seq_still_available() -> None:
    journal = OutputJournal(cap=8)
    for data in (b"aaaa", b"bbbb", b"cccc"):
        journal.append("stdout", data)
    with pytest.raises(OutputEvicted) as evicted:
        journal.since(0)
    assert evicted.value.oldest_available_seq == 2
    # The cursor just before the window, or any inside it, is served.
    assert [f.data for f in journal.since(1)] == [b"bbbb", b"cccc"]
    assert [f.data for f in journal.since(2, limit=5)] == [b"cccc"]


def test_since_takes_at_most_limit_frames_in_order() -> None:
    journal = OutputJournal()
    for number in range(1, 1001):
        journal.append("stdout", str(number).encode())
    batch = journal.since(500, limit=256)
    assert [frame.seq for frame in batch] == list(range(501, 757))
    assert journal.since(999, limit=256)[0].data == b"1000"
