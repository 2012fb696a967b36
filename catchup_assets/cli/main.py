"""`catchup-assets ...`: the command line. Logging is configured here and only here (L36)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from importlib.metadata import version

from catchup_assets.cli import cleanup, console, control, diff, fit_tiers, logs, plan, profile, status, verify, workload
from catchup_assets.cli.demo import command as demo
from catchup_assets.core.aggregate.band_diff import DEFAULT_BAND_LEDGERS, DEFAULT_THRESHOLD
from catchup_assets.core.forecast.fit import NAMES as TIER_NAMES
from catchup_assets.core.forecast.spread import DEFAULT_MEMORY_SIGMA, DEFAULT_SIGMA
from catchup_assets.core.plan.config import DEFAULT_PARALLELISM
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS, LENGTHS, MAX_LEDGER, MAX_RANGES


def number(
    kind: type, above: float | None = None, at_least: float | None = None, at_most: float | None = None, of: int = 0
):
    """An argparse type: `kind`, finite, within the bounds, a multiple of `of`; argparse names the flag (L34)."""

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
        if at_most is not None and not value <= at_most:
            raise argparse.ArgumentTypeError(f"{text!r} must be <= {at_most}")
        if of and value % of:
            raise argparse.ArgumentTypeError(f"{text!r} must be a multiple of {of}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="catchup-assets", description=__doc__)
    # The installed distribution's version, so a bug report names the build that ran, not the source tree's.
    p.add_argument("--version", action="version", version=f"%(prog)s {version('catchup-assets')}")
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
        "--ranges",
        type=number(int, at_least=1, at_most=MAX_RANGES),
        default=48,
        help="ranges the history is cut into (default 48)",
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
    d.add_argument(
        "--fail-ranges",
        type=number(int, at_least=0),
        default=0,
        metavar="N",
        help="corrupt the simulated archive at N ranges: stellar-core fails them and both missions condemn them, "
        "to try the failure walk (docs/tutorial.md)",
    )
    d.add_argument(
        "--metrics-port",
        type=number(int, at_least=0, at_most=65535),
        default=0,
        metavar="PORT",
        help="serve each mission's Prometheus /metrics on this port of 127.0.0.1 while it runs (default 0: off)",
    )
    d.add_argument(
        "--console-port",
        type=number(int, at_least=0, at_most=65535),
        default=0,
        metavar="PORT",
        help="serve the mission console on this port of 127.0.0.1 while the demo runs (default 0: a free one)",
    )
    d.add_argument(
        "--repair",
        action="store_true",
        help="repair the archive of the demo in --dir (undo --fail-ranges) and exit; then backfill from the UI",
    )
    d.set_defaults(func=demo.command)
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
    pl.add_argument(
        "--lengths",
        default="auto",
        choices=LENGTHS,
        help="auto: the profile cut when its expected makespan is at least 5%% shorter at most 1.10x the grid's "
        "node-hours, else the grid, printing which and why with both forecasts; uniform: the --ledgers-per-range "
        "grid; profile: the grid cut and merged to the profile for --parallelism slots, its what-if beside the "
        "uniform grid's (default auto)",
    )
    pl.add_argument("--first-ledger", type=number(int, at_least=1, at_most=MAX_LEDGER), default=1)
    pl.add_argument(
        "--last-ledger",
        type=number(int, at_least=0, at_most=MAX_LEDGER),
        default=0,
        help="the tip (default: the profile's highest ledger)",
    )
    pl.add_argument(
        "--ledgers-per-range", type=number(int, at_least=CHECKPOINT_LEDGERS, of=CHECKPOINT_LEDGERS), default=16000
    )
    pl.add_argument("--overlap", type=number(int, at_least=0), default=320)
    pl.add_argument(
        "--what-if",
        type=number(float, above=0),
        nargs="+",
        default=[0.5, 1.0, 2.0],
        metavar="FACTOR",
        help="parallelism factors to compare (default 0.5 1 2)",
    )
    pl.add_argument(
        "--sigma",
        type=number(float, at_least=0),
        default=None,
        help="how far a range's seconds wander between missions (lognormal sigma) for the expected makespan "
        f"and its p10-p90 band (default {DEFAULT_SIGMA})",
    )
    pl.add_argument(
        "--memory-sigma",
        type=number(float, at_least=0),
        default=DEFAULT_MEMORY_SIGMA,
        help=f"the same for peaks: a drawn peak above its request OOMs once (default {DEFAULT_MEMORY_SIGMA})",
    )
    pl.set_defaults(func=plan.command)
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
    ft.add_argument(
        "--max-tiers",
        type=number(int, at_least=1, at_most=len(TIER_NAMES)),
        default=4,
        help="tiers in the ladder (default 4)",
    )
    ft.add_argument("--cpu", type=number(float, above=0), default=1.0, help="CPU request per range pod (default 1)")
    ft.add_argument("--capacity-type", choices=["spot", "on-demand"], default="spot")
    # A MiB at least: the grid is counted in bytes, and a finer one only costs time.
    ft.add_argument(
        "--step-gib", type=number(float, at_least=1 / 1024), default=0.5, help="the grid of cuts (default 0.5)"
    )
    ft.add_argument(
        "--tolerance", type=number(float, at_least=0), default=0.03, help="makespan over its bound (default 0.03)"
    )
    ft.set_defaults(func=fit_tiers.command)
    wl = sub.add_parser(
        "workload",
        help="write the profile of the seed-shaped workload model (for trying `plan` and the benchmarks)",
    )
    wl.add_argument("--out", required=True, help="where to write the range_profile.parquet")
    wl.add_argument("--ranges", type=number(int, at_least=1, at_most=MAX_RANGES), default=4000)
    wl.add_argument("--seed", type=number(int), default=0)
    wl.set_defaults(func=workload.command)
    pr = sub.add_parser("profile", help="rebuild a mission's profile and tier map from its attempt records")
    pr.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    pr.add_argument("--mission", required=True)
    pr.set_defaults(func=profile.command)
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
    df.set_defaults(func=diff.command)
    cl = sub.add_parser(
        "cleanup",
        help="delete an abandoned mission's leftover Jobs and PVCs (locally, its work directory's range data)",
        description="Delete the Jobs and PVCs the mission left on its backend, found by the mission's label "
        "(locally its attempt and data directories), keeping the volumes of ranges that can resume unless --all; "
        "say how many GiB each choice frees first. Attempts no dispatcher recorded are recorded first. Refused, "
        "unless --force, while a run is live or can retry (asked of DAGSTER_HOME's instance; without it: unchecked).",
    )
    cl.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    cl.add_argument("--mission", required=True)
    cl.add_argument("--settings", help="the deployment's catchup.json (backend, kubernetes, work_dir); default: local")
    cl.add_argument("--work-dir", help="local backend: its work directory (default: beside the storage root)")
    cl.add_argument("--all", action="store_true", help="also delete the volumes of ranges that can resume")
    cl.add_argument("--force", action="store_true", help="clean up even while a run is live or unchecked")
    cl.add_argument("--dry-run", action="store_true", help="say what would be deleted and freed; delete nothing")
    cl.add_argument(
        "--wait",
        type=number(float, at_least=0),
        default=120.0,
        metavar="SECONDS",
        help="wait this long for what was deleted to go (a volume goes once its pods have ended); 0: do not wait",
    )
    cl.set_defaults(func=cleanup.command)
    control.add_parser(sub, number)  # its cap is the mission's record's (mission.json), never a default here
    status.add_parser(sub, number)
    logs.add_parser(sub, number)
    verify.add_parser(sub, number)
    console.add_parser(sub, number)
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
