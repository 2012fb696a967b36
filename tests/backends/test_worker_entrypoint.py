"""The real entrypoint.sh under a POSIX shell, against the real simulated core.

Each test sets up a data directory the way an earlier attempt would have left
it, runs one attempt and asserts on what happened: exit code, the decision
line, whether new-db ran, the marker, and the LCL the core saved. The worker
prints stellar-core's stdout and stderr as one stream (its log file on the
volume gets the same: test_worker_logs.py), so core output is read from stdout.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from catchup_assets.core.measure.logparse import parse_tx_apply
from kit.worker import CORE, ENTRYPOINT, KEY, SHELLS, lcl_of, prepare, run, worker_env


@pytest.fixture(params=SHELLS, ids=[Path(s).name for s in SHELLS])
def shell(request: pytest.FixtureRequest) -> str:
    return request.param


def decision(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith("RESUME"))


def test_L16_never_started_declines_runs_new_db_writes_marker(shell: str, tmp_path: Path) -> None:
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"WORKER: range {KEY} target 640 count 320"
    assert lines[1].startswith("RESUME DECLINED: no range marker")
    assert "* The next launch will catchup from the network afresh." in result.stdout  # new-db ran
    assert "Applying buckets: LCL 320" in result.stdout
    assert (data / ".catchup-range").read_text() == KEY + "\n"
    assert lcl_of(data) == 640


def test_L24_the_worker_asks_stellar_core_for_the_tx_apply_metric(shell: str, tmp_path: Path) -> None:
    """stellar-core reports a metric at exit only when named with --metric."""
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data))
    assert result.returncode == 0, result.stderr
    count, seconds = parse_tx_apply(result.stdout.splitlines())
    assert count and count > 0 and seconds and seconds > 0


# (LCL left by an earlier attempt, its marker, COUNT) -> decision line, new-db ran?
RESUME_CASES = [
    (
        "genesis: bucket phase never finished",
        1,
        KEY,
        "320",
        "RESUME DECLINED: LCL 1 is below range start 320 (bucket apply never finished)",
        True,
    ),
    (
        "one below start",
        319,
        KEY,
        "320",
        "RESUME DECLINED: LCL 319 is below range start 320 (bucket apply never finished)",
        True,
    ),
    ("exactly at start", 320, KEY, "320", f"RESUME: range {KEY} from LCL 320 toward target 640", False),
    ("mid-range", 447, KEY, "320", f"RESUME: range {KEY} from LCL 447 toward target 640", False),
    ("one short of target", 639, KEY, "320", f"RESUME: range {KEY} from LCL 639 toward target 640", False),
    (
        "count with a leading zero is decimal, not octal",
        400,
        KEY,
        "0320",
        f"RESUME: range {KEY} from LCL 400 toward target 640",
        False,
    ),
    (
        "another range's data",
        447,
        "0000000001-0000000320",
        "320",
        "RESUME DECLINED: data dir belongs to range '0000000001-0000000320', not this one",
        True,
    ),
    ("marker but no database", None, KEY, "320", "RESUME DECLINED: offline-info failed", True),
]


@pytest.mark.parametrize(
    "lcl,marker,count,expected,fresh", [c[1:] for c in RESUME_CASES], ids=[c[0] for c in RESUME_CASES]
)
def test_L16_resume_decision(
    shell: str, tmp_path: Path, lcl: int | None, marker: str, count: str, expected: str, fresh: bool
) -> None:
    data = prepare(tmp_path / "data", lcl, marker)
    result = run(shell, worker_env(data, count=count))
    assert result.returncode == 0, result.stderr
    assert decision(result.stdout) == expected
    assert ("catchup from the network afresh" in result.stdout) is fresh
    if not fresh:
        assert f"lastClosedLedger: {lcl}\n" in result.stdout
        assert "buckets" not in result.stdout
    assert (data / ".catchup-range").read_text() == KEY + "\n"
    assert lcl_of(data) == 640


@pytest.mark.parametrize("lcl", [640, 700])
def test_L16_already_complete_exits_zero_without_catchup(shell: str, tmp_path: Path, lcl: int) -> None:
    data = prepare(tmp_path / "data", lcl, KEY)
    result = run(shell, worker_env(data))
    assert result.returncode == 0, result.stderr
    assert decision(result.stdout) == f"RESUME: range {KEY} already complete: LCL {lcl} >= target 640"
    assert "Starting catchup" not in result.stdout and "afresh" not in result.stdout
    assert lcl_of(data) == lcl


def test_L16_catchup_exit_code_passes_through(shell: str, tmp_path: Path) -> None:
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data, SIM_FAIL_TARGETS="640"))
    assert result.returncode == 1
    assert "[default FATAL] Got an exception: Invariant" in result.stdout
    assert (data / ".catchup-range").read_text() == KEY + "\n"


def test_L16_L4_exit_0_short_of_the_target_fails_naming_the_ledger_reached(shell: str, tmp_path: Path) -> None:
    """Exit 0 is not proof (issue 24 item 6): offline-info after catchup must show the target."""
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data, SIM_EXIT_EARLY="640=447"))
    assert result.returncode == 65, result.stderr
    assert "* Catchup finished." in result.stdout  # the core itself claimed success
    assert result.stdout.splitlines()[-1] == "WORKER FAILED: catchup exited 0 at LCL 447, short of target 640"
    assert lcl_of(data) == 447
    # The next attempt resumes from the ledger it reached, and is confirmed at the target.
    again = run(shell, worker_env(data))
    assert again.returncode == 0, again.stderr
    assert decision(again.stdout) == f"RESUME: range {KEY} from LCL 447 toward target 640"
    assert again.stdout.splitlines()[-1] == f"CAUGHT UP: range {KEY}: LCL 640 >= target 640"


def test_L16_exit_0_with_no_readable_ledger_afterwards_fails(shell: str, tmp_path: Path) -> None:
    """A core whose catchup exits 0 but whose offline-info then fails cannot show it caught up."""
    stub = tmp_path / "core"
    stub.write_text('#!/bin/sh\necho "stub $*" >>"$STUB_LOG"\n[ "$1" = offline-info ] && exit 1\nexit 0\n')
    stub.chmod(0o755)
    data = prepare(tmp_path / "data", None, None)
    log = tmp_path / "calls"
    result = run(shell, worker_env(data, STELLAR_CORE=str(stub), STUB_LOG=str(log)))
    assert result.returncode == 65
    assert result.stdout.splitlines()[-1] == (
        "WORKER FAILED: catchup exited 0 but its ledger cannot be read: offline-info failed"
    )
    assert log.read_text().splitlines() == [
        "stub new-db",
        "stub catchup 640/320 --metric ledger.transaction.apply",
        "stub offline-info",
    ]


def trusted_file(tmp_path: Path, newest: int = 1279) -> Path:
    """verify-checkpoints' output, written by the simulated core."""
    out = tmp_path / "trusted.json"
    wrote = subprocess.run(
        [str(CORE), "verify-checkpoints", "--output-file", str(out), "--history-ledger", str(newest)],
        env=worker_env(tmp_path),
        capture_output=True,
        timeout=60,
    )
    assert wrote.returncode == 0, wrote.stderr
    return out


