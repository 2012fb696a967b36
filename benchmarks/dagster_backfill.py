"""Through Dagster: one backfill (a single run) of 4000 partitions, from launch to 2000 attempts live.

The backfill goes the way the UI and the daemons send it, on a temporary
instance with the project's instance config (dagster.yaml; `--storage postgres`:
the Helm chart's, dagster-postgres on a throwaway server): the UI's GraphQL
mutation `launchPartitionBackfill` over an out-of-process code location
(benchmarks/harness/dagster_location.py: the project's definitions, attempts on a
`VirtualBackend` over the seed-shaped `Workload`), then one backfill daemon
iteration (it creates the run: `BackfillPolicy.single_run()`), one run queue
daemon iteration (the instance's run launcher asks the code server to start
the run worker process; the default executor starts the step in its own
process), and the step's dispatcher submits attempts.

Measured: the time from sending the mutation until the backend holds `live`
attempts (target: 2000 within 30 s, and at most 0.3x the `--planned-events
per-partition` run back to back: issue 26), split by milestone; then, once the
run has driven every range to done (the virtual clock runs `speed` times faster
once `live` is reached), the run's event log per range and the run's wall time
per range against the same mission through `run_mission` without Dagster.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq

from benchmarks.harness.backfill_baseline import measure_direct
from benchmarks.harness.backfill_drive import measure_dagster, warm_bytecode
from benchmarks.harness.backfill_process import OtherCpu, stop_leftovers
from benchmarks.harness.backfill_report import report
from benchmarks.harness.report import write_result
from catchup_assets.defs.mission.range_events import SUBSET_ENV
from catchup_assets.sim.workload import Workload


def main(argv: list[str] | None = None) -> int:
    bench(argv)
    return 0


def bench(argv: list[str] | None = None) -> dict:
    """Run the benchmark, write its result file; returns what was measured (for the smoke test)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.dagster_backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--ranges", type=int, default=4000, help="partitions in the backfill (the workload's ranges)")
    p.add_argument("--parallelism", type=int, default=2000, help="the mission's parallelism")
    p.add_argument("--live", type=int, default=None, help="attempts live to time to (default: the parallelism)")
    p.add_argument("--speed", type=float, default=2000.0, help="virtual seconds per real second once `live` is reached")
    p.add_argument("--poll", type=float, default=0.5, help="the dispatcher's poll, real seconds")
    p.add_argument("--order", default="longest-first", choices=["longest-first", "tip-first"])
    p.add_argument("--timeout", type=float, default=900.0, help="for each wait on the run")
    p.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the backfill daemon iteration, and the step process from resource setup to `live`",
    )
    p.add_argument("--profile-lines", type=int, default=25)
    p.add_argument(
        "--condemn",
        type=int,
        default=8,
        help="ranges whose every attempt fails (exit 1, a broken archive): condemned, so the run fails and its "
        "marking shows them FAILED",
    )
    p.add_argument("--skip-direct", action="store_true", help="skip the run_mission baseline")
    p.add_argument(
        "--bytecode",
        choices=["cached", "as-is"],
        default="cached",
        help="cached: the Dagster processes keep compiled bytecode under $TMPDIR/catchup-bench-pycache "
        "(warmed before the timing), as an image with compiled packages does; as-is: this "
        "environment's setting (PYTHONDONTWRITEBYTECODE compiles every import of every process)",
    )
    p.add_argument(
        "--planned-events",
        choices=["per-partition", "subset"],
        default="subset",
        help=f"subset: as the chart and the demo run, {SUBSET_ENV}=true: one "
        "ASSET_MATERIALIZATION_PLANNED event per run, and range_catchup writes each started range's "
        "(defs/mission/range_events.py); per-partition: Dagster's default, one per partition as the run is created",
    )
    p.add_argument(
        "--storage",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the instance's run, event log and schedule storage: the embedded default's SQLite, or the Helm "
        "chart's dagster-postgres (a throwaway local server unless --postgres-url)",
    )
    p.add_argument(
        "--postgres-url",
        default=None,
        help="with --storage postgres: an existing empty database, postgresql+psycopg2://user:password@host:port/db",
    )
    p.add_argument("--smoke", action="store_true", help="tiny sizes (40 partitions, 20 live, 20000x), for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    p.add_argument("--keep", type=Path, default=None, help="keep the instance and storage under this directory")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):
        p.set_defaults(ranges=40, parallelism=20, speed=20_000.0, condemn=2)  # an explicit option still wins
    args = p.parse_args(argv)
    args.live = args.live or args.parallelism
    if not 1 <= args.live <= min(args.parallelism, args.ranges):
        p.error("--live must be between 1 and min(parallelism, ranges)")
    if not 0 <= args.condemn < args.ranges:
        p.error("--condemn must be between 0 and ranges - 1 (some range must materialize)")

    started = time.perf_counter()
    other_cpu = OtherCpu()
    other_cpu.sample()
    other_cpu.start()
    load_before = os.getloadavg()
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    tmp = Path(tempfile.mkdtemp(prefix="dagster-backfill-"))
    try:
        workload = Workload(ranges=args.ranges)
        buf = io.BytesIO()
        pq.write_table(workload.profile_table(), buf)
        previous = tmp / "previous_range_profile.parquet"
        previous.write_bytes(buf.getvalue())
        prev = str(previous) if args.order == "longest-first" else ""
        warm_s = 0.0 if args.smoke else warm_bytecode(args)  # smoke: the cache as it stands
        d = measure_dagster(args, tmp, prev)
        print(f"  dagster run {d['run_status']}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        leftovers = stop_leftovers(before)
        load_mid = os.getloadavg()
        direct = None if args.skip_direct else measure_direct(args, tmp, prev)
        load_after = os.getloadavg()
    finally:
        stop_leftovers(before)
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.perf_counter() - started
    others = other_cpu.stop()
    result = report(args, d, direct, leftovers, (load_before, load_mid, load_after), total, warm_s, others)
    path = write_result(
        "dagster_backfill",
        "Through Dagster: one backfill of a mission, launch to attempts live"
        + (" (Postgres storage)" if args.storage == "postgres" else ""),
        result["tables"],
        result["notes"],
        out_dir=args.out,
        # The SQLite figures stay beside the Postgres ones.
        file_stem="dagster_backfill" if args.storage == "sqlite" else "dagster_backfill_postgres",
    )
    return {"dagster": d, "direct": direct, "leftovers": leftovers, "live_s": result["live_s"], "path": path}


if __name__ == "__main__":
    raise SystemExit(main())
