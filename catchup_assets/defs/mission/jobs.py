"""Jobs the sensors and the demo launch: each selects part of the mission's asset graph."""

import dagster as dg

from catchup_assets.defs.assets.profile_diff import profile_diff
from catchup_assets.defs.assets.range_assets import mission_plan, range_catchup
from catchup_assets.defs.assets.range_profile import range_profile, tier_map
from catchup_assets.defs.assets.tier_ladder import tier_ladder
from catchup_assets.defs.mission.live_runs import RANGE_CATCHUP_JOB

MISSION_PLAN_JOB = "mission_plan_job"
# As the code location serves it, it refuses inline credentials before a run exists (plan_job.py).
mission_plan_job = dg.define_asset_job(MISSION_PLAN_JOB, selection=[mission_plan], description="plan a mission")
range_catchup_job = dg.define_asset_job(
    RANGE_CATCHUP_JOB,
    selection=[range_catchup],
    description="run a contiguous span of ranges (one run, one dispatcher)",
)
# Partitioned by mission, as its assets are (Dagster infers it): a run profiles one mission.
profile_job = dg.define_asset_job(
    "profile_job",
    selection=[range_profile, tier_map, profile_diff, tier_ladder],
    description="profile a mission, map its tiers, compare it with the mission it was sized from, fit a ladder",
)
