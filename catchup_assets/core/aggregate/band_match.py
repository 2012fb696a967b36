"""Which ranges of two profiles are compared, and how: by key, or by ledger band when the keys differ.

Pure. Two missions of one span are cut alike only when both ran the uniform grid: a mission cut to
its profile (core/plan/cut.py) splits slow ranges and merges fast ones, so most of its keys are
not the other's. A range is then compared by the ledgers it covers, through its band.

- By key: both profiles have the range key and both measured it from a completed chain. These
  pairs are compared range by range (peak and seconds B/A, the regressions).
- By band: a range measured from a completed chain whose key the other profile lacks, in a band
  (the band holding its last ledger) where the other profile has a range compared too, or sharing
  ledgers with one (a range merged across a band's edge may hold all of a narrow band's ledgers:
  that band then shows one side). It counts in its band's figures, which compare like for like
  whatever the cut: peaks maxed, seconds per ledger (a cut range's extra setups included: what
  the cut cost).
- Left out, by reason: a key both have whose chain one side never completed (`not_completed_in_a`,
  `..._b`; those ledgers were not measured on that side), a range of one side alone that never
  completed (the same reasons), and a completed range in a band the other side has no compared
  range in (`only_in_a`, `only_in_b`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from catchup_assets.core.values.ledger_range import RangeKeyError, parse_key

SIDES = ("a", "b")


def number(value: Any) -> float | None:
    """A finite, non-negative number, else None (a value no measurement can have is not compared)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out >= 0 else None


def band_of(last_ledger: int, band_ledgers: int) -> int:
    return max(int(last_ledger) - 1, 0) // band_ledgers


def band_label(index: int, band_ledgers: int) -> str:
    def m(ledgers: int) -> str:
        return f"{ledgers / 1e6:.3f}".rstrip("0").rstrip(".")

    return f"{m(index * band_ledgers)}-{m((index + 1) * band_ledgers)}M"


def rows_by_key(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Profile rows by range key; a row without a key or a usable last ledger is skipped."""
    out: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        key = r.get("range_key")
        if key is not None and number(r.get("last_ledger")) is not None:
            out[key] = r
    return out


def span_of(row: Mapping[str, Any]) -> tuple[int, int] | None:
    """The ledgers the row's range covers, first..last, the first read from the key when the row
    lacks it; None when neither says."""
    last, first = number(row.get("last_ledger")), number(row.get("first_ledger"))
    if first is None:
        try:
            first = float(parse_key(str(row.get("range_key"))).first)
        except RangeKeyError:
            return None
    return (int(first), int(last)) if last is not None and first <= last else None


def ledgers(row: Mapping[str, Any]) -> int | None:
    """How many ledgers the row's range covers (`span_of`)."""
    span = span_of(row)
    return None if span is None else span[1] - span[0] + 1


def _overlaps(spans: list[tuple[int, int]], span: tuple[int, int] | None) -> bool:
    """Whether `span` shares a ledger with one of `spans` (sorted by last ledger, not overlapping)."""
    if span is None:
        return False
    i = bisect.bisect_left(spans, span[0], key=lambda s: s[1])
    return i < len(spans) and spans[i][0] <= span[1]


@dataclass(frozen=True)
class Matches:
    by_key: list[str]  # keys compared range by range, both sides completed
    by_band: dict[str, list[str]]  # per side ("a", "b"): keys compared by band only
    left_out: dict[str, int] = field(default_factory=dict)  # ranges compared neither way, by reason

    def counts(self) -> dict[str, int]:
        return {"by_key": len(self.by_key), **{f"by_band_{s}": len(self.by_band[s]) for s in SIDES}}


def match(
    rows_a: Mapping[str, Mapping[str, Any]], rows_b: Mapping[str, Mapping[str, Any]], band_ledgers: int
) -> Matches:
    """The ranges of A and B compared by key, by band, and left out (the module's docstring)."""
    left_out = {"only_in_a": 0, "only_in_b": 0, "not_completed_in_a": 0, "not_completed_in_b": 0}
    by_key: list[str] = []
    alone: dict[str, list[str]] = {s: [] for s in SIDES}
    for key in sorted(rows_a.keys() | rows_b.keys()):
        ra, rb = rows_a.get(key), rows_b.get(key)
        if ra is not None and ra.get("completed") is not True:
            left_out["not_completed_in_a"] += 1
        elif rb is not None and rb.get("completed") is not True:
            left_out["not_completed_in_b"] += 1
        elif ra is not None and rb is not None:
            by_key.append(key)
        else:
            alone["a" if rb is None else "b"].append(key)
    rows = {"a": rows_a, "b": rows_b}

    def band(side: str, key: str) -> int:
        return band_of(int(number(rows[side][key]["last_ledger"]) or 0), band_ledgers)

    compared = {s: by_key + alone[s] for s in SIDES}
    bands = {s: {band(s, k) for k in compared[s]} for s in SIDES}
    spans = {s: sorted(filter(None, (span_of(rows[s][k]) for k in compared[s])), key=lambda v: v[1]) for s in SIDES}
    by_band: dict[str, list[str]] = {s: [] for s in SIDES}
    for side, other in (("a", "b"), ("b", "a")):
        for key in alone[side]:
            # Its band, or its ledgers (a range merged across a band's edge can hold all of a narrow band).
            if band(side, key) in bands[other] or _overlaps(spans[other], span_of(rows[side][key])):
                by_band[side].append(key)
            else:
                left_out[f"only_in_{side}"] += 1
    return Matches(by_key, by_band, left_out)
