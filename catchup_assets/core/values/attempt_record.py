"""The attempt record: what is known of one attempt of one range, as a pure value.

The dispatcher builds it (at submit, while the attempt runs, when it ends) and
the profile reads it; `store.records` encodes it to Parquet, one file per
attempt. Its columns and their kinds are declared here once: the store builds
its Parquet schema from `COLUMNS`, and `unrecordable_fields` checks a record
against the same kinds before anything is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from catchup_assets.core.errors import StateError

SCHEMA_VERSION = 4  # 2 added last_seen_at and seconds_estimated, 3 capacity_type, 4 setup_seconds; older read
PEAK_FIELDS = ("peak_anon_bytes", "peak_working_set_bytes", "peak_ephemeral_bytes")


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of one range. Times are epoch seconds, sizes bytes."""

    mission: str
    range_key: str
    attempt: int
    outcome: str | None = None  # None while in flight
    exit_code: int | None = None
    reason: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    # When the dispatcher last saw the attempt running: a vanished leg's time ends there (L22).
    last_seen_at: float | None = None
    seconds: float | None = None
    # True when `seconds` is last_seen_at - started_at because the pod went with its node.
    seconds_estimated: bool | None = None
    peak_anon_bytes: int | None = None
    peak_working_set_bytes: int | None = None
    peak_ephemeral_bytes: int | None = None
    tx_apply_count: int | None = None
    tx_apply_seconds: float | None = None
    resumed_from_ledger: int | None = None
    fresh_start: bool | None = None
    memory_request_bytes: int | None = None
    memory_limit_bytes: int | None = None
    tier: str | None = None
    # spot or on-demand: what the attempt bought (its tier's, or on-demand after its range's
    # reclaims); None in a record older than schema 3: its tier's.
    capacity_type: str | None = None
    node: str | None = None
    log_path: str | None = None
    # Start to the first replayed checkpoint, from the log's phase lines; None in a record older
    # than schema 4 or when the log did not say (core/measure/phases.py).
    setup_seconds: float | None = None
    schema_version: int = SCHEMA_VERSION


# Each field's column kind, in field order: the store's Parquet schema is built from it.
COLUMNS: dict[str, str] = {
    "mission": "string",
    "range_key": "string",
    "attempt": "int32",
    "outcome": "string",
    "exit_code": "int32",
    "reason": "string",
    "started_at": "float64",
    "finished_at": "float64",
    "last_seen_at": "float64",
    "seconds": "float64",
    "seconds_estimated": "bool",
    "peak_anon_bytes": "int64",
    "peak_working_set_bytes": "int64",
    "peak_ephemeral_bytes": "int64",
    "tx_apply_count": "int64",
    "tx_apply_seconds": "float64",
    "resumed_from_ledger": "int64",
    "fresh_start": "bool",
    "memory_request_bytes": "int64",
    "memory_limit_bytes": "int64",
    "tier": "string",
    "capacity_type": "string",
    "node": "string",
    "log_path": "string",
    "setup_seconds": "float64",
    "schema_version": "int32",
}
assert [f.name for f in fields(AttemptRecord)] == list(COLUMNS)
MAX_FIELDS = (*PEAK_FIELDS, "last_seen_at")  # merged by max: a restart never moves them back (L20)


def merge(old: AttemptRecord | None, new: AttemptRecord) -> AttemptRecord:
    """Peaks by max; any other field: the newer value, but a missing one never erases."""
    if old is None:
        return new
    values = {}
    for f in fields(AttemptRecord):
        a, b = getattr(old, f.name), getattr(new, f.name)
        if f.name in MAX_FIELDS:
            values[f.name] = b if a is None else a if b is None else max(a, b)
        else:
            values[f.name] = a if b is None else b
    return AttemptRecord(**values)


_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_NON_NEGATIVE = (
    *PEAK_FIELDS,
    "seconds",
    "tx_apply_count",
    "tx_apply_seconds",
    "setup_seconds",
    "resumed_from_ledger",
    "memory_request_bytes",
    "memory_limit_bytes",
    "attempt",
)


class UnrecordableRecord(StateError):
    """A record with a value its schema cannot hold or no measurement can have."""


def unrecordable_fields(rec: AttemptRecord) -> dict[str, object]:
    """The fields of `rec` that cannot be written as they are: out of their column's range,
    not finite, or negative where only a measurement >= 0 makes sense."""
    bad: dict[str, object] = {}
    for name, kind in COLUMNS.items():
        v = getattr(rec, name)
        if v is None or isinstance(v, bool):
            continue
        if kind in _INT_BOUNDS:
            lo, hi = _INT_BOUNDS[kind]
            if not isinstance(v, int) or not lo <= v <= hi:
                bad[name] = v
        elif kind == "float64" and (not isinstance(v, int | float) or not math.isfinite(v)):
            bad[name] = v
        if name in _NON_NEGATIVE and name not in bad and isinstance(v, int | float) and v < 0:
            bad[name] = v
    return bad
