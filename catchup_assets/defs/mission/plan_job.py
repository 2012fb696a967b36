"""mission_plan_job refuses a profile's credentials given inline before Dagster stores a run (issue 45 item 4).

Dagster keeps a launch's run config in its run storage as it creates the run (every UI user reads it
on the run's page), and the instance's run coordinator (defs/instance/run_coordinator.py) sees the
run only after that. What runs before, in the code location: the webserver asks it for the run's
execution plan, which resolves the run config through the job's config mapping. So the job carries
a ConfigMapping whose schema is the job's own (the launchpad's form, its defaults and its checks as
they were) and whose function passes the config on unchanged, or refuses one whose previous_profile
holds credentials: the launch answers with the refusal and no run, so nothing of it is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from catchup_assets.defs.assets.launchpad import inline_credentials
from catchup_assets.defs.instance.launch_check import plan_config_of
from catchup_assets.defs.mission.jobs import MISSION_PLAN_JOB, mission_plan_job


def refuse_inline_credentials(run_config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The run config as given (env references unresolved), unless its mission_plan config holds credentials."""
    config = plan_config_of(run_config)
    if config and (why := inline_credentials(config)):
        # A DagsterError passes Dagster's user-code boundary as it is: the launch shows this line alone.
        raise dg.DagsterInvalidConfigError(f"mission_plan config refused: {why}", [], None)
    return run_config


def with_plan_guard(defs: dg.Definitions) -> dg.Definitions:
    """`defs` with mission_plan_job refusing inline credentials before a run exists, its form unchanged."""
    plain = defs.resolve_job_def(MISSION_PLAN_JOB)
    guarded = dg.define_asset_job(
        MISSION_PLAN_JOB,
        selection=mission_plan_job.selection,
        description=mission_plan_job.description,
        config=dg.ConfigMapping(
            config_fn=refuse_inline_credentials,
            config_schema=plain.run_config_schema.run_config_schema_type,
            # The config as launched: a value Dagster would resolve from an env var is checked as the reference.
            receive_processed_config_values=False,
        ),
    )
    return dg.Definitions(
        assets=defs.assets,
        asset_checks=defs.asset_checks,
        jobs=[guarded if job.name == MISSION_PLAN_JOB else job for job in defs.jobs or []],
        sensors=defs.sensors,
        schedules=defs.schedules,
        loggers=defs.loggers,
        executor=defs.executor,
        metadata=defs.metadata,
        resources=defs.resources,
    )
