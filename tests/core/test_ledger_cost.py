"""The cost model per ledger (issue 25 item 2) and sizing by ledger overlap (issue 25 item 3)."""

from __future__ import annotations

import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.forecast.forecast import estimates, forecast
from catchup_assets.core.forecast.ledger_cost import LedgerCost
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure, measures_from_rows
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange


def m(first, last, seconds, setup=None, peak=1 * GiB):
    return RangeMeasure(last, peak, None, seconds, None, first, setup)


# Two measured rows, 1..100 (setup 10, 110 s) and 201..300 (setup 20, 220 s); 101..200 unmeasured.
MEASURED = [m(1, 100, 110.0, 10.0), m(201, 300, 220.0, 20.0)]


@pytest.mark.parametrize(
    "ledger, setup, rate",
    [
        (1, 10.0, 1.0),
        (100, 10.0, 1.0),
        (101, 20.0, 2.0),  # unmeasured: the nearest row above (L25)
        (300, 20.0, 2.0),
        (10_000, 20.0, 2.0),  # above the top: the top's
    ],
)
def test_setup_and_rate_are_steps_of_the_profiled_rows(ledger, setup, rate):
    cost = LedgerCost.from_measures(MEASURED)
    assert (cost.setup(ledger), cost.rate(ledger)) == (setup, rate)


@pytest.mark.parametrize(
    "first, last, seconds",
    [
        (1, 100, 110.0),  # a row's own range predicts its own seconds
        (201, 300, 220.0),
        (1, 50, 60.0),  # half its ledgers, the whole setup
        (51, 100, 60.0),  # the second half pays the setup again
        (1, 300, 10.0 + 100 + 400),  # merged: one setup, every ledger's replay (101..200 at the rate above)
        (301, 310, 40.0),
    ],
)
def test_a_range_pays_its_setup_once_and_its_ledgers_replay(first, last, seconds):
    assert LedgerCost.from_measures(MEASURED).seconds(first, last) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "tip_setup, setups",
    [
        (0.0, (0.0, 0.0)),
        (60.0, (0.3, 30.3)),  # linear in the first ledger: 60 x 1/200, 60 x 101/200
        (1e6, (50.0, 50.0)),  # never more than half the row's seconds
    ],
)
def test_a_profile_without_setup_seconds_assumes_a_setup_growing_to_the_tip(tip_setup, setups):
    cost = LedgerCost.from_measures([m(1, 100, 100.0), m(101, 200, 100.0)], tip_setup)
    assert (cost.setup(1), cost.setup(101)) == pytest.approx(setups)
    assert cost.seconds(1, 100) == pytest.approx(100.0)  # the row's total is kept whatever the split


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_a_bad_assumed_setup_is_refused(bad):
    with pytest.raises(ConfigError, match="tip_setup_seconds"):
        LedgerCost.from_measures(MEASURED, bad)


def test_a_profile_with_nothing_timed_has_no_cost_model():
    with pytest.raises(ConfigError, match="at least one profiled range"):
        LedgerCost.from_measures([RangeMeasure(100, GiB)])


def test_setup_seconds_and_first_ledger_enter_from_the_rows_and_may_be_missing():
    rows = [
        {"range_key": "0000000001-0000000100", "first_ledger": 1, "last_ledger": 100, "peak_anon_bytes": GiB,
         "seconds": 50.0, "setup_seconds": 5.0},
        {"range_key": "0000000101-0000000200", "first_ledger": 101, "last_ledger": 200, "peak_anon_bytes": GiB,
         "seconds": 50.0},
    ]  # fmt: skip
    a, b = measures_from_rows(rows)
    assert (a.first_ledger, a.setup_seconds, b.setup_seconds) == (1, 5.0, None)


# Issue 25 item 3: sizing by ledger overlap.
PROFILE = ProfileIndex([m(1, 100, 100.0, 10.0, 1 * GiB), m(101, 200, 200.0, None, 3 * GiB), m(201, 300, 50.0)])


@pytest.mark.parametrize(
    "first, last, peak, seconds",
    [
        (101, 200, 3 * GiB, 200.0),  # the keys match: the row itself, as before
        (1, 200, 3 * GiB, 10.0 + 90 + 200),  # merged: the largest peak, one setup, both replays
        (51, 150, 3 * GiB, 10.0 + 45 + 100),  # across a boundary: each row pro rata
        (151, 200, 3 * GiB, 100.0),  # a cut piece keeps its parent's peak (no setup measured: all replay)
        (1, 50, 1 * GiB, 55.0),
    ],
)
def test_a_range_the_profile_lacks_is_sized_by_the_rows_it_overlaps(first, last, peak, seconds):
    got = PROFILE.lookup_span(first, last)
    assert (got.peak_anon_bytes, got.seconds) == (peak, pytest.approx(seconds))


def test_a_cut_range_gets_at_least_the_peak_of_every_old_range_it_overlaps():
    placement = Placement()
    for first, last in [(1, 64), (65, 128), (97, 160), (1, 300)]:
        overlapped = [x for x in PROFILE.measures() if x.first_ledger <= last and first <= x.last_ledger]
        s = placement.size(last, PROFILE, first_ledger=first)
        for old in overlapped:
            assert s.base_memory_bytes >= placement.size(old.last_ledger, PROFILE).base_memory_bytes


def test_a_profile_without_first_ledgers_sizes_by_range_end_as_before():
    old = ProfileIndex([RangeMeasure(100, GiB, None, 100.0), RangeMeasure(200, 3 * GiB, None, 200.0)])
    assert old.lookup_span(1, 200) == old.lookup(200)


def test_doubling_ledgers_per_range_keeps_the_predicted_work():
    """Issue 25: against a 16000-ledger profile, doubling the range length halved the predicted work
    (158.6, then 81.9, then 42.9 node-hours): each new range borrowed one old row."""
    grid = plan_ranges(MissionSpan(1, 64 * 16000, 16000))
    profile = ProfileIndex(m(r.first, r.last, 600.0 + r.first / 1000, None, (1 + r.first % 5) * GiB) for r in grid)
    work = []
    for length in (16000, 32000, 64000):
        ranges = plan_ranges(MissionSpan(1, 64 * 16000, length))
        work.append(forecast(estimates(ranges, profile, Placement()), 100).work_hours)
    assert work[1] == pytest.approx(work[0]) and work[2] == pytest.approx(work[0])
    assert LedgerRange(1, 32000) in plan_ranges(MissionSpan(1, 64 * 16000, 32000))
