"""Predict a mission's makespan and node-hours from the previous profile, before it launches.

Pure. The dispatcher fills every free slot with the next range in dispatch
order, so with each range's predicted seconds the mission is a list schedule:
a heap of slot free-times, one pop and push per range. The prediction leaves
out retries (reclaims, OOMs) and node start-up; `tests/core/test_forecast.py` holds
it to the real dispatcher replaying the same ranges in simulated time.

A range the profile does not cover takes the seconds of the nearest measured
range above it (the sizer's own lookup, L25), or above the profile's top (new
history since) the top range's: recent ledgers are the heaviest. With no
profile there is no forecast.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.forecast.cost import Use, node_share, significant
from catchup_assets.core.size.catalog import SPOT
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.ledger_range import LedgerRange

WHAT_IF_FACTORS = (0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Forecast:
    slots: int
    makespan_seconds: float
    lower_bound_seconds: float  # max(longest range, total work / slots)
    node_hours: float  # node time the ranges pay for: seconds x node share (cost.node_share)
    work_hours: float  # sum of predicted range seconds
    longest_seconds: float
    ranges: int
    estimated: int  # ranges without their own measurement (seconds borrowed from above)

    @property
    def ratio(self) -> float:
        return self.makespan_seconds / self.lower_bound_seconds if self.lower_bound_seconds else 1.0


@dataclass(frozen=True)
class RangeEstimate:
    key: str
    seconds: float
    node_share: float  # the share of its tier's node the range pays for (cost.node_share)
    measured: bool  # the profile has this very range
    tier: str = ""
    memory_request_bytes: int = 0
    cpu_request: float = 0.0

    def use(self) -> Use:
        """The range as the cost model prices it."""
        return Use(self.tier, self.memory_request_bytes, self.seconds, self.cpu_request)


def estimates(
    ordered: Sequence[LedgerRange],
    profile: ProfileIndex | None,
    placement: Placement,
) -> list[RangeEstimate] | None:
    """Predicted seconds and node share of each range in dispatch order; None if none is measured."""
    if profile is None or not len(profile):
        return None
    top = profile.top()
    out = []
    for r in ordered:
        s = placement.size(r.last, profile, first_ledger=r.first)
        m = profile.lookup_span(r.first, r.last) or top
        seconds = m.seconds if m is not None and m.seconds is not None else top.seconds if top else None
        if seconds is None:
            return None  # no seconds to borrow: the profile cannot time a mission
        tier = placement.tiers.by_name(s.tier)
        share = node_share(tier, placement.shape_of(s.tier), s.memory_request_bytes, s.cpu_request)
        own = m is not None and m.last_ledger == r.last and m.first_ledger in (None, r.first)
        measured = own and m.seconds is not None
        out.append(RangeEstimate(r.key, float(seconds), share, measured, s.tier, s.memory_request_bytes, s.cpu_request))
    return out


def list_schedule(seconds: Sequence[float], slots: int) -> float:
    """When the last of `seconds` ends if each starts, in order, in the first free slot."""
    if slots < 1:
        raise ConfigError(f"slots must be >= 1, got {slots}")
    free = [0.0] * min(slots, len(seconds))
    heapq.heapify(free)
    end = 0.0
    for s in seconds:
        t = heapq.heappop(free) + s
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def forecast(est: Sequence[RangeEstimate], slots: int) -> Forecast:
    secs = [e.seconds for e in est]
    work = sum(secs)
    longest = max(secs, default=0.0)
    return Forecast(
        slots=slots,
        makespan_seconds=list_schedule(secs, slots),
        lower_bound_seconds=max(longest, work / slots),
        node_hours=sum(e.seconds * e.node_share for e in est) / 3600,
        work_hours=work / 3600,
        longest_seconds=longest,
        ranges=len(est),
        estimated=sum(1 for e in est if not e.measured),
    )


def what_if(est: Sequence[RangeEstimate], slots: int, factors: Sequence[float] = WHAT_IF_FACTORS) -> list[Forecast]:
    """The forecast at `slots` times each factor (at least one slot each)."""
    seen, out = set(), []
    for f in factors:
        n = max(1, round(slots * f))
        if n not in seen:
            seen.add(n)
            out.append(forecast(est, n))
    return out


def forecast_rows(forecasts: Sequence[Forecast], configured: int) -> list[dict]:
    """The what-if table as rows (for metadata and the command line)."""
    return [
        {
            "slots": f.slots,
            "note": "configured" if f.slots == configured else "",
            "makespan_h": significant(f.makespan_seconds / 3600),
            "lower_bound_h": significant(f.lower_bound_seconds / 3600),
            "makespan/bound": round(f.ratio, 3),
            "node_hours": significant(f.node_hours),
        }
        for f in forecasts
    ]


def lengths_rows(cut: Sequence[Forecast], uniform: Sequence[Forecast], configured: int) -> list[dict]:
    """The what-if of a profile cut beside the uniform grid's, slot count by slot count (issue 25 item 4)."""
    grid = {f.slots: f for f in uniform}
    return [
        {
            "slots": f.slots,
            "note": "configured" if f.slots == configured else "",
            "profile_makespan_h": significant(f.makespan_seconds / 3600),
            "uniform_makespan_h": significant(grid[f.slots].makespan_seconds / 3600),
            "profile_node_hours": significant(f.node_hours),
            "uniform_node_hours": significant(grid[f.slots].node_hours),
            "profile_ranges": f.ranges,
            "uniform_ranges": grid[f.slots].ranges,
        }
        for f in cut
        if f.slots in grid
    ]


