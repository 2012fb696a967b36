"""Attempt records on the storage root (L12, L20, L28, L33)."""

import logging

import pytest

from catchup_assets.core.plan.config import validate_mission
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.records import RecordStore, decode, encode
from catchup_assets.store.root import Store

KEY = "0000016001-0000032000"


@pytest.fixture(params=["local", "memory", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return Store(tmp_path / "root")
    if request.param == "s3":  # moto's S3 server (conftest.moto_s3)
        return Store(f"s3://{request.getfixturevalue('s3_bucket')}/root")
    import uuid

    return Store(f"memory://catchup-{uuid.uuid4().hex}")


def test_round_trip_on_local_and_object_storage(store):
    rs = RecordStore(store, "m1")
    r = AttemptRecord("m1", KEY, 1, "ok", exit_code=0, peak_anon_bytes=5, seconds=1.5, fresh_start=True)
    rs.write(r)
    rs.mark_done(KEY, 1)
    recs, done = rs.load()
    assert recs == {(KEY, 1): r} and done == {(KEY, 1)}
    assert decode(encode(r)) == r


def test_L12_a_version_1_record_still_reads_with_the_new_fields_empty(store):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from catchup_assets.store.record_codec import SCHEMA, SCHEMA_V1_NAMES

    rs = RecordStore(store, "m1")
    row = {n: None for n in SCHEMA_V1_NAMES} | {
        "mission": "m1",
        "range_key": KEY,
        "attempt": 1,
        "outcome": "ok",
        "seconds": 12.5,
        "schema_version": 1,
    }
    v1 = pa.schema([SCHEMA.field(n) for n in SCHEMA_V1_NAMES])
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([row], schema=v1), buf)
    store.write_bytes(f"m1/attempts/{KEY}/a001.parquet", buf.getvalue())
    rec = rs.read_one(KEY, 1)
    assert (rec.outcome, rec.seconds, rec.seconds_estimated, rec.last_seen_at) == ("ok", 12.5, None, None)


def test_L22_last_seen_only_moves_forward(store):
    rs = RecordStore(store, "m1")
    first = rs.write(AttemptRecord("m1", KEY, 1, started_at=100.0, last_seen_at=500.0))
    # a restarted dispatcher saw it once, earlier than the flushed sighting: it is not moved back
    merged = rs.write(AttemptRecord("m1", KEY, 1, last_seen_at=300.0), first)
    assert (merged.started_at, merged.last_seen_at) == (100.0, 500.0)


def test_L20_peaks_merge_by_max_and_are_never_lowered(store):
    rs = RecordStore(store, "m1")
    first = rs.write(AttemptRecord("m1", KEY, 1, peak_anon_bytes=900, peak_working_set_bytes=10))
    # a restarted observer starts from zero
    merged = rs.write(AttemptRecord("m1", KEY, 1, peak_anon_bytes=100, peak_working_set_bytes=50), first)
    assert (merged.peak_anon_bytes, merged.peak_working_set_bytes) == (900, 50)
    assert rs.read_one(KEY, 1) == merged


def test_L28_late_measurement_fills_the_hole_and_a_missing_one_never_erases(store):
    rs = RecordStore(store, "m1")
    a = rs.write(AttemptRecord("m1", KEY, 1, "ok", seconds=120.0, tx_apply_count=None))
    b = rs.write(AttemptRecord("m1", KEY, 1, tx_apply_count=777, seconds=None), a)
    assert (b.outcome, b.seconds, b.tx_apply_count) == ("ok", 120.0, 777)


def test_L33_writes_leave_no_temporary_files(tmp_path):
    store = Store(tmp_path / "root")
    rs = RecordStore(store, "m1")
    rs.write(AttemptRecord("m1", KEY, 1, "ok"))
    files = sorted(p.name for p in (tmp_path / "root").rglob("*") if p.is_file())
    assert files == ["a001.parquet"]


def test_L12_torn_foreign_and_misplaced_files_cost_one_attempt_each(tmp_path, caplog):
    store = Store(tmp_path / "root")
    rs = RecordStore(store, "m1")
    good = AttemptRecord("m1", KEY, 2, "ok", peak_anon_bytes=1)
    rs.write(good)
    store.write_bytes(f"m1/attempts/{KEY}/a001.parquet", encode(good)[:40])  # torn
    store.write_bytes(f"m1/attempts/{KEY}/a003.parquet", encode(AttemptRecord("other", KEY, 3)))  # foreign mission
    store.write_bytes(f"m1/attempts/{KEY}/a004.parquet", b"not parquet at all")
    (tmp_path / "root/m1/attempts" / KEY / "a005.parquet.1234.tmp").write_bytes(b"half")  # a writer died
    (tmp_path / "root/m1/attempts/README").write_text("stray")
    rs.mark_done(KEY, 1)
    with caplog.at_level(logging.WARNING):
        recs, done = rs.load()
    assert recs == {(KEY, 2): good}
    assert done == set()  # the done mark of a record that cannot be read does not count
    assert sum("skipping unreadable" in m for m in caplog.messages) == 3


@pytest.mark.parametrize("name", ["M1", "a b", "-m", "m" * 41, "../x", "", "m_1"])
def test_mission_names_are_validated_where_they_enter(name):
    with pytest.raises(ValueError, match="mission name"):
        validate_mission(name)


def test_a_notebook_reads_every_attempt_record_with_plain_pandas(tmp_path):
    import pandas as pd

    store = Store(tmp_path / "root")
    rs = RecordStore(store, "m1")
    for key in (KEY, "0000032001-0000048000"):
        rs.write(AttemptRecord("m1", key, 1, "oom", peak_anon_bytes=7))
        rs.mark_done(key, 1)
        rs.write(AttemptRecord("m1", key, 2, "ok", peak_anon_bytes=9))
        rs.mark_done(key, 2)
    df = pd.read_parquet(tmp_path / "root/m1/attempts")
    assert sorted(zip(df.range_key, df.attempt, df.outcome, strict=True)) == [
        ("0000016001-0000032000", 1, "oom"),
        ("0000016001-0000032000", 2, "ok"),
        ("0000032001-0000048000", 1, "oom"),
        ("0000032001-0000048000", 2, "ok"),
    ]


def test_the_snapshot_serves_done_records_and_the_listing_still_decides(store, caplog):
    rs = RecordStore(store, "m1")
    keys = [f"{i * 16000 + 1:010d}-{(i + 1) * 16000:010d}" for i in range(3)]
    for k in keys:
        rs.write(AttemptRecord("m1", k, 1, "ok", peak_anon_bytes=7))
        rs.mark_done(k, 1)
    recs, done = rs.load()
    rs.write_snapshot(recs, done)
    # Torn after the snapshot: the snapshot still knows the finished record (L12 costs nothing).
    store.write_bytes(f"m1/attempts/{keys[0]}/a001.parquet", b"PAR1torn")
    # Deleted by an operator: gone, whatever the snapshot says.
    store.remove(f"m1/attempts/{keys[1]}/a001.parquet")
    # Newer than the snapshot and not done: read from its own file.
    rs.write(AttemptRecord("m1", keys[2], 2, peak_anon_bytes=9))
    recs, done = rs.load()
    assert sorted(recs) == [(keys[0], 1), (keys[2], 1), (keys[2], 2)]
    assert recs[(keys[0], 1)].peak_anon_bytes == 7 and recs[(keys[2], 2)].peak_anon_bytes == 9
    # An unreadable snapshot costs only speed: every record is read from its file again.
    store.write_bytes("m1/attempt_records.parquet", b"not parquet")
    with caplog.at_level(logging.WARNING):
        recs, _ = rs.load()
    assert sorted(recs) == [(keys[2], 1), (keys[2], 2)]  # keys[0]'s own file is torn: L12 again
    assert any("snapshot" in m for m in caplog.messages)


def test_write_snapshot_keeps_what_another_run_snapshotted(store):
    rs = RecordStore(store, "m1")
    a, b = (AttemptRecord("m1", k, 1, "ok", peak_anon_bytes=1) for k in (KEY, "0000032001-0000048000"))
    rs.write_snapshot({(a.range_key, 1): a}, {(a.range_key, 1)})
    rs.write_snapshot({(b.range_key, 1): b, (KEY, 2): AttemptRecord("m1", KEY, 2)}, {(b.range_key, 1), (KEY, 2)})
    assert sorted(rs.read_snapshot()) == [(KEY, 1), (b.range_key, 1)]  # an unfinished record stays out


def _v2_table(rows):
    import pyarrow as pa

    from catchup_assets.store.record_codec import SCHEMA, SCHEMA_V2_NAMES

    v2 = pa.schema([SCHEMA.field(n) for n in SCHEMA_V2_NAMES])
    return pa.Table.from_pylist(rows, schema=v2)


def _v2_row(attempt, **values):
    from catchup_assets.store.record_codec import SCHEMA_V2_NAMES

    return (
        {n: None for n in SCHEMA_V2_NAMES}
        | {
            "mission": "m1",
            "range_key": KEY,
            "attempt": attempt,
            "outcome": "disrupted",
            "tier": "giant",
            "schema_version": 2,
        }
        | values
    )


def test_L12_a_version_2_record_and_snapshot_still_read_with_no_capacity_type(store):
    """Records written before the on-demand fallback (issue 21) read with capacity_type empty: their tier's."""
    import io

    import pyarrow.parquet as pq

    from catchup_assets.store import layout
    from catchup_assets.store.snapshot_log import DIGEST_KEY as _DIGEST_KEY
    from catchup_assets.store.snapshot_log import digest as _digest

    rs = RecordStore(store, "m1")
    buf = io.BytesIO()
    pq.write_table(_v2_table([_v2_row(1, seconds=7.0)]), buf)
    store.write_bytes(f"m1/attempts/{KEY}/a001.parquet", buf.getvalue())
    rec = rs.read_one(KEY, 1)
    assert (rec.outcome, rec.tier, rec.seconds, rec.capacity_type) == ("disrupted", "giant", 7.0, None)
    table = _v2_table([_v2_row(2, seconds=3.0)])
    table = table.replace_schema_metadata({_DIGEST_KEY: _digest(table.to_pylist())})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    store.write_bytes(layout.snapshot("m1"), buf.getvalue())
    snap = rs.read_snapshot()
    assert [(r.attempt, r.seconds, r.capacity_type) for r in snap.values()] == [(2, 3.0, None)]


def test_the_capacity_type_an_attempt_bought_is_recorded(store):
    rs = RecordStore(store, "m1")
    r = AttemptRecord("m1", KEY, 4, tier="giant", capacity_type="on-demand", memory_request_bytes=5)
    rs.write(r)
    assert rs.read_one(KEY, 4).capacity_type == "on-demand"
    # a later write of the same attempt without the field never erases it
    assert rs.write(AttemptRecord("m1", KEY, 4, outcome="ok"), r).capacity_type == "on-demand"


def test_issue25_a_version_3_record_reads_with_setup_seconds_empty(store):
    """Records written before the phase lines were read (schema 3) decode with setup_seconds None."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from catchup_assets.store.record_codec import SCHEMA, SCHEMA_V3_NAMES

    row = {n: None for n in SCHEMA_V3_NAMES} | {
        "mission": "m1",
        "range_key": KEY,
        "attempt": 1,
        "outcome": "ok",
        "seconds": 9.0,
        "capacity_type": "spot",
        "schema_version": 3,
    }
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([row], schema=pa.schema([SCHEMA.field(n) for n in SCHEMA_V3_NAMES])), buf)
    store.write_bytes(f"m1/attempts/{KEY}/a001.parquet", buf.getvalue())
    rec = RecordStore(store, "m1").read_one(KEY, 1)
    assert (rec.seconds, rec.capacity_type, rec.setup_seconds) == (9.0, "spot", None)


def test_issue25_setup_seconds_round_trips(store):
    rec = AttemptRecord("m1", KEY, 1, "ok", seconds=10.0, setup_seconds=4.25)
    assert decode(encode(rec)).setup_seconds == 4.25
