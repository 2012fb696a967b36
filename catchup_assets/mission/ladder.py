"""Fit the tier ladder to a mission's profile -> tier_ladder.yaml (chart values), against the current ladder."""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.forecast.cost import MissionCost
from catchup_assets.core.forecast.fit import FitResult, FitSettings, chart_values, evaluate, fit_ladder, profile_ranges
from catchup_assets.core.forecast.forecast import Forecast
from catchup_assets.core.size.catalog import DEFAULT_CATALOG
from catchup_assets.core.size.scale import Scale
from catchup_assets.core.size.sizing import Placement
from catchup_assets.mission.plan import require_plan
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table


@dataclass
class LadderOutput:
    fit: FitResult
    current: tuple[MissionCost, Forecast]  # the deployment's own ladder on the same ranges
    values: str  # the chart values of the fitted ladder, in production GiB
    url: str


def build_tier_ladder(
    storage_root: str,
    mission: str,
    placement: Placement,
    slots: int,
    memory_scale: float = 1.0,
    time_scale: float = 1.0,
) -> LadderOutput:
    """The ladder fitted to the mission's profile -> tier_ladder.yaml (chart values), against the current one.

    `time_scale`: production seconds per measured second (a simulated stellar-core's speed), so the
    costs and makespans compared are production's, as the demo's summary prints them."""
    store = Store(storage_root)
    require_plan(store, mission)
    rows = Scale(time=time_scale).rows(read_table(store, layout.profile(mission)).to_pylist())
    ranges, index = profile_ranges(rows)
    # A scaled-down deployment (the demo) fits on a grid scaled alike, so its cuts are production's.
    settings = FitSettings(step_bytes=max(1, int(FitSettings().step_bytes * memory_scale)))
    fit = fit_ladder(ranges, index, placement, placement.catalog, slots, settings)
    custom = placement.catalog != DEFAULT_CATALOG.scaled(memory_scale)
    values = (
        f"# The tier ladder fitted to mission {mission}'s profile ({len(ranges)} ranges; docs/cost.md).\n"
        f"# Predicted cost {fit.cost.dollars:,.2f} USD against {fit.cost.flat_dollars:,.2f} flat, at this mission's\n"
        f"# measured seconds x {time_scale:g} (production's). Apply with\n"
        "# helm upgrade ... -f tier_ladder.yaml\n" + chart_values(fit.placement, memory_scale, with_catalog=custom)
    )
    rel = layout.tier_ladder(mission)
    store.write_bytes(rel, values.encode())
    return LadderOutput(fit, evaluate(ranges, index, placement, slots), values, store.url(rel))
