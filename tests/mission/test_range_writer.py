"""The background writer of per-range rows (mission/range_writer.py): in batches, off the dispatcher's thread,
each range's mark once and never after its end, each row before its range's end (issue 26 item 1)."""

import threading
import time

from catchup_assets.mission.range_writer import MARK, ROW, RangeWriter


class Sink:
    """A write that records its batches; `hold` blocks each write until released; `fail` raises for the next n."""

    def __init__(self, fail: int = 0, hold: bool = False):
        self.batches: list[list[tuple]] = []
        self.fail = fail
        self.entered, self.release = threading.Event(), threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, items):
        self.entered.set()
        self.release.wait(10)
        if self.fail:
            self.fail -= 1
            raise OSError("connection refused")
        self.batches.append(list(items))

    @property
    def items(self) -> list[tuple]:
        return [(kind, key, row) for b in self.batches for kind, key, row in b]

    def marks(self) -> list[str]:
        return [key for kind, key, _ in self.items if kind == MARK]


def wait(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def test_issue26_marks_are_written_once_each_in_batches_in_order_and_close_writes_the_rest():
    sink = Sink()
    w = RangeWriter(sink, batch=3, linger=60)  # only a full batch or close writes
    for k in ["a", "b", "a", "c", "d", "b"]:
        w.mark(k)
    assert wait(lambda: sink.batches)
    assert sink.batches[0] == [(MARK, "a", None), (MARK, "b", None), (MARK, "c", None)]  # a full batch goes at once
    w.add("d", "obs-d")
    w.close(also=["d", "e"])  # d is marked already
    assert sink.marks() == ["a", "b", "c", "d", "e"]
    assert (ROW, "d", "obs-d") in sink.items
    assert all(len(b) <= 3 for b in sink.batches)
    assert w.written == 6 and w.failed == 0


def test_issue26_a_mark_pending_when_its_range_is_done_is_dropped_and_its_rows_are_written_before_done_returns():
    """A mark newer than the range's materialization would show it in progress, then FAILED."""
    sink = Sink()
    w = RangeWriter(sink, batch=100, linger=60)
    w.mark("a")
    w.add("a", "submitted-a")
    w.mark("b")
    w.done("a")  # on the caller's thread: a's row written now, a's mark never
    assert sink.items == [(ROW, "a", "submitted-a"), (MARK, "b", None)]
    w.close()
    assert sink.marks() == ["b"]


def test_L9_a_range_given_up_gets_its_rows_written_before_settle_returns_and_keeps_its_mark():
    """Its failure observation, logged after, stays its latest; its mark shows it FAILED when the step fails."""
    sink = Sink()
    w = RangeWriter(sink, batch=100, linger=60)
    w.mark("a")
    w.add("a", "submitted-a")
    w.settle("a")  # on the caller's thread, no linger waited
    assert (ROW, "a", "submitted-a") in sink.items
    w.close(also=["a"])
    assert sink.marks() == ["a"]


def test_issue26_done_while_its_batch_is_being_written_waits_for_that_write():
    sink = Sink(hold=True)
    w = RangeWriter(sink, batch=1, linger=60)
    w.add("a", "row-a")
    assert sink.entered.wait(5)  # the write of a's row has begun and is held
    finished = threading.Event()
    t = threading.Thread(target=lambda: (w.done("a"), finished.set()))
    t.start()
    assert not finished.wait(0.3)  # done waits: the row lands before the materialization
    sink.release.set()
    assert finished.wait(5)
    assert sink.items == [(ROW, "a", "row-a")]
    w.close()
    t.join()


def test_issue26_handing_over_never_waits_on_a_slow_write():
    sink = Sink(hold=True)
    w = RangeWriter(sink, batch=1, linger=60)
    w.mark("first")
    assert sink.entered.wait(5)  # held from here on
    t = time.perf_counter()
    for i in range(2000):
        w.mark(f"k{i}")
        w.add(f"k{i}", i)
    handed = time.perf_counter() - t
    sink.release.set()
    w.close()
    assert handed < 1.0  # the dispatcher's side: a list append each, with the write held throughout
    assert len(sink.items) == 4001


def test_issue26_a_failed_write_is_retried_once_then_dropped_and_never_raises():
    sink = Sink(fail=1)
    w = RangeWriter(sink, batch=10, linger=0.05)
    w.mark("a")
    w.add("a", "row")
    assert wait(lambda: sink.batches)
    assert sink.items == [(MARK, "a", None), (ROW, "a", "row")]  # the next round wrote them
    sink.fail = 2  # the next batch and its retry both fail: dropped, counted
    w.mark("c")
    w.close()
    assert sink.marks() == ["a"] and w.failed == 1 and w.written == 2


def test_issue26_done_drops_a_mark_waiting_for_its_retry_and_writes_the_range_s_rows():
    sink = Sink(fail=1, hold=True)
    w = RangeWriter(sink, batch=10, linger=60)
    w.mark("a")
    w.add("a", "row-a")
    w.mark("b")
    w._wake.set()  # one round: it fails, all three wait for their retry
    assert sink.entered.wait(5)
    sink.release.set()
    assert wait(lambda: sink.fail == 0)
    w.done("a")
    assert sink.items == [(ROW, "a", "row-a"), (MARK, "b", None)]
    w.close()


def test_issue26_behind_a_stalled_database_unwritten_rows_stay_bounded_and_marks_still_go():
    """Past max_rows unwritten, new rows are dropped and counted; marks (one a range) are kept; writing resumes."""
    sink = Sink(hold=True)
    w = RangeWriter(sink, batch=2, linger=0.01, max_rows=4)
    w.add("a", "r1")
    assert sink.entered.wait(5)  # the writer holds [r1] in a write that does not return
    for i in range(2, 8):
        w.add("a", f"r{i}")
    w.mark("b")
    assert w.dropped == 3  # r1 in flight and r2-r4 pending fill the bound; r5-r7 dropped
    sink.release.set()
    w.close()
    assert [row for kind, _, row in sink.items if kind == ROW] == ["r1", "r2", "r3", "r4"]
    assert sink.marks() == ["b"]
    w2 = RangeWriter(Sink(), batch=2, linger=0.01, max_rows=4)
    for i in range(10):  # a writer that keeps up never drops
        w2.add("a", i)
        w2.done("a")
    w2.close()
    assert w2.dropped == 0 and w2.written == 10
