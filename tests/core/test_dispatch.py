"""The reconciler against an in-memory cluster and a fake clock (T1, T2)."""

from __future__ import annotations

import logging

import pytest

from catchup_assets.core.aggregate.profile_table import profile_rows
from catchup_assets.core.classify.outcomes import Observation, RetryPolicy
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.ports import AttemptSpec, Collected, Peaks
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.sizing import MemoryLadder, Placement
from catchup_assets.core.units import GiB
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import DISRUPTED, FAILED, INTERRUPTED, OOM, FakeBackend, FakeClock, Script
from kit.dispatch import KEYS, RANGES, SPAN, make

BASE = 12 * GiB


def by_attempt(table):
    """A script from {(key, attempt): Script}, default ok."""
    return lambda spec: table.get((spec.range_key, spec.attempt), Script())


def test_whole_mission_completes_and_records_every_attempt(tmp_path):
    d, backend, records = make(tmp_path)
    result = d.run()
    assert sorted(result.done) == sorted(KEYS)
    recs, done = records.load()
    assert len(recs) == len(KEYS) and done == set(recs)
    assert all(r.outcome == "ok" and r.peak_anon_bytes == 100 and r.seconds == 10 for r in recs.values())
    assert sorted(backend.released_ranges) == sorted(KEYS)  # L3
    assert backend.attempts == {}  # L2: every finished attempt released


def test_L11_parallelism_never_exceeded(tmp_path):
    d, backend, _ = make(tmp_path, parallelism=3)
    d.run()
    assert backend.max_live == 3


def test_L13_dispatch_follows_the_plan_order(tmp_path):
    d, backend, _ = make(tmp_path, parallelism=1)
    d.run()
    assert [s.range_key for s in backend.submitted] == KEYS  # tip first


def test_L5_budgets_are_spent_per_class_never_shared(tmp_path):
    # 8 disruptions then 3 OOMs then ok: a shared 5-attempt counter would condemn it.
    key = KEYS[0]
    table = {(key, a): Script(observation=DISRUPTED) for a in range(1, 9)}
    table.update({(key, a): Script(observation=OOM) for a in range(9, 12)})
    d, _, records = make(tmp_path, by_attempt(table))
    result = d.run()
    assert result.results[key].status == "done"
    recs, _ = records.load([key])
    assert [recs[(key, a)].outcome for a in range(1, 13)] == ["disrupted"] * 8 + ["oom"] * 3 + ["ok"]


@pytest.mark.parametrize(
    "observation, allowed, outcome",
    [(FAILED, 0, "failed"), (INTERRUPTED, 5, "interrupted"), (OOM, 4, "oom"), (DISRUPTED, 20, "disrupted")],
)
def test_L5_each_class_condemns_after_its_own_budget(tmp_path, observation, allowed, outcome):
    key = KEYS[2]
    d, backend, _ = make(tmp_path, lambda s: Script(observation=observation) if s.range_key == key else Script())
    result = d.run()
    r = result.results[key]
    assert r.status == "condemned" and r.attempts == allowed + 1
    assert outcome in r.reason
    assert sum(1 for s in backend.submitted if s.range_key == key) == allowed + 1


def test_L6_memory_climbs_by_oom_count_not_attempt_number(tmp_path):
    key = KEYS[0]
    table = {
        (key, 1): Script(observation=DISRUPTED),
        (key, 2): Script(observation=DISRUPTED),
        (key, 3): Script(observation=OOM),
        (key, 4): Script(observation=DISRUPTED),
        (key, 5): Script(observation=OOM),
    }
    d, backend, _ = make(tmp_path, by_attempt(table))
    d.run()
    limits = [s.memory_limit_bytes for s in backend.submitted if s.range_key == key]
    assert limits == [BASE, BASE, BASE, int(BASE * 1.5), int(BASE * 1.5), int(BASE * 2.25)]


def test_L6_oom_at_the_cap_is_condemned_not_retried_at_the_same_limit(tmp_path):
    key = KEYS[0]
    placement = Placement(ladder=MemoryLadder(cap_bytes=16 * GiB))
    d, backend, _ = make(
        tmp_path,
        lambda s: Script(observation=OOM) if s.range_key == key else Script(),
        retry=RetryPolicy(oom_rungs=10),
        placement=placement,
    )
    result = d.run()
    limits = [s.memory_limit_bytes for s in backend.submitted if s.range_key == key]
    assert limits == [BASE, 16 * GiB]
    assert "cap" in result.results[key].reason


