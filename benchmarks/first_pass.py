"""The first pass at 2000 slots: every submit one at a time, against a bounded pool (issue 26 item 3).

The real Dispatcher and KubernetesBackend against the simulated API server in a
child process (`k8s_mission`), one mission per `submit_concurrency`. The first
pass submits every slot's attempt: each claim, its durable record (written and
fsync'd) and two creates (PVC, Job). Reported: that pass's wall time and the
submits it made per second. No target of its own: the launch target is
`dagster_backfill`'s (2000 attempts live), whose step runs this pass.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.harness.k8s_mission import K8sMission, run_k8s_mission
from benchmarks.harness.report import write_result


def main(argv: list[str] | None = None) -> list[tuple[int, float, int]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.first_pass", description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the benchmark still runs")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    n = 6 if args.smoke else args.in_flight
    t0, rows = time.perf_counter(), []
    for c in args.concurrency:
        # Long attempts: nothing finishes during the first pass, and one pass after it ends the run's interest.
        run = run_k8s_mission(K8sMission(n, ranges_per_slot=1.0, submit_concurrency=c, peak_flush_seconds=float("inf")))
        first = run.meter.passes[0]
        rows.append((c, first.wall, first.submitted))
        print(f"submit_concurrency {c}: first pass {first.wall:.1f} s, {first.submitted} submits", flush=True)
    base = rows[0][1]
    table = [
        [c, n, submitted, round(wall, 2), round(submitted / wall, 1), round(wall / base, 3)]
        for c, wall, submitted in rows
    ]
    notes = (
        f"Each row is one mission of {n} ranges at {n} slots (its whole first pass submits), the simulated API "
        "server in a child process on the same 2 cores, so a request's round trip is loopback: on a real "
        "cluster each create also waits for the network and etcd, which the pool overlaps too. The record of "
        "each attempt is written and fsync'd before its Job is created, in either mode. "
        f"Wall time of the whole benchmark: {time.perf_counter() - t0:.0f} s."
    )
    write_result(
        "first_pass",
        "The first pass's submits, serial and through the pool",
        [("First pass", ["submit_concurrency", "slots", "submits", "wall s", "submits per s", "wall / serial"], table)],
        notes,
        args.out,
    )
    return rows


if __name__ == "__main__":
    main()
