"""The KPIs of sizing (issue 23), by hand over a few attempt records: slack, OOM share, first-attempt
success and cost efficiency. The demo's figures against pandas are tests/cli/test_kpis_demo.py."""

from __future__ import annotations

import dataclasses

import pytest

from catchup_assets.core.aggregate.kpis import cheapest_gib_hour, sizing_kpis
from catchup_assets.core.size.catalog import Catalog, NodeShape
from catchup_assets.core.size.sizing import Placement, Tier, Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord

# 10 GiB allocatable at $1/h on-demand, $0.40 spot; 20 GiB at $1.50 and $0.60 (cheaper per GiB).
SMALL = NodeShape("small", 12 * GiB, 4, 1.0, 0.4, 10 * GiB, 4.0)
BIG = NodeShape("big", 24 * GiB, 8, 1.5, 0.6, 20 * GiB, 8.0)
CATALOG = Catalog((SMALL, BIG), "test prices")
A = Tier("a", 8 * GiB, SMALL.memory_bytes, 1.0, None, "small", "spot")
B = Tier("b", 16 * GiB, BIG.memory_bytes, 2.0, None, "big", "on-demand")
CATCH = dataclasses.replace(A, name="catch")
PLACEMENT = Placement(Tiers((A, B), CATCH, dataclasses.replace(A, name="none")), catalog=CATALOG)


def rec(key, attempt, outcome, peak_gib, limit_gib, tier="a", seconds=3600.0, capacity=None):
    return AttemptRecord(
        "m",
        key,
        attempt,
        outcome,
        seconds=seconds,
        peak_anon_bytes=int(peak_gib * GiB),
        memory_limit_bytes=int(limit_gib * GiB),
        memory_request_bytes=int(limit_gib * GiB),
        tier=tier,
        capacity_type=capacity,
    )


def test_L27_slack_oom_share_and_first_attempt_success_by_hand():
    records = [
        rec("k1", 1, "ok", 3, 4),  # slack 1/4
        rec("k2", 1, "oom", 4, 4),
        rec("k2", 2, "ok", 5, 8),  # slack 3/8
        rec("k3", 1, "stopped", 1, 4),  # an operator's stop: not k3's first verdict
        rec("k3", 2, "ok", 6, 12, tier="b"),  # slack 1/2
        rec("k4", 1, "failed", 1, 4),
        AttemptRecord("m", "k5", 1),  # still in flight: not counted
    ]
    k = sizing_kpis(records, PLACEMENT)
    assert k.ranges == 4 and k.completing_attempts == 3
    assert k.memory_slack == pytest.approx(1 - (3 + 5 + 6) / (4 + 8 + 12))
    assert k.slack_by_tier == pytest.approx({"a": 1 - 8 / 12, "b": 0.5})
    assert k.median_range_slack == pytest.approx(3 / 8)
    assert k.oom_hit_share == pytest.approx(1 / 4)
    assert k.first_attempt_success == pytest.approx(2 / 4)  # k1, k3 (after its stop); not k2, k4


def test_cost_efficiency_is_peak_gib_hours_at_the_cheapest_fitting_rate_over_dollars_spent():
    # 3 GiB fits both: big is cheaper per GiB (0.6 / 20 spot); 15 GiB fits big only (1.5 / 20 on-demand).
    assert cheapest_gib_hour(CATALOG, 3 * GiB, "spot") == pytest.approx(0.03)
    assert cheapest_gib_hour(CATALOG, 15 * GiB, "on-demand") == pytest.approx(0.075)
    assert cheapest_gib_hour(CATALOG, 21 * GiB, "spot") is None
    records = [
        rec("k1", 1, "oom", 2, 2, seconds=1800),  # not useful: 1 of 4 CPUs (> 0.2 of memory) x $0.40 x 0.5 h
        rec("k1", 2, "ok", 3, 4, seconds=3600),  # 0.4 of small x $0.40 x 1 h
        rec("k2", 1, "ok", 15, 16, tier="b", seconds=7200),  # 0.8 of big x $1.50 x 2 h
    ]
    k = sizing_kpis(records, PLACEMENT)
    spent = 0.25 * 0.4 * 0.5 + 0.4 * 0.4 * 1 + 0.8 * 1.5 * 2
    ideal = 3 * 1 * 0.03 + 15 * 2 * 0.075
    assert k.dollars == pytest.approx(spent)
    assert k.cost_efficiency == pytest.approx(ideal / spent)
    # A sped-up simulation's seconds scale both sides alike.
    assert sizing_kpis(records, PLACEMENT, time_scale=360).cost_efficiency == pytest.approx(ideal / spent)


def test_no_finished_attempt_has_no_kpis():
    k = sizing_kpis([AttemptRecord("m", "k1", 1)], PLACEMENT)
    assert (k.memory_slack, k.oom_hit_share, k.first_attempt_success, k.cost_efficiency) == (None,) * 4
