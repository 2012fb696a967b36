"""The plan table of a mission.

Pure over ranges, a profile index and policies; the output is a pyarrow table
with documented columns (docs/storage.md).

plan.parquet, one row per range, in dispatch order:
    range_key, first_ledger, last_ledger   the range
    catchup                  the `END/COUNT` argument
    dispatch_rank            0 starts first
    tier, memory_request_bytes, profiled   placement of the first attempt
    predicted_seconds        the profile's measured seconds (null if unprofiled)
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from catchup_assets.core.plan.ranges import LedgerRange
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.size.sizing import Placement

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
