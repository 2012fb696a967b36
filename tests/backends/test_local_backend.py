"""The local backend against real supervisor and worker subprocesses.

Workers are Python one-liners, so these tests need neither the entrypoint
script nor the simulated stellar-core.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
import time
import types
from pathlib import Path

import fsspec
import psutil
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.backends.local.state import flush_peaks, read_json
from catchup_assets.backends.local.supervisor import pid_alive
from catchup_assets.core.classify.outcomes import Outcome, classify
from catchup_assets.core.dispatch.ports import AlreadyExists, TransientBackendError
from catchup_assets.sim.disruption import disruption_delay
from kit.local_backend import RANGE, backend, shut_down_made, spec, state_of, wait_phase

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _no_stray_attempts():
    # A failing test must not leave detached workers behind for the next ones.
    yield
    shut_down_made()


def to(dest: object):
    """collect's log_url when only the attempt's own log is wanted: every attempt to dest."""
    return lambda attempt: str(dest)


def wait_supervisor_gone(b: LocalBackend, aid: str, timeout: float = 5) -> None:
    sup = read_json(b.attempt_dir(aid) / "supervisor.json")
    end = time.monotonic() + timeout
    while pid_alive(sup["pid"], sup["create_time"]) and time.monotonic() < end:
        b.observe()  # reaps the exited child
        time.sleep(0.02)
    assert not pid_alive(sup["pid"], sup["create_time"])


def test_ok_run_finishes_with_times_peaks_and_gzip_log_L23_L19(tmp_path):
    code = (
        "import time; x = b'1' * (40 << 20); open('blob', 'wb').write(b'a' * 300000);"
        "print('hello\\r\\nworld', flush=True); time.sleep(0.4)"
    )
    b = backend(tmp_path, code)
    s = spec()
    t0 = time.time()
    b.submit(s)
    st = wait_phase(b, s.attempt_id)
    assert st.observation.exit_code == 0 and classify(st.observation) is Outcome.OK
    assert t0 <= st.started_at < st.finished_at <= time.time()
    assert st.finished_at - st.started_at >= 0.4
    assert st.peaks.anon_bytes >= 40 * MiB
    assert st.peaks.working_set_bytes >= st.peaks.anon_bytes
    assert st.peaks.ephemeral_bytes >= 300000
    assert st.memory_limit_bytes == 1 << 30 and st.tier == "small" and st.node
    # The data directory is the worker's cwd and outlives the attempt (L3).
    assert (b.data_dir(RANGE) / "blob").exists()
    dest = tmp_path / "logs" / "a1.log.gz"
    c1 = b.collect(st, to(dest))
    c2 = b.collect(st, to(dest))  # idempotent
    assert c1 == c2 and c1.log_path == str(dest)
    assert gzip.decompress(dest.read_bytes()) == b"hello\r\nworld\n"
    assert c1.peaks.anon_bytes >= 40 * MiB
    assert not [p for p in dest.parent.iterdir() if p.name != dest.name]  # no temp left


def test_collect_to_fsspec_url_and_feeds_log_parser_L29_L31(tmp_path, monkeypatch):
    seen = {}

    def iter_lines(chunks, max_line=65536):
        data = b"".join(chunks)
        seen["bytes"] = data
        return iter(data.decode().splitlines())

    def parse_worker_log(lines, source=None):
        seen["lines"], seen["source"] = list(lines), source
        return types.SimpleNamespace(
            resumed_from_ledger=1000, fresh_start=False, already_complete=False, tx_apply_count=7, tx_apply_seconds=1.5
        )

    fake = types.ModuleType("catchup_assets.core.measure.logparse")
    fake.iter_lines, fake.parse_worker_log = iter_lines, parse_worker_log
    monkeypatch.setitem(sys.modules, "catchup_assets.core.measure.logparse", fake)
    b = backend(tmp_path, "print('line one'); print('line two')")
    s = spec()
    b.submit(s)
    st = wait_phase(b, s.attempt_id)
    c = b.collect(st, to("memory://archive/m1/a1.log.gz"))
    with fsspec.open("memory://archive/m1/a1.log.gz", "rb", compression="gzip") as f:
        assert f.read() == b"line one\nline two\n"
    assert seen["lines"] == ["line one", "line two"]
    assert seen["source"] == f"attempt {s.attempt_id}"  # the parser's warnings name the attempt (issue 45)
    assert (c.tx_apply_count, c.tx_apply_seconds, c.resumed_from_ledger, c.fresh_start) == (7, 1.5, 1000, False)


def test_collect_with_the_real_log_parser_does_not_crash_L29(tmp_path):
    pytest.importorskip("catchup_assets.core.measure.logparse")
    b = backend(tmp_path, "import sys; sys.stdout.write('x' * 200000 + '\\r' + 'RESUME: maybe\\n')")
    s = spec()
    b.submit(s)
    st = wait_phase(b, s.attempt_id)
    c = b.collect(st, to(tmp_path / "l.gz"))
    assert c.log_path == str(tmp_path / "l.gz")


def test_memory_limit_exceeded_is_oomkilled_137_L4_L19(tmp_path):
    b = backend(tmp_path, "import time; x = b'1' * (200 << 20); time.sleep(20)")
    s = spec(limit=80 * MiB)
    b.submit(s)
    st = wait_phase(b, s.attempt_id)
    obs = st.observation
    assert (obs.exit_code, obs.termination_reason) == (137, "OOMKilled")
    assert classify(obs) is Outcome.OOM
    assert st.peaks.anon_bytes > 80 * MiB
    assert st.finished_at - st.started_at < 10


def test_deadline_sigterm_then_sigkill_is_deadline_exceeded_L4_L8(tmp_path):
    # The worker ignores SIGTERM: the grace ends in SIGKILL, and the verdict is still the deadline.
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(30)"
    b = backend(tmp_path, code, terminate_grace=0.3)
    s = spec(deadline=1)
    b.submit(s)
    st = wait_phase(b, s.attempt_id)
    assert st.observation.pod_reason == "DeadlineExceeded"
    assert st.observation.exit_code == 137
    assert classify(st.observation) is Outcome.DEADLINE
    assert 1.0 <= st.finished_at - st.started_at < 5


def test_injected_disruption_sigterms_and_records_disruption_target_L4(tmp_path):
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(3)); time.sleep(30)"
    b = backend(tmp_path, code, disruption_rate=1.0, disruption_window=(0.6, 0.6))
    s = spec()
    b.submit(s)
    st = wait_phase(b, s.attempt_id)
    assert "DisruptionTarget" in st.observation.conditions
    assert st.observation.exit_code == 3  # stellar-core drained, as after a real reclaim
    assert classify(st.observation) is Outcome.DISRUPTED


def test_disruption_draw_is_deterministic_and_follows_rate():
    args = (7, 0.3, (0.5, 3.0))
    draws = [disruption_delay(*args, RANGE, a) for a in range(2000)]
    assert draws == [disruption_delay(*args, RANGE, a) for a in range(2000)]
    hits = [d for d in draws if d is not None]
    assert 0.25 < len(hits) / len(draws) < 0.35
    assert all(0.5 <= d <= 3.0 for d in hits)
    assert disruption_delay(7, 0.0, (0.5, 3.0), RANGE, 1) is None
    assert draws != [disruption_delay(8, 0.3, (0.5, 3.0), RANGE, a) for a in range(2000)]


def test_submit_twice_raises_already_exists_and_runs_once_L11(tmp_path):
    b = backend(tmp_path, "print('ran', flush=True)")
    s = spec()
    b.submit(s)
    with pytest.raises(AlreadyExists):
        b.submit(s)
    with pytest.raises(AlreadyExists):  # another dispatcher instance loses the race too
        backend(tmp_path).submit(s)
    st = wait_phase(b, s.attempt_id)
    assert [x.attempt_id for x in b.observe()] == [s.attempt_id]
    assert (b.attempt_dir(s.attempt_id) / "worker.log").read_text() == "ran\n"
    assert st.observation.exit_code == 0


def test_restarted_dispatcher_sees_live_attempt_and_its_finish_L10(tmp_path):
    b1 = backend(tmp_path, "import time; time.sleep(1.5); print('done', flush=True)")
    s = spec()
    b1.submit(s)
    wait_phase(b1, s.attempt_id, "running")
    del b1  # the dispatcher is gone; its in-memory state with it
    b2 = backend(tmp_path)
    st = state_of(b2, s.attempt_id)
    assert st is not None and st.phase == "running" and st.memory_limit_bytes == 1 << 30
    st = wait_phase(b2, s.attempt_id)
    assert st.observation.exit_code == 0 and st.started_at is not None


def test_killed_supervisor_is_node_gone_and_its_worker_is_stopped_Z3_L4(tmp_path):
    b = backend(tmp_path, "import time; time.sleep(30)")
    s = spec()
    b.submit(s)
    d = b.attempt_dir(s.attempt_id)
    end = time.monotonic() + 10
    while not (d / "worker.json").exists() and time.monotonic() < end:
        time.sleep(0.05)
    sup, wrk = read_json(d / "supervisor.json"), read_json(d / "worker.json")
    os.kill(sup["pid"], signal.SIGKILL)
    st = wait_phase(b, s.attempt_id)
    assert st.observation.node_gone and st.observation.message == "supervisor vanished"
    assert classify(st.observation) is Outcome.DISRUPTED
    end = time.monotonic() + 5
    while psutil.pid_exists(wrk["pid"]) and time.monotonic() < end:
        time.sleep(0.05)
    assert not psutil.pid_exists(wrk["pid"])  # no orphan writing into the range's data


def test_supervisor_never_started_is_judged_lost_and_fenced_L10_L12(tmp_path):
    b = backend(tmp_path)
    d = b.attempt_dir("0000000001-0000000064-a004")
    d.mkdir(parents=True)
    old = time.time() - 3600
    os.utime(d, (old, old))
    st = state_of(b, "0000000001-0000000064-a004")
    assert st.phase == "finished" and st.observation.node_gone
    assert read_json(d / "status.json")["node_gone"] is True  # a late supervisor stops on it


def test_torn_files_warn_and_cost_only_their_attempt_L12_L33(tmp_path, caplog):
    b = backend(tmp_path, "print('ok')")
    good, torn = spec(1), spec(2)
    for s in (good, torn):
        b.submit(s)
    for s in (good, torn):
        wait_phase(b, s.attempt_id)
        wait_supervisor_gone(b, s.attempt_id)
    td = b.attempt_dir(torn.attempt_id)
    (td / "status.json").write_text('{"exit_co')
    (td / "peaks.json").write_text("not json")
    junk = b.attempts_dir / "garbage"
    junk.mkdir()
    (junk / "spec.json").write_text("[1, 2")
    b2 = backend(tmp_path)  # no caches
    with caplog.at_level("WARNING"):
        states = {s.attempt_id: s for s in b2.observe()}
    assert "unreadable" in caplog.text
    assert states[good.attempt_id].observation.exit_code == 0
    bad = states[torn.attempt_id]
    assert bad.phase == "finished" and bad.observation.exit_code is None
    assert classify(bad.observation) is Outcome.UNKNOWN
    assert "garbage" not in states


def test_release_and_release_range_delete_what_they_should_L2_L3(tmp_path):
    b = backend(tmp_path, "import time; open('db', 'w').write('x'); time.sleep(1)")
    s = spec()
    b.submit(s)
    live = wait_phase(b, s.attempt_id, "running")
    with pytest.raises(TransientBackendError):  # Busy: a later pass tries again
        b.release(live)
    with pytest.raises(TransientBackendError):
        b.release_range(RANGE)
    assert b.attempt_dir(s.attempt_id).exists() and b.data_dir(RANGE).exists()
    st = wait_phase(b, s.attempt_id)
    b.collect(st, to(tmp_path / "a.log.gz"))
    b.release(st)
    assert not b.attempt_dir(s.attempt_id).exists()
    assert b.observe() == []
    assert (b.data_dir(RANGE) / "db").exists()  # the attempt goes, the range's data stays
    b.release(st)  # idempotent
    b.release_range(RANGE)
    assert not b.data_dir(RANGE).exists()
    assert not list(b.data_root.iterdir())


def test_peaks_are_never_lowered_by_a_later_flush_L20(tmp_path):
    p = tmp_path / "peaks.json"
    flush_peaks(p, {"anon_bytes": 500, "working_set_bytes": 900, "ephemeral_bytes": None})
    flush_peaks(p, {"anon_bytes": 100, "working_set_bytes": 1000, "ephemeral_bytes": 5})
    assert read_json(p) == {"anon_bytes": 500, "working_set_bytes": 1000, "ephemeral_bytes": 5}
    # A recorded peak above anything this run samples survives the run's flushes.
    b = backend(tmp_path, "import time; time.sleep(0.5)")
    s = spec()
    b.submit(s)
    big = 50 << 30
    (b.attempt_dir(s.attempt_id) / "peaks.json").write_text(json.dumps({"anon_bytes": big}))
    st = wait_phase(b, s.attempt_id)
    assert st.peaks.anon_bytes == big
    assert read_json(b.attempt_dir(s.attempt_id) / "status.json")["peaks"]["anon_bytes"] == big
    assert b.collect(st, to(tmp_path / "l.gz")).peaks.anon_bytes == big


def test_env_values_reach_the_worker_verbatim_L17(tmp_path):
    nasty = {
        "PCT": "100% %s %(x)s %%",
        "SUBST": "$(touch pwned) `touch pwned2` ${HOME}",
        "QUOTES": 'it\'s "quoted" \\ back',
        "SPACES": "  a  b\tc ;| & > out ",
    }
    code = (
        "import json, os; json.dump({k: os.environ[k] for k in "
        "['PCT', 'SUBST', 'QUOTES', 'SPACES', 'RANGE_KEY', 'CATCHUP_TARGET', "
        "'CATCHUP_COUNT', 'DATA_DIR', 'STELLAR_CORE', 'FROM_BACKEND']}, open('env.json', 'w'))"
    )
    b = backend(tmp_path, code, env={"FROM_BACKEND": "b % $(x)"})
    s = spec(env=nasty)
    b.submit(s)
    assert wait_phase(b, s.attempt_id).observation.exit_code == 0
    data = b.data_dir(RANGE)
    got = json.loads((data / "env.json").read_text())
    assert {k: got[k] for k in nasty} == nasty
    assert got["FROM_BACKEND"] == "b % $(x)"
    assert (got["RANGE_KEY"], got["CATCHUP_TARGET"], got["CATCHUP_COUNT"]) == (RANGE, "64", "64")
    assert Path(got["DATA_DIR"]) == data.resolve()
    assert got["STELLAR_CORE"].endswith("catchup-sim-core")
    assert not list(data.glob("pwned*"))


def test_shutdown_terminates_workers_and_verdicts_are_still_written_L37_Z5(tmp_path):
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(3));"
        "print('ready', flush=True); time.sleep(30)"
    )
    b = backend(tmp_path, code)
    specs = [spec(1, range_key=RANGE), spec(1, range_key="0000000065-0000000128")]
    for s in specs:
        b.submit(s)
    for s in specs:
        wait_phase(b, s.attempt_id, "running")
        log = b.attempt_dir(s.attempt_id) / "worker.log"
        end = time.monotonic() + 10
        while not (log.exists() and b"ready" in log.read_bytes()) and time.monotonic() < end:
            time.sleep(0.05)
    assert b.shutdown(grace=10) == []
    for s in specs:
        st = state_of(b, s.attempt_id)
        assert st.phase == "finished"
        assert st.observation.exit_code == 3  # the real exit, not "terminated by user"
        assert "signal" in st.observation.message


def test_observe_reads_every_attempt_from_its_registry_files_L10(tmp_path):
    """What is live is read from the registry alone, by a backend that has cached nothing.
    Its cost per attempt is measured in benchmarks/dispatcher_cost.py, not asserted here."""
    # Not through backend(): these fake "supervisors" are this very process.
    b = LocalBackend(tmp_path / "work", "m1")
    me = psutil.Process()
    for i in range(300):
        d = b.attempt_dir(f"{i:010d}-{i:010d}-a001")
        d.mkdir(parents=True)
        (d / "spec.json").write_text(
            json.dumps({"range_key": f"{i:010d}-{i:010d}", "attempt": 1, "memory_limit_bytes": 1, "tier": "t"})
        )
        (d / "peaks.json").write_text(json.dumps({"anon_bytes": 1}))
        if i % 3:  # live: the supervisor record points at this live process
            (d / "supervisor.json").write_text(json.dumps({"pid": me.pid, "create_time": me.create_time()}))
            if i % 3 == 1:  # "running": its worker started; else pending, as a pod before its container runs
                (d / "worker.json").write_text(json.dumps({"pid": me.pid, "started_at": 1.0}))
        else:
            (d / "status.json").write_text(json.dumps({"exit_code": 0}))
    fresh = LocalBackend(tmp_path / "work", "m1")
    states = fresh.observe()
    assert len(states) == 300 and sum(s.phase == "running" for s in states) == 100
    assert sum(s.phase == "pending" for s in states) == 100
    assert all(s.peaks.anon_bytes == 1 for s in states)
