"""The instance's run coordinator: Dagster's run queue, with a range_catchup run tagged with its mission as it queues.

A backfill launched from the partitions page makes `__ASSET_JOB` runs with no
`catchup/mission` tag; they used to learn their mission only when they started
(`run_context.current_mission`), so the queue, the Runs page filtered by mission and
`mission_plan`'s check of live runs saw them untagged until then. Every run is
submitted through the instance's run coordinator before it queues (the backfill
daemon, the sensors, the UI's launches), so here the ownership rule
(`defs/instance/ownership.py`) tags it from the start, from the partitions its tags name.

What the rule cannot decide (partitions of two missions, no mission planned) is left
untagged: the run then refuses itself at start, saying how to choose, as before. Nothing
here may stop a run from queueing: a failure to read the instance leaves it untagged too.
But a mission_plan launch that breaks a bound its config class declares (`parallelism: 0`, a
capitalised name: defs/instance/launch_check.py) fails here at once, naming the field, rather
than when its process starts. A mission_plan launch naming its mission is tagged with it here, so a
refusal found only as it runs (the deployment's cap) is found by mission too; a refusal is never
relaunched by run_retries (`dagster/max_retries=0`), which would otherwise make it three failed runs (issue 46).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext

from catchup_assets.core.plan.config import MISSION_PATTERN
from catchup_assets.defs.instance.launch_check import launch_refusal, plan_config_of
from catchup_assets.defs.instance.ownership import MissionAmbiguous, condemned_by, owning_mission
from catchup_assets.defs.mission.live_runs import PARTITION_TAG, targets_range_catchup
from catchup_assets.defs.mission.run_context import (
    MAX_RETRIES_TAG,
    MISSION_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    ledger_ranges_partitions_def,
    newest_plan,
)

MISSION_NAME = re.compile(MISSION_PATTERN)


def run_keys(tags: Mapping[str, str], partitions: Sequence[str]) -> list[str]:
    """The ranges a run's tags name: its partition, or its span of the partition set's order."""
    if PARTITION_TAG in tags:
        return [tags[PARTITION_TAG]]
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    order = {k: i for i, k in enumerate(partitions)}
    if start not in order or end not in order or order[start] > order[end]:
        return []  # not keys of the set: the run refuses itself at start
    return list(partitions[order[start] : order[end] + 1])


def launch_owner(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[str, str] | None:
    """(mission, why) for an untagged range_catchup run, by the ownership rule; None when it does not decide."""
    if MISSION_TAG in run.tags or not targets_range_catchup(instance, run):
        return None
    keys = run_keys(run.tags, instance.get_dynamic_partitions(ledger_ranges_partitions_def.name))
    if not keys:
        return None
    try:
        owner = owning_mission(keys, condemned_by(instance, keys), newest_plan(instance))
    except MissionAmbiguous:
        return None
    return owner.mission, owner.why


class MissionRunCoordinator(QueuedRunCoordinator):
    """QueuedRunCoordinator (the same config) that tags an untagged range_catchup run with its mission first."""

    def submit_run(self, context: SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        if run.status == dg.DagsterRunStatus.NOT_STARTED and (refusal := _refusal(self, run)):
            # One failed run, found by its mission: the instance's run_retries would relaunch a refusal twice more
            # (its failure is not a step's, which retry_on_asset_or_op_failure: false already spares; issue 46).
            self._instance.add_run_tags(run.run_id, refusal_tags(run.run_config))
            self._instance.report_run_failed(run, refusal)  # one line in the run's log; it never queues
            return self._instance.get_run_by_id(run.run_id) or run
        if run.status == dg.DagsterRunStatus.NOT_STARTED and MISSION_TAG not in run.tags:
            if named := refusal_tags(run.run_config).get(MISSION_TAG):  # a mission_plan launch naming its mission
                self._instance.add_run_tags(run.run_id, {MISSION_TAG: named})
        if run.status == dg.DagsterRunStatus.NOT_STARTED:
            try:
                found = launch_owner(self._instance, run)
            except Exception as exc:  # noqa: BLE001 - a tag is never worth a run that does not queue
                self._logger.warning(f"run {run.run_id}: its mission could not be decided at launch: {exc}")
                found = None
            if found:
                mission, why = found
                self._instance.add_run_tags(run.run_id, {MISSION_TAG: mission})
                self._instance.report_engine_event(f"tagged {MISSION_TAG}={mission} at launch: {why}", run)
        # The queue reads the run back from storage, tags and all.
        return super().submit_run(context)


def refusal_tags(run_config: Mapping[str, Any] | None) -> dict[str, str]:
    """A refused launch's tags: no retry by run_retries, and its mission when it names a valid one."""
    tags = {MAX_RETRIES_TAG: "0"}
    mission = (plan_config_of(run_config) or {}).get("mission")
    if isinstance(mission, str) and MISSION_NAME.fullmatch(mission):
        tags[MISSION_TAG] = mission
    return tags


def _refusal(coordinator: MissionRunCoordinator, run: dg.DagsterRun) -> str | None:
    try:
        return launch_refusal(run.run_config)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run leaves the run to refuse itself at start
        coordinator._logger.warning(f"run {run.run_id}: its launch values could not be checked: {exc}")
        return None
