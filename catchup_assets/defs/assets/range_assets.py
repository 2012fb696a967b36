"""The mission as Dagster assets: thin wrappers around mission/ (plan.py, run.py, profile.py).

mission_plan (mission_plan.py) -> range_catchup[range] (here) -> range_profile -> tier_map
(range_profile.py), and range_profile -> profile_diff and tier_ladder (their own modules). range_catchup's
run is defs/mission/range_catchup_run.py's `RangeCatchupRun`. See docs/design.md, "Dagster facts the
design rests on", for why range_catchup is a generator that yields nothing and logs one
AssetMaterialization per range instead.
"""

from collections.abc import Iterator

import dagster as dg

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, HEALTH_STALL
from catchup_assets.defs.assets.launchpad import policies  # noqa: F401 - re-exported: sensors and benchmarks name it here
from catchup_assets.defs.assets.mission_plan import build_mission_plan, mission_plan  # noqa: F401 - the graph's root, re-exported
from catchup_assets.defs.mission.mission_end import MISSION_COMPLETE_SPEC
from catchup_assets.defs.mission.range_catchup_run import RangeCatchupRun
from catchup_assets.defs.mission.range_events import RangeEvents
from catchup_assets.defs.mission.run_context import (  # noqa: F401 - re-exported: sensors, demo and tests name them here
    MISSION_TAG,
    PLAN_KEY,
    RANGE_END_TAG,
    RANGE_START_TAG,
    WILL_RETRY_TAG,
    ledger_ranges_partitions_def,
)
from catchup_assets.defs.resources import CatchupResource

HEALTH_CHECK_SPECS = [
    dg.AssetCheckSpec(
        HEALTH_STALL,
        asset="range_catchup",
        description="Z4: a range completes within stall_seconds, or some attempt in flight is on time",
    ),
    dg.AssetCheckSpec(
        HEALTH_DISPATCH,
        asset="range_catchup",
        description="new attempts are dispatched (not stopped by the circuit breaker or a full backend)",
    ),
    MISSION_COMPLETE_SPEC,  # issue 36: a drained or stopped run says what it left, not "Success" alone
]


@dg.asset(
    group_name="mission",
    partitions_def=ledger_ranges_partitions_def,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[mission_plan],
    output_required=False,
    retry_policy=dg.RetryPolicy(max_retries=3, delay=5),
    check_specs=HEALTH_CHECK_SPECS,
)
def range_catchup(context: dg.AssetExecutionContext, catchup: CatchupResource) -> Iterator[dg.AssetCheckResult]:
    """Each ledger range caught up by stellar-core; one run drives every range it was given."""
    # Each attempt's start and, when the instance planned the run as one subset, each range's
    # in-progress and FAILED marking: written in batches, off the dispatcher's thread.
    marks = RangeEvents(context)
    failed = True
    try:
        run, prepared = RangeCatchupRun.open(context, catchup, marks)
        yield from run.drive(prepared)
        failed = False
    finally:
        marks.close(failed)
