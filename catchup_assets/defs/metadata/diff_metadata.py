"""profile_diff's metadata: the band table, the regressions, both stellar-cores and a plot."""

from __future__ import annotations

from typing import Any

import dagster as dg

from catchup_assets.core.units import GiB
from catchup_assets.defs.metadata.plots import figure, png_markdown


def _rounded(value, digits: int):
    return None if value is None else round(value, digits)


def profile_diff_plot(diff, memory_scale: float = 1.0) -> dg.MetadataValue:
    """Memory requested per band, A beside B; below, the B/A ratios per band against 1 and the threshold."""
    from catchup_assets.core.aggregate.diff_display import memory_unit

    name, size = memory_unit(diff, memory_scale)
    bands = diff.bands
    xs = list(range(len(bands)))
    fig, axes = figure(2)
    ax1, ax2 = axes[0][0], axes[1][0]

    def mem(column: str) -> list[float]:
        return [(b[column] or 0) / memory_scale / size for b in bands]

    ax1.bar([x - 0.2 for x in xs], mem("requested_a_bytes"), width=0.4, color="#9aa5b1", label=f"A {diff.a.name}")
    ax1.bar([x + 0.2 for x in xs], mem("requested_b_bytes"), width=0.4, color="#4a7bb7", label=f"B {diff.b.name}")
    ax1.set_ylabel(f"requested ({name})")
    ax1.set_title("memory requested per band (completed attempts and OOM rungs)")
    ax1.legend(fontsize="small")
    for column, label, marker in (
        ("requested_ratio", "requested", "o"),
        ("peak_ratio_median", "peak (median)", "s"),
        ("seconds_ratio", "time per ledger", "^"),
    ):
        ax2.plot(xs, [b[column] if b[column] is not None else float("nan") for b in bands], marker=marker, label=label)
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.axhline(diff.threshold, color="#c0392b", linewidth=0.8, linestyle="--", label=f"threshold {diff.threshold:g}")
    ax2.set_ylabel("B / A")
    ax2.set_xlabel("band (million ledgers)")
    ax2.legend(fontsize="small", ncol=4, loc="best")
    ax1.set_xticks(xs)
    ax1.set_xticklabels([])
    ax2.set_xticks(xs)
    ax2.set_xticklabels([b["band"] for b in bands], rotation=45, fontsize="small")
    return png_markdown(fig)


def profile_diff_metadata(mission: str, out, memory_scale: float = 1.0) -> dict[str, Any]:
    """The band table and the regressions in Markdown, the totals as numbers, the images by name.

    Memory in GiB of production figures (divided by `memory_scale`, as the profile's plot is).
    """
    from catchup_assets.core.aggregate.diff_display import (
        display_rows,
        image_text,
        legend,
        regression_rows,
        summary_lines,
    )
    from catchup_assets.core.text import markdown_table

    diff = out.diff
    if diff is None:
        return {"mission": mission, "compared_with": out.note, "image": image_text(out.image)}
    unit = ("GiB", GiB)
    totals = diff.totals
    columns, rows = display_rows(diff, memory_scale, unit)
    rcolumns, rrows = regression_rows(diff, memory_scale, unit)
    regressions = markdown_table(rcolumns, rrows[:50]) if rrows else "none"
    if len(rrows) > 50:
        regressions += f"\n\n{len(rrows) - 50} more"

    def gib(value):
        return None if value is None else round(value / memory_scale / GiB, 1)

    meta: dict[str, Any] = {
        "mission": mission,
        "compared_with": out.note,
        "a_mission": diff.a.name,
        "b_mission": diff.b.name,
        "a_image": image_text(diff.a.image),
        "b_image": image_text(diff.b.image),
        "band_ledgers": diff.band_ledgers,
        "threshold": diff.threshold,
        "ranges_compared": diff.compared,
        # How the ranges met: by key (the same range in both) and, where the cuts differ, by band.
        "ranges_matched_by_key": diff.compared,
        "ranges_matched_by_band": dg.MetadataValue.json({"a": diff.by_band.get("a", 0), "b": diff.by_band.get("b", 0)}),
        "left_out": dg.MetadataValue.json(diff.left_out),
        "requested_a_gib": gib(totals["requested_a_bytes"]),
        "requested_b_gib": gib(totals["requested_b_bytes"]),
        "requested_ratio": _rounded(totals["requested_ratio"], 2),
        "peak_ratio_median": _rounded(totals["peak_ratio_median"], 2),
        "seconds_ratio": _rounded(totals["seconds_ratio"], 2),
        "regressed_ranges": totals["regressed"],
        "new_ooms": dg.MetadataValue.json(diff.new_ooms),
        "bands": dg.MetadataValue.md(
            "\n\n".join(summary_lines(diff))
            + "\n\n"
            + markdown_table(columns, rows)
            + "\n\n"
            + legend(diff, memory_scale, unit)
        ),
        "regressions": dg.MetadataValue.md(f"Past {diff.threshold:g}x, and new OOMs:\n\n{regressions}"),
        "profile_diff_path": dg.MetadataValue.path(out.url),
    }
    if diff.bands:
        meta["plot"] = profile_diff_plot(diff, memory_scale)
    # A None is not a metadata value: a figure that is not known is left out, not shown as 0.
    return {k: v for k, v in meta.items() if v is not None}
