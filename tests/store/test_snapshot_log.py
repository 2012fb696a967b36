"""The snapshot log of finished attempt records: a base and immutable segments (issue 26 item 6).

The log is never the truth (the per-attempt files are): a torn or edited file of it costs
only speed (L12), a done record is the same in any copy (L32), and compaction keeps every
record exactly once.
"""

from __future__ import annotations

import logging

import pytest

from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.snapshot_log import COMPACT_AFTER_SEGMENTS, SnapshotLog

KEYS = [f"{i * 16000 + 1:010d}-{(i + 1) * 16000:010d}" for i in range(6)]


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path):
    if request.param == "memory":
        return Store(f"memory://snapshot-log-{tmp_path.name}")
    return Store(tmp_path / "root")


def finished(rs: RecordStore, key: str, attempt: int, peak: int) -> AttemptRecord:
    rec = rs.write(AttemptRecord("m1", key, attempt, "ok", peak_anon_bytes=peak))
    rs.mark_done(key, attempt)
    return rec


def test_issue26_item6_segments_serve_done_records_and_files_the_rest(store):
    rs = RecordStore(store, "m1")
    first = [finished(rs, k, 1, 10 + i) for i, k in enumerate(KEYS[:3])]
    second = [finished(rs, k, 1, 20 + i) for i, k in enumerate(KEYS[3:5])]
    rs.append_segment(first)
    rs.append_segment(second + [AttemptRecord("m1", KEYS[5], 1)])  # an unfinished record stays out
    finished(rs, KEYS[5], 1, 30)  # finished after the last segment: read from its own file
    recs, done = rs.load()
    assert len(rs.snapshots.segments()) == 2 and len(recs) == 6 and done == set(recs)
    assert rs.files_read == 1 and rs.unsnapshotted == [(KEYS[5], 1)]
    assert [recs[(k, 1)].peak_anon_bytes for k in KEYS] == [10, 11, 12, 20, 21, 30]


def test_issue26_item6_L12_a_truncated_segment_falls_back_to_the_record_files(store, caplog):
    rs = RecordStore(store, "m1")
    rs.append_segment([finished(rs, k, 1, 10 + i) for i, k in enumerate(KEYS[:3])])
    rs.append_segment([finished(rs, k, 1, 20 + i) for i, k in enumerate(KEYS[3:])])
    torn = rs.snapshots.segments()[0]
    store.write_bytes(torn, store.read_bytes(torn)[:-40])  # a torn write, as a crashed copy leaves it
    with caplog.at_level(logging.WARNING):
        recs, done = rs.load()
    assert [recs[(k, 1)].peak_anon_bytes for k in KEYS] == [10, 11, 12, 20, 21, 22] and done == set(recs)
    assert rs.files_read == 3  # the torn segment's records, from their own files
    assert any(store.url(torn) in m and "ignoring snapshot file" in m for m in caplog.messages)


def test_L12_an_edited_segment_is_not_trusted_over_the_files(store):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rs = RecordStore(store, "m1")
    rs.append_segment([finished(rs, KEYS[0], 1, 7)])
    seg = rs.snapshots.segments()[0]
    rows = pq.ParquetFile(pa.BufferReader(store.read_bytes(seg))).read()
    rows = rows.set_column(rows.schema.get_field_index("peak_anon_bytes"), "peak_anon_bytes", pa.array([1]))
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)  # the footer's digest kept, the rows changed
    store.write_bytes(seg, sink.getvalue().to_pybytes())
    assert rs.load()[0][(KEYS[0], 1)].peak_anon_bytes == 7 and rs.files_read == 1


def test_L32_the_listing_decides_what_exists_whatever_a_segment_holds(store):
    rs = RecordStore(store, "m1")
    rs.append_segment([finished(rs, k, 1, 5) for k in KEYS[:2]])
    store.remove(layout.attempt_file("m1", KEYS[0], 1, "parquet"))  # an operator deleted it
    store.remove(layout.attempt_file("m1", KEYS[1], 1, "done"))  # its done mark lost: not done
    recs, done = rs.load()
    assert sorted(recs) == [(KEYS[1], 1)] and done == set()


def test_issue26_item6_compaction_keeps_every_record_exactly_once(store):
    rs = RecordStore(store, "m1")
    log = SnapshotLog(store, "m1")
    recs = [finished(rs, k, a, 10 * a + i) for a in (1, 2) for i, k in enumerate(KEYS)]
    log.compact(recs[:4])  # a base of four
    log.append(recs[2:8])  # overlapping the base: a compaction killed before removing its segments
    log.append(recs[7:])
    compacted, merged = log.read()
    assert len(merged) == 2 and sorted(compacted) == sorted((r.range_key, r.attempt) for r in recs)
    log.compact()
    base, merged = log.read()
    assert merged == [] and log.segments() == []
    assert base == {(r.range_key, r.attempt): r for r in recs}  # each once, unchanged
    assert rs.load()[0] == base and rs.files_read == 0


def test_issue26_item6_segments_are_compacted_once_there_are_enough(store):
    rs = RecordStore(store, "m1")
    key = KEYS[0]
    for a in range(1, COMPACT_AFTER_SEGMENTS + 2):
        rs.append_segment([finished(rs, key, a, a)])
    assert len(rs.snapshots.segments()) == 1  # sixteen merged into the base, then one more
    assert len(rs.read_snapshot()) == COMPACT_AFTER_SEGMENTS + 1
    assert rs.load()[0][(key, 3)].peak_anon_bytes == 3 and rs.files_read == 0
