"""`catchup-assets cleanup` on the local backend: the work directory's range data goes (issue 21 item 3).

Real supervisors and workers (Python one-liners) leave the attempt and data
directories a stopped mission leaves; the assertions are on what the work
directory holds afterwards and on what the command printed, before and after.
"""

from __future__ import annotations

import json
import sys
import time

import dagster as dg
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.cli.main import run
from catchup_assets.core.dispatch.ports import AttemptSpec
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.mission_nonce import MissionNonce
from catchup_assets.defs.definitions import defs
from catchup_assets.defs.mission.run_context import MISSION_TAG
from catchup_assets.mission.saved import mission_nonce, save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

DONE, LEFT, LIVE = "0000000001-0000000064", "0000000065-0000000128", "0000000129-0000000192"
MiB = 1 << 20
NAP = "import os, time; time.sleep(float(os.environ.get('NAP', '0'))); raise SystemExit(int(os.environ.get('RC', '0')))"


def spec(key: str, nap: float = 0, rc: int = 0) -> AttemptSpec:
    return AttemptSpec("m1", key, 1, 64, 64, 1 << 30, 1 << 30, "small", env={"NAP": str(nap), "RC": str(rc)})


@pytest.fixture
def abandoned(tmp_path, monkeypatch):
    """Mission m1 on a root whose work directory is beside it, as CatchupResource puts it: DONE
    completed (its data kept by a release that failed), LEFT ended unfinished (exit 1) and no
    dispatcher recorded it, LIVE still running. The Dagster instance at DAGSTER_HOME runs nothing."""
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    root = tmp_path / "storage"
    store = Store(str(root))
    save_mission(store, MissionConfig(mission="m1", span=MissionSpan(1, 192, 64, 0), storage_root=str(root)))
    # The deployment's attempts, signed with the mission's nonce as its backend signs them (issue 45).
    b = LocalBackend(
        tmp_path / "work",
        "m1",
        command=[sys.executable, "-c", NAP],
        sample_interval=0.05,
        nonce=MissionNonce(mission_nonce(store, "m1")),
    )
    b.submit(spec(DONE))
    b.submit(spec(LEFT, rc=1))
    b.submit(spec(LIVE, nap=60))
    for key, mib in ((DONE, 1), (LEFT, 3), (LIVE, 2)):
        (b.data_dir(key) / "bucket").write_bytes(b"x" * mib * MiB)
    records = RecordStore(store, "m1")
    records.write(AttemptRecord("m1", DONE, 1, outcome="ok"))
    records.mark_done(DONE, 1)
    until = time.monotonic() + 20
    while sum(s.live for s in b.observe()) != 1 and time.monotonic() < until:
        time.sleep(0.05)
    yield root, b
    b.shutdown(5)


def work_holds(b: LocalBackend) -> tuple[list[str], list[str]]:
    ls = lambda d: sorted(p.name for p in d.iterdir() if not p.name.startswith(".")) if d.exists() else []  # noqa: E731
    return ls(b.attempts_dir), ls(b.data_root)


def test_cleanup_refuses_a_live_run_then_keeps_resumable_data_then_all_removes_the_work_directory(abandoned, capsys):
    root, b = abandoned
    argv = ["cleanup", "--root", str(root), "--mission", "m1"]
    assert run(argv) == 2
    out, err = capsys.readouterr()
    assert "catchup-assets: error: force: a run of mission m1 is live (1 live attempts:" in err
    assert "  delete: 1 attempts, 1 volumes: frees 0.0 GiB" in out  # said before the refusal
    # Refused, nothing is recorded either: a live dispatcher records its own attempts.
    assert f"  kept:   2 attempts without a durable record ({LEFT} a001, {LIVE} a001)" in out
    assert len(work_holds(b)[0]) == 3 and len(work_holds(b)[1]) == 3  # nothing deleted

    assert run([*argv, "--dry-run"]) == 0
    assert "dry run: nothing deleted (a run is live: refused without --force)" in capsys.readouterr().out

    b.shutdown(5)  # the run is stopped: its supervisor records LIVE's attempt as interrupted
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert f"keep:   2 volumes of ranges that can resume ({LEFT}, {LIVE}): 0.0 GiB" in out
    # The two no dispatcher recorded were recorded first, done marks last, then released as a
    # dispatcher releases them (issue 36 item 9); the plan, made after, deletes the third.
    assert f"  recorded: 2 finished attempts no dispatcher recorded, then released ({LEFT} a001 failed, " in out
    assert "deleted 1 attempts and 1 volumes" in out
    records, done = RecordStore(Store(str(root)), "m1").load()
    assert done == {(DONE, 1), (LEFT, 1), (LIVE, 1)}
    assert records[(LEFT, 1)].outcome not in (None, "ok") and records[(LEFT, 1)].exit_code == 1
    assert work_holds(b) == ([], [LEFT, LIVE])  # the completed range's data went, the resumable stays

    assert run([*argv, "--all"]) == 0
    assert "deleted 0 attempts and 2 volumes" in capsys.readouterr().out
    assert not b.root.exists()  # the mission's work directory is gone with its range data


