"""The mission as Dagster assets: thin wrappers around mission/ (plan.py, run.py, profile.py).

mission_plan (mission_plan.py) -> range_catchup[range] (here) -> range_profile -> tier_map
(range_profile.py), and range_profile -> profile_diff and tier_ladder (their own modules). See docs/design.md,
"Dagster facts the design rests on", for why range_catchup is a generator that yields nothing and
logs one AssetMaterialization per range instead.
"""

from collections.abc import Iterator

import dagster as dg

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, HEALTH_STALL
from catchup_assets.core.dispatch.obey import PAUSED
from catchup_assets.core.dispatch.results import RangeResult, RangeStatus
from catchup_assets.core.plan.ranges import RangeKeyError, parse_key
from catchup_assets.defs.assets.launchpad import policies
from catchup_assets.defs.assets.mission_plan import build_mission_plan, mission_plan  # noqa: F401 - the graph's root, re-exported
from catchup_assets.defs.instance.ownership import SUPERSEDED, latest_marks
from catchup_assets.defs.metadata.ranges import attempt_metadata, failure_metadata, range_metadata
from catchup_assets.defs.mission.range_events import RangeEvents
from catchup_assets.defs.mission.run_context import (  # noqa: F401 - re-exported: sensors, demo and tests name them here
    MISSION_TAG,
    PLAN_KEY,
    RANGE_END_TAG,
    RANGE_START_TAG,
    WILL_RETRY_TAG,
    current_mission,
    ledger_ranges_partitions_def,
    newest_plan,
    refused,
)
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.metrics import serve_metrics
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import load_mission, mission_ranges
from catchup_assets.store.profiles import ProfileRefused
from catchup_assets.store.root import Store

# A stall may end by itself (a slow range completes); stopped dispatch needs an operator.
HEALTH_SEVERITY = {HEALTH_STALL: dg.AssetCheckSeverity.WARN, HEALTH_DISPATCH: dg.AssetCheckSeverity.ERROR}


def severity(check: str, why: str) -> dg.AssetCheckSeverity:
    """An operator's pause is a warning on the dispatching check, not the error a stop is."""
    return dg.AssetCheckSeverity.WARN if check == HEALTH_DISPATCH and why.startswith(PAUSED) else HEALTH_SEVERITY[check]


def skip_superseded(context: dg.AssetExecutionContext, keys: list[str], on_grid: set[str]) -> list[str]:
    """`keys` without the partitions a later plan superseded (kept for their history, not to run)."""
    marks = latest_marks(context.instance, [k for k in keys if k not in on_grid])
    gone = sorted(k for k, (kind, _) in marks.items() if kind == SUPERSEDED)
    if gone:
        context.log.warning(f"{len(gone)} ranges superseded by a later plan are not run: {', '.join(gone[:10])}")
    return [k for k in keys if k not in set(gone)]


@dg.asset(
    group_name="mission",
    partitions_def=ledger_ranges_partitions_def,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[mission_plan],
    output_required=False,
    retry_policy=dg.RetryPolicy(max_retries=3, delay=5),
    check_specs=[
        dg.AssetCheckSpec(
            HEALTH_STALL,
            asset="range_catchup",
            description="Z4: a range completes within stall_seconds, or some attempt in flight is on time",
        ),
        dg.AssetCheckSpec(
            HEALTH_DISPATCH,
            asset="range_catchup",
            description="new attempts are dispatched (not stopped by the circuit breaker or a full backend)",
        ),
    ],
)
def range_catchup(context: dg.AssetExecutionContext, catchup: CatchupResource) -> Iterator[dg.AssetCheckResult]:
    """Each ledger range caught up by stellar-core; one run drives every range it was given."""
    # Each attempt's start and, when the instance planned the run as one subset, each range's
    # in-progress and FAILED marking: written in batches, off the dispatcher's thread.
    marks = RangeEvents(context)
    failed = True
    try:
        yield from drive(context, catchup, marks)
        failed = False
    finally:
        marks.close(failed)


