"""Sensors that move a mission along: plan -> catchup runs -> profile -> next mission.

- `mission_plan_sensor`: each new `mission_plan` becomes `range_catchup_job` runs
  over the plan's keys, one run per contiguous group of keys in the partition
  set's insertion order (a run covers one contiguous span of that order).
- `mission_finished_sensor`: each finished (success or failure) run that
  targeted `range_catchup` becomes one `profile_job` run for its mission.
- `next_mission_sensor` (stopped by default): each new `range_profile` plans the
  next mission from it, longest ranges first, up to the tip `CatchupResource.tip_source`
  gives (a fixed ledger, or an archive's root HAS `currentLedger`; L38), else over the
  previous mission's span. A tip that cannot be read skips the tick, the cursor held
  just before that profile, so the next tick tries again.

Cursors are storage ids of the newest event handled (a materialization, or a
run's success/failure event), so a second evaluation with the returned cursor
requests nothing. An empty cursor reads from the start of history; run keys let
the daemon drop whatever was already launched should a cursor be reset.

A partial tip superseded by a later mission: ranges sit on a fixed grid, so
only the tip key changes as the tip grows (`0025000961-0025600960` becomes
`0025000961-0026250240`). `mission_plan` retires superseded keys
(`retire_superseded` in assets.py) before adding its own, so the partition set
never holds both. Runs are per contiguous group of the plan's keys as the
partition set stands when `mission_plan_sensor` evaluates: a plan whose tip has
since been retired runs without it (logged), and the later plan's runs cover
only live keys. A run already in flight over the retired key keeps its records
(its profile still measures that range, looked up by ledger); a run still queued
whose range ends on it fails at start, as Dagster no longer knows the key: the
newer mission covers those ledgers. Replanning the same mission name over the
same ranges launches nothing new (same run keys): retry through a UI backfill.
"""

from __future__ import annotations

import json

import dagster as dg

from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.defs.assets.range_assets import (
    MISSION_TAG,
    PLAN_KEY,
    RANGE_END_TAG,
    RANGE_START_TAG,
    WILL_RETRY_TAG,
    ledger_ranges_partitions_def,
    policies,
)
from catchup_assets.defs.jobs import mission_plan_job, profile_job, range_catchup_job
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.mission import MissionConfig, load_mission
from catchup_assets.mission.tip import Tip, TipUnavailable, read_tip, span_to_tip
from catchup_assets.store.io import read_parquet_column
from catchup_assets.store.root import Store

CATCHUP_KEY = dg.AssetKey("range_catchup")
PROFILE_KEY = dg.AssetKey("range_profile")
PREVIOUS_MISSION_TAG = "catchup/previous-mission"
AFTER_RUN_TAG = "catchup/after-run"  # on a profile_job run: the range_catchup run it follows
PARTITIONS = ledger_ranges_partitions_def.name
BATCH = 50
FINISHED_EVENTS = (dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE)
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def new_materializations(context: dg.SensorEvaluationContext, key: dg.AssetKey) -> list[dg.EventLogRecord]:
    after = int(context.cursor) if context.cursor else None
    return list(
        context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_storage_id=after), limit=BATCH, ascending=True
        ).records
    )


def meta(record: dg.EventLogRecord, name: str):
    value = record.asset_materialization.metadata.get(name)
    return None if value is None else value.value


def read_plan_keys(plan_path: str) -> list[str]:
    return read_parquet_column(plan_path, "range_key")


def contiguous_groups(keys: list[str], insertion_order: list[str]) -> tuple[list[list[str]], list[str]]:
    """Keys split into runs of consecutive positions in insertion order; and the keys not present."""
    position = {k: i for i, k in enumerate(insertion_order)}
    missing = sorted(k for k in keys if k not in position)
    groups: list[list[str]] = []
    for k in sorted((k for k in set(keys) if k in position), key=position.__getitem__):
        if groups and position[groups[-1][-1]] + 1 == position[k]:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups, missing


