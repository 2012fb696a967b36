"""RangeCatchupRun alone: its callbacks and exits driven with real values, read back from the run's event log.

Each case is a script a stand-in `range_catchup` asset (same name, same checks, its run's ranges) runs
against a real `RangeCatchupRun` on a real temporary instance: the dispatcher's callbacks as
run_mission calls them (on_attempt, on_status, on_result, on_health, on_control), then how the run
ends (finish, terminated, drive with nothing to run). What is asserted is what the instance
recorded: materializations, observations, check evaluations, the step's failure, warnings, and the
partitions' statuses as the UI reads them. Nothing of ours is mocked; no attempt is dispatched
(tests/defs/test_assets.py and tests/reliability/test_operator_stop.py run the whole asset).
"""

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import dagster as dg
import pytest

from catchup_assets.core.dispatch.live import AttemptEvent
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.ports import Phase
from catchup_assets.core.dispatch.results import MissionResult, RangeResult, RangeStatus, Status
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.defs.assets.range_assets import HEALTH_CHECK_SPECS
from catchup_assets.defs.mission.range_catchup_run import RangeCatchupRun
from catchup_assets.defs.mission.range_events import RangeEvents
from catchup_assets.defs.resources import CatchupResource
from dagster_defs import LEDGERS_PER_RANGE, catchup

MISSION = "m1"
SPAN = MissionSpan(1, 3 * LEDGERS_PER_RANGE, LEDGERS_PER_RANGE, 0)
A, B, C = KEYS = [r.key for r in plan_ranges(SPAN)]
PARTS = dg.StaticPartitionsDefinition(KEYS)
RANGE = dg.AssetKey("range_catchup")
WARN, ERROR = dg.AssetCheckSeverity.WARN, dg.AssetCheckSeverity.ERROR
S = dg.AssetPartitionStatus
BUDGET = "failed budget spent (3 of 3): exit 1"


def result(key: str, status: RangeStatus, reason: str = "") -> RangeResult:
    """A range's result as the dispatcher reports it; a completed one with its profile row."""
    row = {"seconds": 2.0, "peak_anon_bytes": 64 * 2**20} if status is RangeStatus.DONE else None
    outcomes = {RangeStatus.DONE: "ok", RangeStatus.CONDEMNED: "failed,failed,failed"}.get(status, "")
    attempts = len(outcomes.split(",")) if outcomes else 0
    return RangeResult(key, status, reason, row, attempts, outcomes, "nebula", 256 * 2**20, None)


def mission(*results: RangeResult, **kw) -> MissionResult:
    return MissionResult({r.range_key: r for r in results}, passes=3, **kw)


DONE_A, DONE_B, DONE_C = (result(k, RangeStatus.DONE) for k in KEYS)
CONDEMNED_A, CONDEMNED_B = (result(k, RangeStatus.CONDEMNED, BUDGET) for k in (A, B))
NOT_RUN_B, NOT_RUN_C = (result(k, RangeStatus.NOT_RUN, "not started") for k in (B, C))
ALL_DONE = mission(DONE_A, DONE_B, DONE_C)


# The scripts: what the dispatcher and run_mission would call, in their order.


def condemned(run: RangeCatchupRun) -> Iterator:
    run.on_result(DONE_A, False)
    run.on_result(CONDEMNED_B, False)
    run.on_result(DONE_C, True)  # recorded by an earlier run: adopted
    yield from run.finish(mission(DONE_A, CONDEMNED_B, DONE_C))


def condemned_by_an_earlier_run(run: RangeCatchupRun) -> Iterator:
    run.on_result(DONE_A, False)
    run.on_result(CONDEMNED_B, True)
    run.on_result(DONE_C, False)
    yield from run.finish(mission(DONE_A, CONDEMNED_B, DONE_C))


def stopped(run: RangeCatchupRun) -> Iterator:
    run.on_result(DONE_A, False)
    yield from run.finish(mission(DONE_A, NOT_RUN_B, NOT_RUN_C, stopped="SIGTERM"))


def terminated(run: RangeCatchupRun) -> Iterator:
    raise run.terminated(run.catchup.backend_for(MISSION))  # a real local backend, nothing in flight
    yield


