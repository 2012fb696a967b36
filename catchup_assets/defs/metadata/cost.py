"""Dollars in the metadata (issue 15): a mission's cost predicted and actual, a tier map's, a fitted ladder's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from catchup_assets.core.size.scale import FULL, Scale
from catchup_assets.defs.metadata.tables import markdown_table, reading


def cost_metadata(cost, placement, prefix: str) -> dict[str, Any]:
    """A mission's dollars (`prefix`: predicted_ or actual_): total, spot and on-demand, flat sizing, per tier.

    In the seconds of the uses priced: a demo's are production's when its caller scaled them (see `scale`)."""
    from catchup_assets.core.forecast.cost import COST_NOTE, cost_rows

    if cost is None:
        return {f"{prefix}cost": "no previous profile: no prediction of cost"}
    rows = cost_rows(cost, placement)
    return {
        f"{prefix}cost_usd": reading(cost.dollars),
        f"{prefix}spot_usd": reading(cost.spot_dollars),
        f"{prefix}on_demand_usd": reading(cost.on_demand_dollars),
        f"{prefix}all_on_demand_usd": reading(cost.all_on_demand_dollars),
        # Of on_demand_usd: attempts their range's reclaims moved off a spot tier (reclaims_before_on_demand).
        f"{prefix}on_demand_fallback_usd": reading(cost.fallback_dollars),
        f"{prefix}flat_cost_usd": reading(cost.flat_dollars),
        f"{prefix}cost_ratio_to_flat": None if cost.ratio is None else round(cost.ratio, 3),
        f"{prefix}cost_per_tier": markdown_table(rows, list(rows[0])),
        "cost_leaves_out": COST_NOTE,
    }


def mission_cost_metadata(records, plan_rows, placement, scale: Scale = FULL) -> dict[str, Any]:
    """After a mission: what its attempts cost (retries and failures included) next to what its plan predicted.

    The demo's summary (`mission.report.summarize`) computes them, so the UI and the CLI print one figure."""
    from catchup_assets.mission.report import summarize

    rows = list(plan_rows)
    summary = summarize("", records, placement, len(rows), time_scale=scale.time, plan_rows=rows)
    return {
        **cost_metadata(summary.cost, placement, "actual_"),
        "actual_node_hours": reading(summary.node_hours),
        "actual_compute_hours": reading(summary.compute_hours),
        "actual_memory_requested_gib": reading(scale.gib(summary.memory_requested_bytes)),
        **cost_metadata(summary.predicted, placement, "predicted_"),
    }


def tier_map_cost_metadata(rows: Sequence[dict[str, Any]], placement, scale: Scale = FULL) -> dict[str, Any]:
    """What the next mission's first attempts cost on this tier map, at this mission's seconds (production's)."""
    from catchup_assets.core.forecast.cost import Use, mission_cost

    rows = scale.rows(rows)
    uses = [Use(r["tier"], r["memory_request_bytes"] or 0, r["seconds"]) for r in rows if r["seconds"] is not None]
    return cost_metadata(mission_cost(uses, placement) if uses else None, placement, "next_mission_")


def ladder_metadata(mission: str, out, current, scale: Scale = FULL) -> dict[str, Any]:
    """tier_ladder's metadata: the fitted ladder's values and cost beside the ladder in use (fitted on
    production seconds: build_tier_ladder's time_scale)."""
    from catchup_assets.core.forecast.fit import comparison_rows

    fit = out.fit
    rows = comparison_rows(
        [("in use", current, *out.current), ("fitted", fit.placement, fit.cost, fit.forecast)], scale.memory
    )
    meta = {
        "mission": mission,
        "tier_ladder_path": dg.MetadataValue.path(out.url),
        "values": dg.MetadataValue.md(f"```yaml\n{out.values}```"),
        "comparison": markdown_table(rows, list(rows[0])),
        "fitted_cost_usd": reading(fit.cost.dollars),
        "in_use_cost_usd": reading(out.current[0].dollars),
        "flat_cost_usd": reading(fit.cost.flat_dollars),
        "fitted_cost_ratio_to_flat": None if fit.cost.ratio is None else round(fit.cost.ratio, 3),
        "predicted_makespan_hours": reading(fit.forecast.makespan_seconds / 3600),
        "makespan_within_tolerance": fit.within_tolerance,
    }
    return meta | ({"scale": scale.label()} if scale.label() else {})
