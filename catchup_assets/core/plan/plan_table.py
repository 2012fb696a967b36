"""The plan table of a mission and the tier map of a profile.

Pure over ranges, a profile index and policies; the output is a pyarrow table
with documented columns (docs/storage.md).

plan.parquet, one row per range, in dispatch order:
    range_key, first_ledger, last_ledger   the range
    catchup                  the `END/COUNT` argument
    dispatch_rank            0 starts first
    tier, memory_request_bytes, profiled   placement of the first attempt
    predicted_seconds        the profile's measured seconds (null if unprofiled)

tier_map.parquet, one row per planned range (unmeasured ones on the catch-all tier):
    range_key, first_ledger, last_ledger, tier, memory_request_bytes, profiled,
    peak_anon_bytes, peak_working_set_bytes, seconds, node_hours, cost_usd
    (node_hours and cost_usd: the share of its tier's node the range pays for, cost.py)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from catchup_assets.core.plan.ranges import LedgerRange
from catchup_assets.core.size.cost import node_share
from catchup_assets.core.size.sizing import Placement, ProfileIndex, RangeMeasure

log = logging.getLogger(__name__)

PLAN_SCHEMA = pa.schema(
    [
        ("range_key", pa.string()),
        ("first_ledger", pa.int64()),
        ("last_ledger", pa.int64()),
        ("catchup", pa.string()),
        ("dispatch_rank", pa.int32()),
        ("tier", pa.string()),
        ("memory_request_bytes", pa.int64()),
        ("profiled", pa.bool_()),
        ("predicted_seconds", pa.float64()),
    ]
)
TIER_MAP_SCHEMA = pa.schema(
    [
        ("range_key", pa.string()),
        ("first_ledger", pa.int64()),
        ("last_ledger", pa.int64()),
        ("tier", pa.string()),
        ("memory_request_bytes", pa.int64()),
        ("profiled", pa.bool_()),
        ("peak_anon_bytes", pa.int64()),
        ("peak_working_set_bytes", pa.int64()),
        ("seconds", pa.float64()),
        ("node_hours", pa.float64()),
        ("cost_usd", pa.float64()),
    ]
)


def plan_table(
    ordered: Sequence[LedgerRange],
    overlap: int,
    profile: ProfileIndex | None,
    placement: Placement,
) -> pa.Table:
    rows = []
    for rank, r in enumerate(ordered):
        s = placement.size(r.last, profile)
        rows.append(
            {
                "range_key": r.key,
                "first_ledger": r.first,
                "last_ledger": r.last,
                "catchup": r.catchup_arg(overlap),
                "dispatch_rank": rank,
                "tier": s.tier,
                "memory_request_bytes": s.memory_request_bytes,
                "profiled": s.profiled,
                "predicted_seconds": s.predicted_seconds,
            }
        )
    return pa.Table.from_pylist(rows, schema=PLAN_SCHEMA)


MAX_LEDGER = 2**32 - 1
MAX_BYTES = 2**50  # a PiB: no range's peak comes near it


def _checked(row: dict[str, Any], field: str, kind: type, low: float, high: float):
    """The row's `field` as `kind` if present, finite and in (low, high]; else None with a warning."""
    value = row.get(field)
    if value is None:
        return None
    try:
        number = kind(value)
        ok = math.isfinite(number) and low < number <= high
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        log.warning("profile row %s: %s %r out of range, not used", row.get("range_key"), field, value)
        return None
    return number


def measures_from_rows(rows: Iterable[dict[str, Any]]) -> list[RangeMeasure]:
    """What sizing reads of each profile row, every value range-checked where it enters.

    A row without a usable `last_ledger` is skipped; a bad peak or seconds is
    left out of that row alone (a negative peak would size a negative request).
    """
    out = []
    for r in rows:
        last = _checked(r, "last_ledger", int, 0, MAX_LEDGER)
        if last is None:
            log.warning("profile row %s skipped: no usable last_ledger", r.get("range_key"))
            continue
        if r.get("completed") is False:
            # A profile written before incomplete chains were left out may carry an early
            # failure's peak: only the OOM floor of such a row may size a range (L21).
            floor = _checked(r, "oom_floor_bytes", int, 0, MAX_BYTES)
            if floor is None:
                log.warning("profile row %s skipped: it never completed and never OOMed", r.get("range_key"))
                continue
            out.append(RangeMeasure(last, floor))
            continue
        out.append(
            RangeMeasure(
                last,
                _checked(r, "peak_anon_bytes", int, 0, MAX_BYTES),
                _checked(r, "peak_working_set_bytes", int, 0, MAX_BYTES),
                _checked(r, "seconds", float, 0, 1e9),
                _checked(r, "peak_ephemeral_bytes", int, 0, MAX_BYTES),
            )
        )
    return out


def tier_map_table(
    ranges: Sequence[LedgerRange],
    profile_rows: Iterable[dict[str, Any]],
    placement: Placement,
) -> pa.Table:
    """Where each range goes next mission, sized from this profile, and what it costs there."""
    index = ProfileIndex(measures_from_rows(profile_rows))
    out = []
    for r in ranges:
        s = placement.size(r.last, index)
        m = index.lookup(r.last)
        secs = s.predicted_seconds
        tier = placement.tiers.by_name(s.tier)
        shape = placement.shape_of(s.tier)
        share = node_share(tier, shape, s.memory_request_bytes, s.cpu_request)
        out.append(
            {
                "range_key": r.key,
                "first_ledger": r.first,
                "last_ledger": r.last,
                "tier": s.tier,
                "memory_request_bytes": s.memory_request_bytes,
                "profiled": s.profiled,
                "peak_anon_bytes": m.peak_anon_bytes if m else None,
                "peak_working_set_bytes": m.peak_working_set_bytes if m else None,
                "seconds": secs,
                "node_hours": None if secs is None else secs / 3600 * share,
                "cost_usd": None if secs is None else secs / 3600 * share * shape.hourly(tier.capacity_type),
            }
        )
    return pa.Table.from_pylist(out, schema=TIER_MAP_SCHEMA)