def drained(run: RangeCatchupRun) -> Iterator:
    run.on_result(DONE_A, False)
    yield from run.finish(mission(DONE_A, NOT_RUN_B, NOT_RUN_C, drained=True))


def drained_with_a_condemned_range(run: RangeCatchupRun) -> Iterator:
    run.on_result(CONDEMNED_A, False)
    run.on_result(DONE_C, False)
    yield from run.finish(mission(CONDEMNED_A, NOT_RUN_B, DONE_C, drained=True))


def unfinished_without_a_drain(run: RangeCatchupRun) -> Iterator:
    run.on_result(DONE_A, False)
    yield from run.finish(mission(DONE_A, NOT_RUN_B, NOT_RUN_C))


def health(run: RangeCatchupRun) -> Iterator:
    run.on_health("not_stalled", False, "no range completed in 3600 s")
    run.on_health("dispatching", False, "paused by an operator")
    run.on_health("dispatching", False, "circuit breaker: 5 attempts failed alike")
    run.on_health("not_stalled", True, "a range completed, or attempts in flight are on time again")
    for r in ALL_DONE.results.values():
        run.on_result(r, False)
    yield from run.finish(ALL_DONE)


def control(run: RangeCatchupRun) -> Iterator:
    run.on_control(MissionControl(paused=True, parallelism=2), "pause (by ops)")
    for r in ALL_DONE.results.values():
        run.on_result(r, False)
    yield from run.finish(ALL_DONE)


def attempts(run: RangeCatchupRun) -> Iterator:
    run.on_attempt(AttemptEvent(A, 1, Phase.PENDING, "nebula", 256 * 2**20, 200 * 2**20, "spot"))
    run.on_status(Status(passes=1, completed=0, in_flight=1, queued=2, condemned=0, total=3, other_live=0, pending=1))
    run.on_attempt(AttemptEvent(A, 1, Phase.RUNNING, "nebula", 256 * 2**20, node="node-1", started_at=1.7e9))
    for r in ALL_DONE.results.values():
        run.on_result(r, False)
    yield from run.finish(ALL_DONE)


def nothing_to_run(run: RangeCatchupRun) -> Iterator:
    yield from run.drive(None)  # every range superseded by a later plan


def metrics(run: RangeCatchupRun) -> Iterator:
    run.serve_metrics()
    assert run.metrics is not None
    run.metrics.close()
    for r in ALL_DONE.results.values():
        run.on_result(r, False)
    yield from run.finish(ALL_DONE)


SCRIPTS: dict[str, Callable[[RangeCatchupRun], Iterator]] = {
    f.__name__: f
    for f in (
        condemned,
        condemned_by_an_earlier_run,
        stopped,
        terminated,
        drained,
        drained_with_a_condemned_range,
        unfinished_without_a_drain,
        health,
        control,
        attempts,
        nothing_to_run,
        metrics,
    )
}


@dg.asset(
    name="range_catchup",
    partitions_def=PARTS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    output_required=False,
    retry_policy=dg.RetryPolicy(max_retries=2),  # as range_catchup's: a retryable failure would be retried
    check_specs=HEALTH_CHECK_SPECS,
)
def stand_in(context: dg.AssetExecutionContext, catchup: CatchupResource):
    """range_catchup's body, with the script of the run's `case` tag in place of run_mission."""
    marks = RangeEvents(context)
    cfg = MissionConfig(MISSION, SPAN, catchup.root(), parallelism=4)
    run = RangeCatchupRun(context, catchup, marks, MISSION, cfg, list(context.partition_keys))
    failed = True
    try:
        yield from SCRIPTS[context.run.tags["case"]](run)
        failed = False
    finally:
        marks.close(failed)


def run_case(instance: dg.DagsterInstance, case: str, resource: CatchupResource) -> dg.ExecuteInProcessResult:
    defs = dg.Definitions(assets=[stand_in], resources={"catchup": resource}, executor=dg.in_process_executor)
    tags = {"case": case, "dagster/asset_partition_range_start": A, "dagster/asset_partition_range_end": C}
    return defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, tags=tags, raise_on_error=False
    )


