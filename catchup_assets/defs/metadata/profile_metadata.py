"""`range_profile`'s and `tier_map`'s metadata: counts, the KPIs of sizing, inline sparklines, a plot and a preview."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import dagster as dg

from catchup_assets.core.size.scale import FULL, Scale
from catchup_assets.core.units import GiB
from catchup_assets.defs.metadata.plots import figure, png_markdown, profile_plot, spark_metadata
from catchup_assets.defs.metadata.tables import in_mib, markdown_table, reading


def profile_metadata(mission: str, out, plan_keys: set[str], scale: Scale = FULL) -> dict[str, Any]:
    """Times at production scale (`scale.time`), memory in production GiB in the plots; the preview's MiB
    are the deployment's own (what its pods requested), as `scale` says."""
    rows = scale.rows(out.profile.to_pylist())
    meta: dict[str, Any] = {
        "mission": mission,
        "profile_path": dg.MetadataValue.path(out.url),
        "profiled_ranges": len(rows),
        "planned_ranges": len(plan_keys),
        "unmeasured_ranges": len(out.unmeasured),
        "ooms": sum(r["oom_count"] for r in rows),
        "compute_hours": reading(sum(r["seconds"] or 0 for r in rows) / 3600),
        "preview": markdown_table(
            in_mib(sorted(rows, key=lambda r: -(r["seconds"] or 0)), ["peak_anon_bytes", "peak_working_set_bytes"]),
            ["range_key", "peak_anon_mib", "peak_working_set_mib", "seconds", "attempts", "outcomes"],
        ),
    }
    if rows:
        production = " (production scale)" if scale.memory != 1 else ""
        meta["memory_by_ledger"] = spark_metadata(
            rows, "peak_anon_bytes", scale.memory * GiB, "GiB", "peak anon memory" + production
        )
        meta["hours_by_ledger"] = spark_metadata(rows, "seconds", 3600, "h", "compute time")
        meta["plot"] = profile_plot(rows, scale.memory)
    if scale.label():
        meta["scale"] = scale.label()
    meta["preview"] = meta.pop("preview")  # the inline plots first, the long table last
    return meta


def kpi_metadata(records, placement, scale: Scale = FULL) -> dict[str, Any]:
    """The KPIs of sizing (core/aggregate/kpis.py, docs/cost.md) as fractions, and their table beside Autopilot's."""
    from catchup_assets.core.aggregate.kpis import AUTOPILOT, kpi_rows, sizing_kpis
    from catchup_assets.core.text import markdown_table as text_table

    def markdown_table_text(rows: list[dict[str, str]]) -> str:
        columns = ["kpi", "value", "against"]
        return text_table(columns, [[r[c] for c in columns] for r in rows])

    k = sizing_kpis(records, placement, scale.time)

    def fraction(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    return {
        "memory_slack": fraction(k.memory_slack),
        "memory_slack_median_range": fraction(k.median_range_slack),
        "memory_slack_by_tier": dg.MetadataValue.json({t: fraction(s) for t, s in k.slack_by_tier.items()}),
        "oom_hit_share": fraction(k.oom_hit_share),
        "first_attempt_success": fraction(k.first_attempt_success),
        "cost_efficiency": fraction(k.cost_efficiency),
        "kpis": dg.MetadataValue.md(f"{markdown_table_text(kpi_rows(k))}\n\n{AUTOPILOT}"),
    }


def tier_map_metadata(mission: str, rows: Sequence[dict[str, Any]], url: str, catchup) -> dict[str, Any]:
    scale = catchup.scale()
    rows = scale.rows(rows)
    counts = Counter(r["tier"] for r in rows)
    order = [t.name for t in catchup.placement().tiers.all()]
    names = [n for n in order if counts.get(n)]
    fig, ax = figure(1)
    ax = ax[0][0]
    ax.bar(names, [counts[n] for n in names], color="#5a9e6f")
    ax.set_ylabel("ranges")
    ax.set_title("ranges per tier next mission")
    return {
        "mission": mission,
        "tier_map_path": dg.MetadataValue.path(url),
        "ranges": len(rows),
        "ranges_per_tier": dg.MetadataValue.json({n: counts[n] for n in names}),
        "node_hours": reading(sum(r["node_hours"] or 0 for r in rows)),
        "unprofiled_ranges": sum(1 for r in rows if not r["profiled"]),
        "plot": png_markdown(fig),
        "preview": markdown_table(
            in_mib(rows, ["memory_request_bytes"]),
            ["range_key", "tier", "memory_request_mib", "seconds", "node_hours"],
        ),
    } | ({"scale": scale.label()} if scale.label() else {})
