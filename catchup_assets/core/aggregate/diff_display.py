"""A profile diff shown: the same rounded tables and lines for the command line, the notebook and the Dagster UI.

The comparison itself is band_diff.py; this reads its ProfileDiff and only formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from catchup_assets.core.aggregate.band_diff import ProfileDiff
from catchup_assets.core.units import GiB, MiB


def memory_unit(diff: ProfileDiff, scale: float = 1.0) -> tuple[str, int]:
    """GiB, or MiB when every figure is under a GiB (a scaled-down demo)."""
    columns = ("peak_a_max_bytes", "peak_b_max_bytes", "requested_a_bytes", "requested_b_bytes")
    biggest = max((b[c] / scale for b in diff.bands for c in columns if b[c] is not None), default=0)
    return ("GiB", GiB) if biggest >= GiB or biggest == 0 else ("MiB", MiB)


def display_rows(diff: ProfileDiff, scale: float = 1.0, unit: tuple[str, int] | None = None):
    """Column names and rows of strings: memory in `unit` (divided by `scale`: a demo's memory
    x 1/200 reads in production figures), ratios to two decimals, counts as counts.
    `legend(...)` says what the short names mean."""
    name, size = unit or memory_unit(diff, scale)

    def mem(v) -> str:
        return "-" if v is None else f"{v / scale / size:,.1f}"

    def ratio(v) -> str:
        return "-" if v is None else f"{v:.2f}"

    def per_ledger(v) -> str:  # milliseconds, three figures (no exponent at the tip's thousand or more)
        return "-" if v is None else f"{v * 1000:,.0f}" if v >= 1 else f"{v * 1000:.3g}"

    columns = [
        "band",
        "ranges",
        "by band A",
        "by band B",
        "peak A",
        "peak B",
        "peak B/A med",
        "peak B/A max",
        "ms/ledger A",
        "ms/ledger B",
        "time B/A",
        "req A",
        "req B",
        "req B/A",
        "OOM A",
        "OOM B",
        "regressed",
    ]
    rows = []
    for b in [*diff.bands, {"band": "all", **diff.totals}] if diff.bands else []:
        rows.append(
            [
                b["band"],
                str(b["ranges"]),
                str(b["ranges_a_by_band"]),
                str(b["ranges_b_by_band"]),
                mem(b["peak_a_max_bytes"]),
                mem(b["peak_b_max_bytes"]),
                ratio(b["peak_ratio_median"]),
                ratio(b["peak_ratio_max"]),
                per_ledger(b["seconds_per_ledger_a"]),
                per_ledger(b["seconds_per_ledger_b"]),
                ratio(b["seconds_ratio"]),
                mem(b["requested_a_bytes"]),
                mem(b["requested_b_bytes"]),
                ratio(b["requested_ratio"]),
                str(b["ooms_a"]),
                str(b["ooms_b"]),
                str(b["regressed"]),
            ]
        )
    return columns, rows


def legend(diff: ProfileDiff, scale: float = 1.0, unit: tuple[str, int] | None = None) -> str:
    name, _ = unit or memory_unit(diff, scale)
    scaled = "" if scale == 1 else f" (the measured figures x {1 / scale:g})"
    return (
        f"memory in {name}{scaled}. ranges: matched by key (the same range in both), compared range by range; "
        "by band A, B: ranges of each whose key the other lacks (cut otherwise), compared by band; peak: the "
        "band's highest measured peak (anon); peak B/A: per range matched by key, median and max; ms/ledger: "
        "compute seconds over the ledgers their ranges cover (x 1000); time B/A: of the seconds per ledger; req: "
        "memory requested by the attempts that completed and those that OOMed (reclaims left out), B/A only "
        "where every range matched by key; OOM: OOMed attempts; regressed: ranges past the threshold or with a "
        "new OOM"
    )


def regression_rows(diff: ProfileDiff, scale: float = 1.0, unit: tuple[str, int] | None = None):
    name, size = unit or memory_unit(diff, scale)

    def value(what: str, v) -> str:
        if v is None:
            return "-"
        if what == "peak":
            return f"{v / scale / size:,.2f} {name}"
        if what == "seconds":
            return f"{v:,.1f} s" if v >= 10 else f"{v:.3g} s"
        return f"{int(v)} OOM"

    columns = ["range_key", "what", "A", "B", "B/A"]
    rows = [
        [r["range_key"], r["what"], value(r["what"], r["a"]), value(r["what"], r["b"]), _fmt_ratio(r["ratio"])]
        for r in diff.regressions
    ]
    return columns, rows


def _fmt_ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def image_text(image: Mapping[str, Any] | None) -> str:
    """`ref (digest)`, or `unknown` for a mission that recorded none (planned before images were)."""
    if not image or not image.get("image"):
        return "unknown (not recorded)"
    digest = image.get("digest")
    ref = str(image["image"])
    return f"{ref} ({digest})" if digest and digest not in ref else ref


def summary_lines(diff: ProfileDiff) -> list[str]:
    lo = diff.left_out
    left = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in lo.items() if n) or "none"
    by_band = diff.by_band
    lines = [
        f"A  {diff.a.name}  stellar-core {image_text(diff.a.image)}",
        f"B  {diff.b.name}  stellar-core {image_text(diff.b.image)}",
        f"matched by key: {diff.compared} ranges, measured from completed chains in both, compared range by range",
        f"matched by band: {by_band.get('a', 0)} ranges of A, {by_band.get('b', 0)} of B, whose keys the other "
        "lacks (cut otherwise), compared by ledger band: peaks maxed, seconds per ledger",
        f"left out: {left}",
        f"bands of {diff.band_ledgers:,} ledgers, by each range's last ledger; every ratio is B/A",
    ]
    for side in (diff.a, diff.b):
        if side.requested is None:
            lines.append(f"requested memory of {side.name} is not known (its attempt records were not read)")
    return lines
