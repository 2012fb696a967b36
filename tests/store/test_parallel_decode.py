"""The cold read on a process pool (issue 26 item 6): the same records as one by one, and a
torn file still costs only its own attempt, named in a warning (L12)."""

from __future__ import annotations

import logging

from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store import layout, parallel_decode
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

KEYS = [f"{i * 16000 + 1:010d}-{(i + 1) * 16000:010d}" for i in range(6)]


def test_issue26_item6_L12_the_pool_reads_what_one_by_one_reads(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(parallel_decode, "PARALLEL_MIN_FILES", 4)  # a pool for six files, not two thousand
    monkeypatch.setattr(parallel_decode, "workers", lambda: 2)
    store = Store(tmp_path / "root")
    rs = RecordStore(store, "m1")
    for i, key in enumerate(KEYS):
        rs.write(AttemptRecord("m1", key, 1, "ok", peak_anon_bytes=i, seconds=float(i)))
        rs.mark_done(key, 1)
    torn = layout.attempt_file("m1", KEYS[2], 1, "parquet")
    store.write_bytes(torn, store.read_bytes(torn)[:30])
    serial = RecordStore(store, "m1", parallel=False).load()
    with caplog.at_level(logging.WARNING):
        pooled = rs.load()
    assert pooled == serial and sorted(pooled[0]) == [(k, 1) for k in KEYS if k != KEYS[2]]
    assert rs.files_read == 6 and not any("one by one" in m for m in caplog.messages)  # the pool ran
    assert any(torn in m for m in caplog.messages)
