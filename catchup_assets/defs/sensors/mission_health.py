"""Why no next mission should follow a mission: drained or stopped, its dispatch stopped, or ranges condemned.

Each answer comes from what outlives every process, read where the operator reads it:
- a drain: the mission's control record on the storage root (`control.json`, `drain`); none is no drain;
- an operator's stop (SIGTERM to the run worker, or a termination from the UI): its newest finished
  range_catchup run ended CANCELED (defs/mission/mission_end.py), its `catchup/ended` tag saying how;
- a stop (the circuit breaker, a full backend): the last `dispatching` check its newest
  range_catchup run evaluated. Not the run's failure: a run fails for condemned ranges and
  terminations alike, and its text is not a contract; the check is the dispatcher's own verdict,
  as the run ended. A later run of the mission that dispatched again clears it;
- condemned ranges: the partitions' marks (`defs/instance/ownership.py`), each the newest word on its
  range, so a range a later backfill completed is no longer held against the mission. Not the
  profile's rows: a condemned range without a measurement has none.
"""

from __future__ import annotations

import dagster as dg

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH
from catchup_assets.core.errors import StateError
from catchup_assets.defs.instance.ownership import condemned_by
from catchup_assets.defs.mission.mission_end import ENDED_TAG, LEFT_TAG
from catchup_assets.defs.mission.run_context import MISSION_TAG
from catchup_assets.defs.sensors.instance import PARTITIONS, targets_range_catchup
from catchup_assets.mission.saved import drain_requested
from catchup_assets.store import layout
from catchup_assets.store.io import read_parquet_column
from catchup_assets.store.root import Store

FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
RUNS_READ = 20  # a mission's newest runs searched for its last dispatching check


def why_not_followed(instance: dg.DagsterInstance, store: Store, mission: str) -> str | None:
    """Why `mission` is not fit to plan the next mission from, or None if it is."""
    try:
        if drain_requested(store, mission):
            return "it was drained (control.json: drain); run its remaining ranges, then profile it again"
    except StateError as exc:
        return f"its control record cannot be read, so a drain cannot be ruled out: {exc}"
    halted = run_stopped(instance, mission)
    if halted:
        return halted
    stopped = dispatch_stopped(instance, mission)
    if stopped:
        return f"its dispatch was stopped: {stopped}"
    condemned = condemned_ranges(instance, store, mission)
    if condemned:
        shown = ", ".join(condemned[:3]) + (", ..." if len(condemned) > 3 else "")
        return f"it condemned {len(condemned)} ranges ({shown}); backfill them once the cause is fixed"
    return None


def run_stopped(instance: dg.DagsterInstance, mission: str) -> str | None:
    """Why: the newest finished range_catchup run of `mission` was stopped by an operator (it ended CANCELED)."""
    runs = instance.get_run_records(
        filters=dg.RunsFilter(tags={MISSION_TAG: mission}, statuses=FINISHED), limit=RUNS_READ
    )
    for record in runs:  # newest first
        run = record.dagster_run
        if not targets_range_catchup(instance, run):
            continue
        if run.status != dg.DagsterRunStatus.CANCELED:
            return None
        if record.start_time is None and ENDED_TAG not in run.tags:
            continue  # canceled while queued: it never ran, so it stopped nothing
        how, left = run.tags.get(ENDED_TAG, "canceled"), run.tags.get(LEFT_TAG)
        counted = f", {left} ranges left" if left is not None else ""
        return (
            f"its last run was stopped ({how}{counted}, run {run.run_id}); "
            "run its remaining ranges, then profile it again"
        )
    return None


def dispatch_stopped(instance: dg.DagsterInstance, mission: str) -> str | None:
    """The cause the newest range_catchup run of `mission` that evaluated `dispatching` last gave, if it failed."""
    runs = instance.get_run_records(filters=dg.RunsFilter(tags={MISSION_TAG: mission}), limit=RUNS_READ)
    for record in runs:  # newest first
        if not targets_range_catchup(instance, record.dagster_run):
            continue
        last = None
        for entry in instance.all_logs(record.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            evaluation = entry.dagster_event.event_specific_data
            if evaluation.check_name == HEALTH_DISPATCH:
                last = evaluation
        if last is not None:
            if last.passed:
                return None
            why = last.metadata.get("why")
            return f"{why.value if why is not None else 'no cause given'} (run {record.dagster_run.run_id})"
    return None


def condemned_ranges(instance: dg.DagsterInstance, store: Store, mission: str) -> list[str]:
    """The ranges whose newest word is `mission` condemning them: its plan's, else every partition's."""
    try:
        keys = read_parquet_column(store.url(layout.plan(mission)), "range_key")
    except (OSError, ValueError):  # no plan, or not Parquet: every range the instance knows
        keys = instance.get_dynamic_partitions(PARTITIONS)
    return sorted(k for k, by in condemned_by(instance, keys).items() if by == mission)