def hash_of(hashes: Path, ledger: int) -> str:
    return dict(json.loads(hashes.read_text()))[ledger]


def test_L17_a_trusted_hash_reaches_catchup_at_the_checkpoint_past_the_target(shell: str, tmp_path: Path) -> None:
    """A trusted hash verifies only a checkpoint's last ledger: the worker catches up to the
    first one at or past the target (640 -> 703), with that ledger's one hash written as a
    one-checkpoint --trusted-checkpoint-hashes file (issue 24 item 3)."""
    h = hash_of(trusted_file(tmp_path), 703)
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data, CATCHUP_TRUSTED_LEDGER="703", CATCHUP_TRUSTED_HASH=h))
    assert result.returncode == 0, result.stdout
    assert f"TRUSTED: catchup to 703, hash {h}" in result.stdout.splitlines()
    assert f"Found trusted hash {h[:6]} for ledger 703" in result.stdout  # stellar-core read the file
    assert "toLedger: 703\n  count: 383" in result.stdout
    # The one-checkpoint file it read has verify-checkpoints' own shape.
    assert json.loads((data / ".catchup-trusted-checkpoint.json").read_text()) == [[703, h], [0, ""]]
    assert result.stdout.splitlines()[-1] == f"CAUGHT UP: range {KEY}: LCL 703 >= target 640"


def test_L17_a_trusted_hash_that_disagrees_fails_verification_exit_3(shell: str, tmp_path: Path) -> None:
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data, CATCHUP_TRUSTED_LEDGER="703", CATCHUP_TRUSTED_HASH="ab" * 32))
    assert result.returncode == 3
    assert "[History ERROR] Catchup material failed verification - hash mismatch" in result.stdout
    assert "CAUGHT UP" not in result.stdout


@pytest.mark.parametrize(
    "ledger, hex_hash, named",
    [
        ("703", "ab" * 31, "CATCHUP_TRUSTED_HASH"),  # 62 digits
        ("703", "zz" * 32, "CATCHUP_TRUSTED_HASH"),
        ("703", "ab" * 32 + "; rm -rf /", "CATCHUP_TRUSTED_HASH"),
        ("", "ab" * 32, "CATCHUP_TRUSTED_LEDGER"),
        ("70x", "ab" * 32, "CATCHUP_TRUSTED_LEDGER"),
        ("767", "ab" * 32, "CATCHUP_TRUSTED_LEDGER 767 is not the checkpoint end 703"),
    ],
)
def test_L17_a_bad_trusted_hash_or_ledger_exits_64_naming_it(shell, tmp_path, ledger, hex_hash, named) -> None:
    data = prepare(tmp_path / "data", None, None)
    result = run(shell, worker_env(data, CATCHUP_TRUSTED_LEDGER=ledger, CATCHUP_TRUSTED_HASH=hex_hash))
    assert result.returncode == 64 and named in result.stderr, result.stderr
    assert list(data.iterdir()) == []


