"""The tier map of a profile: where each range goes next mission, and what it costs there.

Pure over ranges, profile rows and a placement; the output is rows of
TIER_MAP_COLUMNS (store/tables.py makes them a Parquet table), documented here
and in docs/storage.md.

tier_map.parquet, one row per planned range (unmeasured ones on the catch-all tier):
    range_key, first_ledger, last_ledger, tier, memory_request_bytes, profiled,
    peak_anon_bytes, peak_working_set_bytes, seconds, node_hours, cost_usd
    (node_hours and cost_usd: the share of its tier's node the range pays for, cost.py)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from catchup_assets.core.forecast.cost import node_share
from catchup_assets.core.size.measures import ProfileIndex, measures_from_rows
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.ledger_range import LedgerRange

# The tier map's columns, in order, by name and kind (store/tables.py: the Parquet schema).
TIER_MAP_COLUMNS = (
    ("range_key", "string"),
    ("first_ledger", "int64"),
    ("last_ledger", "int64"),
    ("tier", "string"),
    ("memory_request_bytes", "int64"),
    ("profiled", "bool"),
    ("peak_anon_bytes", "int64"),
    ("peak_working_set_bytes", "int64"),
    ("seconds", "float64"),
    ("node_hours", "float64"),
    ("cost_usd", "float64"),
)


def tier_map_rows(
    ranges: Sequence[LedgerRange],
    profile_rows: Iterable[dict[str, Any]],
    placement: Placement,
) -> list[dict[str, Any]]:
    """Where each range goes next mission, sized from this profile, and what it costs there."""
    index = ProfileIndex(measures_from_rows(profile_rows))
    out = []
    for r in ranges:
        s = placement.size(r.last, index, first_ledger=r.first)
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
    return out
