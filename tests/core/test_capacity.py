"""A range that spot keeps reclaiming moves to on-demand (issue 21 item 6): the rule, its cost, its what-if.

After `reclaims_before_on_demand` (3) `disrupted` attempts of one range its next
attempts buy on-demand capacity of the same tier (the same node shape); 0 turns
the fallback off; a tier already on-demand stays on-demand.
"""

from __future__ import annotations

import dataclasses

import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.forecast.cost import Use, mission_cost
from catchup_assets.core.forecast.forecast import estimates, fallback_what_if
from catchup_assets.core.size.capacity import capacity_for, fell_back
from catchup_assets.core.size.catalog import Catalog, NodeShape
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import Placement, SizingPolicy, Tier, Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange

SMALL = NodeShape("small", 12 * GiB, 4, 1.0, 0.4, 10 * GiB, 4.0)  # $1/h on-demand, $0.40 spot
CATALOG = Catalog((SMALL,), "test prices")


def placement(reclaims: int = 3, capacity: str = "spot") -> Placement:
    t = Tier("t", 8 * GiB, SMALL.memory_bytes, 1.0, None, "small", capacity)
    return Placement(Tiers((t,), dataclasses.replace(t, name="u"), dataclasses.replace(t, name="n")),
                     SizingPolicy(reclaims_before_on_demand=reclaims), catalog=CATALOG)  # fmt: skip


PROFILE = ProfileIndex([RangeMeasure(16000, 2 * GiB, 2 * GiB, 3600.0)])


@pytest.mark.parametrize(
    "tier_capacity, reclaims, n_disrupted, expected",
    [
        ("spot", 3, 0, "spot"),
        ("spot", 3, 1, "spot"),
        ("spot", 3, 2, "spot"),
        ("spot", 3, 3, "on-demand"),  # the 4th attempt after 3 reclaims
        ("spot", 3, 4, "on-demand"),  # and every one after
        ("spot", 0, 0, "spot"),  # off
        ("spot", 0, 10, "spot"),  # off: a reclaimed range stays on spot
        ("spot", 1, 1, "on-demand"),
        ("on-demand", 3, 0, "on-demand"),  # a tier already on-demand
        ("on-demand", 3, 5, "on-demand"),
        ("on-demand", 0, 5, "on-demand"),
    ],
)
def test_a_range_reclaimed_enough_runs_on_demand(tier_capacity, reclaims, n_disrupted, expected):
    assert capacity_for(tier_capacity, n_disrupted, reclaims) == expected
    s = placement(reclaims, tier_capacity).size(16000, PROFILE, n_disrupted=n_disrupted)
    assert (s.tier, s.capacity_type) == ("t", expected)  # the same tier: the same node shape
    assert fell_back(tier_capacity, s.capacity_type) == (expected != tier_capacity)


def test_the_fallback_keeps_the_range_s_size_and_climbs_the_ladder_as_before():
    p = placement()
    spot, od = p.size(16000, PROFILE, n_oom=1), p.size(16000, PROFILE, n_oom=1, n_disrupted=3)
    assert dataclasses.replace(od, capacity_type="spot") == spot


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_a_bad_reclaims_before_on_demand_is_refused_naming_it(bad):
    with pytest.raises(ConfigError, match="reclaims_before_on_demand"):
        SizingPolicy(reclaims_before_on_demand=bad)


def test_the_cost_splits_by_the_capacity_each_attempt_bought():
    p = placement()
    # 5 GiB of a 10 GiB node (share 0.5) for 2 h: $0.40 on spot, $1.00 on-demand.
    uses = [
        Use("t", 5 * GiB, 7200.0, capacity_type="spot"),
        Use("t", 5 * GiB, 7200.0, capacity_type="on-demand"),  # moved by its reclaims
        Use("t", 5 * GiB, 7200.0),  # an old record without the field: its tier's
    ]
    c = mission_cost(uses, p)
    assert c.spot_dollars == pytest.approx(0.8)
    assert c.on_demand_dollars == pytest.approx(1.0)
    assert c.fallback_dollars == pytest.approx(1.0)
    assert c.dollars == pytest.approx(1.8)
    assert c.all_on_demand_dollars == pytest.approx(3.0)
    on_demand_tier = mission_cost([Use("t", 5 * GiB, 7200.0, capacity_type="on-demand")], placement(3, "on-demand"))
    assert (on_demand_tier.on_demand_dollars, on_demand_tier.fallback_dollars) == (pytest.approx(1.0), 0.0)


def test_the_what_if_states_the_on_demand_premium_per_fallen_back_range():
    ranges = [LedgerRange(1, 16000)]
    est = estimates(ranges, PROFILE, placement())
    w = fallback_what_if(est, placement(), reclaim_share=0.1)
    # 2 GiB x 1.25 + 1 GiB = 3.5 of the node's 10 GiB (over 1 of its 4 CPUs), for 1 h, at $1 - $0.40.
    assert w.premium_per_range_usd == w.max_premium_usd == pytest.approx(0.35 * 0.6)
    assert w.expected_ranges == pytest.approx(0.001)  # 1 range x 0.1 ** 3
    assert "after 3 reclaims" in w.line() and "0.21 USD more" in w.line()
    off = fallback_what_if(est, placement(0))
    assert off.expected_usd == 0 and "off" in off.line()
