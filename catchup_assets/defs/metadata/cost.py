"""Dollars in the metadata (issue 15): a mission's cost predicted and actual, a tier map's, a fitted ladder's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from catchup_assets.core.size.forecast import significant
from catchup_assets.defs.metadata.tables import markdown_table


def cost_metadata(cost, placement, prefix: str) -> dict[str, Any]:
    """A mission's dollars (`prefix`: predicted_ or actual_): total, spot and on-demand, flat sizing, per tier.

    In the deployment's own seconds: a demo's are its scaled-down ones (see `scale`)."""
    from catchup_assets.core.size.cost import COST_NOTE, cost_rows

    if cost is None:
        return {f"{prefix}cost": "no previous profile: no prediction of cost"}
    rows = cost_rows(cost, placement)
    return {
        f"{prefix}cost_usd": significant(cost.dollars),
        f"{prefix}spot_usd": significant(cost.spot_dollars),
        f"{prefix}on_demand_usd": significant(cost.on_demand_dollars),
        f"{prefix}all_on_demand_usd": significant(cost.all_on_demand_dollars),
        # Of on_demand_usd: attempts their range's reclaims moved off a spot tier (reclaims_before_on_demand).
        f"{prefix}on_demand_fallback_usd": significant(cost.fallback_dollars),
        f"{prefix}flat_cost_usd": significant(cost.flat_dollars),
        f"{prefix}cost_ratio_to_flat": None if cost.ratio is None else round(cost.ratio, 3),
        f"{prefix}cost_per_tier": markdown_table(rows, list(rows[0])),
        "cost_leaves_out": COST_NOTE,
    }


def mission_cost_metadata(records, plan_rows, placement) -> dict[str, Any]:
    """After a mission: what its attempts cost (retries and failures included) next to what its plan predicted."""
    from catchup_assets.core.size.cost import mission_cost
    from catchup_assets.mission.report import attempt_uses, plan_uses

    predicted = plan_uses(plan_rows)
    return {
        **cost_metadata(mission_cost(attempt_uses(records), placement), placement, "actual_"),
        **cost_metadata(None if predicted is None else mission_cost(predicted, placement), placement, "predicted_"),
    }


def tier_map_cost_metadata(rows: Sequence[dict[str, Any]], placement) -> dict[str, Any]:
    """What the next mission's first attempts cost on this tier map, at this mission's seconds."""
    from catchup_assets.core.size.cost import Use, mission_cost

    uses = [Use(r["tier"], r["memory_request_bytes"] or 0, r["seconds"]) for r in rows if r["seconds"] is not None]
    return cost_metadata(mission_cost(uses, placement) if uses else None, placement, "next_mission_")


def ladder_metadata(mission: str, out, current, memory_scale: float) -> dict[str, Any]:
    """tier_ladder's metadata: the fitted ladder's values and cost beside the ladder in use."""
    from catchup_assets.core.size.fit import comparison_rows

    fit = out.fit
    rows = comparison_rows(
        [("in use", current, *out.current), ("fitted", fit.placement, fit.cost, fit.forecast)], memory_scale
    )
    return {
        "mission": mission,
        "tier_ladder_path": dg.MetadataValue.path(out.url),
        "values": dg.MetadataValue.md(f"```yaml\n{out.values}```"),
        "comparison": markdown_table(rows, list(rows[0])),
        "fitted_cost_usd": significant(fit.cost.dollars),
        "in_use_cost_usd": significant(out.current[0].dollars),
        "flat_cost_usd": significant(fit.cost.flat_dollars),
        "fitted_cost_ratio_to_flat": None if fit.cost.ratio is None else round(fit.cost.ratio, 3),
        "predicted_makespan_hours": significant(fit.forecast.makespan_seconds / 3600),
        "makespan_within_tolerance": fit.within_tolerance,
    }
