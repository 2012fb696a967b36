"""The local attempt's start gate: a fence (an operator's stop, or the registry judging a
supervisor that never started, L10/L37) and the supervisor race to create it, and the first
decides. A supervisor never runs its worker under a fence, and a fence never lands on an
attempt whose supervisor has begun: either would leave a worker running in a directory the
dispatcher has recorded and released."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from catchup_assets.backends.local.state import GATE, fence, read_json, take_gate
from kit.local_backend import backend, spec, state_of, wait_phase


def test_L37_a_supervisor_that_starts_after_a_fence_never_runs_its_worker(tmp_path):
    b = backend(tmp_path, "print('ran')")
    first = spec(1)
    b.submit(first)
    wait_phase(b, first.attempt_id)
    # A second attempt directory as submit leaves it, fenced before its supervisor starts.
    d = b.attempt_dir("0000000001-0000000064-a002")
    d.mkdir()
    for name in ("spec.json", "launch.json"):
        shutil.copy(b.attempt_dir(first.attempt_id) / name, d / name)
    # The fence has taken the gate and not yet written its verdict: the supervisor reads the gate.
    assert take_gate(d, "fence")
    sup = subprocess.run(
        [sys.executable, "-m", "catchup_assets.backends.local.supervisor", str(d)], timeout=60, capture_output=True
    )
    assert sup.returncode == 0, sup.stderr
    assert not (d / "worker.json").exists() and not (d / "worker.log").exists()
    assert not (d / "status.json").exists()  # the verdict is the fence's to write


def test_L37_a_fence_on_an_attempt_whose_supervisor_began_writes_nothing(tmp_path):
    b = backend(tmp_path, "import time; time.sleep(30)")
    s = spec(1)
    b.submit(s)
    wait_phase(b, s.attempt_id, "running")
    d = b.attempt_dir(s.attempt_id)
    assert not fence(d, "stopped by the operator before its supervisor started")
    assert not (d / "status.json").exists()
    assert state_of(b, s.attempt_id).phase == "running"
    assert b.shutdown(grace=10) == []
    assert read_json(d / "status.json")["conditions"] == ["StoppedByOperator"]  # its own verdict


def test_L10_an_old_attempt_whose_supervisor_holds_the_gate_is_pending_not_judged_lost(tmp_path):
    b = backend(tmp_path)
    d = b.attempt_dir("0000000001-0000000064-a003")
    d.mkdir(parents=True)
    (d / GATE).write_text(str(os.getpid()))  # a live supervisor took it, its record not yet written
    old = time.time() - 3600
    os.utime(d, (old, old))
    assert state_of(b, "0000000001-0000000064-a003").phase == "pending"
    assert not (d / "status.json").exists()
    (d / GATE).write_text("999999999")  # its owner is gone: the attempt is lost, as before
    st = state_of(b, "0000000001-0000000064-a003")
    assert st.phase == "finished" and st.observation.node_gone
