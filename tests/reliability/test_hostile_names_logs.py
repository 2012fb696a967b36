"""Issue 45 item 6, names and logs: failures 20-25 of the issue's "Why", one table each.

The failures, numbered as item 6 lists them (26 and 27, the hand-edited control record, are
another table's):

- 20: `validate_mission("m1\\n")` accepted a trailing newline (`re.match` with `$`), and every
  other name check with `$` or `\\d` let such a name, or another script's digits, through;
- 21: `save_mission` then made a directory with a newline in its name;
- 22: a `count` line of the exit report holding invalid bytes was recorded None, without a word;
- 23: `count = NaN` the same;
- 24: `sum = nan` the same;
- 25: a second, forged exit report after the real one won ("last block").

The names are refused where they enter, naming the field. The logs are driven end to end: the
real worker entrypoint and the local backend run a stand-in stellar-core (the boundary, as a
shell script speaking the core's command line: `offline-info`'s JSON, `new-db`, `catchup`
printing its log) under the real dispatcher, and the attempt's stored record and the warnings
logged are what is asserted.
"""

from __future__ import annotations

import json
import logging
import os
import stat

import pytest

from catchup_assets.backends.kubernetes import names
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.mission_control import check_who
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MissionConfig, validate_mission
from catchup_assets.core.plan.naming import next_mission_name
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.sizing import Tier, Tiers
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import dispatch_order, parse_key
from catchup_assets.mission.saved import save_mission
from catchup_assets.sim.core_log import tx_apply_report
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore, encode
from catchup_assets.store.root import Store
from catchup_assets.store.trusted import load_trusted_hashes

KEY = "0000000001-0000016000"
SPAN = MissionSpan(1, 16000, ledgers_per_range=16000)
ARABIC_ONE = "\u0661"  # ARABIC-INDIC DIGIT ONE: \d matches it and int() reads it as 1
ARABIC_KEY = "\u0660" * 9 + ARABIC_ONE + "-" + "\u0660" * 5 + "\u0661\u0666\u0660\u0660\u0660"  # 1..16000
HEX = "ab" * 32
GiB = 1024**3

# The hostile spellings of a good name: trailing newline, leading and trailing space, NUL, and
# a Unicode digit where an ASCII one belongs.
HOSTILE = {
    "trailing newline": lambda good: good + "\n",
    "leading space": lambda good: " " + good,
    "trailing space": lambda good: good + " ",
    "NUL": lambda good: good[:1] + "\x00" + good[1:],
    "unicode digit": lambda good: good[:-1] + ARABIC_ONE,
}


def tiers(name: str) -> Tiers:
    return Tiers((Tier(name, 8 * GiB, 16 * GiB, 1.0),))


def trusted(tmp, value: str):
    path = tmp / "hashes.json"
    path.write_text(json.dumps([[16063, value], [0, ""]]))
    return load_trusted_hashes(str(path), timeout=5)


# (validator, a good value, what the refusal must name)
VALIDATORS = {
    "mission name": (lambda tmp, v: validate_mission(v), "m1", "mission name"),
    "next mission name": (lambda tmp, v: next_mission_name(v), "m1-n2", "mission name"),
    "range key": (lambda tmp, v: parse_key(v), KEY, "range key"),
    "kubernetes job name: mission": (lambda tmp, v: names.job_name(v, KEY, 1), "m1", "mission"),
    "kubernetes job name: range key": (lambda tmp, v: names.job_name("m1", v, 1), KEY, "range key"),
    "local backend: mission": (lambda tmp, v: LocalBackend(tmp / "work", v), "m1", "mission"),
    "local backend: range key": (lambda tmp, v: LocalBackend(tmp / "work", "m1").data_dir(v), KEY, "range key"),
    "local backend: attempt id": (
        lambda tmp, v: LocalBackend(tmp / "work", "m1").attempt_dir(v),
        f"{KEY}-a001",
        "attempt id",
    ),
    "tier name": (lambda tmp, v: tiers(v), "t1", "tier"),
    "kubernetes namespace": (lambda tmp, v: K8sSettings(namespace=v, image="core:1"), "ns1", "namespace"),
    "kubernetes cluster version": (
        lambda tmp, v: K8sSettings(namespace="ns", image="core:1", cluster_version=v),
        "1.31",
        "cluster_version",
    ),
    "trusted checkpoint hash": (lambda tmp, v: trusted(tmp, v), HEX[:-1] + "1", "trusted_hashes"),
}
NAME_CASES = [
    pytest.param(validator, spelling, id=f"failure20-{validator}-{spelling}")
    for validator in VALIDATORS
    for spelling in HOSTILE
    # a hex digit's place takes no Unicode digit; a namespace or tier name may end in a letter only
    if not (spelling == "unicode digit" and validator in ("tier name", "kubernetes namespace"))
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("validator, spelling", NAME_CASES)
def test_issue45_failure20_every_name_check_refuses_a_name_that_is_not_whole(tmp_path, validator, spelling):
    """Failure 20: each name or key check is a whole-string match in ASCII: the good name passes,
    and each hostile spelling of it is refused with a message naming the field."""
    check, good, field = VALIDATORS[validator]
    check(tmp_path, good)
    with pytest.raises((ConfigError, ValueError)) as refused:
        check(tmp_path, HOSTILE[spelling](good))
    assert field in str(refused.value)


@pytest.mark.timeout(30)
def test_issue45_failure20_a_range_key_in_another_script_s_digits_is_no_range(tmp_path):
    """Failure 20: `\\d` took Arabic-Indic digits, and int() read them: the key parsed as ledgers
    1..16000 and named a directory of its own. Refused now, naming the key."""
    with pytest.raises(ConfigError, match="range key"):
        parse_key(ARABIC_KEY)
    with pytest.raises(ConfigError, match="range key"):
        names.pvc_name("m1", ARABIC_KEY)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "who, expected",
    [
        pytest.param("alice\n", None, id="failure20-who-trailing newline"),
        pytest.param("al\x00ice", None, id="failure20-who-NUL"),
        pytest.param("al\u2028ice", None, id="failure20-who-unicode line separator"),
        pytest.param("  alice  ", "alice", id="failure20-who-spaces are trimmed, not kept"),
        pytest.param("alice" + ARABIC_ONE, "alice" + ARABIC_ONE, id="failure20-who-any script is a name"),
    ],
)
def test_issue45_failure20_who_is_one_printable_line(who, expected):
    """Failure 20: `who` goes into the control record and log lines: a newline or control
    character is refused naming the field; spaces around it are trimmed."""
    if expected is None:
        with pytest.raises(ConfigError, match="who"):
            check_who(who)
    else:
        assert check_who(who) == expected


