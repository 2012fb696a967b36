"""`mission_plan`'s metadata: the plan at a glance, and the planner's prediction with its what-if table."""

from __future__ import annotations

from collections import Counter
from typing import Any

import dagster as dg

from catchup_assets.core.size.forecast import significant
from catchup_assets.defs.metadata.tables import gib, in_mib, markdown_table


def forecast_metadata(cfg, forecasts) -> dict[str, Any]:
    """The planner's prediction at the configured parallelism, and the what-if table."""
    from catchup_assets.core.size.forecast import forecast_rows

    mine = next((f for f in forecasts if f.slots == cfg.parallelism), None)
    if mine is None:
        return {"forecast": "no previous profile: no prediction of makespan or node-hours"}
    rows = forecast_rows(forecasts, cfg.parallelism)
    return {
        "predicted_makespan_hours": significant(mine.makespan_seconds / 3600),
        "makespan_lower_bound_hours": significant(mine.lower_bound_seconds / 3600),
        "predicted_node_hours": significant(mine.node_hours),
        "estimated_ranges": dg.MetadataValue.int(mine.estimated),
        "what_if": markdown_table(rows, list(rows[0])),
    }


def plan_metadata(
    cfg,
    prepared,
    plan_url: str,
    new_keys: list[str],
    superseded: list[str],
    deleted: list[str],
    forecasts=(),
    scale: str | None = None,
) -> dict[str, Any]:
    rows = prepared.plan.to_pylist()
    tiers = Counter(r["tier"] for r in rows)
    predicted = [r["predicted_seconds"] for r in rows if r["predicted_seconds"] is not None]
    meta: dict[str, Any] = {
        "mission": cfg.mission,
        "plan_path": dg.MetadataValue.path(plan_url),
        "ranges": len(rows),
        "first_ledger": cfg.span.first_ledger,
        "last_ledger": cfg.span.last_ledger,
        "ledgers_per_range": cfg.span.ledgers_per_range,
        "order": cfg.order,
        "parallelism": cfg.parallelism,
        "profiled_ranges": sum(1 for r in rows if r["profiled"]),
        "previous_profile": prepared.previous.source or "",
        "ranges_per_tier": dg.MetadataValue.json(dict(sorted(tiers.items()))),
        "memory_requested_gib": gib(sum(r["memory_request_bytes"] or 0 for r in rows)),
        "predicted_work_hours": significant(sum(predicted) / 3600),
        "new_partitions": len(new_keys),
        # Superseded partitions with history stay, marked; only those never run are deleted.
        "superseded_partitions": dg.MetadataValue.json(superseded),
        "deleted_partitions": dg.MetadataValue.json(deleted),
        **forecast_metadata(cfg, forecasts),
        "preview": markdown_table(
            in_mib(rows, ["memory_request_bytes"]),
            ["dispatch_rank", "range_key", "catchup", "tier", "memory_request_mib", "predicted_seconds"],
        ),
    }
    from catchup_assets.mission.plan import fallback_forecast

    if forecasts and (fallback := fallback_forecast(prepared)) is not None:
        meta["on_demand_fallback"] = fallback.line()  # beside the what-if: what reclaims moved to on-demand cost
    if scale:
        meta["scale"] = scale
    return meta
