"""The plan table of a mission.

Pure over ranges, a profile index and policies; the output is rows of
PLAN_COLUMNS (store/tables.py makes them a Parquet table), documented here and
in docs/storage.md.

plan.parquet, one row per range, in dispatch order:
    range_key, first_ledger, last_ledger   the range
    catchup                  the `END/COUNT` argument
    dispatch_rank            0 starts first
    tier, memory_request_bytes, profiled   placement of the first attempt
    predicted_seconds        the profile's measured seconds (null if unprofiled)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.ledger_range import LedgerRange

# The plan's columns, in order, by name and kind (store/tables.py: the Parquet schema).
PLAN_COLUMNS = (
    ("range_key", "string"),
    ("first_ledger", "int64"),
    ("last_ledger", "int64"),
    ("catchup", "string"),
    ("dispatch_rank", "int32"),
    ("tier", "string"),
    ("memory_request_bytes", "int64"),
    ("profiled", "bool"),
    ("predicted_seconds", "float64"),
)


def plan_rows(
    ordered: Sequence[LedgerRange],
    overlap: int,
    profile: ProfileIndex | None,
    placement: Placement,
) -> list[dict[str, Any]]:
    rows = []
    for rank, r in enumerate(ordered):
        s = placement.size(r.last, profile, first_ledger=r.first)
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
    return rows