@pytest.mark.timeout(30)
@pytest.mark.parametrize("spelling", list(HOSTILE), ids=[f"failure21-{s}" for s in HOSTILE])
def test_issue45_failure21_no_mission_directory_is_made_for_a_hostile_name(tmp_path, spelling):
    """Failure 21: the mission is refused before save_mission is reached, and the storage root
    holds no directory; the good name is saved where the layout says."""
    root = tmp_path / "root"
    with pytest.raises(ConfigError, match="mission name"):
        save_mission(Store(root), MissionConfig(HOSTILE[spelling]("m1"), SPAN, str(root)))
    assert not root.exists() or not os.listdir(root)
    save_mission(Store(root), MissionConfig("m1", SPAN, str(root)))
    assert os.listdir(root) == ["m1"] and (root / layout.mission_file("m1")).is_file()


@pytest.mark.timeout(30)
def test_issue45_failure20_a_record_file_whose_name_is_not_whole_is_not_read(tmp_path, caplog):
    """Failure 20: a record and done mark listed from the storage root under a name with a trailing
    newline (a careless copy, a tenant of the bucket) are no files of the mission's: each is
    skipped with a warning quoting its name, the newline shown, not printed into the log."""
    caplog.set_level(logging.WARNING)
    store = Store(tmp_path / "root")
    rel = layout.attempt_file("m1", KEY, 1, "parquet")
    store.write_bytes(rel + "\n", encode(AttemptRecord("m1", KEY, 1, "ok", seconds=5.0)))
    store.write_bytes(layout.attempt_file("m1", KEY, 1, "done") + "\n", b"")
    assert RecordStore(store, "m1").load() == ({}, set())
    skipped = sorted(r.getMessage() for r in caplog.records if "unexpected file" in r.getMessage())
    assert skipped == [
        f"ignoring unexpected file under attempts: {layout.attempt_file('m1', KEY, 1, ext) + chr(10)!r}"
        for ext in ("done", "parquet")
    ]
    store.write_bytes(rel, encode(AttemptRecord("m1", KEY, 1, "ok", seconds=5.0)))
    assert list(RecordStore(store, "m1").load()[0]) == [(KEY, 1)]


# -- the logs ---------------------------------------------------------------------------------

# A stand-in stellar-core: what the worker entrypoint calls, answering as the real one does.
# `offline-info` prints the state JSON whose ledger `num` the worker reads; `new-db` makes an
# empty state; `catchup END/COUNT` prints the log in $FAKE_CORE_LOG byte for byte (the log a
# core would print, hostile lines and all) and leaves its LCL at END.
FAKE_CORE = """#!/bin/sh
while [ $# -gt 0 ]; do
    case $1 in
        --conf) shift 2 ;;
        offline-info)
            printf '{"info": {"ledger": {"num": %s}}}\\n' "$(cat .fake-lcl 2>/dev/null || echo 1)"
            exit 0 ;;
        new-db) echo 1 >.fake-lcl; exit 0 ;;
        catchup)
            cat -- "$FAKE_CORE_LOG"
            echo "${2%%/*}" >.fake-lcl
            exit 0 ;;
        *) shift ;;
    esac
done
exit 2
"""
STAMP = "2026-12-07T10:00:00.000"
REAL_COUNT, REAL_SUM_MS = 1532, 1470730.0
REPORT = [line.encode() for line in tx_apply_report(REAL_COUNT, REAL_SUM_MS, when=STAMP)]
COUNT_AT = next(i for i, line in enumerate(REPORT) if b"count = " in line)
SUM_AT = next(i for i, line in enumerate(REPORT) if b" sum = " in line)
FIELD_PREFIX = f"{STAMP} GABCD [default INFO]".encode()
DESTROYED = f"{STAMP} GABCD [default INFO] Application destroyed".encode()


