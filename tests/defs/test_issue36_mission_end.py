"""Issue 36 item 3: a drained mission is not green anywhere, says how many ranges are left, and no next mission
follows it. Real runs on the local backend and a real temporary instance; what is asserted is what the instance
holds (the run's status and tags, the check's evaluation, the partitions' statuses as the UI reads them, the
profile's materialization) and what the sensors' ticks say. A stop (SIGTERM to a run worker) is pinned here
in process, and in tests/reliability/test_operator_stop.py with a run worker process of its own (slow)."""

import os
import signal
import threading
import time

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.defs.assets.range_assets import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from catchup_assets.defs.sensors.next_mission import next_mission_sensor
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from dagster_defs import catchup, defs, plan_config

RANGE = dg.AssetKey("range_catchup")


def deployment(**changes) -> dg.Definitions:
    return dg.Definitions(
        assets=defs.assets,
        jobs=defs.jobs,
        sensors=[mission_finished_sensor, next_mission_sensor],
        resources={"catchup": CatchupResource(**{**catchup.model_dump(), **changes})},
        executor=dg.in_process_executor,
    )


DEPLOYMENT = deployment()


def tick(instance, sensor):
    with dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        definitions=DEPLOYMENT,
        resources={"catchup": DEPLOYMENT.resources["catchup"]},
    ) as context:
        return sensor.evaluate_tick(context)


def run(instance, keys, mission="m1", d=DEPLOYMENT):
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: mission}
    job = d.resolve_job_def("range_catchup_job")
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
    # Not a green Success: Canceled, as a stop (nothing failed); the run itself says it drained, and what it left.
    record = instance.get_run_by_id(drained.run_id)
    assert record.status == dg.DagsterRunStatus.CANCELED
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


def partition_page(instance, key: str) -> dict:
    """The partition's metadata as its page lists it: the newest observation's entries first, then the latest
    materialization's, one per label (dagster-ui's AssetEventMetadataEntriesTable, `uniqBy` label)."""
    one = dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[key])
    rows = [r.asset_observation.metadata for r in instance.fetch_observations(one, limit=100).records]  # newest first
    rows += [r.asset_materialization.metadata for r in instance.fetch_materializations(one, limit=1).records]
    page: dict = {}
    for metadata in rows:
        for label, value in metadata.items():
            page.setdefault(label, value.value)
    return page


def test_issue36_a_condemned_range_s_page_shows_this_mission_s_attempt_and_names_the_earlier_one_s_completion(
    instance,
):
    plan = DEPLOYMENT.resolve_job_def("mission_plan_job")
    assert plan.execute_in_process(run_config=plan_config("m1", 1), instance=instance).success
    [key] = instance.get_dynamic_partitions("ledger_ranges")
    assert run(instance, [key]).success  # m1 completed it: the page's "Materialized" heading is m1's
    [earlier] = instance.fetch_materializations(RANGE, limit=1).records
    assert plan.execute_in_process(run_config=plan_config("m2", 1), instance=instance).success
    broken = deployment(sim_fail_targets=[int(key[-10:])])
    assert not run(instance, [key], "m2", broken).success  # m2 condemns it

    page = partition_page(instance, key)
    assert page["mission"] == "m2" and page["phase"] == "condemned" and page["kind"] == "condemned"
    assert "failed budget spent" in page["cause"] and page["outcomes"] == "failed"
    assert page["materialized_by"] == "mission m1: its completion, not this mission's attempt"
    # None of m1's figures shows beside m2's cause: each label m1's materialization carries is m2's word.
    m1 = earlier.asset_materialization.metadata
    [condemned] = [
        r.asset_observation.metadata
        for r in instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[key]), limit=1
        ).records
    ]
    assert set(m1) <= set(condemned), set(m1) - set(condemned)
    assert page["seconds"] == "none: m2 did not complete it" and isinstance(m1["seconds"].value, float)


def test_L37_issue36_a_stopped_run_is_canceled_fails_no_range_and_no_next_mission_follows(instance):
    """SIGTERM to this process while the run dispatches, as a run worker gets it: the run ends CANCELED, no
    range is FAILED, the run is profiled and the sensor plans nothing after it, saying why."""
    plan = DEPLOYMENT.resolve_job_def("mission_plan_job")
    assert plan.execute_in_process(run_config=plan_config("m1", 6, parallelism=2), instance=instance).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    backend = LocalBackend(DEPLOYMENT.resources["catchup"].work(), "m1")
    sent = threading.Event()

    def stop_once_dispatching() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end and not any(s.live for s in backend.observe()):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # the dispatcher's handler takes it (mission/stop_signals.py)
        sent.set()

    # Ours while the run's is not installed, so a late signal ends nothing but the run it was meant for.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        threading.Thread(target=stop_once_dispatching, daemon=True).start()
        stopped = run(instance, keys)
        assert sent.wait(60)
    finally:
        signal.signal(signal.SIGTERM, previous)

    record = instance.get_run_by_id(stopped.run_id)
    assert record.status == dg.DagsterRunStatus.CANCELED and record.tags["catchup/ended"] == "stopped"
    status = instance.get_status_by_partition(RANGE, keys, ledger_ranges_partitions_def)
    values = [s and s.value for s in status.values()]
    assert "FAILED" not in values and values.count(None) >= 1, values  # not red: stopped, not started
    assert record.tags["catchup/ranges-left"] == str(values.count(None))
    [verdict] = check_evaluations(instance, stopped.run_id, "mission_complete")
    assert not verdict.passed and verdict.severity == dg.AssetCheckSeverity.WARN
    assert verdict.metadata["why"].value.startswith(f"stopped: {values.count('MATERIALIZED')} of 6 ranges done")

    [request] = [r for r in tick(instance, mission_finished_sensor).run_requests if r.partition_key == "m1"]
    profile = DEPLOYMENT.resolve_job_def("profile_job")
    assert profile.execute_in_process(instance=instance, partition_key="m1", tags=request.tags).success
    skipped = tick(instance, next_mission_sensor)
    assert not skipped.run_requests
    assert skipped.skip_message.startswith(
        f"no next mission after m1: its last run was stopped (stopped, {values.count(None)} ranges left, "
        f"run {stopped.run_id})"
    )
