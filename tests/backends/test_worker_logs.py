"""The worker's log on the range's volume (L31), from the real entrypoint.sh and simulated core.

An attempt writes everything it prints to `logs/aNNN.log` in the data dir as
it goes; the next attempt prints earlier files between marker lines and marks
them shipped. The marker lines are compared byte for byte with
`catchup_assets.core.measure.shipped`, which the simulated kubelet prints too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from catchup_assets.core.measure import shipped
from catchup_assets.core.measure.logparse import parse_worker_log
from kit.worker import ENTRYPOINT, KEY, SHELLS, prepare, worker_env


@pytest.fixture(params=SHELLS, ids=[Path(s).name for s in SHELLS])
def shell(request: pytest.FixtureRequest) -> str:
    return request.param


def run_bytes(shell: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([shell, str(ENTRYPOINT)], env=env, capture_output=True, timeout=60)


def shipped_bytes(attempt: int, content: bytes) -> bytes:
    return shipped.section(attempt, shipped.log_file(attempt), content)


def own_part(out: bytes) -> bytes:
    return b"".join(piece for n, piece in shipped.split(out.splitlines(keepends=True)) if n is None)


def test_L31_earlier_logs_are_shipped_once_between_markers_and_the_attempt_s_own_log_is_kept(shell, tmp_path):
    data = prepare(tmp_path / "data", None, None)
    logs = data / "logs"
    logs.mkdir()
    (logs / "a001.log").write_bytes(b"first attempt\ncut off mid-li")  # its writer was killed mid-line
    (logs / "a002.log.shipped").write_bytes(b"shipped by attempt 3\n")
    (logs / "a003.log").write_bytes(b"third attempt\n")

    fourth = run_bytes(shell, worker_env(data, CATCHUP_ATTEMPT="4"))
    assert fourth.returncode == 0, fourth.stderr
    # Exactly what shipped.section renders, in file order, before anything of attempt 4's own.
    prefix = shipped_bytes(1, b"first attempt\ncut off mid-li") + shipped_bytes(3, b"third attempt\n")
    assert fourth.stdout.startswith(prefix + f"WORKER: range {KEY} target 640 count 320\n".encode())
    assert sorted(p.name for p in logs.iterdir()) == [
        "a001.log.shipped",
        "a002.log.shipped",
        "a003.log.shipped",
        "a004.log",
    ]
    assert (logs / "a001.log.shipped").read_bytes() == b"first attempt\ncut off mid-li"  # kept as it was
    # Attempt 4's file holds everything it printed, and none of what it shipped.
    assert (logs / "a004.log").read_bytes() == fourth.stdout[len(prefix) :]

    fifth = run_bytes(shell, worker_env(data, CATCHUP_ATTEMPT="5"))
    assert fifth.returncode == 0, fifth.stderr
    own4 = (logs / "a004.log.shipped").read_bytes()
    assert fifth.stdout.startswith(shipped_bytes(4, own4) + b"WORKER: ")  # 1 and 3 are not sent twice
    assert b"RESUME: range " + KEY.encode() + b" already complete" in own_part(fifth.stdout)


def test_L31_a_killed_attempt_s_log_is_on_the_volume_and_the_next_attempt_ships_it(shell, tmp_path):
    data = prepare(tmp_path / "data", None, None)
    own = data / shipped.log_file(1)
    env = worker_env(data, target="1280", count="1280", SIM_SPEED="20")
    proc = subprocess.Popen([shell, str(ENTRYPOINT)], env=env, stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if b"applying ledger" in line:
            break
    # Written as it runs: the line is in the file before the attempt ends (tee may lag stdout a little).
    for _ in range(200):
        if b"applying ledger" in own.read_bytes():
            break
        time.sleep(0.05)
    assert b"applying ledger" in own.read_bytes() and proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)  # the node is gone: no drain, no exit report
    proc.wait(timeout=10)
    proc.stdout.close()
    left = own.read_bytes()
    assert b"metric 'ledger.transaction.apply'" not in left

    second = run_bytes(shell, worker_env(data, target="1280", count="1280", CATCHUP_ATTEMPT="2"))
    assert second.returncode == 0, second.stderr
    sections: dict[int | None, bytes] = {}
    for n, piece in shipped.split(second.stdout.splitlines(keepends=True)):
        sections[n] = sections.get(n, b"") + piece
    assert sections.keys() == {1, None}
    # Attempt 1's section is its file, whole (a cut-off last line ends on a line of its own) ...
    assert sections[1] == left + (b"" if left.endswith(b"\n") else b"\n")
    assert sections[1].count(b"WORKER: range") == 1  # attempt 1's own start, nothing of attempt 2's
    assert (data / "logs" / "a001.log.shipped").read_bytes() == left
    # ... and attempt 2's own log parses as attempt 2 alone: its resume, its exit report.
    assert sections[None].startswith(b"WORKER: range") and sections[None].count(b"WORKER: range") == 1
    facts = parse_worker_log(sections[None].decode().splitlines())
    assert facts.tx_apply_count and facts.tx_apply_count > 0
    assert sections[None] == (data / shipped.log_file(2)).read_bytes()