def report_with(at: int, line: bytes) -> list[bytes]:
    return [*REPORT[:at], FIELD_PREFIX + line, *REPORT[at + 1 :]]


def run_mission(tmp_path, log_lines: list[bytes]) -> AttemptRecord:
    """One range, one attempt: the real entrypoint runs the stand-in core, which prints
    `log_lines`; the dispatcher records the attempt. Its stored record."""
    core = tmp_path / "stellar-core"
    core.write_text(FAKE_CORE)
    core.chmod(core.stat().st_mode | stat.S_IXUSR)
    log_file = tmp_path / "core.log"
    log_file.write_bytes(b"\n".join(log_lines) + b"\n")
    root = tmp_path / "root"
    cfg = MissionConfig("m1", SPAN, str(root), parallelism=1, poll_seconds=0.05)
    backend = LocalBackend(
        tmp_path / "work", "m1", env={"STELLAR_CORE": str(core), "FAKE_CORE_LOG": str(log_file)}, sample_interval=0.05
    )
    records = RecordStore(Store(root), "m1")
    try:
        result = Dispatcher(DispatchConfig(cfg, dispatch_order(plan_ranges(SPAN))), backend, records).run()
    finally:
        backend.shutdown(grace=5)
    assert result.done == [KEY]
    recs, done = records.load()
    assert (KEY, 1) in done
    return recs[(KEY, 1)]


def parser_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "catchup_assets.core.measure.logparse"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "line, field, kept",
    [
        pytest.param(b"           count = 15\xff\xfe32", "count", "seconds", id="failure22-count-invalid-bytes"),
        pytest.param(b"           count = NaN", "count", "seconds", id="failure23-count-NaN"),
        pytest.param(b"             sum = nan", "sum", "count", id="failure24-sum-nan"),
        # what a C++ ostream prints for a NaN double, the unit after it
        pytest.param(b"             sum = nanms", "sum", "count", id="failure24-sum-nan-with-its-unit"),
        pytest.param(b"           count = " + ARABIC_ONE.encode() * 4, "count", "seconds", id="failure22-count-digits"),
    ],
)
def test_issue45_failures22_24_a_metric_line_that_does_not_parse_is_warned_of_and_left_out(
    tmp_path, caplog, line, field, kept
):
    """Failures 22-24: the attempt's record holds no value for the field, the other field's
    value stays, the record's reason says which field did not parse, and one warning names the
    field, the line and the attempt."""
    caplog.set_level(logging.WARNING)
    rec = run_mission(tmp_path, report_with(COUNT_AT if field == "count" else SUM_AT, line) + [DESTROYED])
    assert rec.outcome == "ok"
    if field == "count":
        assert rec.tx_apply_count is None and rec.tx_apply_seconds == pytest.approx(REAL_SUM_MS / 1000)
    else:
        assert rec.tx_apply_seconds is None and rec.tx_apply_count == REAL_COUNT
    assert f"tx-apply {field}" in rec.reason and "unparsed" in rec.reason
    (warning,) = parser_warnings(caplog)
    assert f"ledger.transaction.apply {field}" in warning and "does not parse" in warning
    assert f"attempt {KEY}-a001" in warning


@pytest.mark.timeout(60)
def test_issue45_failure25_a_second_exit_report_is_not_the_core_s(tmp_path, caplog):
    """Failure 25: stellar-core writes its exit report once, from ~ApplicationImpl, and
    "Application destroyed" follows it; a report after it (a forged one, claiming one
    transaction in a day) is not read. The record holds the first report's figures and says
    which report was taken; one warning names both lines and the attempt."""
    caplog.set_level(logging.WARNING)
    forged = [line.encode() for line in tx_apply_report(1, 86_400_000.0, when=STAMP)]
    rec = run_mission(tmp_path, [*REPORT, DESTROYED, *forged])
    assert rec.tx_apply_count == REAL_COUNT and rec.tx_apply_seconds == pytest.approx(REAL_SUM_MS / 1000)
    assert "exit report 1 of 2 taken" in rec.reason
    (warning,) = parser_warnings(caplog)
    assert "2 ledger.transaction.apply exit reports" in warning and "the first" in warning
    assert f"attempt {KEY}-a001" in warning


@pytest.mark.timeout(60)
def test_issue45_failures22_25_one_exit_report_that_parses_is_recorded_without_a_word(tmp_path, caplog):
    """The control row of failures 22-25: the same run with the core's own report records both
    figures, warns of nothing and adds nothing to the reason."""
    caplog.set_level(logging.WARNING)
    rec = run_mission(tmp_path, [*REPORT, DESTROYED])
    assert rec.tx_apply_count == REAL_COUNT and rec.tx_apply_seconds == pytest.approx(REAL_SUM_MS / 1000)
    assert "log:" not in rec.reason and parser_warnings(caplog) == []