def test_L9_condemned_range_does_not_stop_dispatch(tmp_path, caplog):
    # The tip range fails for real first; with one slot, everything else must still run.
    key = KEYS[0]
    d, backend, _ = make(
        tmp_path, lambda s: Script(observation=FAILED) if s.range_key == key else Script(), parallelism=1
    )
    with caplog.at_level(logging.ERROR):
        result = d.run()
    assert result.condemned.keys() == {key}
    assert sorted(result.done) == sorted(KEYS[1:])
    assert any(key in m and "condemned" in m for m in caplog.messages)
    assert key not in backend.released_ranges  # its data stays for a backfill to resume


def test_L11_an_attempt_created_by_someone_else_is_adopted_and_holds_a_slot(tmp_path):
    clock = FakeClock()
    backend = FakeBackend(clock)
    # Another dispatcher won the create race for our first attempt.
    backend.submit(AttemptSpec("m1", KEYS[0], 1, RANGES[0].last, 6720, BASE, BASE, "nebula"))
    d, backend, _ = make(tmp_path, backend=backend, clock=clock, parallelism=2)
    d.pass_once()
    assert len([s for s in backend.observe() if s.live]) == 2
    result = d.run()
    assert sorted(result.done) == sorted(KEYS) and backend.max_live <= 2
    assert [s.attempt for s in backend.submitted if s.range_key == KEYS[0]] == [1]


def test_L11_two_dispatchers_over_disjoint_ranges_share_one_cap(tmp_path):
    clock = FakeClock()
    backend = FakeBackend(clock, lambda s: Script(seconds=30))
    a, _, _ = make(tmp_path, backend=backend, clock=clock, parallelism=4, ranges=RANGES[:5])
    b, _, _ = make(tmp_path, backend=backend, clock=clock, parallelism=4, ranges=RANGES[5:])
    for _ in range(40):
        a.pass_once()
        b.pass_once()
        clock.sleep(5)
    assert backend.max_live == 4
    assert len(backend.released_ranges) == len(KEYS)


def test_L10_restart_mid_mission_adopts_live_attempts_and_loses_nothing(tmp_path):
    clock = FakeClock()
    backend = FakeBackend(clock, lambda s: Script(seconds=30, peaks=Peaks(5 * GiB, 6 * GiB, 7)))
    first, _, _ = make(tmp_path, backend=backend, clock=clock)
    for _ in range(4):
        first.pass_once()
        clock.sleep(5)
    live_before = {s.attempt_id for s in backend.observe() if s.live}
    assert live_before
    second, _, records = make(tmp_path, backend=backend, clock=clock)  # the restart
    result = second.run()
    assert sorted(result.done) == sorted(KEYS)
    ids = [s.attempt_id for s in backend.submitted]
    assert len(ids) == len(set(ids)) == len(KEYS)  # nothing ran twice
    rows, unmeasured = profile_rows(records.load()[0].values())
    assert unmeasured == [] and all(r["peak_anon_bytes"] == 5 * GiB for r in rows)


def test_L12_a_torn_record_costs_only_its_own_range(tmp_path, caplog):
    d, backend, records = make(tmp_path)
    d.run()
    torn = KEYS[4]
    # As if the dispatcher died before its closing snapshot, which would still hold both records.
    records.store.remove("m1/attempt_records.parquet")
    records.store.write_bytes(f"m1/attempts/{torn}/a001.parquet", b"PAR1\x00\x00torn")
    records.store.write_bytes(
        f"m1/attempts/{KEYS[5]}/a001.parquet", records.store.read_bytes(f"m1/attempts/{KEYS[6]}/a001.parquet")
    )
    backend.submitted.clear()
    with caplog.at_level(logging.WARNING):
        again, _, _ = make(tmp_path, backend=backend, clock=backend.clock)
        result = again.run()
    assert sorted(s.range_key for s in backend.submitted) == sorted([torn, KEYS[5]])
    assert sorted(result.done) == sorted(KEYS)
    assert any("unreadable" in m and torn in m for m in caplog.messages)


