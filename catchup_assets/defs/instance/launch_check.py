"""A mission_plan launch's values checked as its run is submitted, before it queues (issue 36 item 5).

Dagster 1.13 checks a launch against the config schema the webserver holds: types, required and
unknown fields, enums (a Literal). A dg.Config field's pydantic bounds and patterns are not in that
schema (dagster-io/dagster#12536: they hold when the run builds the config), so `parallelism: 0`,
a negative first ledger or a capitalised mission read "No errors" in the launchpad, and were
refused only when the run's process started, ~17 s after Launch. The run coordinator sees every
run before it queues (the UI's launches, the sensors', the backfills'): here each field a launch
gives is checked against the bounds MissionPlanConfig declares, and a run that breaks one fails at
once, naming the field. Credentials inline in the profile's URL are refused here too, for a launch of
mission_plan through another job (the asset's own Materialize); mission_plan_job refuses them before
Dagster stores the run (defs/mission/plan_job.py). What depends on the deployment (its parallelism cap, its grid, the
profile) is the code location's to know, and is still refused as mission_plan starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import pydantic

from catchup_assets.defs.assets.launchpad import MissionPlanConfig, field_errors, inline_credentials

PLAN_OP = "mission_plan"


def plan_config_of(run_config: Mapping[str, Any] | None) -> dict | None:
    """The mission_plan config a run was launched with (mission_plan_job's, or an asset job's), if any."""
    ops = (run_config or {}).get("ops")
    node = ops.get(PLAN_OP) if isinstance(ops, Mapping) else None
    config = node.get("config") if isinstance(node, Mapping) else None
    return dict(config) if isinstance(config, Mapping) else None


def launch_refusal(run_config: Mapping[str, Any] | None) -> str | None:
    """Why the launch breaks a bound of the fields it gives, naming each; None if it breaks none."""
    config = plan_config_of(run_config)
    if not config:
        return None
    if why := inline_credentials(config):  # mission_plan_job refused it before it was stored; another job did not
        return f"mission_plan config refused: {why}"
    fields = MissionPlanConfig.model_fields
    given = {k: v for k, v in config.items() if k in fields}  # the schema check refused any other
    # Each field alone, with its declared bounds and pattern (not the deployment's defaults or cap).
    spec: dict[str, Any] = {k: (_bounded(fields[k]), ...) for k in given}
    try:
        pydantic.create_model("MissionPlanLaunch", **spec)(**given)
    except pydantic.ValidationError as exc:
        return f"mission_plan config refused: {field_errors(exc)}"
    return None


def _bounded(field: Any) -> Any:
    """The field's type with the bounds and pattern it declares (its metadata), nothing else."""
    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
