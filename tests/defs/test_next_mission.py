"""Issue 21 item 4: the next mission waits for a healthy one, and only one, read off the sensors' ticks
on a real temporary instance after real runs on the local backend."""

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.defs.assets.range_assets import MISSION_TAG
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from catchup_assets.defs.sensors.mission_plan import mission_plan_sensor
from catchup_assets.defs.sensors.next_mission import PREVIOUS_MISSION_TAG, next_mission_sensor
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from dagster_defs import catchup, defs, plan_config

SENSORS = [mission_plan_sensor, mission_finished_sensor, next_mission_sensor]


def deployment(**changes) -> tuple[dg.Definitions, dict]:
    resources = {"catchup": CatchupResource(**{**catchup.model_dump(), **changes})}
    d = dg.Definitions(
        assets=defs.assets, jobs=defs.jobs, sensors=SENSORS, resources=resources, executor=dg.in_process_executor
    )
    return d, resources


HEALTHY = deployment()


def tick(instance, sensor=next_mission_sensor, cursor=None, d=HEALTHY):
    # With its ref, as the daemon's: a request's partition is checked against the instance's partitions.
    # Entered, as the daemon enters it: the deployment's resource is a context manager.
    with dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), cursor=cursor, definitions=d[0], resources=d[1]
    ) as context:
        return sensor.evaluate_tick(context)


def plan(instance, mission, n, first_range=0, d=HEALTHY):
    job = d[0].resolve_job_def("mission_plan_job")
    return job.execute_in_process(
        run_config=plan_config(mission, n, first_range), instance=instance, raise_on_error=False
    )


def run(instance, keys, mission, d=HEALTHY):
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: mission}
    return (
        d[0].resolve_job_def("range_catchup_job").execute_in_process(instance=instance, tags=tags, raise_on_error=False)
    )


def profile(instance, mission):
    assert (
        HEALTHY[0]
        .resolve_job_def("profile_job")
        .execute_in_process(instance=instance, partition_key=mission, raise_on_error=False)
        .success
    )


def mission(instance, name, n, first_range=0, d=HEALTHY) -> list[str]:
    """Plan `name`, run its ranges on `d`, profile it: its keys."""
    assert plan(instance, name, n, first_range).success
    keys = instance.get_dynamic_partitions("ledger_ranges")[first_range : first_range + n]
    run(instance, keys, name, d)
    profile(instance, name)
    return keys


def planned_from(data) -> list[tuple[str, str]]:
    return [(r.tags[PREVIOUS_MISSION_TAG], r.run_key) for r in data.run_requests]


def test_turned_on_for_the_first_time_it_plans_from_the_newest_mission_only(instance, tmp_path):
    """Before: no cursor read every past profile and planned one next mission from each (m-next-116 and
    m-next-361 side by side). Now the newest profile plans, and a drain of its mission holds it."""
    mission(instance, "m1", 1)
    mission(instance, "m2", 1, first_range=1)
    store = Store(tmp_path / "storage")

    control = ControlStore(store, "m2")
    control.write(MissionControl(drain=True))  # as `catchup-assets control ... drain` writes it
    drained = tick(instance)
    assert not drained.run_requests
    assert drained.skip_message.startswith("no next mission after m2: it was drained")
    assert "allow_after_failure" in drained.skip_message
    store.write_bytes(layout.control("m2"), b"{not json")
    unreadable = tick(instance)
    assert not unreadable.run_requests and "m2: its control record cannot be read" in unreadable.skip_message
    control.write(MissionControl(paused=True))  # paused is not drained

    data = tick(instance)
    assert planned_from(data) == [("m2", "m2-n2")]  # not m1: m2 superseded it
    assert data.run_requests[0].tags[MISSION_TAG] == "m2-n2"
    assert tick(instance, cursor=data.cursor).skip_message == "no new range_profile materialization"


def test_after_condemned_ranges_it_skips_naming_them_until_they_are_backfilled(instance):
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    bad = keys[1]
    broken = deployment(sim_fail_targets=[int(bad[-10:])])
    assert not run(instance, keys, "m1", broken).success
    # The failed mission is still profiled (mission_finished_sensor), condemned range and all.
    [request] = tick(instance, mission_finished_sensor).run_requests
    assert request.job_name == "profile_job" and request.tags[MISSION_TAG] == "m1" == request.partition_key
    profile(instance, "m1")

    skipped = tick(instance)
    assert not skipped.run_requests
    assert skipped.skip_message.startswith(f"no next mission after m1: it condemned 1 ranges ({bad})")
    # The operator's override plans it anyway.
    anyway = tick(instance, d=deployment(allow_after_failure=True))
    assert planned_from(anyway) == [("m1", "m1-n2")]

    # The archive fixed, the range backfilled and the mission profiled again: the next mission goes.
    assert run(instance, [bad], "m1").success
    profile(instance, "m1")
    assert planned_from(tick(instance, cursor=skipped.cursor)) == [("m1", "m1-n2")]