def test_L31_final_read_is_retried_then_recorded_without_it(tmp_path):
    clock = FakeClock()
    backend = FakeBackend(clock, collect_errors=2)
    d, _, records = make(tmp_path, backend=backend, clock=clock, ranges=RANGES[:1])
    result = d.run()
    assert result.done == [KEYS[0]]
    rec = records.load()[0][(KEYS[0], 1)]
    assert rec.tx_apply_count == 1000  # third try succeeded
    backend2 = FakeBackend(FakeClock(), collect_errors=5)
    d2, _, records2 = make(tmp_path / "b", backend=backend2, clock=backend2.clock, ranges=RANGES[:1])
    assert d2.run().done == [KEYS[0]]
    rec2 = records2.load()[0][(KEYS[0], 1)]
    assert rec2.tx_apply_count is None and rec2.peak_anon_bytes == 100  # kubelet peaks kept


def test_L32_done_mark_exists_before_the_attempt_is_released(tmp_path):
    d, backend, records = make(tmp_path, ranges=RANGES[:3])
    seen = []
    release = backend.release

    def checking_release(state):
        seen.append(records.store.exists(f"m1/attempts/{state.range_key}/_a{state.attempt:03d}.done"))
        release(state)

    backend.release = checking_release
    d.run()
    assert seen == [True, True, True]


def test_Z1_status_names_stragglers_against_their_profile(tmp_path):
    from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure

    slow = KEYS[0]
    profile = ProfileIndex([RangeMeasure(r.last, GiB, GiB, 100.0) for r in RANGES])
    statuses = []
    d, _, _ = make(
        tmp_path,
        lambda s: Script(seconds=500 if s.range_key == slow else 10),
        parallelism=4,
        profile=profile,
        status_every=1,
    )
    d.on_status = statuses.append
    d.run()
    straggling = [s for s in statuses if s.stragglers]
    assert straggling and all(slow in s.stragglers[0] and "profiled 100s" in s.stragglers[0] for s in straggling)
    assert statuses[-1].completed == len(KEYS)


def test_Z4_a_stall_raises_an_alert(tmp_path, caplog):
    d, _, _ = make(tmp_path, lambda s: Script(seconds=1000), ranges=RANGES[:1], stall_seconds=300)
    with caplog.at_level(logging.ERROR):
        d.run()
    assert sum("no range completed" in m for m in caplog.messages) == 1


def test_L21_resumed_chain_reaches_the_result_row(tmp_path):
    key = KEYS[0]
    table = {
        (key, 1): Script(observation=DISRUPTED, peaks=Peaks(9 * GiB, 10 * GiB, 1), fresh_start=True, seconds=100),
        (key, 2): Script(peaks=Peaks(2 * GiB, 3 * GiB, 1), fresh_start=False, resumed_from=3000, seconds=50),
    }
    got = {}
    d, _, _ = make(tmp_path, by_attempt(table), ranges=RANGES[:1])
    d.on_result = lambda r, already: got.setdefault(r.range_key, r)
    d.run()
    row = got[key].row
    assert row["peak_anon_bytes"] == 9 * GiB and row["seconds"] == 150 and row["chain_attempts"] == 2
    assert got[key].outcomes == "disrupted ok"


def test_completed_ranges_are_skipped_by_a_new_dispatcher(tmp_path):
    d, backend, _ = make(tmp_path)
    d.run()
    n = len(backend.submitted)
    again, _, _ = make(tmp_path, backend=backend, clock=backend.clock)
    reported = []
    again.on_result = lambda r, already: reported.append((r.range_key, already))
    # on_result fires from the constructor for completed ranges; rebuild to capture it
    again = Dispatcher(
        again.cfg, backend, again.records, clock=backend.clock, on_result=lambda r, a: reported.append((r.range_key, a))
    )
    result = again.run()
    assert len(backend.submitted) == n and sorted(result.done) == sorted(KEYS)
    assert sorted(reported) == sorted((k, True) for k in KEYS)


