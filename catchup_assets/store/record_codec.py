"""An attempt record as Parquet: its Arrow schema, every older schema version it reads, encode and decode.

The record itself is a pure value (core/values/attempt_record.py); this is its one encoding,
shared by the per-attempt files (store/records.py) and the snapshot log (store/snapshot_log.py).
"""

from __future__ import annotations

import io
from dataclasses import fields

import pyarrow as pa
import pyarrow.parquet as pq

from catchup_assets.core.errors import StateError
from catchup_assets.core.values.attempt_record import (
    COLUMNS,
    SCHEMA_VERSION,
    AttemptRecord,
    UnrecordableRecord,
    unrecordable_fields,
)

# The record's column kinds as Arrow types.
_ARROW = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
SCHEMA = pa.schema([(name, _ARROW[kind]) for name, kind in COLUMNS.items()])
assert [f.name for f in fields(AttemptRecord)] == SCHEMA.names
# Older versions lacked these; their files decode with them empty.
ADDED_IN_2 = ("last_seen_at", "seconds_estimated")
ADDED_IN_3 = ("capacity_type",)
ADDED_IN_4 = ("setup_seconds",)
SCHEMA_V3_NAMES = [n for n in SCHEMA.names if n not in ADDED_IN_4]
SCHEMA_V2_NAMES = [n for n in SCHEMA_V3_NAMES if n not in ADDED_IN_3]
SCHEMA_V1_NAMES = [n for n in SCHEMA_V2_NAMES if n not in ADDED_IN_2]
OLD_NAMES = {1: SCHEMA_V1_NAMES, 2: SCHEMA_V2_NAMES, 3: SCHEMA_V3_NAMES}


def encode(rec: AttemptRecord) -> bytes:
    if bad := unrecordable_fields(rec):
        raise UnrecordableRecord(
            f"{rec.range_key} a{rec.attempt}: " + ", ".join(f"{k}={v!r:.40}" for k, v in bad.items())
        )
    table = pa.Table.from_pylist([vars(rec)], schema=SCHEMA)  # flat fields: no deep-copying asdict
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def decode(data: bytes) -> AttemptRecord:
    # ParquetFile, not read_table: the dataset machinery behind read_table costs 2.5x per small file.
    table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    if table.num_rows != 1:
        raise StateError(f"unexpected rows ({table.num_rows} rows)")
    return row_record(table.to_pylist()[0], table.schema.names)


def row_record(row: dict, names: list[str]) -> AttemptRecord:
    """A record from a row of any schema version (older ones with their late fields empty); else refused."""
    version = row.get("schema_version")
    if names == SCHEMA.names and version == SCHEMA_VERSION:
        return AttemptRecord(**row)
    if version in OLD_NAMES and names == OLD_NAMES[version]:
        return AttemptRecord(**{**row, "schema_version": SCHEMA_VERSION})
    raise StateError(f"unexpected columns or schema_version {version!r} ({len(names)} columns)")
