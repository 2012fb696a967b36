"""Two missions' profiles compared by ledger band: what changed between A and B.

Pure: the band table is rows of BAND_COLUMNS (store/tables.py makes them Parquet). A is the earlier
mission, B the later; every ratio is B / A.

Which ranges are compared, and how, is band_match.py's: by key (both profiles have the range key
and both measured it from a completed chain), or by band when the keys differ (one mission ran
the uniform grid, the other was cut to its profile: core/plan/cut.py); the others are counted as
left out, by reason. Each range falls in the band holding its last ledger (`band_ledgers` ledgers
per band, the first band starting at ledger 1), the ledger by which the profile sizes it.

Per band, over its compared ranges (each side's own: matched by key, then by band):
    ranges                               matched by key
    ranges_a_by_band, ranges_b_by_band   each side's ranges matched by band alone
    peak_a_max_bytes, peak_b_max_bytes   the highest measured peak_anon_bytes
    peak_ratio_median, peak_ratio_max    of each range's peak B/A (ranges matched by key)
    seconds_a, seconds_b                 compute seconds summed
    seconds_per_ledger_a, _b             those seconds over the ledgers their ranges cover
    seconds_ratio                        B/A of the seconds per ledger (of the sums when every
                                         range matched by key: both cover the same ledgers)
    requested_a_bytes, requested_b_bytes, requested_ratio
                                         memory the missions requested for those ranges
                                         (see `requested_by_range`), summed; B/A only when every
                                         range matched by key (a sum over ranges cut otherwise
                                         counts another number of pods)
    ooms_a, ooms_b                       OOMed attempts of every profiled range of the band
    regressed                            the band's ranges in the regressions

The demo's two missions replay the same simulated history, so their measured
peaks are about equal; what sizing changes is the memory requested. Both are
shown.

Regressions (per range of B, `threshold` x): a range whose peak or seconds grew
past the threshold, and a new OOM: a range that OOMed in B and not in A (any row
of B, completed or not). A range matched by key is judged against A's row of the
range; one of B's keys A lacks (cut otherwise), against A's rows over its
ledgers, read as the next mission's sizing reads them (`ProfileIndex.lookup_span`:
peaks maxed, seconds one setup and the replay pro rata), so a cut mission's
heaviest ranges, whose keys the grid never had, are judged too.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from catchup_assets.core.aggregate.band_figures import Group, Rows, coverage, figures, whole
from catchup_assets.core.aggregate.band_figures import ratio as ratio_of
from catchup_assets.core.aggregate.band_match import band_label, band_of, match, number, rows_by_key, span_of
from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.measures import ProfileIndex, measures_from_rows

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
    ("ranges_a_by_band", "int32"),
    ("ranges_b_by_band", "int32"),
    ("peak_a_max_bytes", "int64"),
    ("peak_b_max_bytes", "int64"),
    ("peak_ratio_median", "float64"),
    ("peak_ratio_max", "float64"),
    ("seconds_a", "float64"),
    ("seconds_b", "float64"),
    ("seconds_per_ledger_a", "float64"),
    ("seconds_per_ledger_b", "float64"),
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
    compared: int  # ranges matched by key
    left_out: dict[str, int]
    band_ledgers: int
    threshold: float
    totals: dict[str, Any] = field(default_factory=dict)
    by_band: dict[str, int] = field(default_factory=dict)  # per side ("a", "b"): ranges matched by band alone

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


def compare(
    a: Side, b: Side, band_ledgers: int = DEFAULT_BAND_LEDGERS, threshold: float = DEFAULT_THRESHOLD
) -> ProfileDiff:
    """A and B by ledger band, and the ranges that regressed from A to B."""
    if isinstance(band_ledgers, bool) or not isinstance(band_ledgers, int) or band_ledgers < 1:
        raise ConfigError(f"band_ledgers must be an integer >= 1, got {band_ledgers!r}")
    if not (isinstance(threshold, int | float) and math.isfinite(threshold) and threshold > 1):
        raise ConfigError(f"threshold must be a finite ratio > 1, got {threshold!r}")
    rows = {"a": rows_by_key(a.rows), "b": rows_by_key(b.rows)}
    matches = match(rows["a"], rows["b"], band_ledgers)
    regressions = _regressions(matches.by_key, rows["a"], rows["b"], threshold)
    regressions += _by_ledgers(set(matches.by_band["b"]), rows["a"], rows["b"], threshold)
    regressions.sort(key=lambda r: (r["last_ledger"], r["what"]))

    def band(row: Mapping[str, Any]) -> int:
        return band_of(int(number(row["last_ledger"]) or 0), band_ledgers)

    groups: dict[int, Group] = defaultdict(Group)
    for key in matches.by_key:
        groups[band(rows["b"][key])].by_key.append(key)
    for side, keys in matches.by_band.items():
        for key in keys:
            groups[band(rows[side][key])].counted[side].append(key)
            for i, share in coverage(rows[side][key], band_ledgers):
                groups[i].covers[side].append((key, share))
    ooms: dict[tuple[str, int], int] = defaultdict(int)
    for side, side_rows in rows.items():
        for r in side_rows.values():
            ooms[side, band(r)] += int(number(r.get("oom_count")) or 0)
    regressed: dict[int, set[str]] = defaultdict(set)
    for r in regressions:
        regressed[band_of(r["last_ledger"], band_ledgers)].add(r["range_key"])

    requested = {"a": a.requested, "b": b.requested}
    bands = []
    for i in sorted(set(groups) | {i for (_, i), n in ooms.items() if n} | set(regressed)):
        bands.append(
            {
                "band": band_label(i, band_ledgers),
                "band_first_ledger": i * band_ledgers + 1,
                "band_last_ledger": (i + 1) * band_ledgers,
                **figures(groups.get(i, Group()), rows, requested),
                "ooms_a": ooms.get(("a", i), 0),
                "ooms_b": ooms.get(("b", i), 0),
                "regressed": len(regressed.get(i, ())),
            }
        )
    totals = figures(whole(matches.by_key, matches.by_band), rows, requested)
    totals.update(ooms_a=sum(v for (s, _), v in ooms.items() if s == "a"))
    totals.update(ooms_b=sum(v for (s, _), v in ooms.items() if s == "b"))
    totals.update(regressed=len({r["range_key"] for r in regressions}))
    by_band = {s: len(keys) for s, keys in matches.by_band.items()}
    return ProfileDiff(
        a, b, bands, regressions, len(matches.by_key), matches.left_out, band_ledgers, float(threshold), totals, by_band
    )


def _regressions(
    keys: Sequence[str], rows_a: Mapping[str, Mapping[str, Any]], rows_b: Mapping[str, Mapping[str, Any]], threshold
) -> list[dict[str, Any]]:
    """The ranges matched by key whose peak or seconds grew past `threshold`, and new OOMs."""
    out: list[dict[str, Any]] = []
    for key in keys:
        ra, rb = rows_a[key], rows_b[key]
        for what, column in (("peak", "peak_anon_bytes"), ("seconds", "seconds")):
            va, vb = number(ra.get(column)), number(rb.get(column))
            ratio = ratio_of(vb, va)
            if ratio is not None and ratio > threshold:
                out.append(_regression(key, rb, what, va, vb, ratio))
    for key in sorted(rows_a.keys() & rows_b.keys()):
        ooms_a, ooms_b = number(rows_a[key].get("oom_count")) or 0, number(rows_b[key].get("oom_count")) or 0
        if ooms_b > 0 and ooms_a == 0:
            out.append(_regression(key, rows_b[key], "new_oom", ooms_a, ooms_b, None))
    return sorted(out, key=lambda r: (r["last_ledger"], r["what"]))


def _by_ledgers(judged: set[str], rows_a: Rows, rows_b: Rows, threshold) -> list[dict[str, Any]]:
    """Regressions of B's ranges whose keys A lacks: each of `judged` (matched by band) against A's
    completed rows over its ledgers; every one of them, completed or not, for a new OOM."""
    spans_a = sorted(((span, r) for r in rows_a.values() if (span := span_of(r)) is not None), key=lambda v: v[0])
    lasts = [span[1] for span, _ in spans_a]  # a profile's rows do not overlap: ascending as their firsts
    out: list[dict[str, Any]] = []
    for key in sorted(rows_b.keys() - rows_a.keys()):
        rb, span = rows_b[key], span_of(rows_b[key])
        if span is None:
            continue
        over = []
        for (first, _), ra in spans_a[bisect.bisect_left(lasts, span[0]) :]:
            if first > span[1]:
                break
            over.append(ra)
        done = [ra for ra in over if ra.get("completed") is True]
        m = ProfileIndex(measures_from_rows(done)).lookup_span(*span) if key in judged and done else None
        for what, va, vb in (
            ("peak", m and m.peak_anon_bytes, number(rb.get("peak_anon_bytes"))),
            ("seconds", m and m.seconds, number(rb.get("seconds"))),
        ):
            ratio = ratio_of(vb, number(va))
            if ratio is not None and ratio > threshold:
                out.append(_regression(key, rb, what, number(va), vb, ratio))
        ooms_a, ooms_b = sum(number(ra.get("oom_count")) or 0 for ra in over), number(rb.get("oom_count")) or 0
        if over and ooms_b > 0 and ooms_a == 0:
            out.append(_regression(key, rb, "new_oom", ooms_a, ooms_b, None))
    return out


def _regression(key: str, row: Mapping[str, Any], what: str, a: float | None, b: float | None, ratio):
    return {
        "range_key": key,
        "last_ledger": int(number(row["last_ledger"]) or 0),
        "what": what,
        "a": a,
        "b": b,
        "ratio": ratio,
    }
