"""Plan a mission: validate it, load the previous profile, order and size its ranges (L34, L35).

Also what the plan predicts (makespan, node-hours, dollars) and the check that a
mission to profile or map was planned. The CLI and the mission_plan asset call it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.forecast.cost import MissionCost, mission_cost
from catchup_assets.core.forecast.forecast import (
    WHAT_IF_FACTORS,
    FallbackWhatIf,
    Forecast,
    estimates,
    fallback_what_if,
    what_if,
)
from catchup_assets.core.forecast.spread import DEFAULT_SIGMA, DRAWS, Band, makespan_band, spread_from_history
from catchup_assets.core.plan.choose_lengths import (
    CHOICE_DRAWS,
    LengthsChoice,
    PlanForecast,
    choose_lengths,
    plan_forecast,
)
from catchup_assets.core.plan.config import MissionConfig, validate_mission
from catchup_assets.core.plan.cut import CutPlan, profile_cut
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.redact import redact_url
from catchup_assets.core.values.ledger_range import LedgerRange, dispatch_order, parse_key
from catchup_assets.store import layout
from catchup_assets.store.profiles import PreviousProfile, load_previous_profile
from catchup_assets.store.root import Store
from catchup_assets.store.tables import Table, plan_table, read_table
from catchup_assets.store.trusted import TrustedHashes, hashes_for, load_trusted_hashes

log = logging.getLogger(__name__)


@dataclass
class PreparedMission:
    config: MissionConfig
    ordered: list[LedgerRange]
    previous: PreviousProfile
    plan: Table
    trusted: TrustedHashes | None = None  # the checkpoint hashes every range is checked against
    trusted_by_key: dict[str, tuple[int, str]] | None = None  # each range's: its checkpoint end, hash
    cut: CutPlan | None = None  # lengths profile: the cut, with the uniform grid's forecast beside it
    lengths_note: str = ""  # how the lengths were chosen, when not as asked (auto: which and why)
    lengths_choice: LengthsChoice | None = None  # lengths auto: both plans' forecasts and the choice

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.ordered]


def prepare(
    config: MissionConfig,
    keys: list[str] | None = None,
    planned: list[LedgerRange] | None = None,
    previous: PreviousProfile | None = None,
) -> PreparedMission:
    """Validate everything, load the previous profile, cut and order the ranges (L34, L35).

    `keys` narrows the mission to those ranges (a backfill of some partitions). `planned`: the
    mission's ranges as saved (`saved.mission_ranges`); else cut now, as `config.lengths` says: `auto`
    forecasts the grid and the cut and takes one (`choose`). The returned config says what was applied
    (uniform or profile; a profile cut asked of an unprofiled mission is the grid) and what was asked.
    `previous`: the profile at `config.previous_profile` as already loaded (the command line's), so its rows
    are not read and warned of twice.
    """
    pinned = config.previous_profile_sha256
    if previous is None or previous.source != config.previous_profile or pinned not in (None, previous.sha256):
        previous = load_previous_profile(
            config.previous_profile,
            config.profile_timeout_seconds,
            config.previous_profile_sha256,
            config.profile_max_bytes,
            config.profile_max_rows,
            secret_env=config.previous_profile_secret_env,
        )
    trusted = load_trusted_hashes(config.trusted_hashes, config.profile_timeout_seconds)
    if (gap := coverage_gap(previous, config.span)) is not None:
        log.warning(gap)  # in mission_plan's run too: every instance of ours manages catchup_assets' loggers
    cut, note, choice = None, "", None
    if planned is None and config.lengths in ("profile", "auto"):
        asked = config.lengths
        measures = previous.index.measures() if previous.index is not None else []
        seen = history_spread(Store(config.storage_root), previous)
        sigma = DEFAULT_SIGMA if seen is None else seen  # cut against the spread runtimes are seen to have
        cut = profile_cut(measures, config.span, config.parallelism, sigma, config.cut_node_hours_cap, config.placement)
        if asked == "auto":
            choice = choose(config, previous, cut, sigma)
            note = choice.why()
            cut = cut if choice.lengths == "profile" else None
        elif cut is None:
            note = "lengths profile: no previous profile times a range, so the uniform grid"
        # What the plan applies, and what was asked: a backfill runs the one, the next mission asks the other.
        config = replace(config, lengths="uniform" if cut is None else "profile", lengths_asked=asked)
    if planned is None:
        planned = list(cut.ranges) if cut is not None else plan_ranges(config.span)
    if keys is not None:
        wanted = {parse_key(k) for k in keys}
        outside = sorted(r.key for r in wanted - set(planned))
        if outside:
            raise ConfigError(f"range keys not in the mission's plan: {outside[:5]}")
        planned = [r for r in planned if r in wanted]
    ordered = _ordered(planned, config.order, previous)
    plan = plan_table(ordered, config.span.overlap, previous.index, config.placement)
    by_key = None if trusted is None else hashes_for(trusted, {r.key: r.last for r in ordered})
    return PreparedMission(config, ordered, previous, plan, trusted, by_key, cut, note, choice)


def choose(config: MissionConfig, previous: PreviousProfile, cut: CutPlan | None, sigma: float) -> LengthsChoice:
    """`lengths: auto`: both plans forecast under `sigma` at the mission's slots, in its order, and chosen
    between (core/plan/choose_lengths.py); with no cut (no profile times a range), the grid."""

    def forecast_of(lengths: str, ranges: list[LedgerRange]) -> PlanForecast | None:
        est = estimates(_ordered(ranges, config.order, previous), previous.index, config.placement)
        if est is None:
            return None
        return plan_forecast(lengths, est, config.parallelism, sigma, config.placement, CHOICE_DRAWS)

    grid = plan_ranges(config.span)
    grid_forecast = forecast_of("uniform", grid)
    if cut is None or grid_forecast is None:
        empty = PlanForecast("uniform", len(grid), 0.0, 0.0, 0.0, 0.0, 0.0)
        return choose_lengths(grid_forecast or empty, None, config.cut_node_hours_cap, sigma)
    cap = config.cut_node_hours_cap
    if not cut.cut and not cut.merged:  # the search kept the grid: its forecast is the grid's
        return choose_lengths(grid_forecast, replace(grid_forecast, lengths="profile"), cap, sigma, cut_is_grid=True)
    return choose_lengths(grid_forecast, forecast_of("profile", list(cut.ranges)), cap, sigma)


def coverage_gap(previous: PreviousProfile, span: MissionSpan) -> str | None:
    """Why the plan is sized from ledgers it does not replay, when the profile measured none of the span's.

    Sizing takes a range ending below the profile's last measured range from the nearest one above
    it (and a profile cut cuts by those), counted in `profiled_ranges` though none of its ledgers
    was measured; a range past the profile runs unprofiled.
    """
    if previous.index is None or not len(previous.index):
        return None
    measures = previous.index.measures()
    lo = min(m.last_ledger if m.first_ledger is None else m.first_ledger for m in measures)
    hi = max(m.last_ledger for m in measures)
    if lo <= span.last_ledger and span.first_ledger <= hi:
        return None
    return (
        f"previous profile {redact_url(previous.source or '')} measured ledgers {lo}-{hi}, none of the span "
        f"{span.first_ledger}-{span.last_ledger}: no range is sized from its own ledgers (one below {hi} from the "
        "nearest measured range above it, counted in profiled_ranges); plan with a profile of this span, "
        "or previous_profile none"
    )


def history_spread(store: Store, previous: PreviousProfile) -> float | None:
    """How far the profile's mission ran from what its own plan predicted (`spread_from_history`), when that
    plan is on this storage root; None otherwise (one mission's history: no spread to read)."""
    missions = {r.get("mission") for r in previous.rows}
    if len(missions) != 1 or not isinstance(name := missions.pop(), str):
        return None
    try:
        validate_mission(name)
        plan = read_table(store, layout.plan(name)).to_pylist()
    except (FileNotFoundError, ValueError):
        return None  # another root's mission, or a plan that is not one: no history here
    predicted = {r["range_key"]: r.get("predicted_seconds") for r in plan}
    rows = [r for r in previous.rows if r.get("range_key") in predicted]
    return spread_from_history([predicted[r["range_key"]] for r in rows], [r.get("seconds") for r in rows])


def uniform_forecast(prepared: PreparedMission, factors=WHAT_IF_FACTORS) -> list[Forecast]:
    """The uniform grid's what-if at the same slots, beside a profile cut's; [] for a uniform mission."""
    cfg = prepared.config
    if prepared.cut is None:
        return []
    grid = _ordered(plan_ranges(cfg.span), cfg.order, prepared.previous)
    est = estimates(grid, prepared.previous.index, cfg.placement)
    return [] if est is None else what_if(est, cfg.parallelism, factors)


def _ordered(ranges: list[LedgerRange], order: str, previous: PreviousProfile) -> list[LedgerRange]:
    """`ranges` in dispatch order; longest-first by the seconds of what each overlaps (a cut or merged range)."""
    index = previous.index
    if order != "longest-first" or index is None:
        return dispatch_order(ranges, order)
    found = {r.key: index.lookup_span(r.first, r.last) for r in ranges}
    return dispatch_order(ranges, order, {k: m.seconds for k, m in found.items() if m and m.seconds is not None})


def forecast_mission(prepared: PreparedMission, factors=WHAT_IF_FACTORS) -> list[Forecast]:
    """Predicted makespan and node-hours at the configured parallelism times each factor; [] unprofiled."""
    cfg = prepared.config
    est = estimates(prepared.ordered, prepared.previous.index, cfg.placement)
    return [] if est is None else what_if(est, cfg.parallelism, factors)


def fallback_forecast(prepared: PreparedMission) -> FallbackWhatIf | None:
    """What the on-demand fallback would cost this plan at the usual reclaim share; None unprofiled."""
    cfg = prepared.config
    est = estimates(prepared.ordered, prepared.previous.index, cfg.placement)
    return None if est is None else fallback_what_if(est, cfg.placement)


def predict_cost(prepared: PreparedMission) -> MissionCost | None:
    """What the plan's first attempts cost at the profile's seconds; None unprofiled (nothing to time)."""
    cfg = prepared.config
    est = estimates(prepared.ordered, prepared.previous.index, cfg.placement)
    return None if est is None else mission_cost((e.use() for e in est), cfg.placement)


def require_plan(store: Store, mission: str) -> None:
    """A mission to profile or map is a planned one: refused, naming where its plan should be,
    before anything is written (a typo'd name must not leave an empty profile behind)."""
    validate_mission(mission)
    if not store.exists(layout.plan(mission)):
        raise ConfigError(
            f"mission {mission!r} has no plan at {store.url(layout.plan(mission))}: "
            "plan it first (mission_plan), or check the mission name and storage root"
        )


def forecast_band(
    prepared: PreparedMission, sigma: float | None = None, memory_sigma: float = 0.0, draws: int = DRAWS
) -> Band | None:
    """The makespan's mean and p10-p90 at the configured parallelism under runtime (and peak) spread; None unprofiled.

    `sigma` None: the spread the previous mission showed against its own plan (`history_spread`), else
    DEFAULT_SIGMA. A drawn peak above the plan's request OOMs once."""
    rows = prepared.plan.to_pylist()
    index = prepared.previous.index
    if index is None or any(r["predicted_seconds"] is None for r in rows) or not rows:
        return None
    if sigma is None:
        seen = history_spread(Store(prepared.config.storage_root), prepared.previous)
        sigma = seen if seen is not None else DEFAULT_SIGMA
    peaks = []
    for r in rows:
        m = index.lookup_span(r["first_ledger"], r["last_ledger"])
        peaks.append(float(m.peak_anon_bytes) if m is not None else 0.0)
    return makespan_band(
        [r["predicted_seconds"] for r in rows],
        prepared.config.parallelism,
        sigma,
        peaks=peaks,
        requests=[float(r["memory_request_bytes"]) for r in rows],
        memory_sigma=memory_sigma,
        draws=draws,
    )
