"""The claim book (core/dispatch/claims.py) alone, over real records and a fake clock: one live attempt
a range, an attempt number started once, whoever dispatches (L11)."""

from __future__ import annotations

import pytest

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.claims import ClaimBook
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import FakeClock

KEY = "0000000001-0000006400"
GRACE, RECHECK = 120.0, 10.0


def claims_over(tmp_path, holder="me"):
    clock = FakeClock()
    records = RecordStore(Store(tmp_path / "root"), "m1")
    book = RangeBook([KEY], records, holder, RetryPolicy(), 64 * GiB, lambda r, a: None)
    book.recover()
    return ClaimBook(book, records, clock, GRACE, RECHECK), book, records, clock


# another holder claimed attempt 1 at t (s before now), and maybe recorded it -> what this one may start
CASES = [
    ("no claim: nothing spent", None, None, 0),
    ("a young claim of another: its submit is in flight, the range waits", 30, None, None),
    ("an old claim never recorded: its number is spent", 300, None, 1),
    ("an old claim, recorded finished and ok: decided, nothing to start", 300, "ok", None),
    ("an old claim, recorded failed by the environment: spent by its record", 300, "disrupted", 0),
]


@pytest.mark.parametrize("why, ago, outcome, pending", CASES, ids=[c[0] for c in CASES])
def test_L11_another_holder_s_claim_holds_its_range_until_its_records_say(tmp_path, why, ago, outcome, pending):
    claims, book, records, clock = claims_over(tmp_path)
    if ago is not None:
        records.claim(KEY, 1, "other", clock.time() - ago)
        book.refresh(KEY)  # as a pass's read of the range finds it
        if outcome:
            records.write(AttemptRecord("m1", KEY, 1, outcome=outcome, memory_limit_bytes=8 * GiB))
            records.mark_done(KEY, 1)
    assert claims.pending_elsewhere(KEY) == pending


def test_L11_a_young_claim_is_read_again_only_every_recheck_seconds(tmp_path):
    claims, book, records, clock = claims_over(tmp_path)
    records.claim(KEY, 1, "other", clock.time())
    book.refresh(KEY)
    assert claims.pending_elsewhere(KEY) is None
    records.write(AttemptRecord("m1", KEY, 1, outcome="ok", memory_limit_bytes=8 * GiB))
    records.mark_done(KEY, 1)
    clock.sleep(RECHECK / 2)
    claims.pending_elsewhere(KEY)
    assert not book.decided(KEY)  # not read again yet
    clock.sleep(RECHECK)
    assert claims.pending_elsewhere(KEY) is None and book.decided(KEY)  # read again: done by the other


def test_L11_a_claim_is_taken_once_and_taken_back_by_its_own_holder_after_a_restart(tmp_path):
    claims, book, records, _ = claims_over(tmp_path)
    assert claims.claim(KEY, 1) and book.mine == {(KEY, 1)}
    again, again_book, _, _ = claims_over(tmp_path)  # the same holder restarted (a retried step)
    assert again.claim(KEY, 1) and again_book.mine == {(KEY, 1)}
    other, other_book, _, _ = claims_over(tmp_path, holder="other")
    assert not other.claim(KEY, 1) and other_book.mine == set()
    records.write(AttemptRecord("m1", KEY, 1, outcome="ok", memory_limit_bytes=8 * GiB))
    records.mark_done(KEY, 1)
    assert not again.claim(KEY, 1)  # finished: never started twice
