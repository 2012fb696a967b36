"""Numbers an operator reads at a glance in the Dagster UI: memory in MiB or GiB, and a preview of a
table in Markdown (three significant digits, thousands separated, the rest left to the Parquet file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from catchup_assets.core.forecast.forecast import significant
from catchup_assets.core.text import markdown_table as text_markdown_table
from catchup_assets.core.units import GiB, MiB

PREVIEW_ROWS = 12


def mib(n: int | float | None) -> float | None:
    """Bytes as MiB, to a tenth: a range's memory reads as what the sizing asked for."""
    return None if n is None else round(n / MiB, 1)


def gib(n: int | float | None) -> float | None:
    return None if n is None else significant(n / GiB)


def reading(x: float | None) -> float | None:
    """A figure an operator compares with the CLI's summary: to the hundredth from 1 up (287.93 USD,
    as the summary prints it), else three significant digits (a small figure never reads as 0)."""
    if x is None:
        return None
    return round(x, 2) if abs(x) >= 1 else significant(x, 3)


def in_mib(rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> list[dict[str, Any]]:
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
