"""What a cleanup decides for each leftover (issue 36 item 9), by whether its record is durable and
whether a run of the mission can still run or retry.

Real supervisors leave the attempt and data directories; the records are written as a dispatcher
writes them; Dagster's runs are a real (ephemeral) instance's, asked as the job and the CLI ask.
The plan is made before anything is recorded (a refused or dry-run cleanup records nothing),
so these are its decisions on what it found.
"""

from __future__ import annotations

import sys
import time

import dagster as dg
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.cli.cleanup import dagster_runs
from catchup_assets.core.dispatch.ports import AttemptSpec, Leftover
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.defs.definitions import defs
from catchup_assets.defs.mission.cleanup_job import live_runs
from catchup_assets.defs.mission.run_context import MISSION_TAG
from catchup_assets.mission.cleanup import MissionLive, cleanup, plan_cleanup
from catchup_assets.mission.saved import save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

OK, FAILED, UNRECORDED, FLUSHED, LIVE = (f"{64 * i + 1:010d}-{64 * (i + 1):010d}" for i in range(5))
RETRIES = {"run_retries": {"enabled": True, "max_retries": 1}}  # the chart's instance retries a dead run
WORKER = "import os, time; time.sleep(float(os.environ['NAP'])); raise SystemExit(int(os.environ['RC']))"

# Each leftover's fate, whatever the runs: (kind, range) -> deleted or kept, and why.
DECIDED = {
    ("attempt", OK): "delete",  # done-marked ok: durable
    ("volume", OK): "delete",  # its range completed: nothing to resume
    ("attempt", FAILED): "delete",  # done-marked failed: durable
    ("volume", FAILED): "keep",  # its range can resume
    ("attempt", UNRECORDED): "keep",  # finished, never recorded: not durable
    ("volume", UNRECORDED): "keep",
    ("attempt", FLUSHED): "keep",  # peaks flushed while it ran, no outcome, no done mark: not durable
    ("volume", FLUSHED): "keep",
}


@pytest.fixture
def left(tmp_path):
    root = str(tmp_path / "storage")
    save_mission(Store(root), MissionConfig(mission="m1", span=MissionSpan(1, 320, 64, 0), storage_root=root))
    b = LocalBackend(tmp_path / "work", "m1", command=[sys.executable, "-c", WORKER], sample_interval=0.05)
    for key, rc in ((OK, 0), (FAILED, 1), (UNRECORDED, 0), (FLUSHED, 0)):
        b.submit(AttemptSpec("m1", key, 1, 64, 64, 1 << 30, 1 << 30, "small", env={"NAP": "0", "RC": str(rc)}))
    records = RecordStore(Store(root), "m1")
    for key, outcome in ((OK, "ok"), (FAILED, "failed")):
        records.write(AttemptRecord("m1", key, 1, outcome=outcome, seconds=1.0))
        records.mark_done(key, 1)
    records.write(AttemptRecord("m1", FLUSHED, 1, started_at=time.time(), peak_anon_bytes=1 << 20))
    until = time.monotonic() + 30
    while any(s.live for s in b.observe()) and time.monotonic() < until:
        time.sleep(0.05)
    yield root, b
    b.shutdown(5)


