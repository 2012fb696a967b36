"""How a range_catchup run says how its mission ended: the `mission_complete` check, the run's tags, a stop's cancel.

Issue 36 item 3. Dagster showed a drained run "Success" and its materialized ranges green, and a
stopped run's started ranges FAILED, the red of a condemned one. So the run says itself what is left:
- the `mission_complete` check on range_catchup fails unless every range of the run completed,
  WARN for a drain or a stop (an operator's choice), ERROR for condemned or blocked ranges, with the
  counts: done, not started, stopped (started, left unfinished), condemned;
- the run's tags `catchup/ended` and `catchup/ranges-left`, in the runs list beside its status;
- an operator's stop (SIGTERM or SIGINT to the run worker), and a drain that left ranges unstarted,
  end the run CANCELED, as a termination from the UI does: Dagster's status cache marks a partition
  FAILED only when the run of its newest planned row ended FAILURE (docs/design.md, "Dagster facts
  the design rests on"), so the ranges the stop or drain left show their last status (missing: not
  started), and only condemned ranges are red. The runs list shows no green Success for either.
"""

from __future__ import annotations

import dagster as dg

from catchup_assets.core.dispatch.results import MissionResult, RangeStatus, how_ended
from catchup_assets.defs.mission.mission_page import MissionPage

MISSION_COMPLETE = "mission_complete"
ENDED_TAG = "catchup/ended"  # completed | drained | stopped | condemned | blocked | terminated
LEFT_TAG = "catchup/ranges-left"

MISSION_COMPLETE_SPEC = dg.AssetCheckSpec(
    MISSION_COMPLETE,
    asset="range_catchup",
    description=(
        "every range of the run completed; else how it ended (drained, stopped, condemned, blocked) "
        "and how many ranges are left, not started, stopped and condemned"
    ),
)


def counts(result: MissionResult) -> dict[str, int]:
    """The run's ranges by how they ended: a NOT_RUN range with an attempt was stopped, one without never started."""
    rs = result.results.values()
    left = [r for r in rs if r.status is RangeStatus.NOT_RUN]
    return {
        "ranges": len(result.results),
        "done": sum(1 for r in rs if r.status is RangeStatus.DONE),
        "not_started": sum(1 for r in left if not r.attempts),
        "stopped": sum(1 for r in left if r.attempts),
        "condemned": sum(1 for r in rs if r.status is RangeStatus.CONDEMNED),
    }


def ended(result: MissionResult, n: dict[str, int]) -> str:
    return how_ended(result)  # the word run_end.json keeps too (store/run_end.py)


def end_of_mission(
    context: dg.AssetExecutionContext, mission: str, result: MissionResult, page: MissionPage | None = None
) -> dg.AssetCheckResult:
    """Tag the run with how the mission ended and what is left, on the mission's page too; the
    `mission_complete` check saying the same."""
    n = counts(result)
    how = ended(result, n)
    left = n["ranges"] - n["done"]
    context.instance.add_run_tags(context.run.run_id, {ENDED_TAG: how, LEFT_TAG: str(left)})
    why = f"{how}: all {n['ranges']} ranges done"
    if left:
        why = (
            f"{how}: {n['done']} of {n['ranges']} ranges done, {left} left "
            f"({n['not_started']} not started, {n['stopped']} stopped, {n['condemned']} condemned)"
        )
        context.log.warning(f"mission {mission}: {why}")
    if page is not None:
        page.ended(how, why, n)
    operator = how in ("drained", "stopped")
    return dg.AssetCheckResult(
        check_name=MISSION_COMPLETE,
        passed=not left,
        severity=dg.AssetCheckSeverity.WARN if operator or not left else dg.AssetCheckSeverity.ERROR,
        metadata={"mission": mission, "why": why, "ended": how, "left": left, **n},
    )


def cancel_for_stop(context: dg.AssetExecutionContext, why: str) -> None:
    """Mark the run canceling before its step fails: Dagster then ends it CANCELED, not FAILURE (api.py's
    `job_execution_iterator` reads the run's status as the step fails), so no range the stop left is FAILED."""
    context.instance.report_run_canceling(context.run, message=f"range_catchup: {why}")


def drained(context: dg.AssetExecutionContext, mission: str, left: int, ranges: int) -> dg.Failure:
    """The `Failure` that ends a drained run with ranges left CANCELED, as a stop does: not a green Success
    (issue 36 item 3), and none of the ranges it never started FAILED."""
    cancel_for_stop(context, f"drained by an operator, {left} ranges left")
    return dg.Failure(
        description=f"mission {mission} drained by an operator: {left} of {ranges} ranges not started, left for "
        "a later run (resume the mission, then run them)",
        metadata={"mission": mission, "not_started": left},
        allow_retries=False,
    )


def tag_terminated(context: dg.AssetExecutionContext, page: MissionPage | None = None) -> None:
    """Terminated from the UI (the run is canceling already): what is left is not counted, the next run knows."""
    context.instance.add_run_tags(context.run.run_id, {ENDED_TAG: "terminated"})
    if page is not None:
        page.terminated()