@dataclass
class Recorded:
    """What one run left in the instance's event log, as plain values."""

    materialized: dict[str, dict]
    observed: list[tuple[str | None, dict]]  # (partition, metadata), oldest first
    checks: list[tuple[str, bool, dg.AssetCheckSeverity, str | None]]  # (check, passed, severity, why)
    failure: str | None
    failure_metadata: dict
    warnings: list[str]
    infos: list[str]
    retries: int


def values(metadata) -> dict:
    return {k: v.value for k, v in metadata.items()}


def recorded(instance: dg.DagsterInstance, run_id: str) -> Recorded:
    rec = Recorded({}, [], [], None, {}, [], [], 0)
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            (rec.warnings if entry.level >= 30 else rec.infos).append(entry.user_message)
            continue
        data = event.event_specific_data
        if event.event_type is dg.DagsterEventType.ASSET_MATERIALIZATION:
            mat = data.materialization
            rec.materialized[mat.partition] = values(mat.metadata)
        elif event.event_type is dg.DagsterEventType.ASSET_OBSERVATION:
            obs = data.asset_observation
            rec.observed.append((obs.partition, values(obs.metadata)))
        elif event.event_type is dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            why = data.metadata["why"].value if "why" in data.metadata else None
            rec.checks.append((data.check_name, data.passed, data.severity, why))
            if why is not None:
                assert data.metadata["mission"].value == MISSION
        elif event.event_type is dg.DagsterEventType.STEP_FAILURE:
            rec.failure = data.user_failure_data.description
            rec.failure_metadata = values(data.user_failure_data.metadata)
        elif event.event_type is dg.DagsterEventType.STEP_UP_FOR_RETRY:
            rec.retries += 1
    return rec


def statuses(instance: dg.DagsterInstance) -> dict:
    return instance.get_status_by_partition(RANGE, KEYS, PARTS)


NO_ALERT = [("not_stalled", True, WARN, "no alert in this run"), ("dispatching", True, ERROR, "no alert in this run")]
# Issue 36: every run ends with the mission_complete check saying how it ended and what is left.
COMPLETE = ("mission_complete", True, WARN, "completed: all 3 ranges done")
ALL_WELL = [*NO_ALERT, COMPLETE]
SCALED = round(2.0 * catchup.scale().time, 1)  # the profile row's 2 s at production time
DRAINED = "drained: 1 of 3 ranges done, 2 left (2 not started, 0 stopped, 0 condemned)"
CONDEMNED_B_META = {"cause": BUDGET, "outcomes": "failed,failed,failed", "mission": MISSION, "kind": "condemned"}


@dataclass
class Case:
    id: str  # the requirement it pins first, then what it says
    script: str
    failure: str | None = None  # the step's failure, whole; None: the run succeeds
    failure_metadata: dict = field(default_factory=dict)
    materialized: dict[str, dict] = field(default_factory=dict)  # a subset of each partition's metadata
    observed: list[tuple[str | None, dict]] = field(default_factory=list)  # a subset of each one's, in order
    checks: list = field(default_factory=lambda: ALL_WELL)
    warnings: list[str] = field(default_factory=list)  # among the run's warnings
    infos: list[str] = field(default_factory=list)  # among the run's info lines
    status: dict[str, S | None] = field(default_factory=lambda: dict.fromkeys(KEYS, S.MATERIALIZED))
    run_status: dg.DagsterRunStatus | None = None  # None: SUCCESS if no failure, else FAILURE
    tags: dict[str, str] = field(default_factory=dict)  # among the run's tags once it ended