def test_force_stops_the_live_attempt_and_removes_everything(abandoned, capsys):
    root, b = abandoned
    assert run(["cleanup", "--root", str(root), "--mission", "m1", "--all", "--force"]) == 0
    assert "(forced past a live run)" in capsys.readouterr().out
    records, done = RecordStore(Store(str(root)), "m1").load()  # stopped and recorded before it went
    assert done == {(DONE, 1), (LEFT, 1), (LIVE, 1)} and records[(LIVE, 1)].outcome == "stopped"
    assert not b.root.exists()
    assert b.observe() == []


def test_an_unknown_mission_or_bad_settings_are_refused_naming_the_field(tmp_path, capsys):
    root = str(tmp_path / "storage")
    assert run(["cleanup", "--root", root, "--mission", "nope"]) == 2
    assert "error: mission: 'nope' has no mission.json under" in capsys.readouterr().err
    assert run(["cleanup", "--root", root, "--mission", "Bad_Name"]) == 2
    assert "mission name 'Bad_Name' is invalid" in capsys.readouterr().err
    (tmp_path / "s.json").write_text(json.dumps({"backend": "kubernetes"}))
    assert run(["cleanup", "--root", root, "--mission", "m1", "--settings", str(tmp_path / "s.json")]) == 2
    assert "kubernetes: required when backend is 'kubernetes'" in capsys.readouterr().err
    (tmp_path / "s.json").write_text("[1]")
    assert run(["cleanup", "--root", root, "--mission", "m1", "--settings", str(tmp_path / "s.json")]) == 2
    assert "--settings:" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()  # nothing was written


def test_issue36_item9_the_cli_asks_dagster_home_s_instance_or_requires_force(abandoned, capsys, monkeypatch):
    root, b = abandoned
    b.shutdown(5)  # nothing runs on the backend: only Dagster can say a run is live
    argv = ["cleanup", "--root", str(root), "--mission", "m1"]
    with dg.DagsterInstance.get() as instance:  # the fixture's DAGSTER_HOME: a run of m1 started, not finished
        job = defs.resolve_job_def("range_catchup_job")
        live = instance.create_run_for_job(job, tags={MISSION_TAG: "m1"}, status=dg.DagsterRunStatus.STARTED)
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert f"force: a run of mission m1 is live (Dagster run {live.run_id} (range_catchup_job) is STARTED)" in err
    assert len(work_holds(b)[0]) == 3  # nothing deleted

    monkeypatch.delenv("DAGSTER_HOME")  # no instance to ask: said, and refused without --force
    assert run(argv) == 2
    out, err = capsys.readouterr()
    assert "  unchecked: DAGSTER_HOME is not set, so Dagster's runs of the mission were not asked" in out
    assert "error: force: could not check whether a Dagster run of mission m1 can still run or retry" in err
    assert "Traceback" not in err and len(work_holds(b)[0]) == 3
    assert run([*argv, "--force"]) == 0
    assert "(forced; Dagster's runs not checked)" in capsys.readouterr().out
    assert work_holds(b) == ([], [LEFT, LIVE])
