"""The range book (core/dispatch/range_book.py) alone, over real records on a storage root: what it
rebuilds and decides from the records (L5, L6, L10, L32), what it tells, and how it writes."""

from __future__ import annotations

import pytest

from catchup_assets.core.classify.outcomes import Outcome, RetryPolicy
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

KEY = "0000000001-0000006400"


def rec(attempt, outcome=None, limit=8 * GiB, **kw):
    return AttemptRecord("m1", KEY, attempt, outcome=outcome, memory_limit_bytes=limit, **kw)


def book_over(tmp_path, written, done, holder="me", reset_condemned=False, retry=RetryPolicy()):
    records = RecordStore(Store(tmp_path / "root"), "m1")
    for r in written:
        records.write(r)
    for a in done:
        records.mark_done(KEY, a)
    told = []
    book = RangeBook(
        [KEY], records, holder, retry, 64 * GiB, lambda r, already: told.append((r, already)), reset_condemned
    )
    return book, records, told


# records written, attempts done-marked -> the range's status after recovery (None: undecided, retried)
CASES = [
    ("nothing recorded", [], [], None),
    ("an ok attempt, done-marked", [rec(1, "ok")], [1], "done"),
    ("an ok attempt without its done mark is not finished (L32)", [rec(1, "ok")], [], None),
    ("a failure of its own: condemned at once", [rec(1, "failed")], [1], "condemned"),
    ("a reclaim is the environment's: retried (L5)", [rec(1, "disrupted")], [1], None),
    (
        "five ordinary failures spend that budget alone (L5)",
        [rec(a, "deadline") for a in range(1, 7)],
        range(1, 7),
        "condemned",
    ),
    ("an OOM climbs the ladder (L6)", [rec(1, "oom")], [1], None),
    ("an OOM at the cap is not retried at the same limit (L6)", [rec(1, "oom", limit=64 * GiB)], [1], "condemned"),
    ("a stopped attempt is charged to no budget (L37)", [rec(a, "stopped") for a in range(1, 30)], range(1, 30), None),
]


@pytest.mark.parametrize("why, written, done, status", CASES, ids=[c[0] for c in CASES])
def test_L5_L10_recovery_decides_each_range_from_its_own_records(tmp_path, why, written, done, status):
    book, _, told = book_over(tmp_path, written, done)
    completed = book.recover()
    assert (book.results[KEY].status.value if KEY in book.results else None) == status
    assert told == ([(book.results[KEY], True)] if status else [])  # told once, as already known
    assert completed == ([KEY] if status == "done" else [])  # its data is released again (L3)
    assert book.recover() == [] and len(told) == (1 if status else 0)  # once: a second call reads nothing


def test_L9_an_operator_run_grants_a_condemned_range_fresh_budgets(tmp_path):
    book, records, told = book_over(tmp_path, [rec(1, "failed")], [1], reset_condemned=True)
    book.recover()
    assert book.results == {} and told == []  # undecided again: its old failure is before the reset
    assert records.load_resets([KEY]) == {KEY: 1}  # durable: a restart of this run does not re-grant


def test_L10_attempts_this_holder_claimed_before_a_restart_are_its_own(tmp_path):
    book, records, _ = book_over(tmp_path, [rec(1), rec(2)], [])
    records.claim(KEY, 1, "me", 0.0)
    records.claim(KEY, 2, "other", 0.0)
    book.recover()
    assert book.mine == {(KEY, 1)}


def test_counts_spares_and_the_done_mark_after_the_record(tmp_path):
    book, records, _ = book_over(tmp_path, [rec(1, "oom"), rec(2, "oom"), rec(3, "evicted"), rec(4, "oom")], [1, 2, 3])
    book.recover()
    assert (book.count(KEY, Outcome.OOM), book.count(KEY, Outcome.EVICTED)) == (2, 1)  # attempt 4 not done
    book.spare(KEY, 3)
    assert records.load_resets([KEY]) == {KEY: 3} and book.history(KEY) == []
    book.write(rec(5, "ok"))
    assert not records.is_done(KEY, 5)
    book.mark_done(KEY, 5)
    assert records.is_done(KEY, 5) and 5 in book.done[KEY]
    book.judge(KEY)
    assert book.decided(KEY) and book.tally(book.results[KEY].status) == 1


def test_L11_a_write_over_an_attempt_not_its_own_merges_what_storage_holds(tmp_path):
    # Another dispatcher recorded the peak; this one's start time must not blank it.
    book, records, _ = book_over(tmp_path, [rec(1, peak_anon_bytes=5 * GiB)], [])
    book.recover()
    records.write(rec(1, peak_anon_bytes=6 * GiB), records.read_one(KEY, 1))
    written = book.write(rec(1, started_at=100.0))
    assert (written.peak_anon_bytes, written.started_at) == (6 * GiB, 100.0)
    assert records.read_one(KEY, 1) == written
