"""The snapshot the dispatcher's metrics read (core/dispatch/gauges.py): plain tables of cases,
then real reconcile passes against the fake cluster, the snapshot against the records (L10, Z1, Z4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from catchup_assets.core.classify.outcomes import Outcome, PastAttempt, RetryPolicy
from catchup_assets.core.dispatch.gauges import (
    PEAK_BUCKETS,
    capacity_counts,
    median_seconds,
    oldest_pending,
    peak_histogram,
    range_states,
    retries_left,
)
from catchup_assets.core.dispatch.ports import AttemptState
from catchup_assets.core.size.catalog import ON_DEMAND, SPOT
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from fakes import FAILED, OOM, FakeBackend, FakeClock, Script


def st(key, attempt, phase):
    return AttemptState(key, attempt, phase)


# keys a..e; results, backend states, done marks -> counts by state
STATE_CASES = [
    ("nothing started: all queued", {}, [], {}, {"queued": 5}),
    ("decided ranges by their result", {"a": "done", "b": "condemned"}, [], {},
     {"done": 1, "condemned": 1, "queued": 3}),
    ("a pod waiting for a node is pending", {}, [st("a", 1, "pending")], {}, {"pending": 1, "queued": 4}),
    ("a running pod", {}, [st("a", 1, "running")], {}, {"running": 1, "queued": 4}),
    ("finished, its final read owed: still running", {}, [st("a", 1, "finished")], {}, {"running": 1, "queued": 4}),
    ("finished and recorded, release owed: queued again", {}, [st("a", 1, "finished")], {"a": {1}}, {"queued": 5}),
    ("a result outranks the pod left to release", {"a": "done"}, [st("a", 2, "finished")], {"a": {2}},
     {"done": 1, "queued": 4}),
    ("running outranks pending on one range", {}, [st("a", 1, "running"), st("a", 2, "pending")], {},
     {"running": 1, "queued": 4}),
    ("another dispatcher's range is not counted", {}, [st("zz", 1, "running")], {}, {"queued": 5}),
]  # fmt: skip


@pytest.mark.parametrize("why, results, states, done, expected", STATE_CASES, ids=[c[0] for c in STATE_CASES])
def test_Z1_each_range_is_in_exactly_one_state(why, results, states, done, expected):
    got = range_states("abcde", results, states, done, superseded=2)
    assert got == {"queued": 0, "pending": 0, "running": 0, "done": 0, "condemned": 0} | expected | {"superseded": 2}


POLICY = RetryPolicy(environmental=20, oom_rungs=5, ordinary=5, failed=0)
FULL = {"environmental": 20, "oom": 4, "ordinary": 5, "failed": 0}
RETRY_CASES = [
    ("no ranges", [], {k: 0 for k in FULL}),
    ("a fresh range has every budget", [[]], FULL),
    ("two OOMs spend two rungs", [[PastAttempt(1, Outcome.OOM), PastAttempt(2, Outcome.OOM)]], FULL | {"oom": 2}),
    ("a stopped attempt spends nothing", [[PastAttempt(1, Outcome.STOPPED)]], FULL),
    ("summed over ranges", [[PastAttempt(1, Outcome.DISRUPTED)], [PastAttempt(1, Outcome.DEADLINE)]],
     {"environmental": 39, "oom": 8, "ordinary": 9, "failed": 0}),
    ("never below zero", [[PastAttempt(i, Outcome.OOM) for i in range(1, 8)]], FULL | {"oom": 0}),
]  # fmt: skip


@pytest.mark.parametrize("why, histories, expected", RETRY_CASES, ids=[c[0] for c in RETRY_CASES])
def test_L5_retries_left_per_budget_class(why, histories, expected):
    assert retries_left(histories, POLICY) == expected


def test_peak_histogram_is_cumulative_over_powers_of_two():
    assert [b / GiB for b in PEAK_BUCKETS] == [0.5, 1, 2, 4, 8, 16, 32]
    buckets, total = peak_histogram([GiB // 4, GiB, 3 * GiB, 64 * GiB])
    assert [n for _, n in buckets] == [1, 2, 2, 3, 3, 3, 3, 4]
    assert buckets[-1][0] == float("inf") and total == GiB // 4 + GiB + 3 * GiB + 64 * GiB
    assert peak_histogram([]) == (tuple((b, 0) for b in PEAK_BUCKETS) + ((float("inf"), 0),), 0.0)


def rec(**kw):
    return AttemptRecord("m", "k", 1, outcome="ok", **kw)


def test_capacity_of_each_finished_attempt_its_own_else_its_tier_s():
    placement = Placement()
    tiers = {t.name: t.capacity_type for t in placement.tiers.all()}
    spot_tier = next(n for n, c in tiers.items() if c == SPOT)
    recs = [
        rec(tier=spot_tier, capacity_type=SPOT),
        rec(tier=spot_tier, capacity_type=ON_DEMAND),  # moved off spot by its range's reclaims
        rec(tier=spot_tier),  # older than the field: its tier's
        rec(tier="unknown-tier"),  # neither: not counted
    ]
    assert capacity_counts(recs, placement) == {SPOT: 2, ON_DEMAND: 1}


@pytest.mark.parametrize(
    "seconds, median",
    [([], 0.0), ([None], 0.0), ([10.0, 30.0, 20.0], 20.0), ([10.0, 40.0], 25.0)],
)
def test_profile_median_seconds(seconds, median):
    profile = ProfileIndex(RangeMeasure(1000 * (i + 1), 100, None, s) for i, s in enumerate(seconds))
    assert median_seconds(profile) == median
    assert median_seconds(None) == 0.0


def test_oldest_pending():
    assert oldest_pending({}, 100.0) == 0.0
    assert oldest_pending({("a", 1): 40.0, ("b", 1): 70.0}, 100.0) == 60.0


# -- real passes --------------------------------------------------------------------
class SlowToSchedule(FakeBackend):
    """A cluster whose pods wait `pending` seconds for a node before they run (the API's Pending phase)."""

    pending: float = 0.0

    def _state(self, a):
        s = super()._state(a)
        return replace(s, phase="pending", started_at=None) if self.clock.time() < a.started + self.pending else s


def test_L10_the_snapshot_is_the_records_and_a_restart_continues_it(tmp_path):
    from kit.dispatch import KEYS, make

    clock = FakeClock()

    def script(spec):
        if spec.range_key == KEYS[0]:
            return Script(seconds=30, observation=FAILED)  # failed budget 0: condemned
        if spec.range_key == KEYS[1] and spec.attempt == 1:
            return Script(seconds=35, observation=OOM)
        return Script(seconds=40)

    backend = SlowToSchedule(clock, script)
    backend.pending = 15
    taken = []
    d, _, records = make(tmp_path, script, parallelism=3, clock=clock, backend=backend, breaker_attempts=0)
    d.on_pass = lambda take: taken.append(take())
    d.pass_once()  # three submitted, all pending
    s = taken[-1]
    assert s.live == {"pending": 3, "running": 0} and s.ranges["pending"] == 3 and s.oldest_pending_seconds == 0
    clock.sleep(10)
    d.pass_once()
    assert taken[-1].oldest_pending_seconds == 10  # the same attempts, seen pending for 10 s
    clock.sleep(10)
    d.pass_once()
    assert taken[-1].live == {"pending": 0, "running": 3} and taken[-1].oldest_pending_seconds == 0
    for _ in range(12):
        clock.sleep(10)
        d.pass_once()
    s = taken[-1]
    recs, done = records.load()
    finished = [r for i, r in recs.items() if i in done]
    assert s.ranges["done"] == len({r.range_key for r in finished if r.outcome == "ok"}) > 0
    assert s.ranges["condemned"] == 1 and s.attempts["failed"] == 1 and s.attempts["oom"] == 1
    assert s.attempts == {o: sum(1 for r in finished if r.outcome == o) for o in {r.outcome for r in finished}}
    assert sum(s.by_capacity.values()) == len(finished)
    assert s.peak_buckets[-1][1] == len(finished)  # every fake attempt has its peak
    assert s.dollars > 0 and s.seconds_since_progress < 40

    # A restart: a new dispatcher over the same records sees the same counts at its first pass.
    again, _, _ = make(tmp_path, script, parallelism=3, clock=clock, backend=backend, breaker_attempts=0)
    again.on_pass = lambda take: taken.append(take())
    again.pass_once()
    first = taken[-1]
    assert first.attempts == s.attempts and first.by_capacity == s.by_capacity
    assert first.ranges["done"] == s.ranges["done"] and first.ranges["condemned"] == 1
    assert first.dollars == pytest.approx(s.dollars)


def test_Z1_the_gauges_part_counts_a_submit_pending_from_its_first_sighting_and_a_recorded_attempt_not_live(tmp_path):
    """The Gauges part alone (its own memory is only when each attempt was first seen pending)."""
    from catchup_assets.core.dispatch.gauges import Gauges
    from catchup_assets.core.dispatch.health import Watchdog
    from catchup_assets.core.dispatch.mission_control import ABSOLUTE
    from catchup_assets.core.dispatch.obey import ControlReader
    from catchup_assets.core.dispatch.progress import Progress
    from catchup_assets.core.dispatch.range_book import RangeBook
    from catchup_assets.store.records import RecordStore
    from catchup_assets.store.root import Store
    from kit.dispatch import KEYS, RANGES, mission_config

    clock = FakeClock()
    records = RecordStore(Store(tmp_path / "root"), "m1")
    book = RangeBook(KEYS, records, "me", RetryPolicy(), 64 * GiB, lambda r, a: None)
    book.recover()
    dog = Watchdog(mission_config(), {r.key: r for r in RANGES}, None, clock, lambda *h: None)
    reader = ControlReader("m1", 3, ABSOLUTE, None, lambda c, w: None, dog)
    progress = Progress({r.key: r for r in RANGES}, None, book, clock)
    gauges = Gauges(mission_config(), KEYS, None, book, clock, reader, dog, progress)
    key = KEYS[0]
    book.mine.add((key, 1))  # submitted after this pass asked the backend
    snap = gauges.take([])()
    assert snap.live == {"pending": 1, "running": 0} and snap.ranges["pending"] == 1
    assert (snap.live_cap, snap.planned, snap.time_to_go) == (3, len(KEYS), None)  # no estimate yet
    clock.sleep(30)
    assert gauges.take([st(key, 1, "pending")])().oldest_pending_seconds == 30  # from its first sighting
    clock.sleep(5)
    running = gauges.take([st(key, 1, "running")])
    assert running().live == {"pending": 0, "running": 1} and running().oldest_pending_seconds == 0
    book.write(AttemptRecord("m1", key, 1, outcome="ok", memory_limit_bytes=GiB))
    book.mark_done(key, 1)
    late = running()  # taken after the record was written: the attempt is not live any more
    assert late.live == {"pending": 0, "running": 0} and late.attempts == {"ok": 1}
