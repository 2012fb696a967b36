"""`catchup-assets fit-tiers`: the tier ladder that makes the next mission sized from a profile cheapest."""

from __future__ import annotations

import argparse

from catchup_assets.cli.plan import load_profile, print_cost
from catchup_assets.core.text import records_table


def command(args: argparse.Namespace) -> int:
    import yaml

    from catchup_assets.core.forecast.fit import (
        FitSettings,
        chart_values,
        comparison_rows,
        evaluate,
        fit_ladder,
        profile_ranges,
    )
    from catchup_assets.core.size.sizing import Placement
    from catchup_assets.core.units import GiB
    from catchup_assets.defs.resources.chart_keys import catalog_from_values

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
