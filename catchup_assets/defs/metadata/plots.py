"""Plots in the Dagster UI: a figure embedded as a PNG in Markdown (people would rather look than
read), and sparklines, the one-line plot the UI shows inline."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

import dagster as dg

from catchup_assets.core.forecast.forecast import significant
from catchup_assets.core.units import GiB


def png_markdown(fig) -> dg.MetadataValue:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return dg.MetadataValue.md(f"![plot](data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()})")


def figure(nrows: int = 1):
    import matplotlib

    matplotlib.use("Agg")  # no display on a code server
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, 1, figsize=(8, 2.6 * nrows), squeeze=False)


def profile_plot(rows: Sequence[dict[str, Any]], memory_scale: float = 1.0) -> dg.MetadataValue:
    fig, axes = figure(2)
    ax1, ax2 = axes[0][0], axes[1][0]
    xs = [r["last_ledger"] / 1e6 for r in rows]
    ax1.bar(xs, [r["peak_anon_bytes"] / memory_scale / GiB for r in rows], width=0.8 * _step(xs), color="#4a7bb7")
    ax1.set_ylabel("peak anon (GiB)")
    ax2.bar(xs, [(r["seconds"] or 0) / 3600 for r in rows], width=0.8 * _step(xs), color="#d9843b")
    ax2.set_ylabel("compute (hours)")
    ax2.set_xlabel("range end (million ledgers)")
    return png_markdown(fig)


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


def spark_metadata(rows: Sequence[dict[str, Any]], field: str, scale: float, unit: str, what: str) -> dg.MetadataValue:
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
