"""`mission_cleanup_job` on the local backend through a real Dagster instance (issue 21 item 3).

A run of the mission that Dagster has not finished is a live run: the job refuses,
naming `force`, and deletes nothing; once that run is over it cleans up, keeping the
resumable range's data unless `all`. Assertions are on the work directory and on the
job's own events.
"""

from __future__ import annotations

import sys
import time

import dagster as dg
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.ports import AttemptSpec
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.mission_nonce import MissionNonce
from catchup_assets.defs.definitions import defs
from catchup_assets.defs.mission.run_context import MISSION_TAG
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.saved import mission_nonce, save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

DONE, LEFT = "0000000001-0000000064", "0000000065-0000000128"


@pytest.fixture
def left_behind(tmp_path):
    """m1 stopped: DONE completed, its data kept; LEFT unfinished (exit 1), no dispatcher recorded it;
    both attempts finished, unreleased."""
    root = str(tmp_path / "storage")
    save_mission(Store(root), MissionConfig(mission="m1", span=MissionSpan(1, 128, 64, 0), storage_root=root))
    exits = "import os; raise SystemExit(int(os.environ['RC']))"
    # The deployment's attempts, signed with the mission's nonce as its backend signs them (issue 45).
    b = LocalBackend(
        tmp_path / "work",
        "m1",
        command=[sys.executable, "-c", exits],
        sample_interval=0.05,
        nonce=MissionNonce(mission_nonce(Store(root), "m1")),
    )
    for key, rc in ((DONE, "0"), (LEFT, "1")):
        b.submit(AttemptSpec("m1", key, 1, 64, 64, 1 << 30, 1 << 30, "small", env={"RC": rc}))
        (b.data_dir(key) / "bucket").write_bytes(b"x" * 4096)
    RecordStore(Store(root), "m1").write(AttemptRecord("m1", DONE, 1, outcome="ok"))
    RecordStore(Store(root), "m1").mark_done(DONE, 1)
    until = time.monotonic() + 30  # both end on their own (a shutdown now could stop one)
    while any(s.live for s in b.observe()) and time.monotonic() < until:
        time.sleep(0.05)
    b.shutdown(10)  # waits until both supervisors have written their verdicts
    return CatchupResource(storage_root=root, work_dir=str(tmp_path / "work")), b


def launch(instance, resource, **config):
    return defs.resolve_job_def("mission_cleanup_job").execute_in_process(
        instance=instance,
        resources={"catchup": resource},
        run_config={"ops": {"mission_cleanup": {"config": {"mission": "m1", **config}}}},
        raise_on_error=False,
    )


def failure(run) -> str:
    return run.failure_data_for_node("mission_cleanup").error.message


def test_the_job_refuses_while_a_dagster_run_of_the_mission_is_live_then_cleans_up(left_behind):
    resource, b = left_behind
    with dg.DagsterInstance.ephemeral() as instance:
        live = instance.create_run_for_job(
            defs.resolve_job_def("range_catchup_job"), tags={MISSION_TAG: "m1"}, status=dg.DagsterRunStatus.STARTED
        )
        run = launch(instance, resource)
        assert not run.success
        assert f"force: a run of mission m1 is live (Dagster run {live.run_id} (range_catchup_job) is STARTED)" in (
            failure(run)
        )
        assert sorted(p.name for p in b.data_root.iterdir()) == [DONE, LEFT]  # nothing deleted

        assert launch(instance, resource, dry_run=True).success
        assert sorted(p.name for p in b.data_root.iterdir()) == [DONE, LEFT]

        instance.report_run_canceled(live)  # the operator terminated it
        run = launch(instance, resource)
        assert run.success and run.dagster_run.tags[MISSION_TAG] == "m1"
        (output,) = [e for e in run.all_node_events if e.is_successful_output]
        meta = output.step_output_data.metadata
        assert (meta["deleted_attempts"].value, meta["deleted_volumes"].value, meta["kept_volumes"].value) == (1, 1, 1)
        # LEFT's attempt was recorded first, then released as a dispatcher releases it (issue 36 item 9).
        assert meta["recorded_first"].value == [f"{LEFT} a001 failed"]
        assert RecordStore(Store(resource.storage_root), "m1").load()[1] == {(DONE, 1), (LEFT, 1)}
        assert [p.name for p in b.data_root.iterdir()] == [LEFT]  # the resumable range's data stays
        logs = [e.message for e in instance.all_logs(run.run_id) if e.user_message]
        assert any("keep:   1 volumes of ranges that can resume (0000000065-0000000128)" in m for m in logs)

        assert launch(instance, resource, all=True).success
        assert not b.root.exists()


def test_the_job_refuses_an_unknown_mission_naming_it(left_behind):
    resource, _ = left_behind
    with dg.DagsterInstance.ephemeral() as instance:
        run = defs.resolve_job_def("mission_cleanup_job").execute_in_process(
            instance=instance,
            resources={"catchup": resource},
            run_config={"ops": {"mission_cleanup": {"config": {"mission": "m2"}}}},
            raise_on_error=False,
        )
        assert not run.success and "mission: 'm2' has no mission.json" in failure(run)


def test_issue36_item9_the_job_refuses_while_a_failed_run_awaits_its_retry_or_its_retry_runs(left_behind):
    """A dead dispatcher's run, failed by run monitoring: the retry daemon will start it again, so it
    can still run whatever its claims' age; then its retry runs; once that is over, cleanup goes on."""
    resource, b = left_behind
    with dg.DagsterInstance.ephemeral() as instance:
        job = defs.resolve_job_def("range_catchup_job")
        dead = instance.create_run_for_job(
            job, tags={MISSION_TAG: "m1", "dagster/will_retry": "true"}, status=dg.DagsterRunStatus.FAILURE
        )
        run = launch(instance, resource)
        assert f"Dagster run {dead.run_id} (range_catchup_job) failed and awaits its automatic retry" in failure(run)
        retry = instance.create_run_for_job(job, tags={"dagster/retry_number": "1"}, status=dg.DagsterRunStatus.STARTED)
        instance.add_run_tags(dead.run_id, {"dagster/auto_retry_run_id": retry.run_id})  # as the daemon tags it
        run = launch(instance, resource)
        assert f"Dagster run {retry.run_id} (range_catchup_job), retrying {dead.run_id}, is STARTED" in failure(run)
        assert sorted(p.name for p in b.data_root.iterdir()) == [DONE, LEFT]  # nothing deleted
        assert RecordStore(Store(resource.storage_root), "m1").load()[1] == {(DONE, 1)}  # nor recorded
        instance.report_run_failed(instance.get_run_by_id(retry.run_id))  # no retries left: not tagged will_retry
        assert launch(instance, resource).success
        assert [p.name for p in b.data_root.iterdir()] == [LEFT]
