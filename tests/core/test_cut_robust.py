"""The cut holds on profiles it never saw (issue 37 item 3): the plan that holds with or without noise, the
node-hours cap priced as `lengths: auto` prices it, and a heavy band mid-history with long setups."""

from __future__ import annotations

from dataclasses import replace

import pytest

from catchup_assets.core.forecast.ledger_cost import LedgerCost
from catchup_assets.core.plan.cut import _Candidate, _robust, node_shares, plan_cut
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.measures import RangeMeasure, measures_from_rows
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange
from kit.cut_model import SPAN, cost_model

H = 3600.0

# candidates (exact h, expected h under sigma, ranges) -> the one chosen (index)
ROBUST = [
    # No spread: both figures are the exact makespan; the shortest wins, then the fewer ranges.
    ([(6.0, 6.0, 4000), (3.2, 3.2, 4400), (3.2, 3.2, 4300)], 2),
    # The heavy band mid-history, 10-50 min setups, sigma 0.1 (measured): the best in the draws is 5% behind
    # at the profile's own seconds (1.13 of its bound); the one 2% behind in the draws holds both ways.
    ([(5.865, 6.84, 4000), (3.339, 3.819, 3178), (3.176, 3.896, 3531), (3.173, 4.017, 3411)], 2),
    # A plan best both ways wins outright.
    ([(5.0, 7.0, 4000), (3.0, 3.5, 4200), (3.1, 3.6, 4100)], 1),
    # Only the grid fits the cap: the grid.
    ([(5.0, 7.0, 4000)], 0),
]


@pytest.mark.parametrize(("found", "chosen"), ROBUST)
def test_issue37_the_cut_chosen_holds_whether_runtimes_wander_or_repeat(found, chosen):
    rows = [_Candidate(e * H, x * H, n, 1.0, 0.5, 0.0) for e, x, n in found]
    assert rows.index(_robust(rows)) == chosen


def merged_dear(r: LedgerRange) -> float:
    """A node share 20 times larger for a merged run (two grid ranges or more), as a far larger tier's."""
    return 20.0 if r.length > SPAN.ledgers_per_range else 1.0


@pytest.mark.parametrize(
    ("share", "priced_within_cap"),
    [
        (None, False),  # capped on work seconds: its merges, priced dear, pass the cap
        (merged_dear, True),  # capped on what each range costs
    ],
)
def test_issue37_the_cut_is_capped_on_node_hours_when_given_each_range_s_node_share(share, priced_within_cap):
    plan = plan_cut(cost_model(), SPAN, 40, 1.10, share=share)
    grid = plan_ranges(SPAN)
    uniform = sum(cost_model().seconds(r.first, r.last) * merged_dear(r) for r in grid)
    priced = sum(s * merged_dear(r) for r, s in zip(plan.ranges, plan.seconds, strict=True))
    assert plan.cut >= 1 and plan.merged >= 1
    assert (priced <= 1.10 * uniform) is priced_within_cap


def test_issue37_node_shares_size_a_merged_run_by_its_heaviest_range_and_a_piece_as_its_parent():
    grid = plan_ranges(MissionSpan(1, 3 * 16000, 16000))
    peaks = [int(0.5 * GiB), int(0.6 * GiB), int(12 * GiB)]  # the last on a larger tier than the first two
    measures = [RangeMeasure(r.last, p, None, 1000.0, None, r.first) for r, p in zip(grid, peaks, strict=True)]
    share = node_shares(measures, Placement())
    light, heavy = share(grid[0]), share(grid[2])
    assert light < heavy
    assert share(LedgerRange(1, 32000)) == share(grid[1])  # the two light ones merged: the heavier's
    assert share(LedgerRange(16001, 48000)) == heavy  # a run holding the heavy one costs as it does
    assert share(LedgerRange(32001, 40000)) == heavy  # a piece of the heavy one


def test_issue37_a_heavy_band_mid_history_with_long_setups_cut_within_1_12_of_its_bound():
    """The issue's unseen profile at a quarter of its size (1000 ranges, 524 slots; the band a quarter into
    history, setups 15-50 min), compared under sigma 0.1 as the planner does: 1.131 of the bound before the
    plan had to hold at the profile's own seconds too; benchmarks/cut_generated.py has the 20 generated ones."""
    from catchup_assets.sim.workload import Workload, WorkloadShape

    shape = replace(WorkloadShape(), band=(4_000_000, 5_000_000), setup_seconds=(900.0, 3000.0))
    w = Workload(ranges=1000, shape=shape)
    cost = LedgerCost.from_measures(measures_from_rows(w.profile_table().to_pylist()))
    plan = plan_cut(cost, w.span, 524, sigma=0.1)
    assert plan.makespan_seconds <= 1.12 * plan.bound_seconds
    assert plan.makespan_seconds <= 0.6 * plan.uniform_makespan_seconds
    assert plan.work_seconds <= 1.10 * plan.uniform_work_seconds


def test_issue37_a_profile_of_zero_seconds_plans_without_dividing_by_zero():
    rows = [_Candidate(0.0, 0.0, 4000, None, 0.0, 0.0), _Candidate(0.0, 0.0, 4100, 1.0, 0.5, 0.0)]
    assert _robust(rows) == rows[0]  # every plan takes none: the fewer ranges


def test_issue37_a_generated_profile_with_55_minute_setups_merges_only_what_the_packing_allows():
    """benchmarks.cut_generated's seed 6 (a band at 73-82% of history, setups 10-55 min, sigma 0.27) at a quarter
    of its size. With merge limits fixed at 0.25, 0.5 and 1 x the target the best cut within the cap was 1.124 of
    its bound: runs merged too long to fill the gaps the long pieces left. Merging as much as the list schedule
    allows (the largest limit that does not lengthen it) comes within 1.12, within 1.10 x the node-hours."""
    from benchmarks.harness.generated_profile import generated_shape, profile_table, span

    shape = generated_shape(6)
    measures = measures_from_rows(profile_table(shape, 1000).to_pylist())
    placement = Placement()
    share = node_shares(measures, placement)
    cost = LedgerCost.from_measures(measures)
    plan = plan_cut(cost, span(1000), 524, 1.10, sigma=shape.sigma, share=share)
    grid = plan_ranges(span(1000))
    priced = sum(s * share(r) for r, s in zip(plan.ranges, plan.seconds, strict=True))
    assert plan.merged >= 1 and plan.cut >= 1
    assert plan.makespan_seconds <= 1.12 * plan.bound_seconds
    assert priced <= 1.10 * sum(cost.seconds(r.first, r.last) * share(r) for r in grid)
