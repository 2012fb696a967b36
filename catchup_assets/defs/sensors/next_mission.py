"""`next_mission_sensor` (stopped by default): each new `range_profile` plans the next mission from it,
longest ranges first, up to the tip `CatchupResource.tip_source` gives, else over the previous span."""

from __future__ import annotations

import json

import dagster as dg

from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.defs.assets.range_assets import MISSION_TAG, policies
from catchup_assets.defs.jobs import mission_plan_job
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.instance import PARTITIONS, has_runs, meta, new_materializations, targets_range_catchup
from catchup_assets.mission.saved import load_mission
from catchup_assets.mission.tip import Tip, TipUnavailable, read_tip, span_to_tip
from catchup_assets.store.root import Store

PROFILE_KEY = dg.AssetKey("range_profile")
PREVIOUS_MISSION_TAG = "catchup/previous-mission"
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


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
        "deadline_seconds": previous.deadline_seconds,
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
