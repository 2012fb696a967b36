"""The tables the project writes, as Parquet: their schemas, rows to Table, and a Table on the storage root.

The pure core makes rows and declares each table's columns by name and kind
(PROFILE_COLUMNS, PLAN_COLUMNS, TIER_MAP_COLUMNS, BAND_COLUMNS, each beside the
code that fills them); here they become pyarrow schemas, in that column order.
The attempt records' own schema is store/records.py's.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from catchup_assets.core.aggregate.band_diff import BAND_COLUMNS, ProfileDiff
from catchup_assets.core.aggregate.profile_table import PROFILE_COLUMNS, profile_rows
from catchup_assets.core.errors import StateError
from catchup_assets.core.forecast.tier_map import TIER_MAP_COLUMNS, tier_map_rows
from catchup_assets.core.plan.plan_table import PLAN_COLUMNS, plan_rows
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.ledger_range import LedgerRange
from catchup_assets.store.root import Store

Table = pa.Table  # what the use cases hand on, without importing pyarrow themselves

_KINDS = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "float64": pa.float64(), "bool": pa.bool_()}


def schema_of(columns: Sequence[tuple[str, str]]) -> pa.Schema:
    """A core table's declared (name, kind) columns as a pyarrow schema, in order."""
    return pa.schema([(name, _KINDS[kind]) for name, kind in columns])


PROFILE_SCHEMA = schema_of(PROFILE_COLUMNS)  # range_profile.parquet
PLAN_SCHEMA = schema_of(PLAN_COLUMNS)  # plan.parquet
TIER_MAP_SCHEMA = schema_of(TIER_MAP_COLUMNS)  # tier_map.parquet
BAND_SCHEMA = schema_of(BAND_COLUMNS)  # profile_diff.parquet


def table(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema)


def profile_table(records: Iterable[Any]) -> pa.Table:
    """The profile of these attempt records (aggregate/profile_table.py's rows)."""
    rows, _ = profile_rows(records)
    return table(rows, PROFILE_SCHEMA)


def plan_table(
    ordered: Sequence[LedgerRange], overlap: int, profile: ProfileIndex | None, placement: Placement
) -> pa.Table:
    """The plan of these ranges in dispatch order (plan/plan_table.py's rows)."""
    return table(plan_rows(ordered, overlap, profile, placement), PLAN_SCHEMA)


def tier_map_table(ranges: Sequence[LedgerRange], profile: Iterable[dict[str, Any]], placement: Placement) -> pa.Table:
    """Where each range goes next mission (forecast/tier_map.py's rows)."""
    return table(tier_map_rows(ranges, profile, placement), TIER_MAP_SCHEMA)


def band_table(diff: ProfileDiff) -> pa.Table:
    """The band table; which missions (and stellar-cores) A and B are rides in its schema metadata."""
    return table(diff.bands, BAND_SCHEMA).replace_schema_metadata(diff.schema_metadata())


# What each declared kind accepts as read: any width of integer where an integer is declared (an int32
# peak is exact), an integer where a float is, a null column (every value missing) anywhere.
_READS_AS = {
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "int64": pa.types.is_integer,
    "int32": pa.types.is_integer,
    "float64": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
    "bool": pa.types.is_boolean,
}


def wrong_kinds(data: pa.Table, columns: Sequence[tuple[str, str]]) -> list[str]:
    """Each declared column `data` holds with a type that is not its kind, as "name is TYPE, not KIND"."""
    kinds = dict(columns)
    return [
        f"{f.name} is {f.type}, not {kinds[f.name]}"
        for f in data.schema
        if f.name in kinds and not pa.types.is_null(f.type) and not _READS_AS[kinds[f.name]](f.type)
    ]


class NotATable(StateError):
    """Bytes that are not a Parquet table; the message is the reader's own."""


def parse_table(data: bytes) -> pa.Table:
    """A Parquet file's bytes as a Table, or NotATable saying what the reader found wrong."""
    try:
        # ParquetFile, not pq.read_table: one file needs none of the dataset machinery.
        return pq.ParquetFile(pa.BufferReader(data)).read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        # What pyarrow's reader raises for bytes that are not Parquet, found by truncating and flipping
        # bytes of real files (tests/store/test_profile_io.py): ArrowInvalid, ArrowNotImplementedError, a plain
        # OSError (thrift, zstd, page headers) and, for a damaged string in the metadata, UnicodeDecodeError.
        raise NotATable(str(exc)) from exc


def parquet_rows(data: bytes) -> int:
    """The rows a Parquet file's footer says it holds, read from the footer alone; NotATable as `parse_table`."""
    try:
        return pq.ParquetFile(pa.BufferReader(data)).metadata.num_rows
    except (pa.ArrowException, OSError, ValueError) as exc:  # as parse_table's
        raise NotATable(str(exc)) from exc


def table_bytes(data: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(data, buf, compression="zstd")
    return buf.getvalue()


def write_table(store: Store, rel: str, data: pa.Table) -> str:
    store.write_bytes(rel, table_bytes(data))
    return store.url(rel)


def read_table(store: Store, rel: str) -> pa.Table:
    return parse_table(store.read_bytes(rel))
