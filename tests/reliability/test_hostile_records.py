"""Issue 45 items 2 and 3: every record read back from the storage root, and every previous profile, is read
defensively. One table per way in, a row per hostile input, each row's id naming the failure of the issue's
"Why" it pins (f3 .. f10, f26, f27; rows for the other record kinds pin item 2's "every record"):

- f3: a control.json nested 100 000 deep (valid JSON) raised RecursionError and stopped every dispatcher;
- f4: `catchup-assets control ... pause` printed the same traceback instead of replacing the record;
- f5, f6: control.json as a FIFO, or a link to /dev/zero, hung the dispatcher's pass for good;
- f7, f8: a previous profile given as a FIFO hung the plan; /dev/zero was read into memory;
- f9: an http server that streams forever was buffered up to the timeout;
- f10: a 10^6-row profile took 40 s and 1.4 GiB;
- f26, f27: a hand-edited control record with `history[].at` NaN, or `"paused"` twice, was taken silently.

The dispatcher is the real one over the fake backend and clock; the CLI is `catchup-assets` itself; the http
server is a real one on 127.0.0.1. Every test is bounded in time, so a hang is a failure.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catchup_assets.cli.main import run as cli
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.defs.assets.launchpad import policies
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.saved import load_mission, mission_doc, save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.profiles import ProfileRefused, load_previous_profile
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import PROFILE_SCHEMA, write_table
from catchup_assets.store.trusted import load_trusted_hashes
from fakes import FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges
RANGES = dispatch_order(plan_ranges(SPAN))
KEY = RANGES[0].key
UNREADABLE = "control record unreadable (the last good one kept)"


def good_control(at: float = 1_700_000_000.0) -> dict:
    return {"paused": True, "parallelism": None, "drain": False,
            "history": [{"at": at, "who": "ops", "action": "pause", "value": None}]}  # fmt: skip


def nested(tmp, path):
    # 200 KB of valid JSON, 100 000 deep: json.loads recurses once per level.
    path.write_bytes(b'{"paused": true, "drain": false, "parallelism": null, "history": ' + b"[" * 100_000
                     + b"]" * 100_000 + b"}")  # fmt: skip


def fifo(tmp, path):
    os.mkfifo(path)


def link_to_dev_zero(tmp, path):
    os.symlink("/dev/zero", path)


def link_to_a_fifo_in_the_root(tmp, path):
    os.mkfifo(path.parent / "elsewhere")
    os.symlink(path.parent / "elsewhere", path)


def too_large(tmp, path):
    path.write_bytes(json.dumps(good_control()).encode() + b" " * (2 * 1024 * 1024))


def nan_at(tmp, path):
    path.write_text(json.dumps(good_control(at=float("nan"))))  # json.dumps writes the bare NaN a hand would


def nan_at_as_a_string(tmp, path):
    doc = good_control()
    doc["history"][0]["at"] = "nan"  # float("nan") took it
    path.write_text(json.dumps(doc))


def paused_twice(tmp, path):
    path.write_text('{"paused": true, "paused": false, "drain": false, "parallelism": null, "history": []}')


HOSTILE_CONTROL = [
    pytest.param(nested, "nested more than", id="f3-control-nested-100000-deep"),
    pytest.param(fifo, "is a FIFO", id="f5-control-a-fifo"),
    pytest.param(link_to_dev_zero, "leads out of the storage root", id="f6-control-a-link-to-dev-zero"),
    pytest.param(link_to_a_fifo_in_the_root, "is a FIFO", id="f5-control-a-link-to-a-fifo-in-the-root"),
    pytest.param(too_large, "larger than its cap of 1048576 bytes", id="f6-control-larger-than-its-cap"),
    pytest.param(nan_at, "NaN is not a JSON number", id="f26-control-history-at-NaN"),
    pytest.param(nan_at_as_a_string, "history at 'nan' is not a finite time", id="f26-control-history-at-'nan'"),
    pytest.param(paused_twice, "key 'paused' appears more than once", id="f27-control-paused-twice"),
]


def dispatcher(store: Store, clock: FakeClock, backend: FakeBackend) -> Dispatcher:
    mission = MissionConfig("m1", SPAN, store.root, parallelism=2, poll_seconds=5)
    return Dispatcher(
        DispatchConfig(mission, RANGES, holder="run-a"),
        backend,
        RecordStore(store, "m1"),
        clock=clock,
        read_control=ControlStore(store, "m1").read,
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("make", "says"), HOSTILE_CONTROL)
def test_issue45_a_hostile_control_record_keeps_the_last_good_one_pass_after_pass(make, says, tmp_path, caplog):
    """The dispatcher reads a good record (pause), then finds it replaced by a hostile one: each of ten passes
    (twice failing_passes_limit) goes on, still paused (the last good record: nothing is submitted), the status
    line saying why the record cannot be read, and the log saying it once."""
    store, clock = Store(tmp_path / "root"), FakeClock()
    backend = FakeBackend(clock, lambda spec: Script(seconds=30))
    ControlStore(store, "m1").write(MissionControl.from_doc(good_control()))
    d = dispatcher(store, clock, backend)
    d.pass_once()
    clock.sleep(5)
    assert backend.submitted == []  # paused by the good record
    path = tmp_path / "root" / layout.control("m1")
    path.unlink()
    make(tmp_path, path)
    with caplog.at_level(logging.WARNING):
        lines = []
        for _ in range(10):
            lines.append(d.pass_once().line())  # DispatcherStuck, RecursionError or a hang would end it here
            clock.sleep(5)
    assert backend.submitted == []  # still paused: the last good record holds
    assert all(UNREADABLE in line and says in line for line in lines), lines[-1]
    warned = [r.getMessage() for r in caplog.records if "control record unreadable" in r.getMessage()]
    assert len(warned) == 1 and says in warned[0], warned


def planned(root) -> Store:
    store = Store(root)
    cfg = MissionConfig("m1", SPAN, str(root), parallelism=2, poll_seconds=5)
    save_mission(store, cfg, max_parallelism=8)
    write_table(store, layout.plan("m1"), prepare(cfg).plan)
    return store


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("make", "says"), HOSTILE_CONTROL)
def test_issue45_f4_the_cli_writes_a_fresh_control_record_over_one_it_cannot_read(make, says, tmp_path, capsys):
    """`catchup-assets control ... pause` over each hostile record: it succeeds, says what it replaced and why,
    and leaves a regular file holding the pause (a link is replaced, never written through)."""
    store = planned(tmp_path)
    path = tmp_path / layout.control("m1")
    make(tmp_path, path)
    assert cli(["control", "--root", str(tmp_path), "--mission", "m1", "pause", "--who", "ops"]) == 0
    out = capsys.readouterr().out
    assert "replaced an unreadable control record" in out and says in out, out
    assert "mission m1: paused" in out
    assert path.is_file() and not path.is_symlink()
    control = ControlStore(store, "m1").read()
    assert control.paused and [c.who for c in control.history] == ["cli:ops"]
    assert cli(["control", "--root", str(tmp_path), "--mission", "m1", "resume", "--who", "ops"]) == 0
    assert "replaced" not in capsys.readouterr().out  # a readable record is changed, not replaced


# -- the other records on the storage root (item 2: every record, each costing only itself) --------------


def store_with_a_record(tmp) -> RecordStore:
    rs = RecordStore(Store(tmp / "root"), "m1", parallel=False)
    rs.write(AttemptRecord("m1", KEY, 1, "ok", peak_anon_bytes=7, seconds=10.0))
    rs.mark_done(KEY, 1)
    return rs


def attempt_record_a_fifo(tmp):
    rs = store_with_a_record(tmp)
    path = tmp / "root" / layout.attempt_file("m1", KEY, 1, "parquet")
    path.unlink()
    os.mkfifo(path)
    assert rs.load() == ({}, set())  # the one attempt it describes is not known; nothing hangs
    assert rs.read_one(KEY, 1) is None


def attempt_record_a_link_out_of_the_root(tmp):
    rs = store_with_a_record(tmp)
    path = tmp / "root" / layout.attempt_file("m1", KEY, 1, "parquet")
    outside = tmp / "outside.parquet"
    os.replace(path, outside)  # a real record, but outside the root
    os.symlink(outside, path)
    assert rs.load() == ({}, set())


def snapshot_a_link_to_dev_zero(tmp):
    rs = store_with_a_record(tmp)
    os.symlink("/dev/zero", tmp / "root" / layout.snapshot("m1"))
    records, done = rs.load()
    assert records[(KEY, 1)].peak_anon_bytes == 7 and done == {(KEY, 1)}  # read from its own file


def claim_a_fifo(tmp):
    rs = store_with_a_record(tmp)
    os.mkfifo(tmp / "root" / layout.claim("m1", KEY, 2))
    assert rs.claim_holder(KEY, 2) is None
    assert rs.load_range(KEY)[2] == {2: float("inf")}  # a torn claim still claims (L12): taken as made now


def claim_nested_deep(tmp):
    rs = store_with_a_record(tmp)
    # 20 000 deep fits the claim's cap of 64 KiB, and json.loads would still recurse out.
    (tmp / "root" / layout.claim("m1", KEY, 2)).write_bytes(b'{"holder": ' + b"[" * 20_000 + b"]" * 20_000 + b"}")
    assert rs.claim_holder(KEY, 2) is None and rs.load_range(KEY)[2] == {2: float("inf")}


def claim_at_nan(tmp):
    rs = store_with_a_record(tmp)
    (tmp / "root" / layout.claim("m1", KEY, 2)).write_text('{"holder": "run-b", "at": NaN}')
    assert rs.load_range(KEY)[2] == {2: float("inf")}


def mission_file_a_fifo(tmp):
    store = Store(tmp / "root")
    os.makedirs(tmp / "root" / "m1")
    os.mkfifo(tmp / "root" / layout.mission_file("m1"))
    assert mission_doc(store, "m1") is None
    with pytest.raises(StateError, match="mission.json is not a mission file: .* is a FIFO"):
        load_mission(store, "m1")


def mission_file_nested_deep(tmp):
    store = Store(tmp / "root")
    os.makedirs(tmp / "root" / "m1")
    (tmp / "root" / layout.mission_file("m1")).write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert mission_doc(store, "m1") is None
    with pytest.raises(StateError, match="mission.json is not a mission file: not valid JSON: nested more than"):
        load_mission(store, "m1")


def trusted_hashes_nested_deep(tmp):
    path = tmp / "trusted.json"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ConfigError, match="trusted_hashes .*trusted.json is not JSON: nested more than 2"):
        load_trusted_hashes(str(path), timeout=5)


def trusted_hashes_a_fifo(tmp):
    os.mkfifo(tmp / "trusted.json")
    with pytest.raises(ConfigError, match="trusted_hashes .*trusted.json cannot be read .*is a FIFO"):
        load_trusted_hashes(str(tmp / "trusted.json"), timeout=5)


OTHER_RECORDS = [
    pytest.param(attempt_record_a_fifo, "skipping unreadable attempt record", id="f5-attempt-record-a-fifo"),
    pytest.param(attempt_record_a_link_out_of_the_root, "leads out of the storage root", id="f6-record-linked-out"),
    pytest.param(snapshot_a_link_to_dev_zero, "ignoring snapshot file", id="f6-snapshot-a-link-to-dev-zero"),
    pytest.param(claim_a_fifo, "taken as made now", id="f5-claim-a-fifo"),
    pytest.param(claim_nested_deep, "nested more than", id="f3-claim-nested-20000-deep"),
    pytest.param(claim_at_nan, "NaN is not a JSON number", id="f26-claim-at-NaN"),
    pytest.param(mission_file_a_fifo, "is a FIFO", id="f5-mission-json-a-fifo"),
    pytest.param(mission_file_nested_deep, "nested more than", id="f3-mission-json-nested-100000-deep"),
    pytest.param(trusted_hashes_nested_deep, None, id="f3-trusted-hashes-nested-100000-deep"),
    pytest.param(trusted_hashes_a_fifo, None, id="f5-trusted-hashes-a-fifo"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("run", "warned"), OTHER_RECORDS)
def test_issue45_every_stored_record_is_read_as_a_bounded_regular_file(run, warned, tmp_path, caplog):
    """Each kind of record, hostile: it costs itself (skipped, re-read from its own file, or refused naming it),
    with a warning naming why where it is skipped; nothing hangs or recurses out."""
    with caplog.at_level(logging.WARNING):
        run(tmp_path)
    if warned is not None:
        assert any(warned in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


# -- previous profiles (item 3): bounded in bytes and rows, streamed ----------------------------------------


def profile_of(path, rows: int) -> str:
    columns = {f.name: pa.nulls(rows, f.type) for f in PROFILE_SCHEMA}
    columns["range_key"] = pa.array([f"{i * 16000 + 1:010d}-{(i + 1) * 16000:010d}" for i in range(rows)])
    columns["last_ledger"] = pa.array([(i + 1) * 16000 for i in range(rows)], pa.int64())
    columns["peak_anon_bytes"] = pa.array([2**30] * rows, pa.int64())
    columns["seconds"] = pa.array([600.0] * rows, pa.float64())
    pq.write_table(pa.table(columns, schema=PROFILE_SCHEMA), path)
    return str(path)


class Forever(http.server.BaseHTTPRequestHandler):
    """A server that answers 200 and streams zeros for as long as it is read, with no length."""

    sent: list[int] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        chunk, total = b"\0" * 65536, 0
        try:
            while True:
                self.wfile.write(chunk)
                total += len(chunk)
        except OSError:  # the client hung up: what it was sent is what it read at most
            Forever.sent.append(total)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def streaming_forever():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forever)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/range_profile.parquet"
    server.shutdown()
    server.server_close()


@pytest.mark.timeout(30)
def test_issue45_f9_a_profile_streamed_forever_is_cut_at_the_byte_cap(streaming_forever):
    """The read stops at profile_max_bytes, seconds before profile_timeout_seconds, and names the cap."""
    Forever.sent.clear()
    cap = 4 * 1024 * 1024
    start = time.monotonic()
    with pytest.raises(ProfileRefused, match=f"larger than its cap of {cap} bytes \\(profile_max_bytes\\)"):
        load_previous_profile(streaming_forever, timeout=20.0, max_bytes=cap)
    assert time.monotonic() - start < 10.0  # cut by the cap, not the 20 s timeout
    deadline = time.monotonic() + 5
    while not Forever.sent and time.monotonic() < deadline:
        time.sleep(0.05)
    # The client hung up near the cap (the rest is socket buffers), not after buffering 1 GiB in 10 s.
    assert Forever.sent and Forever.sent[-1] < 64 * 1024 * 1024, Forever.sent


def million_rows(tmp) -> str:
    """A profile whose footer says 10^6 rows (every column but last_ledger empty: cheap to write, and the cap
    is read from the footer before any column is)."""
    n = 1_000_000
    columns = {f.name: pa.nulls(n, f.type) for f in PROFILE_SCHEMA}
    columns["last_ledger"] = pa.array(range(16000, 16000 * (n + 1), 16000), pa.int64())
    pq.write_table(pa.table(columns, schema=PROFILE_SCHEMA), tmp / "p.parquet")
    return str(tmp / "p.parquet")


PROFILE_INPUTS = [
    pytest.param(lambda t: (os.mkfifo(t / "p.parquet"), str(t / "p.parquet"))[1], "is a FIFO", id="f7-profile-fifo"),
    pytest.param(lambda t: "/dev/zero", "is a character device", id="f8-profile-dev-zero"),
    pytest.param(
        lambda t: (os.symlink("/dev/zero", t / "p.parquet"), str(t / "p.parquet"))[1],
        "is a character device",
        id="f8-profile-a-link-to-dev-zero",
    ),
    pytest.param(lambda t: str(t), "is a directory", id="f8-profile-a-directory"),
    pytest.param(
        million_rows,
        "holds 1000000 rows, above its cap of 200000 (profile_max_rows)",
        id="f10-profile-of-a-million-rows",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("make", "says"), PROFILE_INPUTS)
def test_issue45_a_hostile_previous_profile_is_refused_before_it_is_read(make, says, tmp_path):
    """With the default caps: refused at once (a FIFO is not waited on, a device never read, a million rows
    counted from the footer), naming the file and why."""
    spec = make(tmp_path)
    start = time.monotonic()
    with pytest.raises(ProfileRefused, match="previous profile .*" + says.replace("(", r"\(").replace(")", r"\)")):
        load_previous_profile(spec)
    assert time.monotonic() - start < 10.0  # the 10^6 rows took 40.8 s to read whole


@pytest.mark.timeout(60)
def test_issue45_item3_the_deployment_sets_the_profile_caps_and_the_plan_is_refused_past_them(tmp_path):
    """profile_max_bytes and profile_max_rows are deployment settings: CatchupResource takes and bounds them,
    the launchpad hands them to the mission, and the plan refuses a profile past either, naming the setting."""
    profile = profile_of(tmp_path / "p.parquet", 10)
    catchup = CatchupResource(storage_root=str(tmp_path / "root"), profile_max_rows=5, profile_max_bytes=10**6)
    handed = policies(catchup)
    assert (handed["profile_max_rows"], handed["profile_max_bytes"]) == (5, 10**6)
    cfg = MissionConfig("m1", SPAN, str(tmp_path / "root"), previous_profile=profile, **handed)
    with pytest.raises(ProfileRefused, match=r"holds 10 rows, above its cap of 5 \(profile_max_rows\)"):
        prepare(cfg)
    small = MissionConfig("m1", SPAN, str(tmp_path / "root"), previous_profile=profile, profile_max_bytes=100)
    with pytest.raises(ProfileRefused, match=r"larger than its cap of 100 bytes \(profile_max_bytes\)"):
        prepare(small)
    assert prepare(MissionConfig("m1", SPAN, str(tmp_path / "root"), previous_profile=profile)).previous.index
    for bad in ({"profile_max_rows": 0}, {"profile_max_bytes": 0}, {"profile_max_bytes": 2**60}):
        with pytest.raises(Exception, match=next(iter(bad))):
            CatchupResource(storage_root=str(tmp_path / "root"), **bad)


@pytest.mark.timeout(120)
def test_issue45_on_s3_a_record_or_profile_past_its_cap_is_refused_from_its_info(s3_bucket, tmp_path):
    """On an object store (moto's S3 server) the type and size are what the driver's info says: a control
    record over its cap keeps nothing of it and a change replaces it through the conditional PUT (f6, f4);
    a profile past profile_max_bytes or profile_max_rows is refused naming the setting (f8, f10)."""
    import fsspec

    store = Store(f"s3://{s3_bucket}/root")
    store.write_bytes(layout.control("m1"), json.dumps(good_control()).encode() + b" " * (2 * 1024 * 1024))
    records = ControlStore(store, "m1")
    with pytest.raises(StateError, match="control.json is not a control record: .*larger than its cap of 1048576"):
        records.read()
    resumed = records.change(lambda c: c.apply("resume", None, who="ops", at=1.0, max_parallelism=8))
    assert "larger than its cap" in records.replaced and records.read() == resumed and not resumed.paused

    url = f"s3://{s3_bucket}/profiles/range_profile.parquet"
    with open(profile_of(tmp_path / "p.parquet", 10), "rb") as f:
        fsspec.filesystem("s3").pipe_file(url, f.read())
    with pytest.raises(ProfileRefused, match=r"larger than its cap of 100 bytes \(profile_max_bytes\)"):
        load_previous_profile(url, max_bytes=100)
    with pytest.raises(ProfileRefused, match=r"holds 10 rows, above its cap of 5 \(profile_max_rows\)"):
        load_previous_profile(url, max_rows=5)
    assert len(load_previous_profile(url).rows) == 10
