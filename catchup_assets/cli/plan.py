"""`catchup-assets plan`: a mission's makespan, node-hours and cost predicted from a profile;
the --profile it reads and the cost table it prints, which `fit-tiers` shares."""

from __future__ import annotations

import argparse

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.text import records_table


def load_profile(path: str):
    """The profile at `path` (--profile), refused naming the option if it cannot size a mission."""
    from catchup_assets.store.profiles import ProfileRefused, load_previous_profile

    try:
        previous = load_previous_profile(path)
    except ProfileRefused as exc:
        raise ConfigError(f"--profile: {exc}") from exc
    if previous.index is None:
        raise ConfigError(f"--profile: {previous.warning}")
    return previous


def command(args: argparse.Namespace) -> int:
    from collections import Counter

    from catchup_assets.core.forecast.forecast import forecast_rows, lengths_rows
    from catchup_assets.core.plan.choose_lengths import CHOICE_DRAWS, choice_rows
    from catchup_assets.core.plan.config import MissionConfig
    from catchup_assets.core.plan.ranges import MissionSpan
    from catchup_assets.mission.plan import (
        fallback_forecast,
        forecast_band,
        forecast_mission,
        predict_cost,
        prepare,
        uniform_forecast,
    )

    previous = load_profile(args.profile)
    last = args.last_ledger or max(int(r["last_ledger"]) for r in previous.rows)
    # The span's own checks name its fields; the command line's are named by their flags (L34), in the span's order.
    if last < args.first_ledger:
        given = f"--last-ledger {last}" if args.last_ledger else f"the profile's highest ledger {last}"
        raise ConfigError(f"--first-ledger {args.first_ledger} is above {given}")
    try:
        MissionSpan(args.first_ledger, last, args.ledgers_per_range, 0)  # what is left to refuse: too many ranges
    except ConfigError as exc:
        raise ConfigError(f"--ledgers-per-range: {exc}") from None
    if args.overlap >= args.ledgers_per_range:
        raise ConfigError(f"--overlap {args.overlap} must be below --ledgers-per-range {args.ledgers_per_range}")
    span = MissionSpan(args.first_ledger, last, args.ledgers_per_range, args.overlap)
    cfg = MissionConfig(
        mission="plan",
        span=span,
        storage_root="memory://catchup-assets-plan",  # nothing is written
        parallelism=args.parallelism,
        order=args.order,
        previous_profile=args.profile,
        lengths=args.lengths,
    )
    prepared = prepare(cfg, previous=previous)  # read once: its rows' warnings once
    forecasts = forecast_mission(prepared, args.what_if)
    if not forecasts:
        raise ConfigError(f"--profile: {args.profile} has no seconds to time a mission with")
    tiers = Counter(prepared.plan.column("tier").to_pylist())
    print(f"profile   {args.profile}: {len(previous.index)} measured ranges")
    print(
        f"mission   ledgers {cfg.span.first_ledger}..{last}, {len(prepared.ordered)} ranges, order {cfg.order}, "
        f"{forecasts[0].estimated} without their own measurement"
    )
    print("tiers     " + ", ".join(f"{t} {n}" for t, n in sorted(tiers.items(), key=lambda kv: -kv[1])))
    print(lengths_line(prepared))
    print("\n" + records_table(forecast_rows(forecasts, cfg.parallelism)))
    if uniform := uniform_forecast(prepared, args.what_if):
        print("\nThe profile cut beside the uniform grid, at the same slots:")
        print(records_table(lengths_rows(forecasts, uniform, cfg.parallelism)))
    if (choice := prepared.lengths_choice) is not None and choice.cut is not None:
        print(
            f"\nlengths auto: both plans at {cfg.parallelism} slots under runtime spread sigma {choice.sigma:g} "
            f"({CHOICE_DRAWS} seeded draws each):"
        )
        print(records_table(choice_rows(choice)))
    print(
        "\nPredicted from the profile's seconds with the dispatcher's own order; reclaims, OOM retries "
        "and node start-up come on top."
    )
    if (band := forecast_band(prepared, args.sigma, args.memory_sigma)) is not None:
        print("Under noise: " + band.line() + ".")
    if (fallback := fallback_forecast(prepared)) is not None:
        print(fallback.line())
    print_cost(predict_cost(prepared), cfg.placement)
    return 0


def lengths_line(prepared) -> str:
    """How the span was cut, and its longest predicted range; with auto, which plan it chose and why."""
    seconds = [s for s in prepared.plan.column("predicted_seconds").to_pylist() if s is not None]
    longest = f"; longest predicted range {max(seconds) / 3600:.2f} h" if seconds else ""
    cut = prepared.cut
    how = (
        f"profile: {len(prepared.ordered)} ranges, {cut.cut} grid ranges cut and {cut.merged} merged "
        f"(compared under runtime spread sigma {cut.sigma:g})"
        if cut is not None
        else f"uniform: {len(prepared.ordered)} ranges of {prepared.config.span.ledgers_per_range} ledgers"
    )
    why = f"\n          {prepared.lengths_note}" if prepared.lengths_note else ""
    return f"lengths   {how}{longest}{why}"


def print_cost(cost, placement) -> None:
    """The predicted cost of a mission's first attempts, per tier, with flat sizing beside it."""
    from catchup_assets.core.forecast.cost import COST_NOTE, cost_rows

    print("\n" + records_table(cost_rows(cost, placement)))
    ratio = f"{cost.ratio:.3f}" if cost.ratio is not None else "-"
    print(
        f"\ncost {cost.dollars:,.2f} USD (spot {cost.spot_dollars:,.2f}, on-demand {cost.on_demand_dollars:,.2f}; "
        f"{cost.all_on_demand_dollars:,.2f} were it all on-demand); "
        f"flat sizing {cost.flat_dollars:,.2f} USD ({cost.flat_shape}); ratio {ratio}.\n"
        f"Prices: {placement.catalog.source}; {COST_NOTE}."
    )