CASES = [
    Case(
        "L9_a_condemned_range_is_observed_and_named_with_why_after_the_others_complete",
        "condemned",
        failure=f"1 of 3 ranges did not complete:\n{B}: {BUDGET}",
        failure_metadata={"condemned": {B: BUDGET}, "mission": MISSION},
        materialized={
            A: {"mission": MISSION, "attempts": 1, "outcomes": "ok", "recorded_by_earlier_run": False},
            C: {"recorded_by_earlier_run": True, "seconds": SCALED, "tier": "nebula", "memory_limit_mib": 256.0},
        },
        observed=[(B, CONDEMNED_B_META | {"attempts": 3, "tier": "nebula"})],
        checks=[
            *NO_ALERT,
            (
                "mission_complete",
                False,
                ERROR,
                "condemned: 2 of 3 ranges done, 1 left (0 not started, 0 stopped, 1 condemned)",
            ),
        ],
        status={A: S.MATERIALIZED, B: S.FAILED, C: S.MATERIALIZED},
    ),
    Case(
        "L9_a_range_condemned_by_an_earlier_run_is_named_but_not_observed_again",
        "condemned_by_an_earlier_run",
        failure=f"1 of 3 ranges did not complete:\n{B}: {BUDGET}",
        failure_metadata={"condemned": {B: BUDGET}, "mission": MISSION},
        materialized={A: {"recorded_by_earlier_run": False}, C: {"recorded_by_earlier_run": False}},
        checks=[
            *NO_ALERT,
            (
                "mission_complete",
                False,
                ERROR,
                "condemned: 2 of 3 ranges done, 1 left (0 not started, 0 stopped, 1 condemned)",
            ),
        ],
        status={A: S.MATERIALIZED, B: S.FAILED, C: S.MATERIALIZED},
    ),
    Case(
        "L37_a_stop_condemns_nothing_and_is_not_retried",
        "stopped",
        failure="run interrupted, SIGTERM: nothing condemned; the attempts in flight were stopped and recorded "
        "`stopped`, charged to no budget; 2 ranges resume in a later run",
        failure_metadata={"interrupted": "SIGTERM", "mission": MISSION, "not_completed": 2},
        materialized={A: {"mission": MISSION}},
        # A stop has no last word on the health checks; mission_complete says it stopped, and what is left.
        checks=[
            (
                "mission_complete",
                False,
                WARN,
                "stopped: 1 of 3 ranges done, 2 left (2 not started, 0 stopped, 0 condemned)",
            )
        ],
        # Issue 36: the run ends CANCELED, as a stop from the UI: the ranges it left are not FAILED, not red.
        run_status=dg.DagsterRunStatus.CANCELED,
        status={A: S.MATERIALIZED, B: None, C: None},
    ),
    Case(
        "L37_a_termination_stops_the_attempts_first_and_is_not_retried",
        "terminated",
        failure="run terminated: in-flight attempts stopped (still alive after the grace: [])",
        checks=[],
        status=dict.fromkeys(KEYS, S.FAILED),
    ),
    Case(
        "drain_spares_the_unstarted_ranges_neither_materialized_nor_failed",
        "drained",
        failure="mission m1 drained by an operator: 2 of 3 ranges not started, left for a later run (resume the "
        "mission, then run them)",
        failure_metadata={"mission": MISSION, "not_started": 2},
        materialized={A: {"mission": MISSION}},
        checks=[*NO_ALERT, ("mission_complete", False, WARN, DRAINED)],  # issue 36: a drained run is not green
        warnings=[f"mission m1: {DRAINED}"],
        tags={"catchup/ended": "drained", "catchup/ranges-left": "2"},
        run_status=dg.DagsterRunStatus.CANCELED,  # issue 36: not a green Success, and no range FAILED
        status={A: S.MATERIALIZED, B: None, C: None},
    ),
    Case(
        "L9_drain_spares_the_unstarted_ranges_and_names_the_condemned_one",
        "drained_with_a_condemned_range",
        failure=f"1 of 3 ranges did not complete:\n{A}: {BUDGET}",
        failure_metadata={"condemned": {A: BUDGET}, "mission": MISSION},
        materialized={C: {"mission": MISSION}},
        observed=[(A, {"cause": BUDGET, "kind": "condemned"})],
        checks=[
            *NO_ALERT,
            (
                "mission_complete",
                False,
                ERROR,
                "condemned: 1 of 3 ranges done, 2 left (1 not started, 0 stopped, 1 condemned)",
            ),
        ],
        warnings=["mission m1: condemned: 1 of 3 ranges done, 2 left (1 not started, 0 stopped, 1 condemned)"],
        status={A: S.FAILED, B: None, C: S.MATERIALIZED},
    ),
    Case(
        "L9_unstarted_ranges_of_a_run_not_drained_are_named_and_fail",
        "unfinished_without_a_drain",
        failure=f"2 of 3 ranges did not complete:\n{B}: not started\n{C}: not started",
        failure_metadata={"condemned": {B: "not started", C: "not started"}, "mission": MISSION},
        materialized={A: {"mission": MISSION}},
        checks=[
            *NO_ALERT,
            (
                "mission_complete",
                False,
                ERROR,
                "blocked: 1 of 3 ranges done, 2 left (2 not started, 0 stopped, 0 condemned)",
            ),
        ],
        status={A: S.MATERIALIZED, B: S.FAILED, C: S.FAILED},
    ),
    Case(
        "Z4_each_alert_is_evaluated_as_it_happens_and_each_check_s_last_word_ends_the_run",
        "health",
        materialized=dict.fromkeys(KEYS, {"mission": MISSION}),
        checks=[
            ("not_stalled", False, WARN, "no range completed in 3600 s"),
            ("dispatching", False, WARN, "paused by an operator"),  # an operator's pause: a warning
            ("dispatching", False, ERROR, "circuit breaker: 5 attempts failed alike"),
            ("not_stalled", True, WARN, "a range completed, or attempts in flight are on time again"),
            ("not_stalled", True, WARN, "a range completed, or attempts in flight are on time again"),
            ("dispatching", False, ERROR, "circuit breaker: 5 attempts failed alike"),
            COMPLETE,
        ],
    ),
    Case(
        # Warned once, by the control reader's own logger: test_assets.py's test with the instance's python_logs.
        "an_operator_s_control_change_is_observed_on_the_asset",
        "control",
        materialized=dict.fromkeys(KEYS, {"mission": MISSION}),
        observed=[
            (None, {"mission": MISSION, "control": "pause (by ops)", "now": "paused, parallelism 2 (planned 4)"})
        ],
    ),
    Case(
        "L23_each_attempt_s_start_is_observed_on_its_partition_and_the_status_line_logged",
        "attempts",
        materialized=dict.fromkeys(KEYS, {"mission": MISSION}),
        observed=[
            (A, {"kind": "attempt", "phase": "pending", "memory_request_mib": 200.0, "capacity_type": "spot"}),
            (A, {"kind": "attempt", "phase": "running", "node": "node-1", "started_at": 1.7e9}),
        ],
        infos=["completed 0/3, in flight 1 (pending 1, running 0), queued 2, condemned 0"],
    ),
    Case(
        "nothing_left_to_run_passes_both_checks",
        "nothing_to_run",
        # no severity: the default
        checks=[
            ("not_stalled", True, ERROR, None),
            ("dispatching", True, ERROR, None),
            ("mission_complete", True, ERROR, None),
        ],
        status=dict.fromkeys(KEYS),
    ),
    Case(
        "the_metrics_port_is_named_in_the_run_s_log",
        "metrics",
        materialized=dict.fromkeys(KEYS, {"mission": MISSION}),
        infos=["mission m1: Prometheus metrics on port {port}, path /metrics"],
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_range_catchup_run(instance, case: Case):
    port = free_port()
    resource = CatchupResource(**{**catchup.model_dump(), "metrics_port": port if case.script == "metrics" else 0})
    result = run_case(instance, case.script, resource)
    got = recorded(instance, result.run_id)
    assert result.success is (case.failure is None)
    assert got.failure == case.failure
    assert got.failure_metadata == case.failure_metadata
    assert got.retries == 0  # every failure here is final: a step retry would start the ranges again
    assert set(got.materialized) == set(case.materialized)
    for key, meta in case.materialized.items():
        assert got.materialized[key] | meta == got.materialized[key], key
    assert len(got.observed) == len(case.observed)
    for (partition, meta), (want_partition, want) in zip(got.observed, case.observed, strict=True):
        assert partition == want_partition and meta | want == meta
    assert got.checks == case.checks
    for line in case.warnings:
        assert line in got.warnings
    for line in case.infos:
        assert line.format(port=port) in got.infos
    assert statuses(instance) == case.status
    run = instance.get_run_by_id(result.run_id)
    ran = dg.DagsterRunStatus
    assert run.status == (case.run_status or (ran.SUCCESS if case.failure is None else ran.FAILURE))
    assert run.tags | case.tags == run.tags
