"""`catchup-assets ...`: the command line. Logging is configured here and only here (L36)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from pathlib import Path

from catchup_assets.core.aggregate.diff import DEFAULT_BAND_LEDGERS, DEFAULT_THRESHOLD
from catchup_assets.core.plan.config import DEFAULT_PARALLELISM
from catchup_assets.core.text import records_table


def number(kind: type, above: float | None = None, at_least: float | None = None):
    """An argparse type: `kind`, finite, and above/at least a bound; refused naming the value (L34)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"{text!r} must be > {above}")
        if at_least is not None and not value >= at_least:
            raise argparse.ArgumentTypeError(f"{text!r} must be >= {at_least}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _demo(args: argparse.Namespace) -> int:
    import warnings

    import dagster as dg

    # The assets use beta parameters (backfill_policy) on purpose: no warning about it on every demo.
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    from catchup_assets.cli.demo.run import run_demo
    from catchup_assets.cli.demo.settings import DemoSettings

    if Path(args.dir).exists() and not Path(args.dir).is_dir():
        raise ValueError(f"--dir: {args.dir} exists and is not a directory")
    settings = DemoSettings(
        directory=Path(args.dir).resolve(),
        ranges=args.ranges,
        parallelism=args.parallelism,
        speed=args.speed,
        disruption_rate=args.disruption_rate,
        seed=args.seed,
    )
    # -v shows the Dagster runs' own event log (run and step events, the dispatcher's status lines).
    return run_demo(settings, log_level="INFO" if args.verbose else "CRITICAL")


def _profile(args: argparse.Namespace) -> int:
    from catchup_assets.mission.mission import build_profile, build_tier_map, require_plan
    from catchup_assets.store.root import Store

    require_plan(Store(args.root), args.mission)  # before anything is written
    out = build_profile(args.root, args.mission)
    _, tier_map_url = build_tier_map(args.root, args.mission)
    print(f"{out.profile.num_rows} measured ranges, {len(out.unmeasured)} unmeasured")
    print(f"profile   {out.url}\ntier map  {tier_map_url}")
    return 0


def _diff(args: argparse.Namespace) -> int:
    import textwrap

    from catchup_assets.core.aggregate.diff import display_rows, legend, regression_rows, summary_lines
    from catchup_assets.core.text import text_table
    from catchup_assets.mission.mission import diff_missions

    diff = diff_missions(args.root, args.a, args.b, args.band_ledgers, args.threshold)
    print("\n".join(summary_lines(diff)))
    if not diff.bands:
        print("\nno range to compare")
        return 0
    print("\n" + text_table(*display_rows(diff, args.memory_scale)))
    print(textwrap.fill(legend(diff, args.memory_scale), width=110))
    print(f"\nregressions (peak or seconds past {diff.threshold:g}x, and new OOMs): {len(diff.regressions)}")
    if diff.regressions:
        print(text_table(*regression_rows(diff, args.memory_scale)))
    if args.out:
        from catchup_assets.store.io import write_parquet

        write_parquet(diff.table(), args.out)
        print(f"\nband table -> {args.out}")
    return 0


def load_profile(path: str):
    """The profile at `path` (--profile), refused naming the option if it cannot size a mission."""
    from catchup_assets.store.profiles import ProfileRefused, load_previous_profile

    try:
        previous = load_previous_profile(path)
    except ProfileRefused as exc:
        raise ValueError(f"--profile: {exc}") from exc
    if previous.index is None:
        raise ValueError(f"--profile: {previous.warning}")
    return previous


def _plan(args: argparse.Namespace) -> int:
    from collections import Counter

    from catchup_assets.core.plan.ranges import MissionSpan
    from catchup_assets.core.size.forecast import forecast_rows
    from catchup_assets.mission.mission import MissionConfig, forecast_mission, predict_cost, prepare

    previous = load_profile(args.profile)
    last = args.last_ledger or max(int(r["last_ledger"]) for r in previous.rows)
    cfg = MissionConfig(
        mission="plan",
        span=MissionSpan(args.first_ledger, last, args.ledgers_per_range, args.overlap),
        storage_root="memory://catchup-assets-plan",  # nothing is written
        parallelism=args.parallelism,
        order=args.order,
        previous_profile=args.profile,
    )
    prepared = prepare(cfg)
    forecasts = forecast_mission(prepared, args.what_if)
    if not forecasts:
        raise ValueError(f"--profile: {args.profile} has no seconds to time a mission with")
    tiers = Counter(prepared.plan.column("tier").to_pylist())
    print(f"profile   {args.profile}: {len(previous.index)} measured ranges")
    print(
        f"mission   ledgers {cfg.span.first_ledger}..{last}, {len(prepared.ordered)} ranges, order {cfg.order}, "
        f"{forecasts[0].estimated} without their own measurement"
    )
    print("tiers     " + ", ".join(f"{t} {n}" for t, n in sorted(tiers.items(), key=lambda kv: -kv[1])))
    print("\n" + records_table(forecast_rows(forecasts, cfg.parallelism)))
    print(
        "\nPredicted from the profile's seconds with the dispatcher's own order; reclaims, OOM retries "
        "and node start-up come on top."
    )
    print_cost(predict_cost(prepared), cfg.placement)
    return 0


def print_cost(cost, placement) -> None:
    """The predicted cost of a mission's first attempts, per tier, with flat sizing beside it."""
    from catchup_assets.core.size.cost import COST_NOTE, cost_rows

    print("\n" + records_table(cost_rows(cost, placement)))
    ratio = f"{cost.ratio:.3f}" if cost.ratio is not None else "-"
    print(
        f"\ncost {cost.dollars:,.2f} USD (spot {cost.spot_dollars:,.2f}, on-demand {cost.on_demand_dollars:,.2f}; "
        f"{cost.all_on_demand_dollars:,.2f} were it all on-demand); "
        f"flat sizing {cost.flat_dollars:,.2f} USD ({cost.flat_shape}); ratio {ratio}.\n"
        f"Prices: {placement.catalog.source}; {COST_NOTE}."
    )


def _fit_tiers(args: argparse.Namespace) -> int:
    import yaml

    from catchup_assets.core.size.fit import (
        FitSettings,
        chart_values,
        comparison_rows,
        evaluate,
        fit_ladder,
        profile_ranges,
    )
    from catchup_assets.core.size.sizing import Placement
    from catchup_assets.core.units import GiB
    from catchup_assets.defs.resources import catalog_from_values

    previous = load_profile(args.profile)
    base = Placement()
    catalog = base.catalog
    if args.catalog:
        with open(args.catalog) as f:
            catalog = catalog_from_values(yaml.safe_load(f), where=f"--catalog {args.catalog}")
    settings = FitSettings(args.max_tiers, args.cpu, args.capacity_type, int(args.step_gib * GiB), args.tolerance)
    ranges, index = profile_ranges(previous.rows)
    result = fit_ladder(ranges, index, base, catalog, args.parallelism, settings)
    named = [("fitted", result.placement, result.cost, result.forecast)]
    if not args.catalog:  # the default ladder's shapes are in the default catalog only
        named.insert(0, ("default", base, *evaluate(ranges, index, base, args.parallelism)))
    print(f"# chart values of the ladder fitted to {args.profile} ({len(ranges)} ranges)")
    print(chart_values(result.placement, with_catalog=bool(args.catalog)))
    print(records_table(comparison_rows(named)))
    bound = result.forecast.lower_bound_seconds
    print(
        f"\npredicted makespan {result.forecast.makespan_seconds / 3600:.3f} h at {args.parallelism} slots, "
        f"{'within' if result.within_tolerance else 'NOT within'} {args.tolerance:.0%} of its lower bound "
        f"{bound / 3600:.3f} h (a ladder moves cost, not time: every ladder has this makespan)"
    )
    print_cost(result.cost, result.placement)
    return 0


def _workload(args: argparse.Namespace) -> int:
    from catchup_assets.sim.workload import Workload
    from catchup_assets.store.io import write_parquet

    if Path(args.out).is_dir():
        raise ValueError(
            f"--out: {args.out} is a directory; name the file, e.g. {Path(args.out) / 'range_profile.parquet'}"
        )
    model = Workload(ranges=args.ranges, seed=args.seed)
    write_parquet(model.profile_table(), args.out)
    secs = sorted(c.seconds for c in model)
    print(
        f"{len(secs)} ranges, {sum(secs) / 3600:,.0f} h of work, median {secs[len(secs) // 2]:.0f} s, "
        f"longest {secs[-1] / 3600:.2f} h -> {args.out}"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="catchup-assets", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "demo",
        help="run two missions over a simulated history on this machine, through Dagster",
        description="Run two missions over a simulated 60M-ledger history through Dagster, on a persistent "
        "instance under DIR/dagster_home that the Dagster UI can open afterwards (the command is printed). "
        "The second mission is sized from the first's profile.",
    )
    d.add_argument(
        "--dir",
        default="demo",
        help="where the demo keeps its Dagster home, storage, work and code location (default ./demo)",
    )
    d.add_argument(
        "--ranges", type=number(int, at_least=1), default=48, help="ranges the history is cut into (default 48)"
    )
    d.add_argument(
        "--parallelism", type=number(int, at_least=1), default=8, help="attempts in flight at once (default 8)"
    )
    d.add_argument("--speed", type=number(float, above=0), default=300_000.0, help="simulated seconds per real second")
    d.add_argument(
        "--disruption-rate",
        type=number(float, at_least=0),
        default=0.07,
        help="share of attempts hit by a simulated spot reclaim",
    )
    d.add_argument("--seed", type=number(int), default=0)
    d.set_defaults(func=_demo)
    pl = sub.add_parser(
        "plan",
        help="predict a mission's makespan and node-hours from a profile, at several parallelisms",
        description="Plan a mission over the profile's span (or the ledgers given) and predict its makespan, "
        "the lower bound max(longest range, work / slots) and node-hours, "
        "at the parallelism and at each what-if factor.",
    )
    pl.add_argument("--profile", required=True, help="range_profile.parquet of an earlier mission (path or fsspec URL)")
    pl.add_argument(
        "--parallelism",
        type=number(int, at_least=1),
        default=DEFAULT_PARALLELISM,
        help=f"attempts in flight at once (default {DEFAULT_PARALLELISM})",
    )
    pl.add_argument("--order", default="longest-first", choices=["tip-first", "oldest-first", "longest-first"])
    pl.add_argument("--first-ledger", type=number(int, at_least=1), default=1)
    pl.add_argument(
        "--last-ledger", type=number(int, at_least=0), default=0, help="the tip (default: the profile's highest ledger)"
    )
    pl.add_argument("--ledgers-per-range", type=number(int, at_least=64), default=16000)
    pl.add_argument("--overlap", type=number(int, at_least=0), default=320)
    pl.add_argument(
        "--what-if",
        type=number(float, above=0),
        nargs="+",
        default=[0.5, 1.0, 2.0],
        metavar="FACTOR",
        help="parallelism factors to compare (default 0.5 1 2)",
    )
    pl.set_defaults(func=_plan)
    ft = sub.add_parser(
        "fit-tiers",
        help="fit a tier ladder to a profile: the cuts and node shapes that make the next mission cheapest",
        description="Choose up to --max-tiers memory cuts and, for each, the catalog node shape that minimise the "
        "predicted cost of the next mission sized from the profile (docs/cost.md); print the chart values and a "
        "table: ladder, ranges per tier, cost, flat cost, ratio, predicted makespan.",
    )
    ft.add_argument("--profile", required=True, help="range_profile.parquet of an earlier mission (path or fsspec URL)")
    ft.add_argument(
        "--catalog", help="YAML/JSON: a list of shapes as the chart's `catalog` spells them (default: ours)"
    )
    ft.add_argument(
        "--parallelism",
        type=number(int, at_least=1),
        default=DEFAULT_PARALLELISM,
        help=f"slots for the predicted makespan (default {DEFAULT_PARALLELISM})",
    )
    ft.add_argument("--max-tiers", type=number(int, at_least=1), default=4, help="tiers in the ladder (default 4)")
    ft.add_argument("--cpu", type=number(float, above=0), default=1.0, help="CPU request per range pod (default 1)")
    ft.add_argument("--capacity-type", choices=["spot", "on-demand"], default="spot")
    ft.add_argument("--step-gib", type=number(float, above=0), default=0.5, help="the grid of cuts (default 0.5)")
    ft.add_argument(
        "--tolerance", type=number(float, at_least=0), default=0.03, help="makespan over its bound (default 0.03)"
    )
    ft.set_defaults(func=_fit_tiers)
    wl = sub.add_parser(
        "workload",
        help="write the profile of the seed-shaped workload model (for trying `plan` and the benchmarks)",
    )
    wl.add_argument("--out", required=True, help="where to write the range_profile.parquet")
    wl.add_argument("--ranges", type=number(int, at_least=1), default=4000)
    wl.add_argument("--seed", type=number(int), default=0)
    wl.set_defaults(func=_workload)
    pr = sub.add_parser("profile", help="rebuild a mission's profile and tier map from its attempt records")
    pr.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    pr.add_argument("--mission", required=True)
    pr.set_defaults(func=_profile)
    df = sub.add_parser(
        "diff",
        help="compare two missions' profiles by ledger band: peaks, time, memory requested, regressions",
        description="Compare mission B with mission A (both under --root) by ledger band: measured peaks and "
        "time (B/A), the memory each requested (the attempts that completed and those that OOMed), the "
        "ranges whose peak or seconds grew past --threshold, new OOMs, and the stellar-core each ran.",
    )
    df.add_argument("--root", required=True, help="storage root holding both missions (path or fsspec URL)")
    df.add_argument("a", metavar="A", help="the earlier mission's name")
    df.add_argument("b", metavar="B", help="the later mission's name")
    df.add_argument(
        "--band-ledgers",
        type=number(int, at_least=1),
        default=DEFAULT_BAND_LEDGERS,
        help=f"ledgers per band (default {DEFAULT_BAND_LEDGERS:,})",
    )
    df.add_argument(
        "--threshold",
        type=number(float, above=1),
        default=DEFAULT_THRESHOLD,
        help=f"a range whose peak or seconds grew past this many times regressed (default {DEFAULT_THRESHOLD:g})",
    )
    df.add_argument(
        "--memory-scale",
        type=number(float, above=0),
        default=1.0,
        help="memory figures are divided by this (the demo runs memory x 0.005: pass 0.005 for production GiB)",
    )
    df.add_argument("--out", help="also write the band table as Parquet here")
    df.set_defaults(func=_diff)
    return p


def run(argv: list[str] | None = None) -> int:
    """The command's exit code; for callers in the same process."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except ValueError as exc:  # bad input: one clear line, no traceback (L34)
        print(f"catchup-assets: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path that cannot be written or read: named, no traceback
        print(f"catchup-assets: error: {exc}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """The console script: run the command, then leave without the interpreter's teardown.

    pyarrow's native thread pool can abort that teardown ("terminate called
    without an active exception", SIGABRT; apache/arrow#34314), which turned
    about one finished demo in five into exit -6 here. By the time the command
    returns, its Dagster instance is closed and its files are written; stdout,
    stderr and logging are flushed below, so nothing is lost by skipping it.
    """
    code = run(argv)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
