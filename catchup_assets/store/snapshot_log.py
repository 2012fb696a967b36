"""The snapshot log of a mission's finished attempt records: one base table and small immutable segments.

Log-structured, as an LSM tree keeps its runs (the dispatcher's memory is the memtable):

    <mission>/attempt_records.parquet                  the base: finished records compacted into one table
    <mission>/attempt_segments/s<ns>-<id>.parquet      a segment: the few records a dispatcher finished
                                                       since its last one, never changed once written

Every file is written whole and atomically (Store.write_bytes: a temp file then a rename,
one PUT on an object store), so a reader never meets half of one, and each carries a
digest of its rows in its footer: a file whose rows were changed by anything else (an
edit in a notebook) is not trusted. Compaction merges the base and every segment into a
new base, then removes the segments it merged. A crash between the two leaves a record
in the base and in a segment: the union is keyed by (range, attempt), so it counts
once, and a finished record never changes (L32), so either copy is the record.

The log is never the source of truth: RecordStore.load takes a record from it only when
the listing has the record's file and done mark. A torn, edited or foreign file is
warned of by name and passed over, and its records are read from their own files (L12).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
import uuid
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from catchup_assets.core.errors import StateError
from catchup_assets.core.values.attempt_record import SCHEMA_VERSION, AttemptRecord
from catchup_assets.store import layout
from catchup_assets.store.record_codec import SCHEMA, row_record
from catchup_assets.store.root import Store
from catchup_assets.store.safe_read import SNAPSHOT_MAX_BYTES

log = logging.getLogger(__name__)

# Segments merged into the base once this many exist. After a killed run a reader then opens
# the base, at most this many segments and the records finished since the last segment;
# the dispatcher rewrites the base once per COMPACT_AFTER_SEGMENTS x segment_every finished
# attempts instead of once per segment.
COMPACT_AFTER_SEGMENTS = 16

DIGEST_KEY = "catchup_assets.rows_sha256"

Ident = tuple[str, int]


def digest(rows: list[dict]) -> str:
    """A digest of a file's rows, kept in its footer (see the module's docstring)."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=repr).encode()).hexdigest()


def encode_table(records: Iterable[AttemptRecord]) -> bytes:
    table = pa.Table.from_pylist([vars(r) for r in records], schema=SCHEMA)
    table = table.replace_schema_metadata({DIGEST_KEY: digest(table.to_pylist())})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


class SnapshotLog:
    """A mission's base snapshot and its segments on the storage root."""

    def __init__(self, store: Store, mission: str):
        self.store = store
        self.mission = mission

    def segments(self) -> list[str]:
        """The segment files there now (a half-written one is a .tmp, never listed: Store.find)."""
        return sorted(p for p in self.store.find(layout.segments(self.mission)) if p.endswith(".parquet"))

    def read(self) -> tuple[dict[Ident, AttemptRecord], list[str]]:
        """Every finished record the base and the segments hold, and the segments read whole."""
        records = self._read_file(layout.snapshot(self.mission)) or {}
        merged = []
        for rel in self.segments():
            part = self._read_file(rel)
            if part is not None:
                records.update(part)
                merged.append(rel)
        return records, merged

    def append(self, records: Iterable[AttemptRecord]) -> str | None:
        """Write the finished ones of `records` as a new segment; compact once there are enough."""
        finished = [r for r in records if r.outcome is not None and r.mission == self.mission]
        if not finished:
            return None
        rel = layout.segment(self.mission, f"s{time.time_ns():020d}-{uuid.uuid4().hex[:8]}")
        self.store.write_bytes(rel, encode_table(finished))
        if len(self.segments()) >= COMPACT_AFTER_SEGMENTS:
            self.compact()
        return rel

    def compact(self, extra: Iterable[AttemptRecord] = ()) -> str:
        """The base, every readable segment and the finished `extra` records -> a new base; then the
        merged segments go. A concurrent compactor may win: that costs only speed (L12)."""
        records, merged = self.read()
        records.update({(r.range_key, r.attempt): r for r in extra if r.outcome is not None})
        rel = layout.snapshot(self.mission)
        self.store.write_bytes(rel, encode_table(records[i] for i in sorted(records)))
        for seg in merged:
            self.store.remove(seg)
        return self.store.url(rel)

    def _read_file(self, rel: str) -> dict[Ident, AttemptRecord] | None:
        """One file's finished records of this mission; None, with a warning naming it, if unreadable."""
        try:
            data = self.store.read_bytes(rel, SNAPSHOT_MAX_BYTES)
            table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
            rows = table.to_pylist()
            stamp = (table.schema.metadata or {}).get(DIGEST_KEY.encode(), b"").decode()
            if stamp != digest(rows):
                # Edited, or written by something else: the per-attempt files are the truth.
                raise StateError("its rows do not match the digest it was written with")
            recs = [row_record(row, table.schema.names) for row in rows]
        except FileNotFoundError:
            return {} if rel == layout.snapshot(self.mission) else None  # a segment compacted meanwhile
        except Exception as exc:  # noqa: BLE001 - a bad snapshot file costs only speed
            why = "reading its records from their own files"
            log.warning("ignoring snapshot file %s (%s): %s", self.store.url(rel), why, exc)
            return None
        return {
            (r.range_key, r.attempt): r
            for r in recs
            if r.mission == self.mission and r.schema_version == SCHEMA_VERSION and r.outcome is not None
        }