def test_L16_new_db_failure_stops_before_marker_and_catchup(shell: str, tmp_path: Path) -> None:
    stub = tmp_path / "core"
    stub.write_text('#!/bin/sh\necho "stub $*" >>"$STUB_LOG"\n[ "$1" = new-db ] && exit 7\nexit 0\n')
    stub.chmod(0o755)
    data = prepare(tmp_path / "data", None, "0000000001-0000000320")
    log = tmp_path / "calls"
    result = run(shell, worker_env(data, STELLAR_CORE=str(stub), STUB_LOG=str(log)))
    assert result.returncode == 7
    assert "ERROR: new-db failed with exit 7" in result.stdout
    assert log.read_text() == "stub new-db\n"
    assert not (data / ".catchup-range").exists()


def test_L16_sigterm_reaches_core_exit_3_then_next_attempt_resumes(shell: str, tmp_path: Path) -> None:
    data = prepare(tmp_path / "data", None, None)
    # ~0.3 s to its first ledger, then ~40 s to the target: the SIGTERM lands mid-run on a loaded machine too.
    env = worker_env(data, target="25600", count="25600", SIM_SPEED="20")
    proc = subprocess.Popen([shell, str(ENTRYPOINT)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "applying ledger" in line:
            break
    proc.send_signal(signal.SIGTERM)  # to the shell, as the kubelet signals PID 1: it passes it on
    rest = proc.stdout.read()
    assert proc.wait(timeout=10) == 3
    assert "* Catchup failed." in rest and "metric 'ledger.transaction.apply':" in rest
    saved = lcl_of(data)
    assert 1 < saved < 25600

    again = run(shell, worker_env(data, target="25600", count="25600"))
    assert again.returncode == 0, again.stderr
    assert decision(again.stdout) == f"RESUME: range {KEY} from LCL {saved} toward target 25600"
    assert f"lastClosedLedger: {saved}\n" in again.stdout
    assert "afresh" not in again.stdout
    assert lcl_of(data) == 25600


HOSTILE = """50% $(touch pwned1) `touch pwned2` 'q" %s %n ${HOME} \\ ;touch pwned3"""


def test_L17_hostile_values_pass_verbatim_and_never_execute(shell: str, tmp_path: Path) -> None:
    data = prepare(tmp_path / f"d {HOSTILE}", None, None)
    conf = tmp_path / f"c {HOSTILE}.cfg"
    conf.write_text("")
    env = worker_env(data, key=HOSTILE, STELLAR_CORE_CONFIG=str(conf))
    outputs = []
    for expected in (
        "RESUME DECLINED: no range marker",
        f"RESUME: range {HOSTILE} already complete: LCL 640 >= target 640",
    ):
        result = run(shell, env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0] == f"WORKER: range {HOSTILE} target 640 count 320"
        assert decision(result.stdout).startswith(expected)
        outputs.append(result.stdout)
    assert f"Config from {conf}" in outputs[0]  # --conf reached new-db and catchup intact
    assert (data / ".catchup-range").read_text() == HOSTILE + "\n"
    assert lcl_of(data) == 640
    assert not list(tmp_path.rglob("pwned*"))


BAD_INPUT = [
    ("CATCHUP_TARGET", None),
    ("CATCHUP_TARGET", ""),
    ("CATCHUP_TARGET", "12a"),
    ("CATCHUP_TARGET", "-5"),
    ("CATCHUP_TARGET", "1e3"),
    ("CATCHUP_TARGET", " 640"),
    ("CATCHUP_TARGET", "0x10"),
    ("CATCHUP_TARGET", "9" * 19),
    ("CATCHUP_TARGET", "$(id)"),
    ("CATCHUP_COUNT", None),
    ("CATCHUP_COUNT", "3.5"),
    ("CATCHUP_ATTEMPT", None),
    ("CATCHUP_ATTEMPT", "a1"),
    ("CATCHUP_ATTEMPT", "$(id)"),
    ("RANGE_KEY", None),
    ("RANGE_KEY", ""),
    ("DATA_DIR", None),
    ("DATA_DIR", "/nonexistent/catchup"),
]


@pytest.mark.parametrize("var,value", BAD_INPUT)
def test_L17_bad_input_exits_64_naming_the_variable(shell: str, tmp_path: Path, var: str, value: str | None) -> None:
    data = prepare(tmp_path / "data", None, None)
    env = worker_env(data)
    if value is None:
        del env[var]
    else:
        env[var] = value
    result = run(shell, env)
    assert result.returncode == 64
    assert result.stderr.startswith("ERROR: ") and var in result.stderr
    assert result.stdout == "" and list(data.iterdir()) == []


def test_L17_data_dir_that_is_a_file_is_refused(shell: str, tmp_path: Path) -> None:
    plain = tmp_path / "file"
    plain.write_text("")
    result = run(shell, worker_env(plain))
    assert result.returncode == 64 and "DATA_DIR" in result.stderr
