"""`mission_plan`'s metadata: the plan at a glance, and the planner's prediction with its what-if table."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import dagster as dg

from catchup_assets.core.redact import redact_url
from catchup_assets.core.size.scale import FULL, Scale
from catchup_assets.defs.metadata.tables import in_mib, markdown_table, reading


def forecast_metadata(cfg, forecasts, scale: Scale = FULL) -> dict[str, Any]:
    """The planner's prediction at the configured parallelism, and the what-if table (production hours)."""
    from catchup_assets.core.forecast.forecast import forecast_rows

    forecasts = _scaled(forecasts, scale)
    mine = next((f for f in forecasts if f.slots == cfg.parallelism), None)
    if mine is None:
        return {"forecast": "no previous profile: no prediction of makespan or node-hours"}
    rows = forecast_rows(forecasts, cfg.parallelism)
    return {
        "predicted_makespan_hours": reading(mine.makespan_seconds / 3600),
        "makespan_lower_bound_hours": reading(mine.lower_bound_seconds / 3600),
        "predicted_node_hours": reading(mine.node_hours),
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
    scale: Scale = FULL,
    uniform=(),
) -> dict[str, Any]:
    """The plan at a glance; hours, GiB and dollars at production scale (`scale`), as the demo's summary."""
    from catchup_assets.core.forecast.cost import mission_cost
    from catchup_assets.defs.metadata.cost import cost_metadata
    from catchup_assets.mission.report import plan_uses

    raw = prepared.plan.to_pylist()
    rows = scale.rows(raw)
    tiers = Counter(r["tier"] for r in rows)
    predicted = [r["predicted_seconds"] for r in rows if r["predicted_seconds"] is not None]
    # The summary's own "predicted (USD)": the plan's first attempts at their predicted seconds.
    uses = plan_uses(raw, scale.time)
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
        "previous_profile": redact_url(prepared.previous.source or ""),
        "ranges_per_tier": dg.MetadataValue.json(dict(sorted(tiers.items()))),
        "memory_requested_gib": reading(scale.gib(sum(r["memory_request_bytes"] or 0 for r in rows))),
        "predicted_work_hours": reading(sum(predicted) / 3600),
        "new_partitions": len(new_keys),
        # Superseded partitions with history stay, marked; only those never run are deleted.
        "superseded_partitions": dg.MetadataValue.json(superseded),
        "deleted_partitions": dg.MetadataValue.json(deleted),
        **forecast_metadata(cfg, forecasts, scale),
        "preview": markdown_table(
            in_mib(rows, ["memory_request_bytes"]),
            ["dispatch_rank", "range_key", "catchup", "tier", "memory_request_mib", "predicted_seconds"],
        ),
    }
    from catchup_assets.mission.plan import fallback_forecast

    if forecasts and (fallback := fallback_forecast(prepared)) is not None:
        meta["on_demand_fallback"] = fallback.line()  # beside the what-if: what reclaims moved to on-demand cost
    meta |= cost_metadata(None if uses is None else mission_cost(uses, cfg.placement), cfg.placement, "predicted_")
    meta |= lengths_metadata(cfg, prepared, forecasts, uniform, scale)
    if forecasts:
        meta |= band_metadata(prepared, scale)
    if scale.label():
        meta["scale"] = scale.label()
    return meta


def band_metadata(prepared, scale: Scale = FULL) -> dict[str, Any]:
    """The expected makespan under runtime and peak spread, with its p10-p90 band (production hours)."""
    from catchup_assets.core.forecast.spread import DEFAULT_MEMORY_SIGMA
    from catchup_assets.mission.plan import forecast_band

    band = forecast_band(prepared, memory_sigma=DEFAULT_MEMORY_SIGMA)
    if band is None:
        return {}
    hours = scale.time / 3600
    return {
        "expected_makespan_hours": reading(band.expected_seconds * hours),
        # Rounded as the expected figure beside it (issue 36: it read "975 - 1.02e+03").
        "makespan_p10_p90_hours": f"{reading(band.p10_seconds * hours):,} - {reading(band.p90_seconds * hours):,}",
        "makespan_spread": f"runtime sigma {band.sigma:.3g} per range, peaks {band.memory_sigma:.3g}; "
        f"{band.draws} seeded draws; ~{band.expected_oom_retries:.1f} OOM retries",
    }


def lengths_metadata(cfg, prepared, forecasts, uniform, scale: Scale = FULL) -> dict[str, Any]:
    """How the span was cut; for a profile cut, its what-if beside the uniform grid's (production hours)."""
    from catchup_assets.core.forecast.forecast import lengths_rows

    choice = prepared.lengths_choice
    note = prepared.lengths_note if choice is None else choice.scaled(scale.time).why()  # production hours
    meta: dict[str, Any] = {"lengths": cfg.lengths + (f" ({note})" if note else "")}
    if cfg.lengths_asked:
        meta["lengths_asked"] = cfg.lengths_asked
    meta |= choice_metadata(choice, scale)
    cut = prepared.cut
    if cut is None:
        return meta
    meta["ranges_cut"] = cut.cut  # grid ranges cut into pieces
    meta["ranges_merged"] = cut.merged  # grid ranges merged into a neighbour
    meta["cut_under_sigma"] = cut.sigma  # the runtime spread the candidate cuts were compared under
    meta["longest_predicted_hours"] = reading(max(cut.seconds) * scale.time / 3600)
    rows = lengths_rows(_scaled(forecasts, scale), _scaled(uniform, scale), cfg.parallelism)
    if rows:
        meta["what_if_lengths"] = markdown_table(rows, list(rows[0]))
    return meta


def choice_metadata(choice, scale: Scale = FULL) -> dict[str, Any]:
    """lengths auto: both plans' forecasts, and what the cut costs beside the time it saves (issue 37 item 4)."""
    from catchup_assets.core.plan.choose_lengths import choice_rows

    if choice is None or choice.cut is None:
        return {}
    choice = choice.scaled(scale.time)
    grid, cut = choice.grid, choice.cut
    rows = choice_rows(choice)
    return {
        "lengths_choice": markdown_table(rows, list(rows[0])),
        "cut_hours_saved": reading((grid.expected_seconds - cut.expected_seconds) / 3600),
        "cut_extra_node_hours": reading(cut.node_hours - grid.node_hours),
        "cut_extra_usd": reading(cut.dollars - grid.dollars),
        "cut_node_hours_ratio": round(choice.node_hours_ratio, 3),
    }


def _scaled(forecasts, scale: Scale):
    # Every time figure of a forecast grows with the seconds it was made from: scaled alike.
    return [
        replace(
            f,
            makespan_seconds=f.makespan_seconds * scale.time,
            lower_bound_seconds=f.lower_bound_seconds * scale.time,
            longest_seconds=f.longest_seconds * scale.time,
            node_hours=f.node_hours * scale.time,
            work_hours=f.work_hours * scale.time,
        )
        for f in forecasts
    ]
