"""The finisher (core/dispatch/finish.py) alone, over real records and the fake cluster: collect,
record, done mark, then release (L2, L31, L32); the seconds of a leg (L22, L23); a stop's record (L37)."""

from __future__ import annotations

import pytest

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.finish import Finisher
from catchup_assets.core.dispatch.ports import AttemptSpec, AttemptState, Peaks, Phase
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import OOM, FakeBackend, FakeClock, Script

KEY = "0000000001-0000006400"


def finisher(tmp_path, script=None, **backend):
    clock = FakeClock()
    be = FakeBackend(clock, lambda spec: script or Script(), **backend)
    records = RecordStore(Store(tmp_path / "root"), "m1")
    book = RangeBook([KEY], records, "me", RetryPolicy(), 64 * GiB, lambda r, a: None)
    book.recover()
    judged = []
    f = Finisher("m1", be, records, book, clock, lambda st, o, rec: judged.append((st.attempt, o.value)), 60, 3, 50)
    be.submit(AttemptSpec("m1", KEY, 1, 6400, 6400, 8 * GiB, 8 * GiB, "small"))
    book.mine.add((KEY, 1))
    return f, be, records, clock, judged


def ended(be, clock):
    clock.sleep(60)
    return be.observe()[0]


# the script's end, collect failures -> (recorded outcome or None, done-marked, released, judged)
CASES = [
    ("ok: recorded, done, released, judged", Script(), 0, {}, ("ok", True, True, [(1, "ok")])),
    ("an OOM is recorded as one", Script(observation=OOM), 0, {}, ("oom", True, True, [(1, "oom")])),
    ("a failed final read waits for the next pass (L31)", Script(), 1, {}, (None, False, False, [])),
    ("the backend could not answer: not a try", Script(), 0, {"collect": 1}, (None, False, False, [])),
]


@pytest.mark.parametrize("why, script, errors, faults, expected", CASES, ids=[c[0] for c in CASES])
def test_L2_L32_an_ended_attempt_is_recorded_then_done_marked_then_released(
    tmp_path, why, script, errors, faults, expected
):
    f, be, records, clock, judged = finisher(tmp_path, script, collect_errors=errors, faults=faults)
    st = ended(be, clock)
    finished = f.finish(st)
    rec = records.read_one(KEY, 1)
    got = (rec.outcome if rec else None, records.is_done(KEY, 1), st.attempt_id in be.released, judged)
    assert got == expected and finished == expected[1]
    if finished:
        assert rec.seconds == 10.0 and rec.tx_apply_count == 1000 and rec.peak_anon_bytes == 100


def test_L31_a_final_read_that_keeps_failing_is_recorded_without_it_after_its_tries(tmp_path):
    f, be, records, clock, judged = finisher(tmp_path, collect_errors=3)
    st = ended(be, clock)
    assert [f.finish(st) for _ in range(3)] == [False, False, True]
    rec = records.read_one(KEY, 1)
    assert rec.outcome == "ok" and rec.tx_apply_count is None and records.is_done(KEY, 1)


def test_L11_an_attempt_another_dispatcher_recorded_is_released_not_recorded_again(tmp_path):
    f, be, records, clock, judged = finisher(tmp_path)
    first = AttemptRecord("m1", KEY, 1, outcome="ok", tx_apply_count=7, memory_limit_bytes=8 * GiB)
    records.write(first)
    records.mark_done(KEY, 1)
    st = ended(be, clock)
    assert f.finish(st) and judged == []
    assert records.read_one(KEY, 1).tx_apply_count == 7 and st.attempt_id in be.released


T = 1_700_000_000.0
# the state's start and end, its last sighting (this run, the record's) -> (seconds, estimated)
SECONDS = [
    ("its own clock (L23)", T, T + 50, None, None, (50.0, False)),
    ("gone with its node: to its last sighting (L22)", T, None, T + 30, None, (30.0, True)),
    ("the record's sighting from before a restart", T, None, None, T + 20, (20.0, True)),
    ("never seen running: no guess (L23)", None, None, None, None, (None, None)),
]


@pytest.mark.parametrize("why, start, end, seen, prior_seen, expected", SECONDS, ids=[c[0] for c in SECONDS])
def test_L22_L23_an_attempt_s_seconds(tmp_path, why, start, end, seen, prior_seen, expected):
    f, be, records, clock, _ = finisher(tmp_path)
    st = AttemptState(KEY, 1, Phase.FINISHED, started_at=start, finished_at=end)
    if seen:
        clock.now = seen
        f.seen_running(AttemptState(KEY, 1, Phase.RUNNING, started_at=start))
    prior = AttemptRecord("m1", KEY, 1, last_seen_at=prior_seen) if prior_seen else None
    assert f.seconds(st, prior) == expected


def test_L37_an_attempt_the_stop_removed_is_recorded_stopped_with_its_peaks(tmp_path):
    f, be, records, clock, judged = finisher(tmp_path)
    st = AttemptState(KEY, 1, Phase.RUNNING, started_at=clock.time(), peaks=Peaks(5 * GiB), node="n1")
    f.record_stopped(st, "SIGTERM")
    rec = records.read_one(KEY, 1)
    assert (rec.outcome, rec.peak_anon_bytes, rec.node) == ("stopped", 5 * GiB, "n1") and "SIGTERM" in rec.reason
    assert records.is_done(KEY, 1) and judged == []  # a stop decides nothing
