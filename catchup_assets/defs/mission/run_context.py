"""What every asset of a mission needs from its run: the partitions, the tags, its mission.

The sensors and the demo tag each run `catchup/mission=<name>`; a run launched from the UI
is not, and learns its mission here (catchup_assets.defs.instance.ownership) and tags itself.
The assets after range_catchup are partitioned by mission: their partition is their mission.
"""

import dagster as dg

from catchup_assets.core.plan.config import validate_mission
from catchup_assets.defs.instance.ownership import MissionAmbiguous, condemned_by, owning_mission

ledger_ranges_partitions_def = dg.DynamicPartitionsDefinition(name="ledger_ranges")
# One partition per mission (its name): range_profile, tier_map, profile_diff and tier_ladder
# keep each mission's view side by side in the catalog, on the same files as before.
missions_partitions_def = dg.DynamicPartitionsDefinition(name="missions")
MISSION_TAG = "catchup/mission"
# The run tags by which Dagster runs one partition range in one run (its documented
# "dagster/asset_partition_range_*" tags; the constants themselves are not public API).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
# Dagster's documented run tag: how many times run_retries may relaunch this run (0: never).
MAX_RETRIES_TAG = "dagster/max_retries"
# Set by Dagster on a failed run it will retry (run_retries).
WILL_RETRY_TAG = "dagster/will_retry"
PLAN_KEY = dg.AssetKey("mission_plan")


def refused(what: str, exc: Exception) -> dg.Failure:
    """Bad input stops the run before dispatch, with the reason and no retry (L34).

    Raise it `from None`: a cause would put its own traceback beneath the reason in the run's log
    (issue 36 item 5); the reason names the field, which is all the operator needs."""
    return dg.Failure(description=f"{what}: {exc}", allow_retries=False)


def newest_plan(instance: dg.DagsterInstance) -> str | None:
    event = instance.get_latest_materialization_event(PLAN_KEY)
    if event is None or event.asset_materialization is None:
        return None
    return str(event.asset_materialization.metadata["mission"].value)


def current_mission(context: dg.AssetExecutionContext, keys: list[str] | None = None) -> str:
    """The run's mission tag; else the mission that owns `keys`, tagged on the run from here on."""
    tagged = context.run.tags.get(MISSION_TAG)
    if tagged:
        return tagged
    instance = context.instance
    try:
        owner = owning_mission(keys or [], condemned_by(instance, keys) if keys else {}, newest_plan(instance))
    except MissionAmbiguous as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    context.log.info(f"run not tagged {MISSION_TAG}: mission {owner.mission}, {owner.why}")
    # Filtering runs by mission in the UI, and the sensors, find it from now on.
    instance.add_run_tags(context.run.run_id, {MISSION_TAG: owner.mission})
    return owner.mission


def mission_partition(context: dg.AssetExecutionContext) -> str:
    """The mission a mission-partitioned asset is about: its partition key, checked as a mission name.

    A key added by hand in the UI is refused here, before any path is made of it; so is a
    run tagged with another mission (its tag and its partition would disagree on the UI's pages).
    """
    key = context.partition_key
    try:
        validate_mission(key)
    except ValueError as exc:
        raise refused(f"partition {key!r} of {missions_partitions_def.name}", exc) from None
    tagged = context.run.tags.get(MISSION_TAG)
    if tagged and tagged != key:
        raise dg.Failure(
            description=f"the run is tagged {MISSION_TAG}={tagged} but materializes the partition of mission {key}: "
            "launch it for one mission, without the tag or with the same name",
            allow_retries=False,
        )
    if not tagged:  # launched from the UI: filtering runs by mission finds it
        context.instance.add_run_tags(context.run.run_id, {MISSION_TAG: key})
    return key
