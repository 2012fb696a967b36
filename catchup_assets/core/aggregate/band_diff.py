"""Two missions' profiles compared by ledger band: what changed between A and B.

Pure: the band table is rows of BAND_COLUMNS (store/tables.py makes them Parquet). A is the earlier
mission, B the later;
every ratio is B / A.

A range is compared when both profiles have it (same range key) and both
measured it from a completed chain (`completed`); the others are counted as
left out, by reason. Each range falls in the band holding its last ledger
(`band_ledgers` ledgers per band, the first band starting at ledger 1), the
ledger by which the profile sizes it.

Per band, over its compared ranges:
    peak_a_max_bytes, peak_b_max_bytes   the highest measured peak_anon_bytes
    peak_ratio_median, peak_ratio_max    of each range's peak B/A
    seconds_a, seconds_b, seconds_ratio  compute seconds summed, and B/A of the sums
    requested_a_bytes, requested_b_bytes, requested_ratio
                                         memory the missions requested for those ranges
                                         (see `requested_by_range`), summed; B/A
    ooms_a, ooms_b                       OOMed attempts of every profiled range of the band
    regressed                            the band's ranges in the regressions

The demo's two missions replay the same simulated history, so their measured
peaks are about equal; what sizing changes is the memory requested. Both are
shown.

Regressions (per range, `threshold` x): a compared range whose peak or seconds
grew past the threshold, and a new OOM: a range that OOMed in B and not in A
(any row of B, completed or not, against A's row of the range).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.errors import ConfigError

DEFAULT_BAND_LEDGERS = 5_000_000  # 12 bands over ~60M ledgers
DEFAULT_THRESHOLD = 1.25
# What the diff reads of a profile (range_profile.parquet; profile.py documents each column).
DIFF_COLUMNS = ("range_key", "last_ledger", "peak_anon_bytes", "seconds", "oom_count", "completed")

# The band table's columns, in order, by name and kind (store/tables.py: the Parquet schema).
BAND_COLUMNS = (
    ("band", "string"),
    ("band_first_ledger", "int64"),
    ("band_last_ledger", "int64"),
    ("ranges", "int32"),
    ("peak_a_max_bytes", "int64"),
    ("peak_b_max_bytes", "int64"),
    ("peak_ratio_median", "float64"),
    ("peak_ratio_max", "float64"),
    ("seconds_a", "float64"),
    ("seconds_b", "float64"),
    ("seconds_ratio", "float64"),
    ("requested_a_bytes", "int64"),
    ("requested_b_bytes", "int64"),
    ("requested_ratio", "float64"),
    ("ooms_a", "int32"),
    ("ooms_b", "int32"),
    ("regressed", "int32"),
)
# Attempts whose request sizing answers for: the one that completed the range, and each
# rung of the memory ladder that OOMed on the way there.
SIZED_OUTCOMES = (Outcome.OK.value, Outcome.OOM.value)


@dataclass(frozen=True)
class Side:
    """One mission's side of the diff."""

    name: str
    rows: Sequence[Mapping[str, Any]]  # profile rows (range_profile.parquet)
    requested: Mapping[str, int] | None = None  # bytes per range key; None: not known
    image: Mapping[str, Any] | None = None  # the stellar-core it ran: {"image", "digest"}


@dataclass
class ProfileDiff:
    a: Side
    b: Side
    bands: list[dict[str, Any]]
    regressions: list[dict[str, Any]]
    compared: int
    left_out: dict[str, int]
    band_ledgers: int
    threshold: float
    totals: dict[str, Any] = field(default_factory=dict)

    def schema_metadata(self) -> dict[str, str]:
        """Which missions (and stellar-cores) A and B are: the band table's schema metadata
        (store/tables.band_table)."""
        meta = {
            "a": self.a.name,
            "b": self.b.name,
            "a_image": json.dumps(dict(self.a.image or {})),
            "b_image": json.dumps(dict(self.b.image or {})),
            "band_ledgers": str(self.band_ledgers),
            "threshold": repr(self.threshold),
        }
        return {f"catchup_assets.diff.{k}": v for k, v in meta.items()}

    @property
    def new_ooms(self) -> list[str]:
        return [r["range_key"] for r in self.regressions if r["what"] == "new_oom"]


