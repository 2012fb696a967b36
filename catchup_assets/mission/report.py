"""What a mission cost, from its attempt records: the demo's side-by-side summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from catchup_assets.core.aggregate.kpis import SizingKpis, percent, sizing_kpis
from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.forecast.cost import MissionCost, Use, attempt_uses, mission_cost
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.attempt_record import AttemptRecord


@dataclass(frozen=True)
class MissionSummary:
    mission: str
    ranges: int
    completed: int
    condemned: int
    attempts: int
    outcomes: dict[str, int]
    memory_requested_bytes: int  # summed over every attempt's request
    memory_hours_gib: float  # request x compute time
    node_hours: float  # compute time x the share of its tier's node each attempt paid for
    compute_hours: float  # every finished attempt's compute time, in mission seconds
    cost: MissionCost  # every finished attempt, retries and failures included
    predicted: MissionCost | None  # from the plan, before the mission ran (None: no profile)
    wall_seconds: float | None
    kpis: SizingKpis | None = None  # the KPIs of sizing (core/aggregate/kpis.py)

    @property
    def oom_retries(self) -> int:
        return self.outcomes.get(Outcome.OOM.value, 0)


def plan_uses(plan_rows: Iterable[dict], time_scale: float = 1.0) -> list[Use] | None:
    """The plan's first attempts at their predicted seconds; None if the plan predicts none (no profile)."""
    rows = list(plan_rows)
    if not rows or any(r.get("predicted_seconds") is None for r in rows):
        return None
    return [Use(r["tier"], r["memory_request_bytes"] or 0, r["predicted_seconds"] * time_scale) for r in rows]


def summarize(
    mission: str,
    records: Iterable[AttemptRecord],
    placement: Placement,
    n_ranges: int,
    condemned: int = 0,
    time_scale: float = 1.0,
    plan_rows: Iterable[dict] = (),
) -> MissionSummary:
    """`time_scale` turns measured seconds into mission seconds (a sped-up simulation)."""
    recs = [r for r in records if r.outcome is not None]
    outcomes = Counter(r.outcome for r in recs)
    secs = [(r, (r.seconds or 0.0) * time_scale) for r in recs]
    starts = [r.started_at for r in recs if r.started_at]
    ends = [r.finished_at for r in recs if r.finished_at]
    cost = mission_cost(attempt_uses(recs, time_scale), placement)
    predicted = plan_uses(plan_rows, time_scale)
    return MissionSummary(
        mission=mission,
        ranges=n_ranges,
        completed=len({r.range_key for r in recs if r.outcome == Outcome.OK}),
        condemned=condemned,
        attempts=len(recs),
        outcomes=dict(outcomes),
        memory_requested_bytes=sum(r.memory_request_bytes or 0 for r in recs),
        memory_hours_gib=sum((r.memory_request_bytes or 0) / 1024**3 * s / 3600 for r, s in secs),
        node_hours=cost.node_hours,
        compute_hours=sum(s for _, s in secs) / 3600,
        cost=cost,
        predicted=None if predicted is None else mission_cost(predicted, placement),
        wall_seconds=(max(ends) - min(starts)) if starts and ends else None,
        kpis=sizing_kpis(recs, placement, time_scale),
    )


def _usd(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def side_by_side(summaries: Sequence[MissionSummary], memory_scale: float = 1.0) -> str:
    """Memory figures are divided by `memory_scale`: a scaled-down demo reads in production GiB.

    Dollars need no scaling for memory (a scaled pod takes the same share of a scaled node);
    the summaries' seconds are already mission seconds.
    """
    gib = 1024**3 * memory_scale
    rows = [
        ("mission", [s.mission for s in summaries]),
        ("ranges", [str(s.ranges) for s in summaries]),
        ("completed", [str(s.completed) for s in summaries]),
        ("condemned", [str(s.condemned) for s in summaries]),
        ("attempts", [str(s.attempts) for s in summaries]),
        ("retries", [str(s.attempts - s.completed - s.condemned) for s in summaries]),
        ("  of them after OOM", [str(s.oom_retries) for s in summaries]),
        ("memory requested (GiB)", [f"{s.memory_requested_bytes / gib:,.0f}" for s in summaries]),
        ("compute hours", [f"{s.compute_hours:,.0f}" for s in summaries]),
        ("node-hours (est.)", [f"{s.node_hours:,.0f}" for s in summaries]),
        ("cost (USD)", [_usd(s.cost.dollars) for s in summaries]),
        ("  spot / on-demand", [f"{s.cost.spot_dollars:,.2f}/{s.cost.on_demand_dollars:,.2f}" for s in summaries]),
        ("  predicted (USD)", [_usd(s.predicted.dollars if s.predicted else None) for s in summaries]),
        ("flat sizing (USD)", [_usd(s.cost.flat_dollars) for s in summaries]),
        ("cost / flat", [f"{s.cost.ratio:.2f}" if s.cost.ratio else "-" for s in summaries]),
        ("memory slack", [percent(s.kpis and s.kpis.memory_slack) for s in summaries]),
        ("  median range", [percent(s.kpis and s.kpis.median_range_slack) for s in summaries]),
        ("OOM-hit ranges", [percent(s.kpis and s.kpis.oom_hit_share) for s in summaries]),
        ("first-attempt success", [percent(s.kpis and s.kpis.first_attempt_success) for s in summaries]),
        ("cost efficiency", [percent(s.kpis and s.kpis.cost_efficiency) for s in summaries]),
        ("wall time (s)", [f"{s.wall_seconds:,.1f}" if s.wall_seconds is not None else "-" for s in summaries]),
    ]
    width = max(len(k) for k, _ in rows)
    col = max(12, *(len(v) for _, vs in rows for v in vs))
    return "\n".join(f"{k:<{width}}  " + "  ".join(f"{v:>{col}}" for v in vs) for k, vs in rows)


def cost_verdict(unprofiled: MissionSummary, profiled: MissionSummary) -> str:
    """One line on whether the profile paid for itself, and what dominated if it did not."""
    a, b = unprofiled.cost, profiled.cost
    if b.dollars < a.dollars:
        return f"the profiled mission cost {b.dollars / a.dollars:.0%} of the unprofiled one"
    worst = max(b.by_tier.items(), key=lambda kv: kv[1].dollars, default=("-", None))
    return (
        f"the profiled mission cost MORE than the unprofiled one ({b.dollars:,.2f} against {a.dollars:,.2f} USD): "
        f"tier {worst[0]} took {worst[1].dollars if worst[1] else 0:,.2f} USD of it; "
        f"OOM retries {unprofiled.oom_retries} -> {profiled.oom_retries}"
    )


def summary_paragraph(s: MissionSummary, forecast_hours: float | None, time_scale: float = 1.0) -> str:
    """A mission's end in one paragraph (the notification's): ranges done and condemned, cost against its
    prediction, makespan (first start to last end, in mission hours) against the plan's forecast."""
    cost = f"cost ${s.cost.dollars:,.2f}" + (
        f" against ${s.predicted.dollars:,.2f} predicted" if s.predicted else " (no prediction: no previous profile)"
    )
    wall = None if s.wall_seconds is None else s.wall_seconds * time_scale / 3600
    makespan = "makespan -" if wall is None else f"makespan {wall:,.2f} h"
    makespan += " (no forecast)" if forecast_hours is None else f" against {forecast_hours:,.2f} h forecast"
    return (
        f"{s.completed} of {s.ranges} ranges done, {s.condemned} condemned, {s.attempts} attempts "
        f"({s.oom_retries} OOM); {cost}; {makespan}."
    )