def test_after_the_circuit_breaker_stopped_a_mission_it_skips_with_its_cause(instance):
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    broken = deployment(breaker_attempts=2, sim_fail_targets=[int(k[-10:]) for k in keys])
    assert not run(instance, keys, "m1", broken).success
    profile(instance, "m1")
    skipped = tick(instance)
    assert not skipped.run_requests
    assert skipped.skip_message.startswith(
        "no next mission after m1: its dispatch was stopped: circuit breaker: 2 attempts in a row failed the same way"
    )
    assert planned_from(tick(instance, d=deployment(allow_after_failure=True))) == [("m1", "m1-n2")]


def test_the_next_name_never_takes_an_existing_mission_s(instance):
    # Planned by hand under the name the chain would take, before m1 (m1, the newest mission, plans the next:
    # issue 46 failure 6).
    assert plan(instance, "m1-n2", 1, first_range=1).success
    mission(instance, "m1", 1)
    assert planned_from(tick(instance)) == [("m1", "m1-n3")]


def failure_text(result) -> str:
    return " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)


def test_a_second_plan_over_partitions_a_live_mission_holds_is_refused_naming_it(instance, tmp_path):
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    # m1's run as mission_plan_sensor requests it, not started yet: live.
    [request] = tick(instance, mission_plan_sensor).run_requests
    queued = instance.create_run_for_job(
        HEALTHY[0].resolve_job_def("range_catchup_job"), tags=request.tags, status=dg.DagsterRunStatus.NOT_STARTED
    )
    store = Store(tmp_path / "storage")

    refused = plan(instance, "m2", 2, first_range=1)  # ranges 1 and 2: range 1 is m1's
    assert not refused.success
    text = failure_text(refused)
    assert f"mission: m2 would dispatch over 1 ranges ({keys[1]}) that mission m1 holds" in text
    assert queued.run_id in text
    assert instance.get_dynamic_partitions("ledger_ranges") == keys  # range 2 not added
    assert not store.exists(layout.plan("m2")) and not store.exists(layout.mission_file("m2"))

    assert plan(instance, "m1", 2).success  # m1 replanned: its own run holds its ranges
    assert plan(instance, "m3", 1, first_range=5).success  # ledgers m1 does not hold
    instance.report_run_canceled(queued)
    assert plan(instance, "m2", 2, first_range=1).success  # m1 no longer live


def in_flight_profile_job(instance, mission) -> dg.DagsterRun:
    """A profile_job run of `mission` still running, as the instance holds one (tier_map after range_profile)."""
    job = HEALTHY[0].resolve_job_def("profile_job")
    return instance.create_run_for_job(
        job_def=job, tags={MISSION_TAG: mission, "dagster/partition": mission}, status=dg.DagsterRunStatus.STARTED
    )


def test_issue46_only_the_newest_mission_s_profile_plans_and_only_once_its_profile_job_ended(instance):
    """Issue 46 failure 6: turned on while a drained mission's profile job still ran, the sensor planned a new
    mission from the *older* mission's profile. Two missions: m1 profiled, m2 (the newest) run and its profile job
    running. Neither m1's profile nor m1's newer one plans; m2's waits for its profile job, then plans."""
    mission(instance, "m1", 1)
    assert plan(instance, "m2", 1, first_range=1).success
    run(instance, instance.get_dynamic_partitions("ledger_ranges")[1:2], "m2")
    running = in_flight_profile_job(instance, "m2")

    older = tick(instance)
    assert not older.run_requests and "not the newest mission's (m2)" in older.skip_message
    profile(instance, "m1")  # the older mission's profile newer on disk (re-profiled after a backfill)
    again = tick(instance, cursor=older.cursor)
    assert not again.run_requests and "mission m1's, not the newest mission's (m2)" in again.skip_message

    profile(instance, "m2")  # its range_profile materialized; its profile job's run still in flight
    waiting = tick(instance, cursor=again.cursor)
    assert not waiting.run_requests and "m2's profile_job is still running" in waiting.skip_message
    # Its cursor stays before m2's profile: the next tick reads it again, and waits again.
    assert "m2's profile_job is still running" in tick(instance, cursor=waiting.cursor).skip_message

    instance.report_run_canceled(running)  # the profile job's run ended
    data = tick(instance, cursor=waiting.cursor)
    assert planned_from(data) == [("m2", "m2-n2")]
