"""What a mission cost, from its attempt records: the demo's side-by-side summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from catchup_assets.outcomes import Outcome
from catchup_assets.records import AttemptRecord
from catchup_assets.sizing import Tiers


@dataclass(frozen=True)
class MissionSummary:
    mission: str
    ranges: int
    completed: int
    condemned: int
    attempts: int
    outcomes: dict[str, int]
    memory_requested_bytes: int  # summed over every attempt's request
    memory_hours_gib: float  # request x compute time, the thing a node bill follows
    node_hours: float  # compute time / pods per node of the attempt's tier
    node_gib_hours: float  # the same weighted by the node's memory: a cost proxy across tiers
    wall_seconds: float | None

    @property
    def oom_retries(self) -> int:
        return self.outcomes.get(Outcome.OOM.value, 0)


def summarize(
    mission: str,
    records: Iterable[AttemptRecord],
    tiers: Tiers,
    n_ranges: int,
    condemned: int = 0,
    time_scale: float = 1.0,
) -> MissionSummary:
    """`time_scale` turns measured seconds into mission seconds (a sped-up simulation)."""
    recs = [r for r in records if r.outcome is not None]
    per_node = {t.name: t.pods_per_node for t in tiers.all()}
    node_mem = {t.name: t.node_memory_bytes for t in tiers.all()}
    outcomes = Counter(r.outcome for r in recs)
    secs = [(r, (r.seconds or 0.0) * time_scale) for r in recs]
    starts = [r.started_at for r in recs if r.started_at]
    ends = [r.finished_at for r in recs if r.finished_at]
    return MissionSummary(
        mission=mission,
        ranges=n_ranges,
        completed=len({r.range_key for r in recs if r.outcome == Outcome.OK}),
        condemned=condemned,
        attempts=len(recs),
        outcomes=dict(outcomes),
        memory_requested_bytes=sum(r.memory_request_bytes or 0 for r in recs),
        memory_hours_gib=sum((r.memory_request_bytes or 0) / 1024**3 * s / 3600 for r, s in secs),
        node_hours=sum(s / 3600 / per_node.get(r.tier or "", 1) for r, s in secs),
        node_gib_hours=sum(
            s / 3600 / per_node.get(r.tier or "", 1) * node_mem.get(r.tier or "", 0) / 1024**3 for r, s in secs
        ),
        wall_seconds=(max(ends) - min(starts)) if starts and ends else None,
    )


def side_by_side(summaries: Sequence[MissionSummary], memory_scale: float = 1.0) -> str:
    """Memory figures are divided by `memory_scale`: a scaled-down demo reads in production GiB."""
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
        ("node-hours (est.)", [f"{s.node_hours:,.0f}" for s in summaries]),
        ("node GiB-hours (cost)", [f"{s.node_gib_hours / memory_scale:,.0f}" for s in summaries]),
        ("wall time (s)", [f"{s.wall_seconds:,.1f}" if s.wall_seconds is not None else "-" for s in summaries]),
    ]
    width = max(len(k) for k, _ in rows)
    col = max(12, *(len(v) for _, vs in rows for v in vs))
    return "\n".join(f"{k:<{width}}  " + "  ".join(f"{v:>{col}}" for v in vs) for k, vs in rows)
