"""Attempt records on the storage root: one Parquet file per attempt, done mark last.

The paths are store/layout.py's: the record `attempts/<range_key>/a<NNN>.parquet`, its
done mark `_a<NNN>.done` written after it (L32), claims and resets beside them, and
the snapshot log of done attempts (`attempt_records.parquet` and its segments,
store/snapshot_log.py): never the source of truth (docs/storage.md).

A done-marked record never changes again (L32), so `load()` takes it from the
snapshot log instead of opening its file: a few reads instead of thousands. The
listing still decides what exists; a record missing from the log, or a log file
that is stale or unreadable, falls back to the record's own file.

A torn, foreign or old-schema file costs the one attempt it describes, with a
warning (L12, L33); peaks merge by max (L20) and a late field fills a hole (L28).
The record itself, its merge and its bounds are pure (core/values/attempt_record.py).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Mapping

from catchup_assets.core.errors import StateError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.core.values.attempt_record import AttemptRecord, merge
from catchup_assets.store import layout
from catchup_assets.store.parallel_decode import decode_files
from catchup_assets.store.record_codec import decode, encode
from catchup_assets.store.root import Store
from catchup_assets.store.safe_read import CLAIM_MAX_BYTES, RECORD_MAX_BYTES
from catchup_assets.store.snapshot_log import SnapshotLog
from catchup_assets.store.strict_json import loads

log = logging.getLogger(__name__)

# Matched whole (fullmatch) and in ASCII digits: a listed name with a trailing newline, or another
# script's digits that int() would still read, is no file of ours.
_RESET_FILE = re.compile(layout.ATTEMPTS_DIR + r"/([0-9]{10}-[0-9]{10})/_reset-a([0-9]{3,})")
_CLAIM_FILE = re.compile(layout.ATTEMPTS_DIR + r"/([0-9]{10}-[0-9]{10})/_claim-a([0-9]{3,})")
_ATTEMPT_FILE = re.compile(
    layout.ATTEMPTS_DIR + r"/([0-9]{10}-[0-9]{10})/(?:a([0-9]{3,})\.(parquet)|_a([0-9]{3,})\.(done))"
)


class RecordStore:
    """A mission's attempt records on the storage root."""

    def __init__(self, store: Store, mission: str, parallel: bool = True):
        self.store = store
        self.parallel = parallel  # thousands of record files to open are decoded on a process pool
        self.mission = validate_mission(mission)
        self.snapshots = SnapshotLog(store, self.mission)
        self.files_read = 0  # record files the last load() had to open (not in the snapshot log)
        self.unsnapshotted: list[tuple[str, int]] = []  # done records the last load() read from their files

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
            return self._checked(decode(self.store.read_bytes(rel, RECORD_MAX_BYTES)), range_key, attempt, rel)
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
            m = _ATTEMPT_FILE.fullmatch(rel[len(prefix) :]) if rel.startswith(prefix) else None
            if not m and (_RESET_FILE.fullmatch(rel[len(prefix) :]) or _CLAIM_FILE.fullmatch(rel[len(prefix) :])):
                continue
            if not m:
                log.warning("ignoring unexpected file under attempts: %r", rel)  # repr: a name may hold a newline
                continue
            key, attempt, ext = m.group(1), int(m.group(2) or m.group(4)), m.group(3) or m.group(5)
            if wanted is not None and key not in wanted:
                continue
            if ext == "done":
                done.add((key, attempt))
            else:
                files.append((key, attempt, rel))
        snapshot = self.read_snapshot() if files else {}
        self.unsnapshotted = []
        to_read = []
        for key, attempt, rel in files:
            ident = (key, attempt)
            if ident in done and ident in snapshot:
                records[ident] = snapshot[ident]
            else:
                to_read.append((key, attempt, rel))
        self.files_read = len(to_read)
        decoded = self._decode_many([rel for _, _, rel in to_read])
        for (key, attempt, rel), (rec, error) in zip(to_read, decoded, strict=True):
            try:
                if rec is None:
                    raise StateError(error)
                records[(key, attempt)] = self._checked(rec, key, attempt, rel)
            except Exception as exc:  # noqa: BLE001 - a bad file costs one attempt (L12)
                log.warning("skipping unreadable attempt record %s: %s", rel, exc)
                continue
            if (key, attempt) in done:
                self.unsnapshotted.append((key, attempt))
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

    def _decode_many(self, rels: list[str]) -> list[tuple[AttemptRecord | None, str | None]]:
        """Each file's record or why not: on a process pool when there are thousands on a local
        root and `parallel` is on (the cold read: store/parallel_decode.py), else one by one."""
        paths = [self.store.path(r) for r in rels]
        if self.parallel and self.store.local and (pooled := decode_files(paths, self.store.base)):
            return pooled
        out: list[tuple[AttemptRecord | None, str | None]] = []
        for rel in rels:
            try:
                out.append((decode(self.store.read_bytes(rel, RECORD_MAX_BYTES)), None))
            except Exception as exc:  # noqa: BLE001 - a bad file costs one attempt (L12)
                out.append((None, f"{type(exc).__name__}: {exc}"))
        return out

    def sweep_tmp(self, now: float) -> int:
        """Remove half-written files a dead writer left under this mission (see Store.sweep_tmp)."""
        return self.store.sweep_tmp(self.mission, now)

    def read_snapshot(self) -> dict[tuple[str, int], AttemptRecord]:
        """The snapshot log's records by (range, attempt): the base's and every readable segment's."""
        return self.snapshots.read()[0]

    def append_segment(self, records: Iterable[AttemptRecord]) -> None:
        """Append newly finished records to the snapshot log as one small segment (compacted in time)."""
        self.snapshots.append(records)

    def write_snapshot(self, records: Mapping[tuple[str, int], AttemptRecord], done: Iterable[tuple[str, int]]) -> str:
        """Compact the snapshot log, with the done ones of `records` added, into the base snapshot
        (a concurrent writer may win: that costs only speed)."""
        return self.snapshots.compact(records[i] for i in done if i in records)

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
            holder = self._read_claim(self._claim_rel(range_key, attempt)).get("holder")
        except Exception:  # noqa: BLE001 - unreadable: not provably anyone's
            return None
        return holder if isinstance(holder, str) else None

    def _read_claim(self, rel: str) -> dict:
        """A claim's JSON object, read defensively (a regular file of at most CLAIM_MAX_BYTES, strict JSON):
        the one place a claim is parsed; StateError naming it if it is not one."""
        doc = loads(self.store.read_bytes(rel, CLAIM_MAX_BYTES), self.store.url(rel))
        if not isinstance(doc, dict):
            raise StateError(f"{self.store.url(rel)} is not a claim: not a JSON object")
        return doc

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
            if c := _CLAIM_FILE.fullmatch(tail):
                try:
                    claim = self._read_claim(rel)
                    if other_than is None or claim.get("holder") != other_than:
                        claims[int(c.group(2))] = _claimed_at(claim["at"])
                except Exception as exc:  # noqa: BLE001 - a torn claim still claims (L12)
                    log.warning("claim %s unreadable (%s): taken as made now", rel, exc)
                    claims[int(c.group(2))] = float("inf")
                continue
            m = _ATTEMPT_FILE.fullmatch(tail)
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
            m = _RESET_FILE.fullmatch(rel[len(prefix) :]) if rel.startswith(prefix) else None
            if m and (wanted is None or m.group(1) in wanted):
                out[m.group(1)] = max(out.get(m.group(1), 0), int(m.group(2)))
        return out

    def _checked(self, rec: AttemptRecord, key: str, attempt: int, rel: str) -> AttemptRecord:
        if (rec.mission, rec.range_key, rec.attempt) != (self.mission, key, attempt):
            raise StateError(f"{rel} describes {rec.mission}/{rec.range_key}/a{rec.attempt}, not its own path")
        return rec


def _claimed_at(at: object) -> float:
    """A claim's time: a finite number (a NaN would make the claim never young and never old)."""
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise StateError(f"its time {at!r} is not a finite number")
    return float(at)
