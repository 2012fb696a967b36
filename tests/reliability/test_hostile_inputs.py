"""R3: hostile inputs, one table. Each is refused where it enters with an error naming
the field, file or path (L34), or skipped with a warning naming it (L12): never a
crash, a silently wrong value or a half-written file.

A case is (id, what to run, what it must say). `run` gets a scratch directory and
either raises, or returns and logs; the table says which and what the message holds.
"""

from __future__ import annotations

import io
import logging
import math
import os
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import catchup_assets.cli.main as cli
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.ports import Peaks
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.dispatch.results import DispatcherStuck
from catchup_assets.core.measure.logparse import parse_worker_log
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.measures import measures_from_rows
from catchup_assets.core.size.sizing import Tier, Tiers
from catchup_assets.core.values.attempt_record import AttemptRecord, UnrecordableRecord
from catchup_assets.core.values.ledger_range import dispatch_order, parse_key
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_tier_map
from catchup_assets.store.profiles import load_previous_profile
from catchup_assets.store.records import RecordStore, encode
from catchup_assets.store.root import StorageError, Store
from catchup_assets.store.tables import PROFILE_SCHEMA
from catchup_assets.store.trusted import load_trusted_hashes
from fakes import FakeBackend, FakeClock, Script

KEY = "0000000001-0000016000"
P = "2026-11-29T07:52:44.123 GABCD [Perf INFO] "


def medida(count: str = "1200", total: str = "3456.5ms") -> list[str]:
    """stellar-core's exit report of `--metric ledger.transaction.apply` (reportCfgMetrics,
    medida ConsoleReporter): header, then one field per line."""
    return [P, P + "metric 'ledger.transaction.apply':", P + "  type: timer", P + f"  count = {count}",
            P + "  event type: calls", P + f"  sum = {total}", P + "  median = 7.1ms", P]  # fmt: skip


def profile_file(tmp, rows: list[dict] | None = None, table: pa.Table | None = None) -> str:
    path = tmp / "range_profile.parquet"
    if table is None:
        base = {name: None for name in PROFILE_SCHEMA.names}
        table = pa.Table.from_pylist([{**base, **r} for r in rows or []], schema=PROFILE_SCHEMA)
    pq.write_table(table, path)
    return str(path)


def good_row(**over) -> dict:
    return {"range_key": KEY, "last_ledger": 16000, "peak_anon_bytes": 2**30, "peak_working_set_bytes": 2**31,
            "seconds": 600.0, **over}  # fmt: skip


def cli_run(argv: list[str]) -> None:
    """The command line as a user meets it: its error line is raised here to be matched."""
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        try:
            rc = cli.run(argv)
        except SystemExit as exc:  # argparse refusals
            rc = exc.code
    if rc:
        raise ValueError(f"rc={rc}: {err.getvalue()}")


def store_with_record(tmp):
    rs = RecordStore(Store(tmp / "root"), "m1")
    rs.write(AttemptRecord("m1", KEY, 1, "ok", peak_anon_bytes=7, seconds=10.0))
    rs.mark_done(KEY, 1)
    return rs


def torn_record(tmp):
    rs = store_with_record(tmp)
    rs.store.write_bytes(f"m1/attempts/{KEY}/a001.parquet", b"PAR1torn")
    assert rs.load() == ({}, set())


def foreign_record(tmp):
    rs = store_with_record(tmp)
    other = encode(AttemptRecord("m2", KEY, 1, "ok"))
    rs.store.write_bytes(f"m1/attempts/{KEY}/a001.parquet", other)
    assert rs.load()[0] == {}


def done_without_record(tmp):
    rs = store_with_record(tmp)
    rs.store.remove(f"m1/attempts/{KEY}/a001.parquet")
    assert rs.load() == ({}, set())