def test_L9_a_new_operator_run_grants_a_condemned_range_fresh_budgets_once(tmp_path):
    key = KEYS[1]
    fails = {(key, 1): Script(observation=FAILED)}
    d, backend, records = make(tmp_path, by_attempt(fails))
    assert d.run().condemned.keys() == {key}
    # A dispatcher retry (same run) keeps the verdict...
    again, _, _ = make(tmp_path, backend=backend, clock=backend.clock)
    assert again.run().condemned.keys() == {key}
    assert [s.attempt for s in backend.submitted if s.range_key == key] == [1]
    # ...a new run by an operator (a backfill of the failed partition) runs it again.
    fresh, _, _ = make(tmp_path, backend=backend, clock=backend.clock, reset_condemned=True)
    result = fresh.run()
    assert result.condemned == {} and key in result.done
    assert [s.attempt for s in backend.submitted if s.range_key == key] == [1, 2]


@pytest.mark.parametrize("call", ["observe", "collect", "release", "release_range", "submit"])
def test_L5_a_transient_error_from_any_call_is_retried_and_never_charged(tmp_path, call):
    """The error contract (core/dispatch/ports.py): any call may answer TransientBackendError;
    the dispatcher retries it on a later pass and no range spends a budget on it."""
    clock = FakeClock()
    backend = FakeBackend(clock, faults={call: 4})
    d, _, records = make(tmp_path, backend=backend, clock=clock)
    result = d.run()
    assert backend.faults_raised == 4
    assert sorted(result.done) == sorted(KEYS) and not result.condemned
    recs, done = records.load()
    assert {r.outcome for r in recs.values()} == {"ok"} and len(recs) == len(KEYS)  # one attempt each
    assert all(r.tx_apply_count == 1000 for r in recs.values())  # a deferred final read lost nothing
    assert sorted(backend.released_ranges) == sorted(KEYS) and backend.attempts == {}  # L2, L3 caught up


def test_a_backend_that_stops_answering_raises_an_alert_and_dispatches_nothing_meanwhile(tmp_path, caplog):
    clock = FakeClock()
    backend = FakeBackend(clock, faults={"observe": 12})
    d, _, _ = make(tmp_path, backend=backend, clock=clock, transient_alert_passes=10)
    with caplog.at_level(logging.ERROR, logger="catchup_assets.core.dispatch.reconciler"):
        for _ in range(12):
            d.pass_once()
    assert backend.submitted == []  # blind passes decide nothing
    assert "has not answered for 10 consecutive passes" in caplog.text
    assert sorted(d.run().done) == sorted(KEYS)


def test_constructing_a_dispatcher_does_no_io(tmp_path):
    """recover() reads the records and frees completed ranges; the constructor touches nothing."""
    clock = FakeClock()
    backend = FakeBackend(clock)
    d, _, _ = make(tmp_path, backend=backend, clock=clock)
    d.run()
    backend.released_ranges.clear()
    make(tmp_path, backend=backend, clock=clock)  # a second dispatcher, constructed only
    assert (
        backend.released_ranges == [] and not (tmp_path / "root" / "m1" / "attempts" / KEYS[0] / "_reset-a001").exists()
    )


@pytest.mark.parametrize("grace", [120.0, 1.0])  # 1 s: the other's claims go stale while its attempts run
def test_two_dispatchers_over_the_same_ranges_never_run_an_attempt_twice(tmp_path, grace):
    """A backfill of partitions a live run holds: two dispatchers, same ranges, same storage.

    Each claims an attempt on the storage root before starting it, so the second reads
    what the first did instead of starting attempt N again once the first released it."""
    clock = FakeClock()
    table = {(KEYS[0], 1): Script(observation=DISRUPTED, fresh_start=True), (KEYS[3], 1): Script(observation=OOM)}
    backend = FakeBackend(
        clock, lambda s: table.get((s.range_key, s.attempt), Script(seconds=7 + len(s.range_key) % 5))
    )
    records = RecordStore(Store(tmp_path / "root"), "m1")
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=4, poll_seconds=5)
    first, second = (
        Dispatcher(DispatchConfig(mission, RANGES, holder=h, claim_grace_seconds=grace), backend, records, clock=clock)
        for h in ("run-a", "run-b")
    )
    live_per_range = []
    for _ in range(80):
        for d in (first, second):
            d.pass_once()
            live = [s.range_key for s in backend.observe() if s.live]
            live_per_range.append(max((live.count(k) for k in set(live)), default=0))
        clock.sleep(5)
    ids = [s.attempt_id for s in backend.submitted]
    assert len(ids) == len(set(ids))  # no (range, attempt) started twice
    assert max(live_per_range) == 1  # never two live attempts of one range
    recs, done = records.load()
    assert done == set(recs) and {k for k, _ in done} == set(KEYS)  # everything finished, once
    assert all(r.tx_apply_count == 1000 for r in recs.values() if r.outcome == "ok")  # no finished record blanked
    assert len(ids) == len(KEYS) + 2  # the reclaim and the OOM retried, once each