def check_diff_columns(names: Iterable[str], source: str) -> None:
    """A profile the diff can read has every DIFF_COLUMNS column; else refused naming `source`."""
    missing = [c for c in DIFF_COLUMNS if c not in set(names)]
    if missing:
        raise ConfigError(f"profile {source} lacks column(s) {missing} that the diff reads: not a range_profile")


def requested_by_range(records: Iterable[Any]) -> dict[str, int]:
    """Per range key, the memory its finished attempts requested that sizing answers for.

    The attempt that completed the range and every one that OOMed (the memory
    ladder's rungs), summed: an unprofiled mission pays for each rung it climbs.
    Reclaims, evictions and other environmental retries are the cloud's doing,
    not the sizing's, and differ from run to run: they are left out, so two
    missions compare on what their sizing asked for.
    """
    out: dict[str, int] = defaultdict(int)
    for rec in records:
        if rec.outcome in SIZED_OUTCOMES and rec.memory_request_bytes is not None:
            out[rec.range_key] += int(rec.memory_request_bytes)
    return dict(out)


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _ratio(b: float | None, a: float | None) -> float | None:
    return None if a is None or b is None or a <= 0 else b / a


def band_of(last_ledger: int, band_ledgers: int) -> int:
    return max(int(last_ledger) - 1, 0) // band_ledgers


def band_label(index: int, band_ledgers: int) -> str:
    def m(ledgers: int) -> str:
        return f"{ledgers / 1e6:.3f}".rstrip("0").rstrip(".")

    return f"{m(index * band_ledgers)}-{m((index + 1) * band_ledgers)}M"