def edited_snapshot(tmp):
    rs = store_with_record(tmp)
    rs.write_snapshot(*rs.load())
    # An operator "fixes" a peak in the snapshot with pyarrow: the files stay the truth.
    path = tmp / "root/m1/attempt_records.parquet"
    t = pq.read_table(path).to_pylist()
    t[0]["peak_anon_bytes"] = 1
    pq.write_table(pa.Table.from_pylist(t, schema=pq.read_schema(path).remove_metadata()), path)
    assert rs.load()[0][(KEY, 1)].peak_anon_bytes == 7


def stale_tmp(tmp):
    rs = store_with_record(tmp)
    left = tmp / f"root/m1/attempts/{KEY}/a002.parquet.1234abcd.tmp"
    left.write_bytes(b"half")
    os.utime(left, (0, 0))
    mission_run(tmp, rs, Script())
    assert not left.exists()


def mission_run(tmp, rs: RecordStore, script: Script | None = None, scripts=None, **cfg):
    span = MissionSpan(1, 16000, ledgers_per_range=16000)
    clock = FakeClock()
    backend = FakeBackend(clock, lambda s: (scripts or {}).get(s.attempt, script or Script()))
    dcfg = DispatchConfig(MissionConfig("m1", span, str(tmp / "root"), parallelism=1, poll_seconds=5),
                          dispatch_order(plan_ranges(span)), **cfg)  # fmt: skip
    return Dispatcher(dcfg, backend, rs, clock=clock).run()


def unrecordable_evidence(tmp):
    """A forged count past int64 reaches the record (the log parser drops it first; here it
    comes straight from the backend): recorded once as unknown, the next attempt runs."""
    rs = RecordStore(Store(tmp / "root"), "m1")
    result = mission_run(tmp, rs, scripts={1: Script(tx=(10**23, 2.0))})
    recs = rs.load()[0]
    assert result.done == [KEY] and recs[(KEY, 1)].outcome == "unknown" and recs[(KEY, 1)].tx_apply_count is None
    assert "evidence not recordable" in recs[(KEY, 1)].reason and recs[(KEY, 2)].outcome == "ok"


def negative_seconds_record(tmp):
    encode(AttemptRecord("m1", KEY, 1, "ok", seconds=-5.0))


def blocked_storage(tmp):
    """A file where the mission's directory must go: every write fails; the dispatcher stops
    after failing_passes_limit passes with the path, instead of crashing or looping."""
    (tmp / "root").mkdir()
    (tmp / "root/m1").write_bytes(b"")
    rs = RecordStore(Store(tmp / "root"), "m1")
    mission_run(tmp, rs, failing_passes_limit=3)


def storage_root_is_a_file(tmp):
    (tmp / "file").write_bytes(b"")
    Store(tmp / "file/root")


def full_storage(tmp):
    """A storage root on a full filesystem: the write is refused naming its path, no .tmp is left."""
    mnt = tmp / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        store = Store(mnt)
        try:
            store.write_bytes("m1/big", b"x" * 200_000)
        finally:
            assert not [f for f in os.listdir(mnt / "m1") if f.endswith(".tmp")]
    finally:
        subprocess.run(["umount", str(mnt)])


def kubelet_value(value):
    def run(tmp):
        assert Peaks(value, 5, 6).anon_bytes is None

    return run


def log_facts(lines: list[str], field: str):
    def run(tmp):
        facts = parse_worker_log(lines)
        assert getattr(facts, field) is None

    return run


def profile_rows(rows: list[dict], field: str):
    def run(tmp):
        (m,) = measures_from_rows(rows)
        assert getattr(m, field) is None

    return run


def previous_profile(make):
    def run(tmp):
        spec = make(tmp)
        prepare(MissionConfig("m1", MissionSpan(1, 16000, 16000), str(tmp / "root"), previous_profile=spec))

    return run


# A password given inside a URL (issue 36 item 10): every row's messages and logs are checked for it.
SECRET = "s3cret-pw"
UNREACHABLE = f"http://op:{SECRET}@127.0.0.1:9/range_profile.parquet"  # port 9 (discard): nothing answers


