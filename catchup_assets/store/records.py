"""Attempt records on the storage root: one Parquet file per attempt, done mark last.

The paths are store/layout.py's: the record `attempts/<range_key>/a<NNN>.parquet`, its
done mark `_a<NNN>.done` written after it (L32), claims and resets beside them, and
`attempt_records.parquet`, every done attempt in one table: a snapshot, never the source
of truth (docs/storage.md).

A done-marked record never changes again (L32), so `load()` takes it from the
snapshot instead of opening its file: one read instead of thousands. The
listing still decides what exists; a record missing from the snapshot, or a
snapshot that is stale or unreadable, falls back to the record's own file.

A torn, foreign or old-schema file costs the one attempt it describes, with a
warning (L12, L33); peaks merge by max (L20) and a late field fills a hole (L28).
The record itself, its merge and its bounds are pure (core/dispatch/record.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields

import pyarrow as pa
import pyarrow.parquet as pq

from catchup_assets.core.dispatch.record import (
    COLUMNS,
    SCHEMA_VERSION,
    AttemptRecord,
    UnrecordableRecord,
    merge,
    unrecordable_fields,
)
from catchup_assets.core.errors import StateError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.store import layout
from catchup_assets.store.root import Store

log = logging.getLogger(__name__)

_RESET_FILE = re.compile("^" + layout.ATTEMPTS_DIR + r"/(\d{10}-\d{10})/_reset-a(\d{3,})$")
_CLAIM_FILE = re.compile("^" + layout.ATTEMPTS_DIR + r"/(\d{10}-\d{10})/_claim-a(\d{3,})$")
_ATTEMPT_FILE = re.compile("^" + layout.ATTEMPTS_DIR + r"/(\d{10}-\d{10})/(?:a(\d{3,})\.(parquet)|_a(\d{3,})\.(done))$")

# The record is a pure value (core/dispatch/record.py); its column kinds as Arrow types.
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
    return _record(table.to_pylist()[0], table.schema.names)


def _record(row: dict, names: list[str]) -> AttemptRecord:
    """A record from a row of any schema version (older ones with their late fields empty); else refused."""
    version = row.get("schema_version")
    if names == SCHEMA.names and version == SCHEMA_VERSION:
        return AttemptRecord(**row)
    if version in OLD_NAMES and names == OLD_NAMES[version]:
        return AttemptRecord(**{**row, "schema_version": SCHEMA_VERSION})
    raise StateError(f"unexpected columns or schema_version {version!r} ({len(names)} columns)")


_DIGEST_KEY = "catchup_assets.rows_sha256"


def _digest(rows: list[dict]) -> str:
    """A digest of the snapshot's rows, kept in its footer: a snapshot whose rows were changed
    by anything but write_snapshot is not trusted over the files it summarizes."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=repr).encode()).hexdigest()


