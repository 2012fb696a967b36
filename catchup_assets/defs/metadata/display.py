"""Materialization metadata an operator reads at a glance in the Dagster UI.

Numbers as numbers, paths as paths, a table preview in Markdown and, for the
profile and the tier map, a plot embedded as a PNG (people would rather look
than read).
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

import dagster as dg

from catchup_assets.core.size.forecast import significant
from catchup_assets.core.text import markdown_table as text_markdown_table
from catchup_assets.core.units import GiB, MiB

PREVIEW_ROWS = 12


def _png_markdown(fig) -> dg.MetadataValue:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return dg.MetadataValue.md(f"![plot](data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()})")


def _figure(nrows: int = 1):
    import matplotlib

    matplotlib.use("Agg")  # no display on a code server
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, 1, figsize=(8, 2.6 * nrows), squeeze=False)


def mib(n: int | float | None) -> float | None:
    """Bytes as MiB, to a tenth: a range's memory reads as what the sizing asked for."""
    return None if n is None else round(n / MiB, 1)


def gib(n: int | float | None) -> float | None:
    return None if n is None else significant(n / GiB)


def _in_mib(rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Rows with each `*_bytes` field of `fields` as `*_mib`, for a preview table."""
    return [{**r, **{f[: -len("_bytes")] + "_mib": mib(r.get(f)) for f in fields}} for r in rows]


def markdown_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], limit: int = PREVIEW_ROWS
) -> dg.MetadataValue:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            # Three significant digits: 0.0087 h (the demo's scaled-down ranges) does not read as 0.0.
            return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000:
            return f"{v:,}"
        return "" if v is None else str(v)

    text = text_markdown_table(columns, [[cell(r.get(c)) for c in columns] for r in rows[:limit]])
    if len(rows) > limit:
        text += f"\n\n{len(rows) - limit} more rows in the Parquet file"
    return dg.MetadataValue.md(text)


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
            _in_mib(rows, ["memory_request_bytes"]),
            ["dispatch_rank", "range_key", "catchup", "tier", "memory_request_mib", "predicted_seconds"],
        ),
    }
    if scale:
        meta["scale"] = scale
    return meta


def range_metadata(mission: str, result, adopted: bool) -> dict[str, Any]:
    row = result.row or {}
    meta: dict[str, Any] = {
        "mission": mission,
        "attempts": result.attempts,
        "outcomes": result.outcomes,
        "tier": result.tier or "",
        "memory_limit_mib": mib(result.memory_limit_bytes or 0),
        "recorded_by_earlier_run": adopted,
    }
    for field in ("seconds", "wall_seconds", "tx_apply_seconds"):
        if row.get(field) is not None:
            meta[field] = round(float(row[field]), 1)
    for field in ("seconds_estimated", "tx_apply_count"):
        if row.get(field) is not None:
            meta[field] = row[field]
    for field in ("peak_anon_bytes", "peak_working_set_bytes", "peak_ephemeral_bytes"):
        if row.get(field) is not None:
            meta[field[: -len("_bytes")] + "_mib"] = mib(row[field])
    if result.log_path:
        meta["log_path"] = dg.MetadataValue.path(result.log_path)
    return meta


LOG_TAIL_LINES = 40
LOG_TAIL_MAX_BYTES = 256 * 1024**2  # decompressed: past this, the tail is left to the log itself


def log_tail(url: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of an attempt's gzipped log, read in bounded lines (L29)."""
    import collections
    import gzip

    from catchup_assets.core.measure.logparse import iter_lines
    from catchup_assets.store.io import open_binary

    tail: collections.deque[str] = collections.deque(maxlen=lines)
    read = 0
    try:
        with open_binary(url) as raw, gzip.open(raw) as f:

            def chunks():
                nonlocal read
                while read < LOG_TAIL_MAX_BYTES and (chunk := f.read(1 << 20)):
                    read += len(chunk)
                    yield chunk

            tail.extend(line[:1000] for line in iter_lines(chunks()))
    except Exception as exc:  # noqa: BLE001 - evidence, not a reason to fail the run
        return f"(log {url} not readable: {type(exc).__name__}: {exc})"
    head = "(only the first 256 MiB read) " if read >= LOG_TAIL_MAX_BYTES else ""
    return head + "\n".join(tail)


def failure_metadata(mission: str, result) -> dict[str, Any]:
    """A condemned range's evidence, on its partition: this mission's cause and the log's last lines."""
    meta: dict[str, Any] = {
        "mission": mission,
        "kind": "condemned",  # catchup_assets.defs.ownership reads it
        "cause": result.reason,
        "attempts": result.attempts,
        "outcomes": result.outcomes,
        "tier": result.tier or "",
        "memory_limit_mib": mib(result.memory_limit_bytes or 0),
    }
    if result.log_path:
        meta["log_path"] = dg.MetadataValue.path(result.log_path)
        fence = "`" * 3
        tail = log_tail(result.log_path).replace(fence, "'" * 3)  # a log line cannot close the block
        meta["log_tail"] = dg.MetadataValue.md(
            f"Last {LOG_TAIL_LINES} lines of the last attempt's log:\n\n{fence}\n{tail}\n{fence}"
        )
    return meta


def profile_plot(rows: Sequence[dict[str, Any]], memory_scale: float = 1.0) -> dg.MetadataValue:
    fig, axes = _figure(2)
    ax1, ax2 = axes[0][0], axes[1][0]
    xs = [r["last_ledger"] / 1e6 for r in rows]
    ax1.bar(xs, [r["peak_anon_bytes"] / memory_scale / GiB for r in rows], width=0.8 * _step(xs), color="#4a7bb7")
    ax1.set_ylabel("peak anon (GiB)")
    ax2.bar(xs, [(r["seconds"] or 0) / 3600 for r in rows], width=0.8 * _step(xs), color="#d9843b")
    ax2.set_ylabel("seconds (h)")
    ax2.set_xlabel("range end (million ledgers)")
    return _png_markdown(fig)


SPARKS = "▁▂▃▄▅▆▇█"
SPARK_BINS = 60


def sparkline(points: Sequence[tuple[float, float | None]], bins: int = SPARK_BINS) -> str:
    """(x, y) points as one line of block characters: the highest y in each of `bins` bins of x.

    The Dagster UI shows a Markdown value inline only under 1000 characters, which no PNG
    is: this line is the plot that shows at a glance; the full one is behind its link.
    """
    pts = [(x, y) for x, y in points if y is not None]
    if not pts:
        return ""
    lo, hi = min(x for x, _ in pts), max(x for x, _ in pts)
    n = max(1, min(bins, len({x for x, _ in pts})))
    top: list[float | None] = [None] * n
    for x, y in pts:
        i = 0 if hi == lo else min(n - 1, int((x - lo) / (hi - lo) * n))
        top[i] = y if top[i] is None else max(top[i], y)
    tallest = max(v for v in top if v is not None)
    return "".join(" " if v is None else SPARKS[0 if tallest <= 0 else min(7, int(v / tallest * 8))] for v in top)


def _spark_metadata(rows: Sequence[dict[str, Any]], field: str, scale: float, unit: str, what: str) -> dg.MetadataValue:
    points = [(r["last_ledger"], None if r.get(field) is None else r[field] / scale) for r in rows]
    line = sparkline(points)
    tallest = max((y for _, y in points if y is not None), default=0)
    first, last = min(r["last_ledger"] for r in rows), max(r["last_ledger"] for r in rows)
    return dg.MetadataValue.md(
        f"`{line}`\n\n{what} by range end, ledger {first:,} to {last:,}; tallest {significant(tallest, 3)} {unit}"
    )


def _step(xs: Sequence[float]) -> float:
    s = sorted(set(xs))
    return min((b - a for a, b in zip(s, s[1:], strict=False)), default=1.0)


def profile_metadata(
    mission: str, out, plan_keys: set[str], memory_scale: float, scale: str | None = None
) -> dict[str, Any]:
    rows = out.profile.to_pylist()
    meta: dict[str, Any] = {
        "mission": mission,
        "profile_path": dg.MetadataValue.path(out.url),
        "profiled_ranges": len(rows),
        "planned_ranges": len(plan_keys),
        "unmeasured_ranges": len(out.unmeasured),
        "ooms": sum(r["oom_count"] for r in rows),
        "compute_hours": significant(sum(r["seconds"] or 0 for r in rows) / 3600),
        "preview": markdown_table(
            _in_mib(sorted(rows, key=lambda r: -(r["seconds"] or 0)), ["peak_anon_bytes", "peak_working_set_bytes"]),
            ["range_key", "peak_anon_mib", "peak_working_set_mib", "seconds", "attempts", "outcomes"],
        ),
    }
    if rows:
        production = " (production scale)" if memory_scale != 1 else ""
        meta["memory_by_ledger"] = _spark_metadata(
            rows, "peak_anon_bytes", memory_scale * GiB, "GiB", "peak anon memory" + production
        )
        meta["hours_by_ledger"] = _spark_metadata(rows, "seconds", 3600, "h", "compute time")
        meta["plot"] = profile_plot(rows, memory_scale)
    if scale:
        meta["scale"] = scale
    meta["preview"] = meta.pop("preview")  # the inline plots first, the long table last
    return meta


def tier_map_metadata(mission: str, rows: Sequence[dict[str, Any]], url: str, catchup) -> dict[str, Any]:
    counts = Counter(r["tier"] for r in rows)
    order = [t.name for t in catchup.placement().tiers.all()]
    names = [n for n in order if counts.get(n)]
    fig, ax = _figure(1)
    ax = ax[0][0]
    ax.bar(names, [counts[n] for n in names], color="#5a9e6f")
    ax.set_ylabel("ranges")
    ax.set_title("ranges per tier next mission")
    return {
        "mission": mission,
        "tier_map_path": dg.MetadataValue.path(url),
        "ranges": len(rows),
        "ranges_per_tier": dg.MetadataValue.json({n: counts[n] for n in names}),
        "node_hours": significant(sum(r["node_hours"] or 0 for r in rows)),
        "unprofiled_ranges": sum(1 for r in rows if not r["profiled"]),
        "plot": _png_markdown(fig),
        "preview": markdown_table(
            _in_mib(rows, ["memory_request_bytes"]),
            ["range_key", "tier", "memory_request_mib", "seconds", "node_hours"],
        ),
    }