def profile_outside_the_span(tmp):
    """A profile of ledgers 1-16000 for a span of 64001-128000: sized, but from none of its own ledgers."""
    spec = profile_file(tmp, [good_row()])
    prepared = prepare(MissionConfig("m1", MissionSpan(64001, 128000, 16000), str(tmp / "root"), previous_profile=spec))
    assert prepared.previous.index is not None  # still a profiled plan: the warning is the only sign


def resource(**settings):
    def run(tmp):
        CatchupResource(**settings).placement()

    return run


def tier(name):
    def run(tmp):
        Tiers((Tier(name, 2**30, 2**31, 1.0),))

    return run


NAN = float("nan")
ERROR, WARNING = "error", "warning"
CASES = [
    # -- configuration ------------------------------------------------------------
    ("span reversed", lambda t: MissionSpan(100, 1), ERROR, "last_ledger (1) must be >= first_ledger"),
    ("span past uint32", lambda t: MissionSpan(1, 2**32, 64_000), ERROR, "last_ledger must be a ledger number"),
    ("span not checkpoint-cut", lambda t: MissionSpan(1, 10_000, 100), ERROR, "ledgers_per_range must be"),
    ("span of a million ranges", lambda t: MissionSpan(1, 10**9 // 16, 64), ERROR, "more than max_ranges"),
    ("span ledgers as text", lambda t: MissionSpan(1, "16000"), ERROR, "last_ledger must be an integer"),
    ("span negative overlap", lambda t: MissionSpan(1, 16000, 16000, -1), ERROR, "overlap must be >= 0"),
    ("mission name with a shell", lambda t: MissionConfig("m;rm", MissionSpan(1, 64), "x"), ERROR, "mission name"),
    ("mission name too long", lambda t: MissionConfig("m" * 41, MissionSpan(1, 64), "x"), ERROR, "mission name"),
    (
        "breaker_attempts negative",
        lambda t: MissionConfig("m1", MissionSpan(1, 64), "x", breaker_attempts=-1),
        ERROR,
        "breaker_attempts",
    ),
    ("stall_factor below 1", lambda t: MissionConfig("m1", MissionSpan(1, 64), "x", stall_factor=0.5), ERROR, "stall"),
    ("parallelism 0", lambda t: MissionConfig("m1", MissionSpan(1, 64), "x", parallelism=0), ERROR, "parallelism"),
    ("tier name with a shell", tier("bad name;$(x)"), ERROR, "bad name;$(x)"),
    ("tier name upper case", tier("Big"), ERROR, "'Big'"),
    (
        "resource tier name",
        resource(tiers=[{"name": "a b", "memory_cut_gib": 1, "node_memory_gib": 2, "cpu": 1}]),
        ERROR,
        "a b",
    ),
    ("misspelt retry knob", resource(retry={"environmentl": 1}), ERROR, "environmentl"),
    ("ladder that does not climb", resource(ladder={"factor": 1.0}), ERROR, "factor"),
    ("unknown backend", resource(backend="nomad"), ERROR, "backend"),
    # issue 36 item 13: a channel Slack would not have, refused at load naming the field
    ("slack_channel with a newline", resource(slack_channel="#ops\nWARNING forged"), ERROR, "slack_channel: '#ops\\n"),
    (
        "slack_channel of 100k characters",
        resource(slack_channel="a" * 100_000),
        ERROR,
        "slack_channel: 'aaaa",
    ),
    ("slack_channel upper case", resource(slack_channel="#Ops"), ERROR, "is not a Slack channel"),
    # -- partition keys -----------------------------------------------------------
    ("key with a trailing newline", lambda t: parse_key(KEY + "\n"), ERROR, "range key"),
    ("key reversed", lambda t: parse_key("0000016000-0000000001"), ERROR, "range key"),
    ("key with a path", lambda t: parse_key("../0000000001-0000016000"), ERROR, "range key"),
    ("key of digits only", lambda t: parse_key("00000000010000016000"), ERROR, "range key"),
    # -- worker logs: the value dropped, the rest of the log read ------------------
    (
        "tx count past int64",
        log_facts(medida(count="99999999999999999999999"), "tx_apply_count"),
        WARNING,
        "out of range",
    ),
    ("tx sum of 1e400", log_facts(medida(total="1e400ms"), "tx_apply_seconds"), WARNING, "out of range"),
    ("tx sum negative", log_facts(medida(total="-5ms"), "tx_apply_seconds"), WARNING, "out of range"),
    # issue 36 item 13: once passed over in silence (`tx None`), now warned of with its line
    ("tx count negative", log_facts(medida(count="-5"), "tx_apply_count"), WARNING, "in line '" + P.strip()),
    (
        "resume from a 23-digit LCL",
        log_facts([f"RESUME: range {KEY} from LCL {'9' * 23} toward target 16000"], "resumed_from_ledger"),
        WARNING,
        "out of range",
    ),
    # -- kubelet samples -----------------------------------------------------------
    ("kubelet rss negative", kubelet_value(-1), WARNING, "not a byte count"),
    ("kubelet rss as text", kubelet_value("12Gi"), WARNING, "not a byte count"),
    ("kubelet rss past int64", kubelet_value(2**64), WARNING, "not a byte count"),
    ("kubelet rss a float", kubelet_value(1.5e9), WARNING, "not a byte count"),
    # -- previous profiles ---------------------------------------------------------
    (
        "profile peak negative",
        profile_rows([good_row(peak_anon_bytes=-1)], "peak_anon_bytes"),
        WARNING,
        "peak_anon_bytes",
    ),
    ("profile seconds NaN", profile_rows([good_row(seconds=NAN)], "seconds"), WARNING, "seconds"),
    ("profile seconds inf", profile_rows([good_row(seconds=math.inf)], "seconds"), WARNING, "seconds"),
    (
        "profile row without last_ledger",
        lambda t: measures_from_rows([good_row(last_ledger=None)]),
        WARNING,
        "no usable last_ledger",
    ),
    (
        "profile not Parquet",
        previous_profile(lambda t: (t / "p.parquet").write_bytes(b"csv,data") and str(t / "p.parquet")),
        ERROR,
        "p.parquet",
    ),
    (
        "profile lacking a column",
        previous_profile(lambda t: profile_file(t, table=pa.table({"range_key": [KEY]}))),
        ERROR,
        "last_ledger",
    ),
    (
        "profile with no measured range",
        previous_profile(
            lambda t: profile_file(t, [good_row(peak_anon_bytes=None, peak_working_set_bytes=None, seconds=None)])
        ),
        ERROR,
        "range_profile.parquet",
    ),
    ("profile file missing", lambda t: load_previous_profile(str(t / "none.parquet")), ERROR, "none.parquet does not"),
    # issue 36 item 13: the URL named without its password (SECRET is checked absent from every row)
    (
        "profile URL with a password, unreachable",
        lambda t: load_previous_profile(UNREACHABLE, timeout=5),
        ERROR,
        "previous profile http://***@127.0.0.1:9/range_profile.parquet is",
    ),
    (
        "hashes URL with a password, unreachable",
        lambda t: load_trusted_hashes(UNREACHABLE, timeout=5),
        ERROR,
        "trusted_hashes http://***@127.0.0.1:9/range_profile.parquet cannot be read",
    ),
    ("profile covering none of the span", profile_outside_the_span, WARNING, "none of the span 64001-128000"),
    # -- records and storage -------------------------------------------------------
    ("torn record", torn_record, WARNING, "a001.parquet"),
    ("record of another mission", foreign_record, WARNING, "describes m2"),
    ("done mark without its record", done_without_record, WARNING, "done mark of attempt 1 has no readable record"),
    ("snapshot edited", edited_snapshot, WARNING, "do not match the digest"),
    ("stale .tmp of a dead writer", stale_tmp, WARNING, "stale .tmp"),
    ("evidence past int64", unrecordable_evidence, WARNING, "unrecordable values dropped"),
    ("negative seconds record", negative_seconds_record, ERROR, "seconds=-5.0"),
    ("storage blocked by a file", blocked_storage, ERROR, "root/m1"),
    ("storage root under a file", storage_root_is_a_file, ERROR, "file/root"),
    ("storage full", full_storage, ERROR, "m1/big"),
    ("profile of an unplanned mission", lambda t: build_tier_map(str(t / "root"), "m1"), ERROR, "has no plan"),
    # -- the command line ----------------------------------------------------------
    ("--what-if inf", lambda t: cli_run(["plan", "--profile", "p", "--what-if", "inf"]), ERROR, "'inf'"),
    ("--what-if 0", lambda t: cli_run(["plan", "--profile", "p", "--what-if", "0"]), ERROR, "must be > 0"),
    ("--parallelism nan", lambda t: cli_run(["plan", "--profile", "p", "--parallelism", "nan"]), ERROR, "'nan'"),
    (
        "--last-ledger 1e9 at 64 per range",
        lambda t: cli_run(
            [
                "plan",
                "--profile",
                profile_file(t, [good_row()]),
                "--last-ledger",
                "1000000000",
                "--ledgers-per-range",
                "64",
            ]
        ),
        ERROR,
        "max_ranges",
    ),
    (
        "workload --out a directory",
        lambda t: cli_run(["workload", "--out", str(t), "--ranges", "3"]),
        ERROR,
        "is a directory",
    ),
    (
        "demo --dir a file",
        lambda t: (t / "f").write_bytes(b"") or cli_run(["demo", "--dir", str(t / "f")]),
        ERROR,
        "is not a directory",
    ),
    (
        "profile without a plan",
        lambda t: cli_run(["profile", "--root", str(t), "--mission", "m1"]),
        ERROR,
        "has no plan",
    ),
    (
        "profile of a bad mission name",
        lambda t: cli_run(["profile", "--root", str(t), "--mission", "M 1"]),
        ERROR,
        "mission name",
    ),
    (
        "diff of a mission without a profile",
        lambda t: diff_of(t, None),
        ERROR,
        "B (m2): mission 'm2' has no profile at",
    ),
    (
        "diff of a profile with a wrong schema",
        lambda t: diff_of(t, pa.table({"range_key": [KEY], "peak": [1]})),
        ERROR,
        "m2/range_profile.parquet lacks column(s) ['last_ledger'",
    ),
]


def diff_of(tmp, b_profile: pa.Table | None) -> None:
    """`catchup-assets diff` of a profiled m1 and a planned m2 whose profile is `b_profile` (None: none)."""
    for name in ("m1", "m2"):
        (tmp / name).mkdir()
        (tmp / name / "plan.parquet").write_bytes(b"")
    profile_file(tmp / "m1", [good_row(oom_count=0, completed=True)])
    if b_profile is not None:
        profile_file(tmp / "m2", table=b_profile)
    cli_run(["diff", "--root", str(tmp), "m1", "m2"])


def test_R3_the_table_is_at_least_forty_inputs():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("run, kind, says", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_R3_L34_a_hostile_input_is_refused_or_skipped_with_its_name(run, kind, says, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    if kind == ERROR:
        with pytest.raises((ValueError, OSError, DispatcherStuck, UnrecordableRecord, StorageError)) as exc:
            run(tmp_path)
        text = "".join(str(e) for e in _chain(exc.value))
        assert says in text
    else:
        run(tmp_path)
        text = ""
        assert says in caplog.text
    assert SECRET not in text + caplog.text  # a URL's password is named nowhere (issue 36 item 10)
    # Never half a file left behind by a refused write.
    assert not [p for p in tmp_path.rglob("*.tmp")]


def _chain(exc: BaseException):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__
