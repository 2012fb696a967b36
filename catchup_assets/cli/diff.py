"""`catchup-assets diff`: two missions' profiles by ledger band, printed, and with --out written."""

from __future__ import annotations

import argparse


def command(args: argparse.Namespace) -> int:
    import textwrap

    from catchup_assets.core.aggregate.diff_display import display_rows, legend, regression_rows, summary_lines
    from catchup_assets.core.text import text_table
    from catchup_assets.mission.diff import diff_missions

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
        from catchup_assets.store.tables import band_table

        write_parquet(band_table(diff), args.out)
        print(f"\nband table -> {args.out}")
    return 0