def test_a_stale_foreign_claim_is_checked_against_the_records_before_its_number_is_spent(tmp_path):
    """Another dispatcher claimed attempt 1, ran it and released it while this one looked away:
    past the grace the records, not the claim's age, decide whether the range still needs work."""
    from catchup_assets.core.values.attempt_record import AttemptRecord

    clock = FakeClock()
    backend = FakeBackend(clock)
    records = RecordStore(Store(tmp_path / "root"), "m1")
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=10, poll_seconds=5)
    key = KEYS[0]
    assert records.claim(key, 1, "run-other", clock.time())  # the other run, between claim and submit
    d = Dispatcher(
        DispatchConfig(mission, RANGES, holder="run-here", claim_grace_seconds=60), backend, records, clock=clock
    )
    d.pass_once()
    assert key not in {s.range_key for s in backend.submitted}  # its claim holds the range back
    # The other run's attempt ran and was recorded ok, then its Job was released.
    records.write(AttemptRecord("m1", key, 1, "ok", peak_anon_bytes=100, seconds=30.0, fresh_start=True))
    records.mark_done(key, 1)
    clock.sleep(120)
    result = d.run()
    assert key not in {s.range_key for s in backend.submitted}  # never run again
    assert result.results[key].status == "done"


def test_issue26_item6_a_killed_run_leaves_its_finished_records_in_segments_but_the_last_few(tmp_path):
    """P5, issue 26 item 6: every `segment_every` finished attempts go to the snapshot log as
    one segment, so a run killed between two leaves fewer than that many finished records
    for the next reader to open from their own files."""
    d, _, records = make(tmp_path, segment_every=2, parallelism=1)
    done: set = set()
    while len(done) < 5:  # the dispatcher "dies" once five attempts are finished
        d.pass_once()
        d.clock.sleep(5)
        done = records.load()[1]
    segments = records.snapshots.segments()
    in_log = records.read_snapshot()
    assert len(segments) == 2 and len(in_log) == 4 and set(in_log) <= done
    assert not (tmp_path / "root/m1/attempt_records.parquet").exists()  # compacted only at the end
    # Opened from their own files: the one finished after the last segment, and the one in flight.
    records.load()
    assert records.files_read <= 2 and len(records.unsnapshotted) == 1
    d.run()  # the run's end compacts the log into the base snapshot
    assert records.snapshots.segments() == [] and set(records.read_snapshot()) == records.load()[1]


def test_Z4_a_long_range_on_time_is_no_stall_and_one_past_its_profile_is_overdue(tmp_path, caplog):
    """Hours without a completion are normal while every range in flight is a long one on time;
    a range running past stall_factor x its profiled seconds is named overdue, and when every
    range in flight is overdue, the mission has stalled."""
    from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure

    long_key, stuck_key = KEYS[0], KEYS[1]
    by_end = {r.key: r.last for r in RANGES}
    profile = ProfileIndex(
        [RangeMeasure(by_end[long_key], GiB, GiB, 5000.0), RangeMeasure(by_end[stuck_key], GiB, GiB, 400.0)]
    )
    scripts = {long_key: Script(seconds=4900), stuck_key: Script(seconds=20000)}
    d, _, _ = make(
        tmp_path,
        lambda s: scripts[s.range_key],
        ranges=[r for r in RANGES if r.key in scripts],
        profile=profile,
        stall_seconds=300,
        stall_factor=2.0,
    )
    with caplog.at_level(logging.WARNING, logger="catchup_assets.core.dispatch.reconciler"):
        while d.clock.time() - 1_700_000_000.0 < 4800:  # the long range is still on time
            d.pass_once()
            d.clock.sleep(5)
        assert [m for m in caplog.messages if "overdue" in m] == [m for m in caplog.messages if stuck_key in m]
        assert any(f"range {stuck_key}: overdue" in m and "profiled 400s" in m for m in caplog.messages)
        assert not any("stalled" in m for m in caplog.messages)  # one range on time: no stall
        d.run()
    stalls = [m for m in caplog.messages if "stalled" in m]
    assert len(stalls) == 1 and "all 1 in flight are overdue" in stalls[0]  # the long one done, the stuck one left