# Share of spot attempts a reclaim ends, as the seed's missions saw it (docs/cost.md: ~7%).
RECLAIM_SHARE = 0.07


@dataclass(frozen=True)
class FallbackWhatIf:
    """What the on-demand fallback (size/capacity.py) would cost: ranges moved, and their premium."""

    reclaims: int  # the policy's threshold; 0: the fallback is off
    reclaim_share: float  # chance a spot attempt is reclaimed, taken independent per attempt
    spot_ranges: int  # ranges on spot tiers: the ones that can fall back
    premium_per_range_usd: float  # mean extra of running a spot range whole on on-demand
    max_premium_usd: float  # the dearest range's: the long tail, the ranges a reclaim costs most
    expected_ranges: float  # spot_ranges x reclaim_share ** reclaims
    expected_usd: float  # their premium, a range that falls back taken to rerun whole (an upper bound)

    def line(self) -> str:
        if not self.reclaims:
            return "on-demand fallback: off (reclaims_before_on_demand 0): a reclaimed range stays on spot"
        return (
            f"on-demand fallback after {self.reclaims} reclaims: a range moved there costs "
            f"{self.premium_per_range_usd:,.2f} USD more than on spot (mean; the dearest {self.max_premium_usd:,.2f}; "
            f"run whole); at "
            f"{self.reclaim_share:.0%} of spot attempts reclaimed, ~{significant(self.expected_ranges, 2):g} of "
            f"{self.spot_ranges} spot ranges fall back: ~{self.expected_usd:,.2f} USD at most"
        )


def fallback_what_if(
    est: Sequence[RangeEstimate], placement: Placement, reclaim_share: float = RECLAIM_SHARE
) -> FallbackWhatIf:
    """The fallback's premium per range and expected at `reclaim_share`, from the plan's estimates."""
    premiums = []
    for e in est:
        if placement.tiers.by_name(e.tier).capacity_type == SPOT:
            shape = placement.shape_of(e.tier)
            premiums.append(e.node_share * (shape.on_demand_hourly - shape.spot_hourly) * e.seconds / 3600)
    k = placement.sizing.reclaims_before_on_demand
    p = reclaim_share**k if k else 0.0
    mean = sum(premiums) / len(premiums) if premiums else 0.0
    dearest = max(premiums, default=0.0)
    return FallbackWhatIf(k, reclaim_share, len(premiums), mean, dearest, len(premiums) * p, p * sum(premiums))
