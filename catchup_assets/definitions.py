"""The code location: what `workspace.yaml` (and `dagster dev`) loads."""

import dagster as dg

from catchup_assets.assets import mission_plan, range_catchup, range_profile, tier_map
from catchup_assets.jobs import mission_plan_job, profile_job, range_catchup_job
from catchup_assets.resources import CatchupResource

defs = dg.Definitions(
    assets=[mission_plan, range_catchup, range_profile, tier_map],
    jobs=[mission_plan_job, range_catchup_job, profile_job],
    resources={"catchup": CatchupResource()},
)