def drive(
    context: dg.AssetExecutionContext, catchup: CatchupResource, marks: RangeEvents
) -> Iterator[dg.AssetCheckResult]:
    keys = list(context.partition_keys)
    try:
        for k in keys:
            parse_key(k)
    except RangeKeyError as exc:
        raise refused("range_catchup refused", exc) from exc
    mission = current_mission(context, keys)
    try:
        store = Store(catchup.root())
        cfg = load_mission(store, mission, **policies(catchup))
        # A new run over condemned ranges is an operator's retry; a step retry
        # or an automatic run retry of a dead dispatcher is not (it would loop).
        fresh = context.retry_number == 0 and "dagster/retry_number" not in context.run.tags
        planned = mission_ranges(store, cfg)  # a profile-cut mission's from its saved plan
        keys = marks.keys = skip_superseded(context, keys, {r.key for r in planned})
        if not keys:
            yield from (dg.AssetCheckResult(check_name=c, passed=True) for c in (HEALTH_STALL, HEALTH_DISPATCH))
            return
        prepared = prepare(cfg, keys, planned)
    except (ValueError, RangeKeyError, ProfileRefused) as exc:
        raise refused(f"range_catchup of mission {mission} refused", exc) from exc
    context.log.info(f"mission {mission}: {len(keys)} ranges, parallelism {cfg.parallelism}")

    def on_result(result: RangeResult, already: bool) -> None:
        if result.status is RangeStatus.CONDEMNED and not already:
            # The partition shows why this mission gave it up, not the last success of another.
            marks.condemned(result.range_key)
            context.log_event(
                dg.AssetObservation(
                    asset_key=context.asset_key,
                    partition=result.range_key,
                    metadata=failure_metadata(mission, result),
                )
            )
        if result.status is RangeStatus.DONE:
            marks.finished(result.range_key)
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=context.asset_key,
                    partition=result.range_key,
                    metadata=range_metadata(mission, result, already, catchup.scale()),
                )
            )

    def on_attempt(event) -> None:
        # Submitted, then running on its node: the partition's page shows the chain while it runs.
        meta = attempt_metadata(mission, event)
        marks.started(
            event.range_key, dg.AssetObservation(asset_key=context.asset_key, partition=event.range_key, metadata=meta)
        )

    def on_health(check: str, passed: bool, why: str) -> None:
        # As it happens, not at the end: the check shows a stalled or blocked mission while it runs.
        seen[check] = (passed, why)
        context.log_event(
            dg.AssetCheckEvaluation(
                asset_key=context.asset_key,
                check_name=check,
                passed=passed,
                severity=severity(check, why),
                metadata={"mission": mission, "why": why},
            )
        )

    def on_control(control, what: str) -> None:
        # Each change of the operator's control, as this run's dispatcher first sees it.
        state = control.state(cfg.parallelism)
        context.log.warning(f"mission {mission}: control: {what}: now {state}")
        context.log_event(
            dg.AssetObservation(
                asset_key=context.asset_key, metadata={"mission": mission, "control": what, "now": state}
            )
        )

    seen: dict[str, tuple[bool, str]] = {}
    backend = catchup.backend_for(mission)
    # /metrics while the mission runs (None: off); the partitions a later plan superseded are counted there too.
    superseded = len(context.partition_keys) - len(keys)
    # Every interface of a run pod (Prometheus scrapes its IP); locally the loopback alone.
    addr = "0.0.0.0" if catchup.backend == "kubernetes" else "127.0.0.1"
    scale = catchup.scale().time  # dollars in mission seconds, as the demo's summary counts them
    metrics = serve_metrics(catchup.metrics_port, mission, addr, superseded=superseded, time_scale=scale)
    if metrics is not None:
        context.log.info(f"mission {mission}: Prometheus metrics on port {metrics.port}, path /metrics")
    try:
        result = run_mission(
            prepared,
            backend,
            on_status=lambda s: context.log.info(s.line()),
            on_result=on_result,
            on_health=on_health,
            on_control=on_control,
            on_attempt=on_attempt,
            write_plan=False,
            reset_condemned=fresh,
            holder=context.run.run_id,  # a retried step of this run takes its own claims back
            metrics=metrics,
        )
    except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError):
        # Terminated from the UI: stop the attempts first, bounded (L37); their
        # data directories stay, so a later run resumes them.
        # Not a retryable failure: a step retry would start them all again.
        left = backend.shutdown(grace=15.0)
        raise dg.Failure(
            description=f"run terminated: in-flight attempts stopped (still alive after the grace: {left})",
            allow_retries=False,
        ) from None
    finally:
        if metrics is not None:
            metrics.close()
    if result.stopped:
        # SIGTERM or SIGINT to the run worker (mission/stop_signals.py): an operator's stop.
        stopped = [k for k, r in result.results.items() if r.status is not RangeStatus.DONE]
        raise dg.Failure(
            description=f"run interrupted, {result.stopped}: nothing condemned; the attempts in flight were "
            f"stopped and recorded `stopped`, charged to no budget; {len(stopped)} ranges resume in a later run",
            metadata={"interrupted": result.stopped, "mission": mission, "not_completed": len(stopped)},
            allow_retries=False,
        )
    for check in (HEALTH_STALL, HEALTH_DISPATCH):  # the run's last word on each, whatever it was
        passed, why = seen.get(check, (True, "no alert in this run"))
        yield dg.AssetCheckResult(
            check_name=check, passed=passed, severity=severity(check, why), metadata={"mission": mission, "why": why}
        )
    left = sorted(k for k, r in result.results.items() if r.status is RangeStatus.NOT_RUN)
    if result.drained and left:
        # Drained by an operator: the unstarted ranges stay unmaterialized, not failed, for a later run.
        context.log.warning(f"mission {mission}: drained: {len(left)} ranges left unstarted for a later run")
    skip = marks.spared = set(left) if result.drained else set()
    unfinished = {k: r.reason for k, r in result.results.items() if r.status is not RangeStatus.DONE and k not in skip}
    if unfinished:
        # After draining every range it could (L9): name each one and why.
        lines = "\n".join(f"{k}: {why}" for k, why in sorted(unfinished.items()))
        raise dg.Failure(
            description=f"{len(unfinished)} of {len(keys)} ranges did not complete:\n{lines}",
            metadata={"condemned": dg.MetadataValue.json(unfinished), "mission": mission},
            allow_retries=False,
        )
    yield from ()
