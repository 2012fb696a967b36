"""`mission_finished_sensor`: each finished (success, failure or canceled) run that targeted `range_catchup`
becomes one `profile_job` run for its mission, of the mission's partition (added if missing).

Canceled too: an operator's stop ends the run CANCELED (defs/mission/mission_end.py), and its profile
says how many ranges are left."""

from __future__ import annotations

import dagster as dg

from catchup_assets.core.plan.config import validate_mission
from catchup_assets.defs.assets.range_assets import MISSION_TAG, PLAN_KEY, WILL_RETRY_TAG
from catchup_assets.defs.mission.jobs import profile_job
from catchup_assets.defs.mission.mission_partitions import MISSIONS, is_planned, missing_missions, unadopted
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.instance import BATCH, has_runs, meta, targets_range_catchup
from catchup_assets.store.root import Store

AFTER_RUN_TAG = "catchup/after-run"  # on a profile_job run: the range_catchup run it follows
FINISHED_EVENTS = (dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.RUN_CANCELED)


def finished_status_changes(instance: dg.DagsterInstance, after: int | None) -> list[dg.EventLogRecord]:
    """Success, failure and cancel events after `after`, in storage order, with no gap left behind."""
    records, horizon = [], None
    for event_type in FINISHED_EVENTS:
        result = instance.fetch_run_status_changes(
            dg.RunStatusChangeRecordsFilter(event_type=event_type, after_storage_id=after), limit=BATCH, ascending=True
        )
        records += result.records
        # One type's page may end early: the other type's later events wait for the next tick.
        if result.has_more and result.records:
            last = result.records[-1].storage_id
            horizon = last if horizon is None else min(horizon, last)
    return sorted((r for r in records if horizon is None or r.storage_id <= horizon), key=lambda r: r.storage_id)


@dg.sensor(
    job=profile_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Profile a mission each time one of its range_catchup runs finishes, succeeded or failed.",
)
def mission_finished_sensor(context: dg.SensorEvaluationContext, catchup: CatchupResource):
    """Profile a mission each time one of its range_catchup runs finishes, succeeded or failed."""
    instance = context.instance
    store = Store(catchup.root())
    adopt = adoptable(context, store)
    events = finished_status_changes(instance, int(context.cursor) if context.cursor else None)
    if not events and not adopt:
        return dg.SkipReason("no run has finished")
    requests = []
    for event in events:
        run = instance.get_run_by_id(event.run_id)
        if run is None or not targets_range_catchup(instance, run):
            continue
        if run.tags.get(WILL_RETRY_TAG) == "true":
            context.log.info(f"run {run.run_id} failed and will be retried: its retry's finish is profiled")
            continue
        if has_runs(instance, job_name=profile_job.name, tags={AFTER_RUN_TAG: run.run_id}):
            continue  # profiled already (`catchup-assets demo` profiles its own runs)
        mission = run.tags.get(MISSION_TAG) or mission_planned_before(instance, run.run_id)
        if not mission:
            context.log.warning(f"run {run.run_id} has no mission tag and no mission is planned: not profiled")
            continue
        # The mission becomes a partition here: a name a tag carries is checked first.
        try:
            planned = is_planned(store, validate_mission(mission))
        except ValueError as exc:
            context.log.warning(f"run {run.run_id}: {exc}: not profiled")
            continue
        if not planned:
            context.log.warning(f"run {run.run_id}: mission {mission} has no plan on {store.root}: not profiled")
            continue
        requests.append(
            dg.RunRequest(
                run_key=run.run_id,
                job_name=profile_job.name,
                partition_key=mission,
                tags={MISSION_TAG: mission, AFTER_RUN_TAG: run.run_id},
            )
        )
    new = missing_missions(instance, [*adopt, *(r.partition_key for r in requests)])
    # The daemon adds these partitions before it launches the runs that name them.
    added = [dg.AddDynamicPartitionsRequest(MISSIONS, new)] if new else []
    cursor = str(events[-1].storage_id) if events else context.cursor
    if not requests:
        return dg.SensorResult(
            skip_reason="no finished run of range_catchup", dynamic_partitions_requests=added, cursor=cursor
        )
    return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=added, cursor=cursor)


def adoptable(context: dg.SensorEvaluationContext, store: Store) -> list[str]:
    """The storage root's missions not yet partitions; none when the root cannot be listed this tick
    (profiling must not wait on it: the next tick looks again)."""
    try:
        return unadopted(context.instance, store)
    except OSError as exc:
        context.log.warning(f"the storage root {store.root} cannot be listed for missions to adopt: {exc}")
        return []


def mission_planned_before(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The mission an untagged run worked on: the newest plan when it started (see `current_mission`)."""
    record = instance.get_run_record_by_id(run_id)
    started = record.start_time or record.create_timestamp.timestamp()
    newest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=PLAN_KEY, before_timestamp=started), limit=1
    ).records
    return meta(newest[0], "mission") if newest else None