def _by_key(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        key = r.get("range_key")
        if key is not None and _number(r.get("last_ledger")) is not None:
            out[key] = r
    return out


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def compare(
    a: Side, b: Side, band_ledgers: int = DEFAULT_BAND_LEDGERS, threshold: float = DEFAULT_THRESHOLD
) -> ProfileDiff:
    """A and B by ledger band, and the ranges that regressed from A to B."""
    if isinstance(band_ledgers, bool) or not isinstance(band_ledgers, int) or band_ledgers < 1:
        raise ConfigError(f"band_ledgers must be an integer >= 1, got {band_ledgers!r}")
    if not (isinstance(threshold, int | float) and math.isfinite(threshold) and threshold > 1):
        raise ConfigError(f"threshold must be a finite ratio > 1, got {threshold!r}")
    rows_a, rows_b = _by_key(a.rows), _by_key(b.rows)
    left_out = {"only_in_a": 0, "only_in_b": 0, "not_completed_in_a": 0, "not_completed_in_b": 0}
    compared: list[str] = []
    for key in sorted(rows_a.keys() | rows_b.keys()):
        ra, rb = rows_a.get(key), rows_b.get(key)
        if rb is None:
            left_out["only_in_a"] += 1
        elif ra is None:
            left_out["only_in_b"] += 1
        elif ra.get("completed") is not True:
            left_out["not_completed_in_a"] += 1
        elif rb.get("completed") is not True:
            left_out["not_completed_in_b"] += 1
        else:
            compared.append(key)

    regressions: list[dict[str, Any]] = []
    for key in compared:
        ra, rb = rows_a[key], rows_b[key]
        for what, column in (("peak", "peak_anon_bytes"), ("seconds", "seconds")):
            va, vb = _number(ra.get(column)), _number(rb.get(column))
            ratio = _ratio(vb, va)
            if ratio is not None and ratio > threshold:
                regressions.append(_regression(key, rb, what, va, vb, ratio))
    for key in sorted(rows_a.keys() & rows_b.keys()):
        ooms_a, ooms_b = _number(rows_a[key].get("oom_count")) or 0, _number(rows_b[key].get("oom_count")) or 0
        if ooms_b > 0 and ooms_a == 0:
            regressions.append(_regression(key, rows_b[key], "new_oom", ooms_a, ooms_b, None))
    regressions.sort(key=lambda r: (r["last_ledger"], r["what"]))

    def band(row: Mapping[str, Any]) -> int:
        return band_of(int(_number(row["last_ledger"]) or 0), band_ledgers)

    members: dict[int, list[str]] = defaultdict(list)
    for key in compared:
        members[band(rows_b[key])].append(key)
    ooms: dict[tuple[str, int], int] = defaultdict(int)
    for side, rows in (("a", rows_a), ("b", rows_b)):
        for r in rows.values():
            ooms[side, band(r)] += int(_number(r.get("oom_count")) or 0)
    regressed: dict[int, set[str]] = defaultdict(set)
    for r in regressions:
        regressed[band_of(r["last_ledger"], band_ledgers)].add(r["range_key"])

    bands = []
    indexes = sorted(set(members) | {i for (_, i), n in ooms.items() if n} | set(regressed))
    for i in indexes:
        keys = members.get(i, [])
        bands.append(
            {
                "band": band_label(i, band_ledgers),
                "band_first_ledger": i * band_ledgers + 1,
                "band_last_ledger": (i + 1) * band_ledgers,
                "ranges": len(keys),
                **_measures(keys, rows_a, rows_b, a.requested, b.requested),
                "ooms_a": ooms.get(("a", i), 0),
                "ooms_b": ooms.get(("b", i), 0),
                "regressed": len(regressed.get(i, ())),
            }
        )
    totals = {"ranges": len(compared), **_measures(compared, rows_a, rows_b, a.requested, b.requested)}
    totals.update(ooms_a=sum(v for (s, _), v in ooms.items() if s == "a"))
    totals.update(ooms_b=sum(v for (s, _), v in ooms.items() if s == "b"))
    totals.update(regressed=len({r["range_key"] for r in regressions}))
    return ProfileDiff(a, b, bands, regressions, len(compared), left_out, band_ledgers, float(threshold), totals)


def _regression(key: str, row: Mapping[str, Any], what: str, a: float | None, b: float | None, ratio):
    return {
        "range_key": key,
        "last_ledger": int(_number(row["last_ledger"]) or 0),
        "what": what,
        "a": a,
        "b": b,
        "ratio": ratio,
    }


def _measures(
    keys: Sequence[str],
    rows_a: Mapping[str, Mapping[str, Any]],
    rows_b: Mapping[str, Mapping[str, Any]],
    requested_a: Mapping[str, int] | None,
    requested_b: Mapping[str, int] | None,
) -> dict[str, Any]:
    peaks_a = [_number(rows_a[k].get("peak_anon_bytes")) for k in keys]
    peaks_b = [_number(rows_b[k].get("peak_anon_bytes")) for k in keys]
    peak_ratios = [r for r in map(_ratio, peaks_b, peaks_a) if r is not None]
    seconds_a = _sum(_number(rows_a[k].get("seconds")) for k in keys)
    seconds_b = _sum(_number(rows_b[k].get("seconds")) for k in keys)

    def requested(side: Mapping[str, int] | None) -> int | None:
        # Known only if known for every compared range: a partial sum would compare unlike things.
        if side is None or not keys or any(k not in side for k in keys):
            return None
        return int(sum(side[k] for k in keys))

    req_a, req_b = requested(requested_a), requested(requested_b)
    return {
        "peak_a_max_bytes": _int_max(peaks_a),
        "peak_b_max_bytes": _int_max(peaks_b),
        "peak_ratio_median": statistics.median(peak_ratios) if peak_ratios else None,
        "peak_ratio_max": max(peak_ratios) if peak_ratios else None,
        "seconds_a": seconds_a,
        "seconds_b": seconds_b,
        "seconds_ratio": _ratio(seconds_b, seconds_a),
        "requested_a_bytes": req_a,
        "requested_b_bytes": req_b,
        "requested_ratio": _ratio(req_b, req_a),
    }


def _int_max(values: Iterable[float | None]) -> int | None:
    present = [v for v in values if v is not None]
    return int(max(present)) if present else None