# Dagster shows `description`, not the docstring, in the UI.
@dg.sensor(
    job=range_catchup_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Run each newly planned mission: one range_catchup_job run per contiguous span of its ranges.",
)
def mission_plan_sensor(context: dg.SensorEvaluationContext):
    """Run each newly planned mission: one range_catchup_job run per contiguous span of its ranges."""
    records = new_materializations(context, PLAN_KEY)
    if not records:
        return dg.SkipReason("no new mission_plan materialization")
    live = context.instance.get_dynamic_partitions(PARTITIONS)
    requests = []
    for record in records:
        mission, plan_path = meta(record, "mission"), meta(record, "plan_path")
        if has_runs(context.instance, job_name=range_catchup_job.name, tags={MISSION_TAG: mission}):
            # Run already (by `catchup-assets demo`, by hand, or before a cursor reset): a plan is launched once.
            context.log.info(f"mission {mission} already has range_catchup runs: none launched")
            continue
        try:
            keys = read_plan_keys(plan_path)
        except OSError as exc:
            # One unreadable plan must not stall every later one: it stays launchable by hand.
            context.log.warning(f"mission {mission}: plan {plan_path} unreadable, not run: {exc}")
            continue
        groups, missing = contiguous_groups(keys, live)
        if missing:
            context.log.info(
                f"mission {mission}: {len(missing)} planned ranges not in the partition set "
                f"(retired by a later plan), skipped: {missing[:5]}"
            )
        for group in groups:
            start, end = group[0], group[-1]
            requests.append(
                dg.RunRequest(
                    run_key=f"{mission}:{start}...{end}",
                    job_name=range_catchup_job.name,
                    tags={RANGE_START_TAG: start, RANGE_END_TAG: end, MISSION_TAG: mission},
                )
            )
        context.log.info(f"mission {mission}: {len(groups)} run(s) over {sum(map(len, groups))} ranges")
    cursor = str(records[-1].storage_id)
    if not requests:
        return dg.SensorResult(skip_reason="the new plans have no live ranges", cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)


def finished_status_changes(instance: dg.DagsterInstance, after: int | None) -> list[dg.EventLogRecord]:
    """Success and failure events after `after`, in storage order, with no gap left behind."""
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