class RecordStore:
    """A mission's attempt records on the storage root."""

    def __init__(self, store: Store, mission: str):
        self.store = store
        self.mission = validate_mission(mission)
        self.files_read = 0  # record files the last load() had to open (not in the snapshot)

    def _rel(self, range_key: str, attempt: int, ext: str) -> str:
        return layout.attempt_file(self.mission, range_key, attempt, ext)

    def log_url(self, range_key: str, attempt: int) -> str:
        return self.store.url(layout.log(self.mission, range_key, attempt))

    def write(self, rec: AttemptRecord, existing: AttemptRecord | None = None) -> AttemptRecord:
        """Merge `rec` over what is known and write it atomically; returns the merged record."""
        if rec.mission != self.mission:
            raise ValueError(f"record of mission {rec.mission!r} written to {self.mission!r}")
        merged = merge(existing, rec)
        self.store.write_bytes(self._rel(rec.range_key, rec.attempt, "parquet"), encode(merged))
        return merged

    def is_done(self, range_key: str, attempt: int) -> bool:
        return self.store.exists(self._rel(range_key, attempt, "done"))

    def mark_done(self, range_key: str, attempt: int) -> None:
        self.store.write_bytes(self._rel(range_key, attempt, "done"), b"")

    def read_one(self, range_key: str, attempt: int) -> AttemptRecord | None:
        rel = self._rel(range_key, attempt, "parquet")
        try:
            return self._checked(decode(self.store.read_bytes(rel)), range_key, attempt, rel)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - a bad file costs one attempt (L12)
            log.warning("skipping unreadable attempt record %s: %s", rel, exc)
            return None

    def load(
        self, keys: Iterable[str] | None = None
    ) -> tuple[dict[tuple[str, int], AttemptRecord], set[tuple[str, int]]]:
        """All records (optionally of `keys` only) and the set of done marks, in one listing."""
        wanted = set(keys) if keys is not None else None
        records: dict[tuple[str, int], AttemptRecord] = {}
        done: set[tuple[str, int]] = set()
        files: list[tuple[str, int, str]] = []
        prefix = f"{self.mission}/"
        for rel in self.store.find(layout.attempts(self.mission)):
            m = _ATTEMPT_FILE.match(rel[len(prefix) :]) if rel.startswith(prefix) else None
            if not m and (_RESET_FILE.match(rel[len(prefix) :]) or _CLAIM_FILE.match(rel[len(prefix) :])):
                continue
            if not m:
                log.warning("ignoring unexpected file under attempts: %s", rel)
                continue
            key, attempt, ext = m.group(1), int(m.group(2) or m.group(4)), m.group(3) or m.group(5)
            if wanted is not None and key not in wanted:
                continue
            if ext == "done":
                done.add((key, attempt))
            else:
                files.append((key, attempt, rel))
        snapshot = self.read_snapshot() if files else {}
        self.files_read = 0
        for key, attempt, rel in files:
            ident = (key, attempt)
            if ident in done and ident in snapshot:
                records[ident] = snapshot[ident]
                continue
            self.files_read += 1
            try:
                records[ident] = self._checked(decode(self.store.read_bytes(rel)), key, attempt, rel)
            except Exception as exc:  # noqa: BLE001 - a bad file costs one attempt (L12)
                log.warning("skipping unreadable attempt record %s: %s", rel, exc)
        # A done mark without its record means the record was lost: not done, and said so.
        for key, attempt in sorted(done - set(records)):
            log.warning(
                "%s/attempts/%s: done mark of attempt %d has no readable record: the attempt counts as not done",
                self.mission,
                key,
                attempt,
            )
        done &= set(records)
        return records, done

    def sweep_tmp(self, now: float) -> int:
        """Remove half-written files a dead writer left under this mission (see Store.sweep_tmp)."""
        return self.store.sweep_tmp(self.mission, now)

    def _snapshot_rel(self) -> str:
        return layout.snapshot(self.mission)

    def read_snapshot(self) -> dict[tuple[str, int], AttemptRecord]:
        """The snapshot's records by (range, attempt); empty if there is none or it is unreadable."""
        rel = self._snapshot_rel()
        try:
            table = pq.ParquetFile(pa.BufferReader(self.store.read_bytes(rel))).read()
            rows = table.to_pylist()
            stamp = (table.schema.metadata or {}).get(_DIGEST_KEY.encode(), b"").decode()
            if stamp != _digest(rows):
                # Edited, or written by something else: the per-attempt files are the truth.
                raise StateError("its rows do not match the digest it was written with")
            recs = [_record(row, table.schema.names) for row in rows]
        except FileNotFoundError:
            return {}
        except Exception as exc:  # noqa: BLE001 - a bad snapshot costs only speed
            log.warning("ignoring snapshot %s (reading each record instead): %s", rel, exc)
            return {}
        return {
            (r.range_key, r.attempt): r
            for r in recs
            if r.mission == self.mission and r.schema_version == SCHEMA_VERSION and r.outcome is not None
        }

    def write_snapshot(self, records: Mapping[tuple[str, int], AttemptRecord], done: Iterable[tuple[str, int]]) -> str:
        """Add the done records to the snapshot (a concurrent writer may win: that costs only speed)."""
        rows = self.read_snapshot()
        rows.update({i: records[i] for i in done if i in records and records[i].outcome is not None})
        table = pa.Table.from_pylist([vars(rows[i]) for i in sorted(rows)], schema=SCHEMA)
        table = table.replace_schema_metadata({_DIGEST_KEY: _digest(table.to_pylist())})
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        self.store.write_bytes(self._snapshot_rel(), buf.getvalue())
        return self.store.url(self._snapshot_rel())

    def claim(self, range_key: str, attempt: int, holder: str, now: float) -> bool:
        """Take attempt `attempt` of the range for `holder`, or False if someone has it already.

        The claim outlives the attempt's Job, whose name is free again once the Job is
        deleted: whoever dispatches, a range's attempt number is started once.
        """
        return self.store.create_exclusive(
            self._claim_rel(range_key, attempt), json.dumps({"holder": holder, "at": now}).encode()
        )

    def claim_holder(self, range_key: str, attempt: int) -> str | None:
        """Who holds the attempt's claim; None if there is none or it cannot be read."""
        try:
            return json.loads(self.store.read_bytes(self._claim_rel(range_key, attempt))).get("holder")
        except Exception:  # noqa: BLE001 - unreadable: not provably anyone's
            return None

    def _claim_rel(self, range_key: str, attempt: int) -> str:
        return layout.claim(self.mission, range_key, attempt)

    def load_range(
        self, range_key: str, other_than: str | None = None
    ) -> tuple[dict[int, AttemptRecord], set[int], dict[int, float]]:
        """One range's records, done marks and claims (attempt -> claimed at; only those of
        holders other than `other_than`), read afresh."""
        records: dict[int, AttemptRecord] = {}
        done: set[int] = set()
        claims: dict[int, float] = {}
        prefix = f"{self.mission}/"
        for rel in self.store.find(layout.attempts(self.mission, range_key)):
            tail = rel[len(prefix) :] if rel.startswith(prefix) else rel
            if c := _CLAIM_FILE.match(tail):
                try:
                    claim = json.loads(self.store.read_bytes(rel))
                    if other_than is None or claim.get("holder") != other_than:
                        claims[int(c.group(2))] = float(claim["at"])
                except Exception as exc:  # noqa: BLE001 - a torn claim still claims (L12)
                    log.warning("claim %s unreadable (%s): taken as made now", rel, exc)
                    claims[int(c.group(2))] = float("inf")
                continue
            m = _ATTEMPT_FILE.match(tail)
            if not m or m.group(1) != range_key:
                continue
            attempt = int(m.group(2) or m.group(4))
            if m.group(5):
                done.add(attempt)
            elif (rec := self.read_one(range_key, attempt)) is not None:
                records[attempt] = rec
        return records, done & set(records), claims

    def mark_reset(self, range_key: str, after_attempt: int) -> None:
        """An operator's new run over a condemned range: budgets count attempts after this one."""
        self.store.write_bytes(layout.reset(self.mission, range_key, after_attempt), b"")

    def load_resets(self, keys: Iterable[str] | None = None) -> dict[str, int]:
        wanted = set(keys) if keys is not None else None
        out: dict[str, int] = {}
        prefix = f"{self.mission}/"
        for rel in self.store.find(layout.attempts(self.mission)):
            m = _RESET_FILE.match(rel[len(prefix) :]) if rel.startswith(prefix) else None
            if m and (wanted is None or m.group(1) in wanted):
                out[m.group(1)] = max(out.get(m.group(1), 0), int(m.group(2)))
        return out

    def _checked(self, rec: AttemptRecord, key: str, attempt: int, rel: str) -> AttemptRecord:
        if (rec.mission, rec.range_key, rec.attempt) != (self.mission, key, attempt):
            raise StateError(f"{rel} describes {rec.mission}/{rec.range_key}/a{rec.attempt}, not its own path")
        return rec
