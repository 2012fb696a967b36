"""One demo mission through Dagster, as an operator runs it: mission_plan, range_catchup_job over
the plan's partitions as one run, profile_job; what it measured and where its files are."""

from __future__ import annotations

import signal
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

import dagster as dg

from catchup_assets.cli.demo.progress import Poller, ProgressBar
from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.errors import CatchupError
from catchup_assets.core.plan.ranges import contiguous_groups
from catchup_assets.defs.assets.range_assets import (
    MISSION_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    ledger_ranges_partitions_def,
)
from catchup_assets.defs.resources import CatchupResource, deployment_catchup
from catchup_assets.defs.sensors.mission_finished import AFTER_RUN_TAG
from catchup_assets.mission.report import MissionSummary, summarize
from catchup_assets.mission.stop_signals import received
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table


class DemoFailed(CatchupError):
    """A run failed for a reason other than condemned ranges (those are reported, not raised)."""


class DemoInterrupted(CatchupError):
    """SIGTERM or SIGINT stopped the demo: its attempts were stopped and recorded, nothing condemned."""

    def __init__(self, mission: str, signum: int | None, stopped: int, condemned: int) -> None:
        self.signum = signum or signal.SIGINT  # Dagster's own handler took it: which one is not known
        by = signal.Signals(signum).name if signum else "a signal Dagster's step received"
        super().__init__(
            f"interrupted by {by}: mission {mission}: {stopped} attempts in flight "
            f"stopped and recorded `stopped`, charged to no budget; {condemned} ranges condemned; "
            "a later range_catchup_job run over its ranges resumes them"
        )


def check_interrupted(
    store: Store, mission: str | None, condemned: int = 0, run: dg.ExecuteInProcessResult | None = None
) -> None:
    """Raise DemoInterrupted if a stop signal reached this process (mission/stop_signals.py), or
    Dagster's handler turned one into an interrupt of the run's step (outside the dispatch)."""
    signum = received()
    if signum is None and not (run is not None and not run.success and _interrupted(run)):
        return
    stopped = 0
    if mission is not None:
        records, _ = RecordStore(store, mission).load()
        stopped = sum(1 for r in records.values() if r.outcome == Outcome.STOPPED.value)
    raise DemoInterrupted(mission or "(none started)", signum, stopped, condemned)


@dataclass
class MissionOutcome:
    mission: str
    summary: MissionSummary
    condemned: dict[str, str]
    paths: dict[str, str]
    run_ids: dict[str, str]


def _quiet(level: str) -> dict[str, Any]:
    return {"loggers": {"console": {"config": {"log_level": level}}}}


def _interrupted(result: dg.ExecuteInProcessResult) -> bool:
    errors = [e.event_specific_data.error for e in result.all_events if e.is_failure and e.event_specific_data]
    return any(
        err is not None and err.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt") for err in errors
    )


def _failure_text(result: dg.ExecuteInProcessResult) -> str:
    errors = [e.event_specific_data.error for e in result.all_events if e.is_failure and e.event_specific_data]
    messages = dict.fromkeys(err.message.strip() for err in errors if err is not None)  # the step's and the run's
    return "; ".join(messages) or "run failed"


def _contiguous(instance: dg.DagsterInstance, keys: list[str]) -> tuple[str, str]:
    """The plan's keys as one span of the instance's key order (a run covers one span)."""
    groups, missing = contiguous_groups(keys, instance.get_dynamic_partitions(ledger_ranges_partitions_def.name))
    if missing:
        raise DemoFailed(f"plan keys missing from partitions {ledger_ranges_partitions_def.name}: {missing[:3]}")
    if len(groups) != 1 or len(groups[0]) != len(keys):
        raise DemoFailed("the plan's partitions are not contiguous in the instance's key order")
    return groups[0][0], groups[0][-1]


def run_one(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    settings: DemoSettings,
    mission: str,
    previous: str | None,
    order: str,
    log_level: str = "CRITICAL",
) -> MissionOutcome:
    catchup: CatchupResource = deployment_catchup(defs)
    store = Store(catchup.root())
    tags = {MISSION_TAG: mission}
    run_ids: dict[str, str] = {}

    plan_run = defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config={
            "ops": {"mission_plan": {"config": settings.plan_config(mission, previous, order)}},
            **_quiet(log_level),
        },
        instance=instance,
        tags=tags,
        raise_on_error=False,
    )
    run_ids["mission_plan_job"] = plan_run.run_id
    check_interrupted(store, None, run=plan_run)
    if not plan_run.success:
        raise DemoFailed(f"mission_plan of {mission}: {_failure_text(plan_run)}")
    keys = sorted(read_table(store, layout.plan(mission)).column("range_key").to_pylist())
    first, last = _contiguous(instance, keys)

    run_id = str(uuid.uuid4())  # what Dagster makes a run id of
    bar = ProgressBar(mission, len(keys))
    poller = Poller(bar, catchup, mission, keys)
    started = time.monotonic()
    with bar.above():
        poller.start()
        try:
            catchup_run = defs.resolve_job_def("range_catchup_job").execute_in_process(
                run_config=_quiet(log_level),
                instance=instance,
                tags={**tags, RANGE_START_TAG: first, RANGE_END_TAG: last},
                run_id=run_id,
                raise_on_error=False,
            )
        finally:
            states = poller.stop()
    wall = time.monotonic() - started
    run_ids["range_catchup_job"] = catchup_run.run_id
    check_interrupted(store, mission, len(states.condemned))
    if not catchup_run.success and not states.condemned:
        raise DemoFailed(f"range_catchup of {mission} (run {run_id}): {_failure_text(catchup_run)}")

    # Tagged as mission_finished_sensor tags the profile it requests after a run.
    profile_run = defs.resolve_job_def("profile_job").execute_in_process(
        run_config=_quiet(log_level),
        instance=instance,
        partition_key=mission,  # mission_plan added it: each mission's views are its partition
        tags={**tags, AFTER_RUN_TAG: run_id},
        raise_on_error=False,
    )
    run_ids["profile_job"] = profile_run.run_id
    check_interrupted(store, mission, len(states.condemned), run=profile_run)
    if not profile_run.success:
        raise DemoFailed(f"profile_job of {mission}: {_failure_text(profile_run)}")

    records, done = RecordStore(store, mission).load()
    summary = summarize(
        mission,
        [r for i, r in records.items() if i in done],
        catchup.placement(),
        len(keys),
        len(states.condemned),
        time_scale=catchup.scale().time,  # the factor the UI's metadata scales by too
        plan_rows=read_table(store, layout.plan(mission)).to_pylist(),
    )
    paths = {
        "plan": store.url(layout.plan(mission)),
        "attempts": store.url(layout.attempts(mission)),
        "profile": store.url(layout.profile(mission)),
        "tier map": store.url(layout.tier_map(mission)),
    }
    if store.exists(layout.profile_diff(mission)):
        paths["diff"] = store.url(layout.profile_diff(mission))  # profile_diff: against the one before
    return MissionOutcome(mission, replace(summary, wall_seconds=wall), states.condemned, paths, run_ids)
