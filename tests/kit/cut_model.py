"""The cut's test profile: 40 grid ranges, 30 old ones of 100 s, then slower toward the tip, the tip 20000 s."""

from __future__ import annotations

from catchup_assets.core.forecast.ledger_cost import LedgerCost
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.measures import RangeMeasure
from catchup_assets.core.units import GiB

SPAN = MissionSpan(1, 40 * 16000, 16000)


def cost_model() -> LedgerCost:
    """The profile's ledger cost, with 300 s of setup at the tip."""
    grid = plan_ranges(SPAN)
    secs = [100.0] * 30 + [1000.0 * 2**i for i in range(9)] + [20000.0]
    return LedgerCost.from_measures(
        [RangeMeasure(r.last, GiB, None, s, None, r.first) for r, s in zip(grid, secs, strict=True)], 300.0
    )
