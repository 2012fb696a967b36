"""The code location: what `workspace.yaml` (and `dagster dev`) loads."""

import dagster as dg

# Before anything in the process imports the kubernetes client (dagster-k8s, should a run worker load
# its launcher): then every importer gets only the parts it uses (backends/kubernetes/lean_import.py).
import catchup_assets.backends.kubernetes  # noqa: F401
from catchup_assets.defs.assets.profile_diff import profile_diff
from catchup_assets.defs.assets.range_assets import mission_plan, range_catchup
from catchup_assets.defs.assets.range_profile import range_profile, tier_map
from catchup_assets.defs.assets.tier_ladder import tier_ladder
from catchup_assets.defs.mission.cleanup_job import mission_cleanup_job
from catchup_assets.defs.mission.control_job import mission_control_job
from catchup_assets.defs.mission.jobs import mission_plan_job, profile_job, range_catchup_job
from catchup_assets.defs.mission.plan_job import with_plan_guard
from catchup_assets.defs.resources import CatchupResource, deployment_resource
from catchup_assets.defs.resources.slack import slack_from_env
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from catchup_assets.defs.sensors.mission_plan import mission_plan_sensor
from catchup_assets.defs.sensors.next_mission import next_mission_sensor
from catchup_assets.defs.sensors.notify import notify_sensor


def unguarded_definitions() -> dg.Definitions:
    """The project's definitions as declared, mission_plan_job before its guard (plan_job.py): a deployment's
    code location builds its own from them (defs/location.py). A function: Dagster loads a module with one
    Definitions object at its top level."""
    return dg.Definitions(
        assets=[mission_plan, range_catchup, range_profile, tier_map, profile_diff, tier_ladder],
        jobs=[mission_plan_job, range_catchup_job, profile_job, mission_cleanup_job, mission_control_job],
        sensors=[mission_plan_sensor, mission_finished_sensor, next_mission_sensor, notify_sensor],
        # Fixed at load: the launchpad carries the mission's choices only (defs/resources/deployment.py).
        # `slack`: notify_sensor's client; its token from $SLACK_BOT_TOKEN (off without one).
        resources={"catchup": deployment_resource(CatchupResource()), "slack": slack_from_env()},
    )


# mission_plan_job refuses a profile's credentials inline before Dagster stores a run (plan_job.py).
defs = with_plan_guard(unguarded_definitions())