def dagster_says(kind: str | None, instance: dg.DagsterInstance) -> list[str]:
    """Runs of m1 in the state `kind`, made in the instance as Dagster makes them; then what the job asks."""
    job = defs.resolve_job_def("range_catchup_job")
    tags = {MISSION_TAG: "m1"}
    status = dg.DagsterRunStatus
    if kind in ("STARTED", "NOT_STARTED", "CANCELED", "SUCCESS"):
        instance.create_run_for_job(job, tags=tags, status=status[kind])
    elif kind in ("will retry", "no retry left"):
        # A dead dispatcher's run, failed as run monitoring fails it: Dagster itself tags it dagster/will_retry,
        # true while it has retries left (the instance's max_retries 1; a run tagged dagster/max_retries 0 has none).
        none_left = {"dagster/max_retries": "0"} if kind == "no retry left" else {}
        instance.report_run_failed(instance.create_run_for_job(job, tags={**tags, **none_left}, status=status.STARTED))
    elif kind in ("retry running", "retry finished"):
        dead = instance.create_run_for_job(job, tags=tags, status=status.STARTED)
        instance.report_run_failed(dead)
        retry = instance.create_run_for_job(
            job, status=status.STARTED if kind == "retry running" else status.SUCCESS
        )  # the daemon's retry, not tagged with the mission: found by the id the failed run names
        instance.add_run_tags(dead.run_id, {"dagster/auto_retry_run_id": retry.run_id})  # as the daemon tags it
    return live_runs(instance, "m1")


@pytest.mark.parametrize(
    "runs, live_attempt, refused",
    [
        (None, False, None),  # no Dagster run of the mission at all
        ("STARTED", False, "(range_catchup_job) is STARTED"),
        # Created, not launched yet. (A QUEUED run needs a code location's origin to be made; the
        # filter asks for QUEUED, NOT_STARTED and the other unfinished statuses alike.)
        ("NOT_STARTED", False, "(range_catchup_job) is NOT_STARTED"),
        ("will retry", False, "failed and awaits its automatic retry"),  # a dead dispatcher's run, failed
        ("retry running", False, "retrying"),
        ("retry finished", False, None),
        ("no retry left", False, None),
        ("CANCELED", False, None),
        ("SUCCESS", False, None),
        (None, True, "1 live attempts"),  # the backend still runs one: a dispatcher may be running it
        ("unchecked", False, "could not check whether a Dagster run of mission m1 can still run or retry"),
    ],
)
def test_issue36_item9_what_cleanup_decides_per_leftover(left, monkeypatch, runs, live_attempt, refused):
    root, b = left
    if live_attempt:
        b.submit(AttemptSpec("m1", LIVE, 1, 64, 64, 1 << 30, 1 << 30, "small", env={"NAP": "60", "RC": "0"}))
    if runs == "unchecked":  # the CLI with no instance to ask
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        live, unchecked = dagster_runs("m1")
    else:
        with dg.DagsterInstance.ephemeral(settings=RETRIES) as instance:
            live, unchecked = dagster_says(runs, instance), []
    plan = plan_cleanup(root, "m1", b, also_live=live, unchecked=unchecked, now=time.time() + 3600)
    decided = {(o.kind, o.range_key): "delete" for o in plan.delete}
    decided |= {(o.kind, o.range_key): "keep" for o in (*plan.keep, *plan.unrecorded)}
    want = DECIDED | ({("attempt", LIVE): "keep", ("volume", LIVE): "keep"} if live_attempt else {})
    assert decided == want
    held = lambda: ({(o.kind, o.name) for o in b.leftovers()}, RecordStore(Store(root), "m1").load())  # noqa: E731
    before = held()
    if refused is None:
        assert plan.refused_without_force is False
        assert cleanup(plan, b, dry_run=True).lines() == ["dry run: nothing deleted"]
    else:
        with pytest.raises(MissionLive, match="^force: ") as exc:
            cleanup(plan, b)
        assert refused in str(exc.value)
        assert held() == before  # nothing deleted, nothing written


def test_issue36_item9_with_all_the_volumes_of_ranges_owed_a_record_stay(left):
    root, b = left
    plan = plan_cleanup(root, "m1", b, everything=True, now=time.time() + 3600)
    volumes = {o.range_key: "delete" for o in plan.delete if o.kind == Leftover.VOLUME}
    volumes |= {o.range_key: "keep" for o in plan.keep}
    # A volume may hold the log of an attempt not yet recorded: it goes only with its attempt's record.
    assert volumes == {OK: "delete", FAILED: "delete", UNRECORDED: "keep", FLUSHED: "keep"}
