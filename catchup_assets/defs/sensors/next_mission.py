"""`next_mission_sensor` (stopped by default): the newest new `range_profile` plans the next mission from it,
longest ranges first, up to the tip `CatchupResource.tip_source` gives, else over the previous span.

One at a time: a tick plans from the newest profile after its cursor only (turned on for the first
time, the newest of all), older ones superseded by it, and only when it is the newest mission's and that
mission's profile_job has ended (issue 46); and not after a mission that was drained,
stopped or condemned ranges (mission_health.py) unless `CatchupResource.allow_after_failure`."""

from __future__ import annotations

import json

import dagster as dg

from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.naming import next_mission_name
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.defs.assets.range_assets import MISSION_TAG, policies
from catchup_assets.defs.mission.jobs import mission_plan_job, profile_job
from catchup_assets.defs.mission.live_runs import IN_FLIGHT, PARTITION_TAG
from catchup_assets.defs.mission.run_context import newest_plan
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.instance import PARTITIONS, has_runs, meta, targets_range_catchup
from catchup_assets.defs.sensors.mission_health import why_not_followed
from catchup_assets.mission.saved import load_mission
from catchup_assets.mission.tip import TipUnavailable, read_tip, span_to_tip
from catchup_assets.store import layout
from catchup_assets.store.root import Store

PROFILE_KEY = dg.AssetKey("range_profile")
PREVIOUS_MISSION_TAG = "catchup/previous-mission"


def catchup_runs_in_flight(instance: dg.DagsterInstance, mission: str) -> bool:
    # The profile's own profile_job run carries the mission tag too, and may still be running tier_map.
    runs = instance.get_run_records(filters=dg.RunsFilter(tags={MISSION_TAG: mission}, statuses=IN_FLIGHT))
    return any(targets_range_catchup(instance, r.dagster_run) for r in runs)


def profile_job_in_flight(instance: dg.DagsterInstance, mission: str) -> bool:
    """A profile_job run of the mission not ended: the sensor's (tagged) or one from the UI (its partition)."""
    return any(
        instance.get_run_records(
            filters=dg.RunsFilter(job_name=profile_job.name, tags={tag: mission}, statuses=IN_FLIGHT), limit=1
        )
        for tag in (MISSION_TAG, PARTITION_TAG)
    )


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
        # The operator's choice carries (auto, not what auto chose last time); a cut is made anew from this profile.
        "lengths": previous.lengths_asked or previous.lengths,
        "parallelism": previous.parallelism,
        "previous_profile": profile_path,
        "deadline_seconds": previous.deadline_seconds,
    }


@dg.sensor(
    job_name=mission_plan_job.name,  # by name: the code location serves the job with its guard (plan_job.py)
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Plan the next mission from the newest range_profile, longest ranges first, unless its mission was "
        "drained, stopped or condemned ranges. Stopped by default: "
        "chaining multi-hour, thousand-pod missions automatically is an operator's decision."
    ),
)
def next_mission_sensor(context: dg.SensorEvaluationContext, catchup: CatchupResource):
    """Plan the next mission from the newest range_profile, after a healthy mission (an operator turns this on)."""
    instance = context.instance
    after = int(context.cursor) if context.cursor else None
    # The newest profile only: each older one is of a mission it supersedes, and planning from
    # each would start missions side by side (a first tick would plan from every past one).
    newest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=PROFILE_KEY, after_storage_id=after), limit=1, ascending=False
    ).records
    if not newest:
        return dg.SkipReason("no new range_profile materialization")
    record = newest[0]
    cursor = str(record.storage_id)
    # Its partition is its mission; a profile materialized before the asset was partitioned has none, and says.
    mission = record.partition_key or meta(record, "mission")
    store = Store(catchup.root())

    def skip(why: str) -> dg.SensorResult:
        context.log.info(why)
        return dg.SensorResult(skip_reason=why, cursor=cursor)

    # Only the newest mission's profile plans the next (issue 46 failure 6): an older mission re-profiled, or
    # profiled while a newer one runs, would plan beside it, from a span and profile it has superseded.
    newest_mission = newest_plan(instance)
    if newest_mission is not None and newest_mission != mission:
        return skip(
            f"the new range_profile is mission {mission}'s, not the newest mission's ({newest_mission}): "
            f"only {newest_mission}'s profile plans the next"
        )
    # Its profile is whole once its profile_job has ended (tier_map, the ladder after it): until then the
    # cursor stays before this profile, and a later tick plans from it.
    if profile_job_in_flight(instance, mission):
        why = f"mission {mission}'s profile_job is still running: its profile plans the next once the run ends"
        context.log.info(why)
        return dg.SensorResult(skip_reason=why, cursor=str(record.storage_id - 1))
    # Each of a mission's runs is profiled as it ends; only the last profile covers the mission.
    if catchup_runs_in_flight(instance, mission):
        return skip(f"mission {mission} still has runs in flight: its last run's profile plans the next")
    # A backfill of failed ranges re-profiles the mission: it must not start a second, concurrent one.
    if has_runs(instance, job_name=mission_plan_job.name, tags={PREVIOUS_MISSION_TAG: mission}):
        return skip(f"a next mission was already planned from {mission}: plan another by hand")
    why = why_not_followed(instance, store, mission)
    if why and not catchup.allow_after_failure:
        return skip(
            f"no next mission after {mission}: {why}. Its new profile then plans the next; or set "
            "allow_after_failure on the catchup resource and run its profile_job again to plan after it anyway"
        )
    if why:
        context.log.warning(f"next mission after {mission} although {why} (allow_after_failure)")
    try:
        name = next_mission_name(mission, lambda n: mission_exists(instance, store, n))
        previous = load_mission(store, mission, **policies(catchup))
    except ValueError as exc:  # ConfigError, StateError: a name or a mission.json refused
        return skip(f"no next mission from {mission}: {exc}")
    span = previous.span
    source = catchup.tip_source_spec()
    if source is not None:
        try:
            tip = read_tip(source, catchup.tip_timeout_seconds)
        except TipUnavailable as exc:
            # Nothing planned this tick; the cursor stops just before this profile,
            # so the next tick reads the tip again and plans from it.
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
            return skip(f"no next mission from {mission} up to the tip {tip.ledger}: {exc}")
    config = next_mission_config(previous, meta(record, "profile_path"), name, span)
    live = set(instance.get_dynamic_partitions(PARTITIONS))
    # The grid's new keys, as mission_plan adds them; a cut's keys (auto's, should it cut) exist only once
    # mission_plan cuts.
    grid = plan_ranges(span) if config["lengths"] == "uniform" else []
    new_keys = sorted(r.key for r in grid if r.key not in live)
    context.log.info(f"next mission {name} from {mission}'s profile: {json.dumps(config)}")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=name,
                job_name=mission_plan_job.name,
                run_config={"ops": {"mission_plan": {"config": config}}},
                tags={MISSION_TAG: name, PREVIOUS_MISSION_TAG: mission},
            )
        ],
        dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(PARTITIONS, new_keys)] if new_keys else [],
        cursor=cursor,
    )


def mission_exists(instance: dg.DagsterInstance, store: Store, name: str) -> bool:
    """A mission of that name was planned (its mission.json) or run (a run tagged with it)."""
    return store.exists(layout.mission_file(name)) or has_runs(instance, tags={MISSION_TAG: name})
