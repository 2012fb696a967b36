"""`catchup-assets demo`: the arguments made `DemoSettings`, then the demo run (Dagster imported only once it runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from catchup_assets.core.errors import ConfigError


def command(args: argparse.Namespace) -> int:
    import warnings

    import dagster as dg

    # The assets use beta parameters (backfill_policy) on purpose: no warning about it on every demo.
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    from catchup_assets.cli.demo.run import run_demo
    from catchup_assets.cli.demo.settings import DemoSettings

    if Path(args.dir).exists() and not Path(args.dir).is_dir():
        raise ConfigError(f"--dir: {args.dir} exists and is not a directory")
    if args.repair:
        from catchup_assets.cli.demo.archive import repair

        return repair(Path(args.dir).resolve())
    settings = DemoSettings(
        directory=Path(args.dir).resolve(),
        ranges=args.ranges,
        parallelism=args.parallelism,
        speed=args.speed,
        disruption_rate=args.disruption_rate,
        seed=args.seed,
        fail_ranges=args.fail_ranges,
        metrics_port=args.metrics_port,
        console_port=args.console_port,
    )
    # -v shows the Dagster runs' own event log (run and step events, the dispatcher's status lines).
    return run_demo(settings, log_level="INFO" if args.verbose else "CRITICAL")