def targets_range_catchup(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    # UI backfills run as an asset job selecting the asset; `dg.materialize` and
    # `dagster asset materialize` as an ephemeral job that only its plan names.
    if run.job_name == range_catchup_job.name or CATCHUP_KEY in (run.asset_selection or ()):
        return True
    snapshot = run.execution_plan_snapshot_id and instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
    return bool(snapshot) and CATCHUP_KEY.to_python_identifier() in (snapshot.step_keys_to_execute or ())


@dg.sensor(
    job=profile_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Profile a mission each time one of its range_catchup runs finishes, succeeded or failed.",
)
def mission_finished_sensor(context: dg.SensorEvaluationContext):
    """Profile a mission each time one of its range_catchup runs finishes, succeeded or failed."""
    instance = context.instance
    events = finished_status_changes(instance, int(context.cursor) if context.cursor else None)
    if not events:
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
        requests.append(
            dg.RunRequest(
                run_key=run.run_id, job_name=profile_job.name, tags={MISSION_TAG: mission, AFTER_RUN_TAG: run.run_id}
            )
        )
    cursor = str(events[-1].storage_id)
    if not requests:
        return dg.SensorResult(skip_reason="no finished run of range_catchup", cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)


def mission_planned_before(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The mission an untagged run worked on: the newest plan when it started (see `current_mission`)."""
    record = instance.get_run_record_by_id(run_id)
    started = record.start_time or record.create_timestamp.timestamp()
    newest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=PLAN_KEY, before_timestamp=started), limit=1
    ).records
    return meta(newest[0], "mission") if newest else None


def has_runs(instance: dg.DagsterInstance, **filters) -> bool:
    return bool(instance.get_run_records(filters=dg.RunsFilter(**filters), limit=1))


def catchup_runs_in_flight(instance: dg.DagsterInstance, mission: str) -> bool:
    # The profile's own profile_job run carries the mission tag too, and may still be running tier_map.
    runs = instance.get_run_records(filters=dg.RunsFilter(tags={MISSION_TAG: mission}, statuses=IN_FLIGHT))
    return any(targets_range_catchup(instance, r.dagster_run) for r in runs)


def next_mission_config(previous: MissionConfig, profile_path: str, name: str, span: MissionSpan | None = None) -> dict:
    """The previous mission's parallelism over `span` (default: its own), sized and ordered by its profile."""
    span = span or previous.span
    return {
        "mission": name,
        "first_ledger": span.first_ledger,
        "last_ledger": span.last_ledger,
        "ledgers_per_range": span.ledgers_per_range,
        "overlap": span.overlap,
        "order": "longest-first",
        "parallelism": previous.parallelism,
        "previous_profile": profile_path,
        "deadline_seconds": previous.deadline_seconds or 0,
    }


@dg.sensor(
    job=mission_plan_job,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Plan the next mission from each new range_profile, longest ranges first. Stopped by default: "
        "chaining multi-hour, thousand-pod missions automatically is an operator's decision."
    ),
)
def next_mission_sensor(context: dg.SensorEvaluationContext, catchup: CatchupResource):
    """Plan the next mission from each new range_profile (an operator turns this on)."""
    records = new_materializations(context, PROFILE_KEY)
    if not records:
        return dg.SkipReason("no new range_profile materialization")
    instance = context.instance
    newest_per_mission = {meta(r, "mission"): r for r in records}  # ascending: the last one wins
    live = set(instance.get_dynamic_partitions(PARTITIONS))
    source = catchup.tip_source_spec()
    tip: Tip | None = None  # read once per tick, when a mission first needs it
    requests, partition_requests = [], []
    for record in sorted(newest_per_mission.values(), key=lambda r: r.storage_id):
        mission = meta(record, "mission")
        # Each of a mission's runs is profiled as it ends; only the last profile covers the mission.
        if catchup_runs_in_flight(instance, mission):
            context.log.info(f"mission {mission} still has runs in flight: its last run's profile plans the next")
            continue
        # A backfill of failed ranges re-profiles the mission: it must not start a second, concurrent one.
        if has_runs(instance, job_name=mission_plan_job.name, tags={PREVIOUS_MISSION_TAG: mission}):
            context.log.info(f"a next mission was already planned from {mission}: plan another by hand")
            continue
        name = f"m-next-{record.storage_id}"
        try:
            previous = load_mission(Store(catchup.root()), mission, **policies(catchup))
        except ValueError as exc:
            context.log.warning(f"no next mission from {mission}: {exc}")
            continue
        span = previous.span
        if source is not None:
            if tip is None:
                try:
                    tip = read_tip(source, catchup.tip_timeout_seconds)
                except TipUnavailable as exc:
                    # Nothing planned this tick (every plan needs the tip); the cursor stops just
                    # before this profile, so the next tick reads the tip again and plans from it.
                    why = f"no next mission from {mission} this tick, the tip is unavailable: {exc}"
                    context.log.warning(why)
                    return dg.SensorResult(skip_reason=why, cursor=str(record.storage_id - 1))
                for note in tip.notes:
                    context.log.warning(f"tip_source: {note}")
            if tip.ledger < previous.span.last_ledger:
                context.log.warning(
                    f"tip_source {source} gives ledger {tip.ledger}, below where {mission} ended "
                    f"({previous.span.last_ledger}): the next mission ends there too"
                )
            try:
                span = span_to_tip(previous.span, tip.ledger)
            except ValueError as exc:
                context.log.warning(f"no next mission from {mission} up to the tip {tip.ledger}: {exc}")
                continue
        config = next_mission_config(previous, meta(record, "profile_path"), name, span)
        new_keys = sorted(r.key for r in plan_ranges(span) if r.key not in live)
        if new_keys:
            partition_requests.append(dg.AddDynamicPartitionsRequest(PARTITIONS, new_keys))
            live.update(new_keys)
        requests.append(
            dg.RunRequest(
                run_key=name,
                job_name=mission_plan_job.name,
                run_config={"ops": {"mission_plan": {"config": config}}},
                tags={MISSION_TAG: name, PREVIOUS_MISSION_TAG: mission},
            )
        )
        context.log.info(f"next mission {name} from {mission}'s profile: {json.dumps(config)}")
    cursor = str(records[-1].storage_id)
    if not requests:
        return dg.SensorResult(skip_reason="no profile to plan a next mission from", cursor=cursor)
    return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=cursor)
