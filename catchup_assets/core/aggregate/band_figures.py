"""A band's figures (or the totals') over the ranges band_match.py compared, one side against the other.

Pure. A range matched by key counts whole in the band of its last ledger, on both sides alike.
A range matched by band alone counts in the band of its last ledger too (its count, its memory
requested), while its peak, seconds and ledgers count in every band it covers, the seconds and
ledgers pro rata: a range merged across a band's edge then gives the band below its replay, not
only the band above, and the seconds per ledger compare the same ledgers on both sides.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from catchup_assets.core.aggregate.band_match import SIDES, band_of, number, span_of

Rows = Mapping[str, Mapping[str, Any]]


@dataclass
class Group:
    """The ranges of one band (or of the whole diff)."""

    by_key: list[str] = field(default_factory=list)  # matched by key, whole on both sides
    counted: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in SIDES})  # by band, per side
    covers: dict[str, list[tuple[str, float]]] = field(default_factory=lambda: {s: [] for s in SIDES})  # key, share


def coverage(row: Mapping[str, Any], band_ledgers: int) -> list[tuple[int, float]]:
    """The bands a range covers, each with the share of its ledgers there (the band of its last
    ledger, whole, when its first ledger is not known)."""
    span = span_of(row)
    if span is None:
        return [(band_of(int(number(row["last_ledger"]) or 0), band_ledgers), 1.0)]
    first, last = span
    out = []
    for i in range(band_of(first, band_ledgers), band_of(last, band_ledgers) + 1):
        shared = min(last, (i + 1) * band_ledgers) - max(first, i * band_ledgers + 1) + 1
        out.append((i, shared / (last - first + 1)))
    return out


def ratio(b: float | None, a: float | None) -> float | None:
    return None if a is None or b is None or a <= 0 else b / a


def figures(
    group: Group,
    rows: Mapping[str, Rows],
    requested: Mapping[str, Mapping[str, int] | None],
) -> dict[str, Any]:
    """The band table's figures of `group`: `rows` and `requested` are per side ("a", "b")."""
    parts = {s: [(k, 1.0) for k in group.by_key] + list(group.covers[s]) for s in SIDES}

    def seconds(side: str) -> tuple[float | None, float | None]:
        """The side's seconds summed, and per ledger over the ranges whose ledgers are known too."""
        timed, per_ledger = [], []
        for key, share in parts[side]:
            t = number(rows[side][key].get("seconds"))
            if t is None:
                continue
            timed.append(t * share)
            span = span_of(rows[side][key])
            if span is not None:
                per_ledger.append((t * share, (span[1] - span[0] + 1) * share))
        total = sum(timed) if timed else None
        return total, (sum(t for t, _ in per_ledger) / sum(n for _, n in per_ledger) if per_ledger else None)

    def requested_sum(side: str) -> int | None:
        # Known only if known for every range counted: a partial sum would compare unlike things.
        keys, known = group.by_key + group.counted[side], requested[side]
        if known is None or not keys or any(k not in known for k in keys):
            return None
        return int(sum(known[k] for k in keys))

    def peak(side: str, key: str) -> float | None:
        return number(rows[side][key].get("peak_anon_bytes"))

    peaks = {s: [peak(s, k) for k, _ in parts[s]] for s in SIDES}
    peak_ratios = [r for k in group.by_key if (r := ratio(peak("b", k), peak("a", k))) is not None]
    (seconds_a, spl_a), (seconds_b, spl_b) = seconds("a"), seconds("b")
    req_a, req_b = requested_sum("a"), requested_sum("b")
    keyed_only = not (group.covers["a"] or group.covers["b"])
    return {
        "ranges": len(group.by_key),
        "ranges_a_by_band": len(group.counted["a"]),
        "ranges_b_by_band": len(group.counted["b"]),
        "peak_a_max_bytes": _int_max(peaks["a"]),
        "peak_b_max_bytes": _int_max(peaks["b"]),
        "peak_ratio_median": statistics.median(peak_ratios) if peak_ratios else None,
        "peak_ratio_max": max(peak_ratios) if peak_ratios else None,
        "seconds_a": seconds_a,
        "seconds_b": seconds_b,
        "seconds_per_ledger_a": spl_a,
        "seconds_per_ledger_b": spl_b,
        "seconds_ratio": ratio(spl_b, spl_a),
        "requested_a_bytes": req_a,
        "requested_b_bytes": req_b,
        # A sum of requests over ranges cut otherwise counts another number of pods: no ratio.
        "requested_ratio": ratio(req_b, req_a) if keyed_only else None,
    }


def _int_max(values: Iterable[float | None]) -> int | None:
    present = [v for v in values if v is not None]
    return int(max(present)) if present else None


def whole(by_key: Sequence[str], by_band: Mapping[str, Sequence[str]]) -> Group:
    """The whole diff as one group: every range once, whole."""
    return Group(list(by_key), {s: list(by_band[s]) for s in SIDES}, {s: [(k, 1.0) for k in by_band[s]] for s in SIDES})
