"""`catchup-assets logs` (issue 23 item 3): a running local attempt's log followed as it is written,
ending when the attempt ends; a finished one's from its archive; bad input refused naming the flag.

A real mission on the local backend (real supervisor, the worker script, the simulated core, slowed
down) runs in a thread; the command runs as the operator runs it, in a process of its own.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.cli.main import run
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.log_archive import stored_lines
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from scaled import scaled_placement

MiB = 1024**2
SPAN = MissionSpan(59_955_201, 59_968_000, ledgers_per_range=12_800, overlap=320)
KEY = "0059955201-0059968000"


def config(tmp_path: Path, speed: str) -> MissionConfig:
    return MissionConfig(
        mission="live",
        span=SPAN,
        storage_root=str(tmp_path / "storage"),
        parallelism=1,
        placement=scaled_placement(64 * MiB, 4 * MiB),
        poll_seconds=0.1,
        env={"SIM_SPEED": speed, "SIM_MEMORY_SCALE": "0.001"},  # slow: 200 checkpoints take seconds
    )


def logs(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from catchup_assets.cli.main import main; main(sys.argv[1:])",
        "logs",
        "--root",
        str(tmp_path / "storage"),
        "--work-dir",
        str(tmp_path / "work"),
        "--mission",
        "live",
        "--range",
        KEY,
        *extra,
    ]


def test_logs_follow_prints_a_running_attempt_s_new_lines_as_they_come_and_stops_when_it_ends(tmp_path):
    cfg = config(tmp_path, "2000")
    backend = LocalBackend(tmp_path / "work", "live", sample_interval=0.05)
    mission = threading.Thread(target=run_mission, args=(prepare(cfg), backend), daemon=True)
    mission.start()
    attempt = tmp_path / "work" / "live" / "attempts" / f"{KEY}-a001"
    log = attempt / "worker.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_bytes().count(b"applying ledger") >= 3):
        assert time.monotonic() < deadline, "the attempt never started"
        time.sleep(0.05)
    at_start = log.read_bytes().count(b"\n")
    proc = subprocess.Popen(logs(tmp_path, "--follow", "--tail", "1000000"), stdout=subprocess.PIPE, text=True)
    arrivals: list[tuple[float, bool, str]] = []  # when each line came, and whether the attempt had ended
    for line in proc.stdout:
        arrivals.append((time.monotonic(), (attempt / "status.json").exists(), line.rstrip("\n")))
    assert proc.wait(timeout=30) == 0
    ended_at = time.monotonic()
    mission.join(timeout=60)
    assert not mission.is_alive()
    # It returned once the attempt ended: its verdict is written, and the whole log was printed.
    records, done = RecordStore(Store(cfg.storage_root), "live").load()
    assert done == {(KEY, 1)} and records[(KEY, 1)].outcome == "ok"
    archived = list(stored_lines(records[(KEY, 1)].log_path))
    assert [text for _, _, text in arrivals] == archived
    # Lines written after it started reached it while the attempt still ran, not at the end.
    live_new = [text for t, ended, text in arrivals[at_start:] if not ended]
    assert len(live_new) >= 20 and any("applying ledger" in text for text in live_new)
    assert ended_at - arrivals[0][0] > 1.0  # it followed for a while, it did not dump and leave


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("finished")
    cfg = config(tmp_path, "200000")
    assert run_mission(prepare(cfg), LocalBackend(tmp_path / "work", "live")).done == [KEY]
    records, _ = RecordStore(Store(cfg.storage_root), "live").load()
    return tmp_path, list(stored_lines(records[(KEY, 1)].log_path))


def test_a_finished_attempt_s_log_is_its_archive_tail_within_its_bounds(finished):
    tmp_path, archived = finished
    out = subprocess.run(logs(tmp_path, "--tail", "5"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == archived[-5:] and "attempt 1: archived at" in out.stderr
    # --follow of a finished attempt prints it and returns at once.
    out = subprocess.run(logs(tmp_path, "--follow", "--attempt", "1"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines() == archived[-200:]
    cut = subprocess.run(logs(tmp_path, "--limit-bytes", "300"), capture_output=True, text=True, timeout=60)
    assert 0 < len(cut.stdout.encode()) <= 300 and cut.stdout.splitlines() == archived[-len(cut.stdout.splitlines()) :]


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--range", "59955201-59968000", "--range: range key '59955201-59968000' does not parse"),
        ("--range", "0059955201-0059968000\n", "--range: range key"),
        ("--mission", "Bad_Name", "--mission: mission name 'Bad_Name' is invalid"),
        ("--mission", "other", "--mission: no mission 'other' is stored"),
        ("--range", "0000000001-0000012800", "--range: mission live has started no attempt of range"),
        ("--attempt", "7", "--attempt: range 0059955201-0059968000 has attempts [1], not 7"),
    ],
)
def test_bad_input_is_refused_naming_its_flag(finished, capsys, flag, value, says):
    tmp_path, _ = finished
    argv = logs(tmp_path)[3:]
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    assert run(argv) == 2
    assert says in capsys.readouterr().err
