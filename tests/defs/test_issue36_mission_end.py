"""Issue 36 item 3: a drained mission is not green anywhere, says how many ranges are left, and no next mission
follows it. Real runs on the local backend and a real temporary instance; what is asserted is what the instance
holds (the run's status and tags, the check's evaluation, the partitions' statuses as the UI reads them, the
profile's materialization) and what the sensors' ticks say. A stop (SIGTERM to a run worker) is pinned in
tests/reliability/test_operator_stop.py, with its own run worker process."""

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.defs.assets.range_assets import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from catchup_assets.defs.sensors.next_mission import next_mission_sensor
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from dagster_defs import catchup, defs, plan_config

RANGE = dg.AssetKey("range_catchup")
DEPLOYMENT = dg.Definitions(
    assets=defs.assets,
    jobs=defs.jobs,
    sensors=[mission_finished_sensor, next_mission_sensor],
    resources={"catchup": CatchupResource(**catchup.model_dump())},
    executor=dg.in_process_executor,
)


def tick(instance, sensor):
    with dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        definitions=DEPLOYMENT,
        resources={"catchup": DEPLOYMENT.resources["catchup"]},
    ) as context:
        return sensor.evaluate_tick(context)


def run(instance, keys):
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: "m1"}
    job = DEPLOYMENT.resolve_job_def("range_catchup_job")
    return job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)


def check_evaluations(instance, run_id: str, name: str) -> list:
    logs = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return [e.dagster_event.event_specific_data for e in logs if e.dagster_event.event_specific_data.check_name == name]


def test_issue36_a_drained_mission_is_not_green_shows_its_unstarted_count_and_no_next_mission_follows(
    instance, tmp_path
):
    plan = DEPLOYMENT.resolve_job_def("mission_plan_job")
    assert plan.execute_in_process(run_config=plan_config("m1", 3), instance=instance).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert run(instance, keys[:1]).success  # one range done, by an earlier run of the mission
    ControlStore(Store(tmp_path / "storage"), "m1").write(MissionControl(drain=True))  # as the CLI's drain

    drained = run(instance, keys)
    # Dagster says "Success" (nothing failed); the run itself says it drained, and what it left.
    assert drained.success
    record = instance.get_run_by_id(drained.run_id)
    assert record.tags["catchup/ended"] == "drained" and record.tags["catchup/ranges-left"] == "2"
    [verdict] = check_evaluations(instance, drained.run_id, "mission_complete")
    assert not verdict.passed and verdict.severity == dg.AssetCheckSeverity.WARN
    counts = {k: verdict.metadata[k].value for k in ("ranges", "done", "not_started", "stopped", "condemned", "left")}
    assert counts == {"ranges": 3, "done": 1, "not_started": 2, "stopped": 0, "condemned": 0, "left": 2}
    assert (
        verdict.metadata["why"].value == "drained: 1 of 3 ranges done, 2 left (2 not started, 0 stopped, 0 condemned)"
    )
    status = instance.get_status_by_partition(RANGE, keys, ledger_ranges_partitions_def)
    assert [s and s.value for s in status.values()] == ["MATERIALIZED", None, None]  # not started: not FAILED

    # The drained run is profiled, and its profile says how many ranges are left.
    requests = {r.tags["catchup/after-run"]: r for r in tick(instance, mission_finished_sensor).run_requests}
    assert requests[drained.run_id].partition_key == "m1"
    profile = DEPLOYMENT.resolve_job_def("profile_job")
    assert profile.execute_in_process(instance=instance, partition_key="m1").success
    [mat] = instance.fetch_materializations(dg.AssetKey("range_profile"), limit=1).records
    meta = mat.asset_materialization.metadata
    assert (meta["ranges_done"].value, meta["ranges_left"].value) == (1, 2)

    # And no next mission is planned from it; the tick says why.
    skipped = tick(instance, next_mission_sensor)
    assert not skipped.run_requests
    assert skipped.skip_message.startswith("no next mission after m1: it was drained")


def test_issue36_a_completed_mission_passes_mission_complete_and_is_tagged_completed(instance):
    plan = DEPLOYMENT.resolve_job_def("mission_plan_job")
    assert plan.execute_in_process(run_config=plan_config("m1", 2), instance=instance).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    done = run(instance, keys)
    assert done.success
    record = instance.get_run_by_id(done.run_id)
    assert (record.tags["catchup/ended"], record.tags["catchup/ranges-left"]) == ("completed", "0")
    [verdict] = check_evaluations(instance, done.run_id, "mission_complete")
    assert verdict.passed and verdict.metadata["why"].value == "completed: all 2 ranges done"
