"""Makespan against the lower bound, by dispatch order and slot count, on the seed-shaped model.

Each cell is one whole mission of the workload model (4000 ranges) replayed by
the real dispatcher in simulated time (kubesim/replay.py), sized
from the model's own profile. Target: makespan <= 1.03 x lower bound with
`longest-first` at 1092 slots.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from benchmarks.harness.report import write_result
from catchup_assets.sim.workload import Workload
from kubesim.replay import ReplayReport, replay

ORDERS = ("tip-first", "oldest-first", "longest-first")
SLOTS = (400, 800, 1092, 2096)


def row(r: ReplayReport, profiled: bool = True) -> list[object]:
    util = "n/a" if r.utilisation_while_queued is None else f"{r.utilisation_while_queued:.4f}"
    retries = ", ".join(f"{k} {v}" for k, v in r.retries.items()) or "none"
    return [
        r.order + ("" if profiled else " (no profile)"),
        r.slots,
        f"{r.makespan_seconds / 3600:.2f}",
        f"{r.lower_bound_seconds / 3600:.2f}",
        f"{r.ratio:.4f}",
        util,
        retries,
        f"{r.node_hours:,.0f}",
        r.passes,
        f"{r.wall_seconds:.1f}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.makespan", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--slots", type=int, nargs="+", default=list(SLOTS))
    p.add_argument("--seed", type=int, default=0, help="the workload model's seed")
    p.add_argument("--mission-seed", type=int, default=1, help="which reclaims and runtime jitter the mission draws")
    p.add_argument("--poll-seconds", type=float, default=10.0)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.smoke:
        args.ranges, args.slots = 60, [6, 12]
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)  # Z4 stall alerts are expected here
    w = Workload(ranges=args.ranges, seed=args.seed)
    started = time.perf_counter()
    rows = []
    for slots in args.slots:
        for order in ORDERS:
            rows.append(
                row(replay(w, order=order, slots=slots, mission_seed=args.mission_seed, poll_seconds=args.poll_seconds))
            )
            print(f"  {order} at {slots} slots done", file=sys.stderr)
    cold_slots = 1092 if 1092 in args.slots else args.slots[0]
    rows.append(
        row(
            replay(
                w,
                order="tip-first",
                slots=cold_slots,
                profiled=False,
                mission_seed=args.mission_seed,
                poll_seconds=args.poll_seconds,
            ),
            profiled=False,
        )
    )
    header = [
        "order",
        "slots",
        "makespan h",
        "lower bound h",
        "makespan / bound",
        "slot use while queued",
        "retries",
        "node-hours",
        "passes",
        "wall s",
    ]
    costs = list(w)
    notes = (
        f"Workload: {len(costs)} ranges of {w.ledgers_per_range} ledgers (seed {args.seed}), "
        f"{sum(c.seconds for c in costs) / 3600:,.0f} h of clean work, "
        f"longest {max(c.seconds for c in costs) / 3600:.2f} h; "
        f"mission draw {args.mission_seed} (reclaims and +-5% runtime jitter against the profile); "
        f"poll {args.poll_seconds:g} s; whole benchmark {time.perf_counter() - started:.0f} s wall.\n\n"
        "The lower bound is max(longest range, total work / slots) over this mission's clean runtimes, so "
        "rework from reclaims and OOMs shows as makespan above it. Slot use is the share of slot-time held by "
        "attempts from launch until the last range started. Node-hours count run time over pods per node; "
        "node start-up is not modelled."
    )
    write_result(
        "makespan",
        "Makespan / lower bound by dispatch order",
        [("Replayed missions", header, rows)],
        notes,
        out_dir=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
