"""`mission_cleanup_job`: delete what an abandoned mission left on its backend, from the launchpad.

Its config is the mission and the CLI's switches (`all`, `force`, `dry_run`, `wait_seconds`). Besides
what `mission/cleanup.py` checks (the backend's live attempts, young claims), a run of
the mission that Dagster has not finished (queued, starting, started, canceling), or that
failed and awaits its automatic retry, or whose retry has not finished, is a live run:
refused unless `force`, whatever the age of its claims (issue 36 item 9). Finished
attempts no dispatcher recorded are recorded first (mission/cleanup_settle.py). What each
choice frees is logged before anything is deleted, and what was deleted is the op's
output metadata.
"""

import dagster as dg
from pydantic import Field

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.defs.mission.run_context import MISSION_TAG, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.resources.backend import backend_for
from catchup_assets.mission.cleanup import WaitProgress, cleanup, gib
from catchup_assets.mission.cleanup_settle import settled_plan

JOB = "mission_cleanup_job"
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"  # on a failed run: the retry the daemon launched


class CleanupConfig(dg.Config):
    mission: str = Field(description="the mission whose leftover Jobs and PVCs (locally, range data) go")
    all: bool = Field(default=False, description="also delete the volumes of ranges that can resume")
    force: bool = Field(default=False, description="clean up even while a run of the mission is live")
    dry_run: bool = Field(default=False, description="say what would be deleted and freed; delete nothing")
    wait_seconds: float = Field(
        default=120.0, ge=0, description="wait this long for what was deleted to go (a volume, once its pods ended)"
    )


def live_runs(instance: dg.DagsterInstance, mission: str) -> list[str]:
    """The mission's runs that can still run or retry (other cleanups aside), as the refusal names them:
    not finished; failed with the run retry daemon's retry still to come; or retried, the retry not finished."""
    statuses = [*UNFINISHED, dg.DagsterRunStatus.FAILURE]
    out = []
    for record in instance.get_run_records(filters=dg.RunsFilter(tags={MISSION_TAG: mission}, statuses=statuses)):
        run = record.dagster_run
        if run.job_name == JOB:
            continue
        if run.status in UNFINISHED:
            out.append(f"Dagster run {run.run_id} ({run.job_name}) is {run.status.value}")
        elif run.is_complete_and_waiting_to_retry:  # failed, tagged dagster/will_retry, its retry not launched
            out.append(f"Dagster run {run.run_id} ({run.job_name}) failed and awaits its automatic retry")
        elif (retry_id := run.tags.get(AUTO_RETRY_RUN_ID_TAG)) and (retry := instance.get_run_by_id(retry_id)):
            if retry.status in UNFINISHED:  # the retry may not carry the mission's tag: asked by its id
                out.append(f"Dagster run {retry_id} ({retry.job_name}), retrying {run.run_id}, is {retry.status.value}")
    return out


@dg.op(
    description="delete an abandoned mission's leftover Jobs and PVCs, keeping resumable ranges' unless `all`",
    out=dg.Out(dg.Nothing),  # what it did is the output's metadata; nothing for an IO manager to store
)
def mission_cleanup(context: dg.OpExecutionContext, config: CleanupConfig, catchup: CatchupResource) -> None:
    try:
        validate_mission(config.mission)
        if MISSION_TAG not in context.run.tags:  # filtering runs by mission in the UI finds it
            context.instance.add_run_tags(context.run.run_id, {MISSION_TAG: config.mission})
        backend = backend_for(catchup, config.mission)
        plan, settled = settled_plan(
            catchup.root(),
            config.mission,
            backend,
            everything=config.all,
            also_live=live_runs(context.instance, config.mission),
            force=config.force,
            dry_run=config.dry_run,
        )
    except ConfigError as exc:
        raise refused("mission_cleanup", exc) from None
    for line in plan.lines() + settled.lines():
        context.log.info(line)
    try:
        result = cleanup(
            plan,
            backend,
            force=config.force,
            dry_run=config.dry_run,
            wait_seconds=config.wait_seconds,
            on_wait=WaitProgress(context.log.info).said,
        )
    except ConfigError as exc:  # MissionLive: names `force`
        raise refused("mission_cleanup", exc) from None
    for line in result.lines():
        context.log.info(line)
    summary = {
        "mission": config.mission,
        "dry_run": config.dry_run,
        "frees": gib(plan.freed_bytes),
        "kept": gib(plan.kept_bytes),
        "kept_volumes": len(plan.keep),
        "deleted_attempts": sum(o.kind == "attempt" for o in result.deleted),
        "deleted_volumes": sum(o.kind == "volume" for o in result.deleted),
        "freed": gib(result.freed_bytes),
        "freed_once_released": gib(result.pending_bytes),
        "still_there": [o.name for o in result.still_there],
        "live": list(plan.live),
        "recorded_first": list(settled.recorded),
        "kept_unrecorded": [o.name for o in plan.unrecorded],
    }
    context.add_output_metadata(
        {k: v if not isinstance(v, list) else dg.MetadataValue.json(v) for k, v in summary.items()}
    )


@dg.job(name=JOB, description="clean up after an abandoned mission: its leftover Jobs and PVCs, by its label")
def mission_cleanup_job():
    mission_cleanup()
