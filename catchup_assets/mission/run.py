"""Run a planned mission: write its plan, then dispatch its ranges on a backend until each is done or condemned.

Nothing here knows which backend runs the attempts.
"""

from __future__ import annotations

from collections.abc import Callable

from catchup_assets.core.dispatch.dispatch_config import Clock, DispatchConfig
from catchup_assets.core.dispatch.live import AttemptEvent
from catchup_assets.core.dispatch.mission_control import DEPLOYMENT, Cap, MissionControl
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.dispatch.results import MissionResult, RangeResult, Status, how_ended
from catchup_assets.mission.metrics import MissionMetrics
from catchup_assets.mission.plan import PreparedMission
from catchup_assets.mission.saved import mission_cap
from catchup_assets.mission.stop_signals import stop_on_signals
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.run_end import RunEnd, write_run_end
from catchup_assets.store.tables import write_table


def run_mission(
    prepared: PreparedMission,
    backend: Backend,
    *,
    clock: Clock | None = None,
    on_status: Callable[[Status], None] | None = None,
    on_result: Callable[[RangeResult, bool], None] | None = None,
    on_health: Callable[[str, bool, str], None] | None = None,
    on_control: Callable[[MissionControl, str], None] | None = None,
    on_attempt: Callable[[AttemptEvent], None] | None = None,
    write_plan: bool = True,
    reset_condemned: bool = False,
    holder: str | None = None,
    stop_grace_seconds: float = 15.0,
    metrics: MissionMetrics | None = None,
    max_parallelism: int | None = None,
) -> MissionResult:
    """`metrics`: the snapshot its /metrics serve, taken each pass and at the end; the caller closes it.
    `max_parallelism`: the deployment's cap where it runs now; the mission's record's is kept if lower."""
    cfg = prepared.config
    store = Store(cfg.storage_root)
    if write_plan:
        write_table(store, layout.plan(cfg.mission), prepared.plan)
    dispatch_cfg = DispatchConfig(
        cfg,
        prepared.ordered,
        prepared.previous.index,
        reset_condemned=reset_condemned,
        holder=holder,
        stop_grace_seconds=stop_grace_seconds,
        trusted=prepared.trusted_by_key or {},  # each attempt its range's one hash (entrypoint.sh)
        cap=mission_cap(store, cfg.mission, Cap(max_parallelism, DEPLOYMENT) if max_parallelism else None),
    )
    dispatcher = Dispatcher(
        dispatch_cfg,
        backend,
        RecordStore(store, cfg.mission),
        clock=clock,
        on_status=on_status,
        on_result=on_result,
        on_health=on_health,
        read_control=ControlStore(store, cfg.mission).read,  # the operator's, read once a pass
        on_control=on_control,
        on_pass=metrics.on_pass if metrics is not None else None,
        on_attempt=on_attempt,
    )
    # SIGTERM or SIGINT: an operator's stop, shut down and recorded `stopped`, never condemned.
    try:
        with stop_on_signals(dispatcher.stop):
            result = dispatcher.run()
        # What `status` and the console read to know the run has ended (issue 46): Dagster's run storage is not theirs.
        write_run_end(store, cfg.mission, RunEnd(how_ended(result), dispatcher.clock.time(), len(result.results),
                                                 len(result.done)))  # fmt: skip
        return result
    finally:
        if metrics is not None:
            metrics.flush()  # the counts as the run left them, its stopped attempts recorded
