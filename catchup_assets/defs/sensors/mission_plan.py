"""`mission_plan_sensor`: each new `mission_plan` becomes `range_catchup_job` runs, one per
contiguous span of the plan's keys in the partition set's insertion order.

Two missions never dispatch over the same ledgers at once: a plan whose ranges a live run of
another mission holds, or a run this very tick launches for another plan, waits. The cursor
stays before it, so a later tick launches it once those runs have ended (`mission_plan`
refuses such a plan when it can see the live run; two plans made before either ran meet here).
"""

from __future__ import annotations

import dagster as dg

from catchup_assets.core.plan.ranges import contiguous_groups
from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.defs.assets.range_assets import MISSION_TAG, PLAN_KEY, RANGE_END_TAG, RANGE_START_TAG
from catchup_assets.defs.mission.jobs import range_catchup_job
from catchup_assets.defs.mission.live_runs import Holder, holding, live_holders
from catchup_assets.defs.sensors.instance import PARTITIONS, has_runs, meta, new_materializations
from catchup_assets.store.io import read_parquet_column


def read_plan_keys(plan_path: str) -> list[str]:
    return read_parquet_column(plan_path, "range_key")


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
    holders = live_holders(context.instance, live)
    requests, cursor, waiting = [], context.cursor, None
    for record in records:
        mission, plan_path = meta(record, "mission"), meta(record, "plan_path")
        if has_runs(context.instance, job_name=range_catchup_job.name, tags={MISSION_TAG: mission}):
            # Run already (by `catchup-assets demo`, by hand, or before a cursor reset): a plan is launched once.
            context.log.info(f"mission {mission} already has range_catchup runs: none launched")
            cursor = str(record.storage_id)
            continue
        try:
            keys = read_plan_keys(plan_path)
        except OSError as exc:
            # One unreadable plan must not stall every later one: it stays launchable by hand.
            context.log.warning(f"mission {mission}: plan {plan_path} unreadable, not run: {exc}")
            cursor = str(record.storage_id)
            continue
        clash = holding(holders, keys, mission)
        if clash:
            holder, held = clash[0]
            waiting = (
                f"mission {mission} waits: {len(held)} of its ranges (first {held[0]}) are held by "
                f"{holder.who()} (run {holder.run_id}); it is launched once that run has ended"
            )
            context.log.warning(waiting)
            break  # the cursor stays before this plan, and the plans after it wait their turn
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
        spans = tuple((r.first, r.last) for r in (parse_key(k) for group in groups for k in group))
        holders.append(Holder("launched by this tick", mission, spans))
        cursor = str(record.storage_id)
    if not requests:
        return dg.SensorResult(skip_reason=waiting or "the new plans have no live ranges", cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)