EXIT_2 = Observation(exit_code=2, termination_reason="Error")


def test_a_systemic_failure_trips_the_breaker_once_with_budgets_unspent(tmp_path, caplog):
    """Every range fails the same way (a broken config): after breaker_attempts in a row the
    mission stops with that one cause; no range is condemned and a new run finds its budgets."""
    d, backend, records = make(tmp_path, lambda s: Script(observation=FAILED), breaker_attempts=5)
    with caplog.at_level(logging.ERROR, logger="catchup_assets.core.dispatch.reconciler"):
        result = d.run()
    assert result.condemned == {} and result.done == []
    assert {r.status.value for r in result.results.values()} == {"not_run"}
    assert all("circuit breaker: 5 attempts in a row failed the same way" in r.reason for r in result.results.values())
    assert len(backend.submitted) < len(KEYS)  # stopped early, not range by range
    assert sum("circuit breaker" in m for m in caplog.messages) == 1
    # Every range that failed, the five and those still in flight then, keeps its budgets.
    assert set(records.load_resets(KEYS)) == {s.range_key for s in backend.submitted}
    # The next run (the config fixed) runs those ranges afresh: nothing was charged to them.
    d2, backend2, _ = make(tmp_path, lambda s: Script(), breaker_attempts=5)
    assert sorted(d2.run().done) == sorted(KEYS)


@pytest.mark.parametrize(
    "script, condemned",
    [
        # one bad range among good ones: the first success releases it to its budget, as before
        (lambda s: Script(observation=FAILED) if s.range_key == KEYS[0] else Script(), {KEYS[0]}),
        # failures that differ (exit codes) are not one cause: each range is judged on its own
        (lambda s: Script(observation=FAILED if KEYS.index(s.range_key) % 2 else EXIT_2), set(KEYS)),
    ],
    ids=["one-bad-range", "different-failures"],
)
def test_the_breaker_holds_nothing_that_is_not_systemic(tmp_path, script, condemned):
    d, _, _ = make(tmp_path, script, breaker_attempts=3, parallelism=1)
    result = d.run()
    assert d.blocked is None
    assert set(result.condemned) == condemned and len(result.done) == len(KEYS) - len(condemned)


def test_a_lone_failing_range_is_judged_once_nothing_else_is_left(tmp_path):
    d, _, _ = make(tmp_path, lambda s: Script(observation=FAILED), ranges=RANGES[:2], breaker_attempts=5)
    result = d.run()
    assert d.blocked is None and set(result.condemned) == {KEYS[0], KEYS[1]}


class CountingStore(Store):
    """The real local Store, counting what it reads back (the storage root is the boundary)."""

    def __init__(self, root):
        super().__init__(root)
        self.reads: list[str] = []

    def read_bytes(self, rel: str, *args, **kwargs) -> bytes:
        self.reads.append(rel)
        return super().read_bytes(rel, *args, **kwargs)


@pytest.mark.parametrize(("holder", "rereads"), [("run-a", False), ("run-b", True)])
def test_L10_a_restarted_dispatcher_owns_what_its_run_claimed(tmp_path, holder, rereads):
    """Restarted under its run's holder (a retried step), the dispatcher's live attempts are its
    own: flushing their peaks reads no record back. Under another holder (a second run over the
    same ranges) it merges over what storage holds, reading each record first."""
    clock = FakeClock()
    backend = FakeBackend(clock, lambda spec: Script(seconds=10_000))
    store = CountingStore(tmp_path / "root")
    records = RecordStore(store, "m1")
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=4, poll_seconds=5)

    def dispatcher(h):
        return Dispatcher(
            DispatchConfig(mission, RANGES, holder=h, peak_flush_seconds=10), backend, records, clock=clock
        )

    first = dispatcher("run-a")
    for _ in range(3):
        first.pass_once()
        clock.sleep(5)
    live = {(s.range_key, s.attempt) for s in backend.observe() if s.live}
    assert len(live) == 4
    again = dispatcher(holder)
    again.pass_once()  # recovers: reads every record and claim once
    store.reads.clear()
    for _ in range(4):
        clock.sleep(11)
        again.pass_once()
    record_reads = [r for r in store.reads if "/attempts/" in r and "_claim" not in r]
    assert bool(record_reads) is rereads
    assert {(s.range_key, s.attempt) for s in backend.observe() if s.live} == live  # adopted, none restarted


