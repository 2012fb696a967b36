"""The four KPIs of sizing, per mission, from its finished attempt records (docs/cost.md, "The KPIs of sizing").

Pure. What they answer, and against what (Google's Autopilot, EuroSys 2020:
23% slack on autopiloted jobs, 46% on manually sized ones, 10x fewer jobs hit
by OOM):

- memory slack: of the attempts that completed their range, (limit - peak) /
  limit, peak being anon memory (what an OOM kill counts). In aggregate,
  1 - sum(peak) / sum(limit); the same per tier; and the median range's
  (each range's own, over its completing attempts). A completing attempt
  without a peak or a limit is left out, and counted.
- ranges hit by OOM: the share of ranges with a finished attempt of which at
  least one attempt ended `oom`.
- first-attempt success: the share of ranges whose first finished attempt
  completed it. An operator's stop (`stopped`) is no verdict on sizing and is
  skipped: the range's first attempt is then the next one.
- cost efficiency: what the completing attempts' peaks would cost if memory
  were bought by the GiB-hour at the cheapest rate that fits, over the dollars
  the mission spent (every finished attempt, retries and failures included,
  as `cost.mission_cost` prices them). The rate of a peak is the least
  hourly price over allocatable GiB of the catalog shapes whose allocatable
  memory holds it, at the capacity type the attempt bought (spot or
  on-demand: buying on-demand is a choice apart from sizing, priced
  elsewhere). 1.0 would be a mission paying for exactly the memory it used,
  for exactly as long; retries, slack, CPU-bound packing and node fragments
  all pull it down. Attempts on a tier the placement does not know are left
  out of both sides (the cost model's `unpriced`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import UNCHARGED, Outcome
from catchup_assets.core.forecast.cost import attempt_uses, mission_cost
from catchup_assets.core.size.catalog import ON_DEMAND, SPOT, Catalog
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB

AUTOPILOT = "Autopilot (EuroSys 2020): slack 23% autopiloted, 46% manual; 10x fewer jobs hit by OOM"


@dataclass(frozen=True)
class SizingKpis:
    ranges: int  # ranges with a finished attempt
    completing_attempts: int  # measured completing attempts, the slack's population
    unmeasured_completing: int  # completing attempts without a peak or a limit: left out of slack
    memory_slack: float | None  # 1 - sum(peak) / sum(limit) over completing attempts
    median_range_slack: float | None
    slack_by_tier: dict[str, float] = field(default_factory=dict)
    oom_hit_share: float | None = None  # ranges with any oom attempt, over ranges
    first_attempt_success: float | None = None
    cost_efficiency: float | None = None  # ideal memory dollars over dollars spent
    ideal_dollars: float = 0.0
    dollars: float = 0.0


def cheapest_gib_hour(catalog: Catalog, peak_bytes: int, capacity_type: str) -> float | None:
    """The least $ per allocatable GiB-hour of the shapes whose allocatable memory holds `peak_bytes`."""
    rates = [
        s.hourly(capacity_type) / (s.allocatable_memory_bytes / GiB)
        for s in catalog.shapes
        if s.allocatable_memory_bytes >= peak_bytes
    ]
    return min(rates, default=None)


def _slack(peaks: Iterable[int], limits: Iterable[int]) -> float | None:
    total = sum(limits)
    return 1 - sum(peaks) / total if total > 0 else None


def sizing_kpis(
    records: Iterable, placement: Placement, time_scale: float = 1.0, decided: Collection[str] | None = None
) -> SizingKpis:
    """The KPIs of the finished attempt records of one mission (`time_scale`: measured to mission seconds).

    `decided`: while the mission runs, the ranges with a verdict: the shares per range (OOM-hit,
    first-attempt success) are over those alone, and absent before the first, so an OOM early in a
    range's first attempt does not read as every range hit. None: every range with a finished attempt."""
    finished = [r for r in records if r.outcome is not None]
    ok = [r for r in finished if r.outcome == Outcome.OK]
    measured = [r for r in ok if r.peak_anon_bytes is not None and r.memory_limit_bytes]
    by_tier: dict[str, list] = defaultdict(list)
    by_range: dict[str, list] = defaultdict(list)
    for r in measured:
        by_tier[r.tier or ""].append(r)
        by_range[r.range_key].append(r)

    def slack_of(rs: list) -> float | None:
        return _slack((r.peak_anon_bytes for r in rs), (r.memory_limit_bytes for r in rs))

    range_slacks = [s for rs in by_range.values() if (s := slack_of(rs)) is not None]
    ranges = {r.range_key for r in finished}
    judged = ranges if decided is None else ranges & set(decided)
    oom_ranges = {r.range_key for r in finished if r.outcome == Outcome.OOM and r.range_key in judged}
    first: dict[str, object] = {}
    for r in sorted(finished, key=lambda r: r.attempt):
        if r.outcome not in UNCHARGED and r.range_key in judged:  # a stop or a foreign name: no first attempt
            first.setdefault(r.range_key, r)
    known = {t.name: t for t in placement.tiers.all()}
    ideal = 0.0
    for r in measured:
        tier = known.get(r.tier or "")
        if tier is None:
            continue
        capacity = r.capacity_type if r.capacity_type in (SPOT, ON_DEMAND) else tier.capacity_type
        rate = cheapest_gib_hour(placement.catalog, r.peak_anon_bytes, capacity)
        if rate is not None:
            ideal += r.peak_anon_bytes / GiB * (r.seconds or 0.0) * time_scale / 3600 * rate
    dollars = mission_cost(attempt_uses(finished, time_scale), placement).dollars
    return SizingKpis(
        ranges=len(ranges),
        completing_attempts=len(measured),
        unmeasured_completing=len(ok) - len(measured),
        memory_slack=slack_of(measured),
        median_range_slack=statistics.median(range_slacks) if range_slacks else None,
        slack_by_tier={t: s for t, rs in sorted(by_tier.items()) if (s := slack_of(rs)) is not None},
        oom_hit_share=len(oom_ranges) / len(judged) if judged else None,
        first_attempt_success=(sum(1 for r in first.values() if r.outcome == Outcome.OK) / len(first))
        if first
        else None,
        cost_efficiency=ideal / dollars if dollars > 0 else None,
        ideal_dollars=ideal,
        dollars=dollars,
    )


def percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def kpi_rows(k: SizingKpis) -> list[dict[str, str]]:
    """The KPIs as rows of a table (the metadata's and the notebook's), each with what it is measured against."""
    rows = [
        {"kpi": "memory slack (aggregate)", "value": percent(k.memory_slack), "against": "Autopilot 23%, manual 46%"},
        {"kpi": "memory slack (median range)", "value": percent(k.median_range_slack), "against": ""},
    ]
    rows += [{"kpi": f"memory slack ({t})", "value": percent(s), "against": ""} for t, s in k.slack_by_tier.items()]
    rows += [
        {"kpi": "ranges hit by OOM", "value": percent(k.oom_hit_share), "against": "Autopilot: 10x fewer than manual"},
        {"kpi": "first-attempt success", "value": percent(k.first_attempt_success), "against": ""},
        {"kpi": "cost efficiency", "value": percent(k.cost_efficiency), "against": "1.0: only the memory used"},
    ]
    return rows
