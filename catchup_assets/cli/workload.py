"""`catchup-assets workload`: the profile of the seed-shaped workload model, written as Parquet."""

from __future__ import annotations

import argparse
from pathlib import Path

from catchup_assets.core.errors import ConfigError


def command(args: argparse.Namespace) -> int:
    from catchup_assets.sim.workload import Workload
    from catchup_assets.store.io import write_parquet

    if Path(args.out).is_dir():
        raise ConfigError(
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
