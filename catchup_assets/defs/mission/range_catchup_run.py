"""One range_catchup run: the dispatcher's callbacks, as the run's events, marks, control and metrics, and how it ends.

defs/assets/range_assets.py's `range_catchup` is a thin wrapper around `RangeCatchupRun`: `open` refuses bad
input and prepares the mission, `drive` runs it (mission/run.py's `run_mission`, with this object's
`on_*` methods as its callbacks) and decides how the step ends:

- terminated from the UI: the attempts in flight stopped, bounded, then a `Failure` with no retries (L37);
- stopped by a signal to the run worker: a `Failure` of a run marked canceling, so it ends CANCELED,
  nothing condemned and no range FAILED (L37, mission_end.py);
- ranges left unfinished: the run's check results, then a `Failure` naming each range and why (L9);
- drained by an operator: the unstarted ranges spared, neither materialized nor failed, and the run
  ends CANCELED, as a stop does.

Whichever way it ends, the `mission_complete` check and the run's tags say how, and how many ranges are left.

Each completed range is logged as its partition's `AssetMaterialization`, each condemned one as an
`AssetObservation` on its partition: docs/design.md, "Dagster facts the design rests on", says why.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

from catchup_assets.core.dispatch.dispatch_config import SystemClock
from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, HEALTH_STALL
from catchup_assets.core.dispatch.live import AttemptEvent
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.obey import PAUSED
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.dispatch.results import MissionResult, RangeResult, RangeStatus, Status
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.values.ledger_range import RangeKeyError, parse_key
from catchup_assets.defs.assets.launchpad import policies
from catchup_assets.defs.instance.ownership import SUPERSEDED, latest_marks
from catchup_assets.defs.metadata.ranges import attempt_metadata, failure_metadata, materialized_by, range_metadata
from catchup_assets.defs.mission.mission_end import (
    MISSION_COMPLETE,
    cancel_for_stop,
    drained,
    end_of_mission,
    tag_terminated,
)
from catchup_assets.defs.mission.mission_page import MissionPage
from catchup_assets.defs.mission.range_events import RangeEvents
from catchup_assets.defs.mission.run_context import current_mission, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.metrics import MissionMetrics, serve_metrics
from catchup_assets.mission.plan import PreparedMission, prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import load_mission, mission_ranges
from catchup_assets.store.profiles import ProfileRefused
from catchup_assets.store.root import Store

HEALTH_CHECKS = (HEALTH_STALL, HEALTH_DISPATCH)
# A stall may end by itself (a slow range completes); stopped dispatch needs an operator.
HEALTH_SEVERITY = {HEALTH_STALL: dg.AssetCheckSeverity.WARN, HEALTH_DISPATCH: dg.AssetCheckSeverity.ERROR}
NO_ALERT = "no alert in this run"
TERMINATE_GRACE_SECONDS = 15.0


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


class RangeCatchupRun:
    """What one run's callbacks share: its context, mission, config, ranges, marks, checks seen and metrics."""

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        catchup: CatchupResource,
        marks: RangeEvents,
        mission: str,
        cfg: MissionConfig,
        keys: list[str],
    ) -> None:
        self.context, self.catchup, self.marks = context, catchup, marks
        self.mission, self.cfg, self.keys = mission, cfg, keys
        self.seen: dict[str, tuple[bool, str]] = {}  # each health check's last word in this run
        self.metrics: MissionMetrics | None = None  # /metrics while the mission runs (None: off)
        self.page: MissionPage | None = None  # the mission's counts and time to go, on its page

    @classmethod
    def open(
        cls, context: dg.AssetExecutionContext, catchup: CatchupResource, marks: RangeEvents
    ) -> tuple[RangeCatchupRun, PreparedMission | None]:
        """The run over the context's partitions, and its prepared mission (None: nothing left to run).

        Bad input is refused before anything is dispatched (L34)."""
        keys = list(context.partition_keys)
        try:
            for k in keys:
                parse_key(k)
        except RangeKeyError as exc:
            raise refused("range_catchup refused", exc) from None
        mission = current_mission(context, keys)
        try:
            store = Store(catchup.root())
            cfg = load_mission(store, mission, **policies(catchup))
            planned = mission_ranges(store, cfg)  # a profile-cut mission's from its saved plan
            keys = marks.keys = skip_superseded(context, keys, {r.key for r in planned})
            prepared = prepare(cfg, keys, planned) if keys else None
        except (ValueError, RangeKeyError, ProfileRefused) as exc:
            raise refused(f"range_catchup of mission {mission} refused", exc) from None
        return cls(context, catchup, marks, mission, cfg, keys), prepared

    @property
    def fresh(self) -> bool:
        # A new run over condemned ranges is an operator's retry; a step retry
        # or an automatic run retry of a dead dispatcher is not (it would loop).
        return self.context.retry_number == 0 and "dagster/retry_number" not in self.context.run.tags

    def drive(self, prepared: PreparedMission | None) -> Iterator[dg.AssetCheckResult]:
        """Dispatch the mission to its end; the run's check results; a `Failure` for whatever is left undone."""
        context = self.context
        if prepared is None:
            yield from (dg.AssetCheckResult(check_name=c, passed=True) for c in (*HEALTH_CHECKS, MISSION_COMPLETE))
            return
        context.log.info(f"mission {self.mission}: {len(self.keys)} ranges, parallelism {self.cfg.parallelism}")
        # One clock for the dispatcher and the backend's waits for the API server: a stop wakes it, and a
        # wait ends at once (issue 36 item 8).
        clock = SystemClock()
        console = self.catchup.console_mission_url(self.mission)
        self.page = MissionPage(context, self.mission, clock, console_url=console)
        backend = self.catchup.backend_for(self.mission, sleeper=clock.sleep)
        self.serve_metrics()
        try:
            result = run_mission(
                prepared,
                backend,
                clock=clock,
                on_status=self.on_status,
                on_result=self.on_result,
                on_health=self.on_health,
                on_control=self.on_control,
                on_attempt=self.on_attempt,
                write_plan=False,
                reset_condemned=self.fresh,
                holder=context.run.run_id,  # a retried step of this run takes its own claims back
                metrics=self.metrics,
                max_parallelism=self.catchup.mission_defaults.max_parallelism,  # the record's kept if lower
            )
        except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError):
            raise self.terminated(backend) from None
        finally:
            if self.metrics is not None:
                self.metrics.close()
        yield from self.finish(result)

    def serve_metrics(self) -> None:
        """/metrics while the mission runs; the partitions a later plan superseded are counted there too."""
        catchup = self.catchup
        superseded = len(self.context.partition_keys) - len(self.keys)
        # Every interface of a run pod (Prometheus scrapes its IP); locally the loopback alone.
        addr = "0.0.0.0" if catchup.backend == "kubernetes" else "127.0.0.1"
        scale = catchup.scale().time  # dollars in mission seconds, as the demo's summary counts them
        self.metrics = serve_metrics(catchup.metrics_port, self.mission, addr, superseded=superseded, time_scale=scale)
        if self.metrics is not None:
            port = self.metrics.port
            self.context.log.info(f"mission {self.mission}: Prometheus metrics on port {port}, path /metrics")

    # The dispatcher's callbacks (run_mission's on_status, on_result, on_attempt, on_health, on_control).

    def on_status(self, status: Status) -> None:
        self.context.log.info(status.line())
        if self.page is not None:
            self.page.running(status)

    def on_result(self, result: RangeResult, already: bool) -> None:
        context = self.context
        if result.status is RangeStatus.CONDEMNED and not already:
            # The partition shows why this mission gave it up, not the last success of another.
            self.marks.condemned(result.range_key)
            context.log_event(
                dg.AssetObservation(
                    asset_key=context.asset_key,
                    partition=result.range_key,
                    metadata=failure_metadata(
                        self.mission,
                        result,
                        self.catchup.scale(),
                        materialized_by(context.instance, context.asset_key, result.range_key),
                    ),
                )
            )
        if result.status is RangeStatus.DONE:
            self.marks.finished(result.range_key)
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=context.asset_key,
                    partition=result.range_key,
                    metadata=range_metadata(self.mission, result, already, self.catchup.scale()),
                )
            )

    def on_attempt(self, event: AttemptEvent) -> None:
        # Submitted, then running on its node: the partition's page shows the chain while it runs.
        meta = attempt_metadata(self.mission, event)
        observation = dg.AssetObservation(asset_key=self.context.asset_key, partition=event.range_key, metadata=meta)
        self.marks.started(event.range_key, observation)

    def on_health(self, check: str, passed: bool, why: str) -> None:
        # As it happens, not at the end: the check shows a stalled or blocked mission while it runs.
        self.seen[check] = (passed, why)
        self.context.log_event(
            dg.AssetCheckEvaluation(
                asset_key=self.context.asset_key,
                check_name=check,
                passed=passed,
                severity=severity(check, why),
                metadata={"mission": self.mission, "why": why},
            )
        )

    def on_control(self, control: MissionControl, what: str) -> None:
        # Each change of the operator's control, as this run's dispatcher first sees it. Observed, not warned:
        # the control reader's own logger (managed: the run's log) has warned it already (core/dispatch/obey.py).
        context, mission = self.context, self.mission
        state = control.state(self.cfg.parallelism)
        context.log_event(
            dg.AssetObservation(
                asset_key=context.asset_key, metadata={"mission": mission, "control": what, "now": state}
            )
        )

    # How the run ends.

    def terminated(self, backend: Backend) -> dg.Failure:
        """Terminated from the UI: the attempts stopped first, bounded (L37); their data directories
        stay, so a later run resumes them. Not a retryable failure: a step retry would start them all again."""
        left = backend.shutdown(grace=TERMINATE_GRACE_SECONDS)
        tag_terminated(self.context, self.page)
        return dg.Failure(
            description=f"run terminated: in-flight attempts stopped (still alive after the grace: {left})",
            allow_retries=False,
        )

    def checks(self) -> Iterator[dg.AssetCheckResult]:
        """The run's last word on each health check, whatever it was."""
        for check in HEALTH_CHECKS:
            passed, why = self.seen.get(check, (True, NO_ALERT))
            yield dg.AssetCheckResult(
                check_name=check,
                passed=passed,
                severity=severity(check, why),
                metadata={"mission": self.mission, "why": why},
            )

    def finish(self, result: MissionResult) -> Iterator[dg.AssetCheckResult]:
        """A stop's `Failure`; else the checks, then a `Failure` naming each range left unfinished (L9).

        The ranges a drain left unstarted are spared: neither materialized nor failed; the run ends CANCELED."""
        mission = self.mission
        verdict = end_of_mission(self.context, mission, result, self.page)
        if result.stopped:
            # SIGTERM or SIGINT to the run worker (mission/stop_signals.py): an operator's stop, not a failure
            # of any range: none gets a planned row now, and the run ends CANCELED (mission_end.py), unless
            # it condemned a range before the stop: that one stays red, and the run FAILURE with it.
            stopped = [k for k, r in result.results.items() if r.status is not RangeStatus.DONE]
            self.marks.spared = {k for k, r in result.results.items() if r.status is RangeStatus.NOT_RUN}
            yield verdict
            if not result.condemned:
                cancel_for_stop(self.context, result.stopped)
            raise dg.Failure(
                description=f"run interrupted, {result.stopped}: nothing condemned; the attempts in flight were "
                f"stopped and recorded `stopped`, charged to no budget; {len(stopped)} ranges resume in a later run",
                metadata={"interrupted": result.stopped, "mission": mission, "not_completed": len(stopped)},
                allow_retries=False,
            )
        yield from self.checks()
        yield verdict
        # Drained by an operator: the unstarted ranges stay unmaterialized, not failed, for a later run
        # (the verdict's warning counts them).
        left = sorted(k for k, r in result.results.items() if r.status is RangeStatus.NOT_RUN)
        skip = self.marks.spared = set(left) if result.drained else set()
        unfinished = {
            k: r.reason for k, r in result.results.items() if r.status is not RangeStatus.DONE and k not in skip
        }
        if unfinished:
            # After draining every range it could (L9): name each one and why.
            lines = "\n".join(f"{k}: {why}" for k, why in sorted(unfinished.items()))
            raise dg.Failure(
                description=f"{len(unfinished)} of {len(self.keys)} ranges did not complete:\n{lines}",
                metadata={"condemned": dg.MetadataValue.json(unfinished), "mission": mission},
                allow_retries=False,
            )
        if skip:  # drained with ranges left: CANCELED as a stop is (mission_end.py), never a green Success
            raise drained(self.context, mission, len(skip), len(self.keys))