def test_L11_a_range_another_dispatcher_finished_unseen_is_read_within_the_recheck_not_the_grace(tmp_path):
    """The other dispatcher claimed, ran, recorded and released an attempt between two of this
    one's passes: its records are read every claim_recheck_seconds, so the range is known done
    in seconds, not after the claim's grace (and never run again)."""
    from catchup_assets.core.values.attempt_record import AttemptRecord

    clock = FakeClock()
    backend = FakeBackend(clock)
    records = RecordStore(Store(tmp_path / "root"), "m1")
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=10, poll_seconds=5)
    key = KEYS[0]
    assert records.claim(key, 1, "run-other", clock.time())
    d = Dispatcher(
        DispatchConfig(mission, RANGES, holder="run-here", claim_grace_seconds=120, claim_recheck_seconds=10),
        backend,
        records,
        clock=clock,
    )
    d.pass_once()  # its own claim fails: it learns the other's
    clock.sleep(5)
    d.pass_once()  # the range's records read: nothing yet, the other's submit is in flight
    records.write(AttemptRecord("m1", key, 1, "ok", peak_anon_bytes=100, seconds=30.0, fresh_start=True))
    records.mark_done(key, 1)
    clock.sleep(5)
    d.pass_once()
    assert key not in d.book.results  # read again only 10 s after the last read
    clock.sleep(6)
    d.pass_once()
    assert d.book.results[key].status == "done"  # 16 s after the claim, far inside its 120 s grace
    assert key not in {s.range_key for s in backend.submitted}


def test_L11_a_finish_the_other_dispatcher_records_during_this_one_s_final_read_is_not_blanked(tmp_path):
    """The owner reads an attempt's evidence while the other dispatcher records, marks done and
    releases it: the owner's read comes back empty (the logs are gone), and the other's full
    record stands (the CI failure of the two-thread local test, at one interleaving)."""
    clock = FakeClock()
    records = RecordStore(Store(tmp_path / "root"), "m1")
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=1, poll_seconds=5)
    other: list[Dispatcher] = []

    class RacingBackend(FakeBackend):
        def collect(self, state, log_url):
            if other:  # the other dispatcher's whole finish lands inside this read
                other.pop().pass_once()
            if state.attempt_id not in self.attempts:
                return Collected()  # released under this reader: nothing left to read
            return super().collect(state, log_url)

    backend = RacingBackend(clock, lambda spec: Script(seconds=10))
    owner, second = (
        Dispatcher(DispatchConfig(mission, RANGES[:1], holder=h), backend, records, clock=clock)
        for h in ("run-a", "run-b")
    )
    owner.pass_once()  # submits and claims attempt 1
    clock.sleep(20)
    other.append(second)
    owner.pass_once()
    recs, done = records.load()
    assert done == {(KEYS[0], 1)} and recs[(KEYS[0], 1)].tx_apply_count == 1000
    assert recs[(KEYS[0], 1)].fresh_start is not None and [s.attempt for s in backend.submitted] == [1]


def test_L22_an_attempt_whose_node_is_lost_is_not_seen_running_while_podgc_takes_its_time(tmp_path):
    """A reclaimed node's pod still says Running until PodGC fails it (40-60 s on a real control plane):
    its leg ends when its node was found gone, not when PodGC got to it."""

    def script(spec):
        if spec.range_key == KEYS[0] and spec.attempt == 1:
            return Script(seconds=400, observation=DISRUPTED, lost_after=200)
        return Script(seconds=30)

    d, _, records = make(tmp_path, script=script)
    d.run()
    first = records.load()[0][(KEYS[0], 1)]
    assert first.outcome == "disrupted" and first.finished_at is None and first.seconds_estimated
    assert 195 <= first.seconds <= 200  # the last pass it was seen running, poll_seconds 5
