"""The real dispatcher replaying a modelled mission in simulated time (issue 6).

Assertions are on what the replayed mission left: its attempt records and
profile on the storage root, and the cluster's view of every attempt.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from catchup_assets.core.forecast.forecast import estimates, forecast
from catchup_assets.core.plan.ranges import plan_ranges
from catchup_assets.core.size.measures import ProfileIndex, measures_from_rows
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.mission.profile import build_profile
from catchup_assets.sim.workload import Workload, WorkloadShape
from catchup_assets.store.profiles import PreviousProfile
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kubesim.replay import replay


@pytest.fixture(autouse=True)
def quiet():
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)
    yield
    logging.getLogger("catchup_assets").setLevel(logging.NOTSET)


def shaped(**kw) -> WorkloadShape:
    return dataclasses.replace(WorkloadShape(), **kw)


def test_spiked_ranges_oom_once_without_a_profile_and_never_with_one(tmp_path):
    w = Workload(ranges=60, shape=shaped(spikes=3, disruption_share=0.0))
    cold = replay(w, order="tip-first", slots=10, profiled=False, storage_root=str(tmp_path / "cold"))
    assert cold.retries == {"oom": 3} and cold.condemned == 0
    warm = replay(w, order="longest-first", slots=10, profiled=True)
    assert warm.retries == {} and warm.attempts == 60


def test_a_reclaimed_range_resumes_on_its_kept_data(tmp_path):
    w = Workload(ranges=40, shape=shaped(disruption_share=0.3, spikes=0, mission_jitter=0.0))
    rep = replay(w, order="longest-first", slots=8, storage_root=str(tmp_path))
    hit = [c for c in w if w.draw(c.key, 1).disrupt_at is not None]
    assert rep.retries == {"disrupted": len(hit)} and len(hit) >= 5
    records, _ = RecordStore(Store(str(tmp_path)), rep.mission).load()
    profile = {row["range_key"]: row for row in build_profile(str(tmp_path), rep.mission).profile.to_pylist()}
    for c in hit:
        first, second = records[(c.key, 1)], records[(c.key, 2)]
        at = w.draw(c.key, 1).disrupt_at
        assert (first.outcome, second.outcome, second.fresh_start) == ("disrupted", "ok", False)
        assert second.resumed_from_ledger == c.range.first + int(at * c.range.length)
        # The chain's seconds add up to the clean run plus one resume (L21, L22).
        assert profile[c.key]["seconds"] == pytest.approx(c.seconds + 60.0, rel=1e-6)
        assert profile[c.key]["outcomes"] == "disrupted ok"


@pytest.mark.parametrize("order", ["tip-first", "oldest-first", "longest-first"])
@pytest.mark.parametrize("slots", [7, 30])
def test_the_forecast_is_what_the_dispatcher_does(order, slots):
    """With nothing to retry, the planner's list schedule and the replay agree to a poll or two."""
    w = Workload(ranges=120, shape=shaped(disruption_share=0.0, spikes=0, mission_jitter=0.0))
    rep = replay(w, order=order, slots=slots, poll_seconds=10.0)
    prev_rows = w.profile_table().to_pylist()
    index = ProfileIndex(measures_from_rows(prev_rows))
    ordered = dispatch_order(plan_ranges(w.span), order, PreviousProfile("x", index, prev_rows).seconds_by_key)
    f = forecast(estimates(ordered, index, Placement()), slots)
    # Each range waits at most one poll for its slot; the chain of waits is bounded by ranges per slot.
    assert f.makespan_seconds <= rep.makespan_seconds <= f.makespan_seconds + 10.0 * (120 / slots + 1)
    assert rep.lower_bound_seconds == pytest.approx(f.lower_bound_seconds)
    assert rep.node_hours == pytest.approx(f.node_hours)


def test_longest_first_finishes_nearest_the_bound_and_keeps_slots_busy():
    w = Workload(ranges=300, shape=shaped(mission_jitter=0.0))
    by_order = {o: replay(w, order=o, slots=25) for o in ("tip-first", "oldest-first", "longest-first")}
    best = by_order["longest-first"]
    assert best.makespan_seconds < by_order["oldest-first"].makespan_seconds
    assert best.makespan_seconds <= by_order["tip-first"].makespan_seconds
    assert best.ratio < 1.05
    assert best.utilisation_while_queued > 0.97
    # The clock skips passes in which nothing can change.
    assert best.passes < best.makespan_seconds / 10.0 / 5


def test_a_full_slot_count_starts_everything_at_once():
    w = Workload(ranges=20, shape=shaped(disruption_share=0.0, spikes=0))
    rep = replay(w, slots=50)
    assert rep.utilisation_while_queued is None
    assert rep.makespan_seconds == pytest.approx(rep.longest_seconds)
