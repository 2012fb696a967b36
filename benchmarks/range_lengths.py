"""Ranges cut to the profile against the uniform grid, replayed by the real dispatcher (issue 25 item 5).

Each cell is one whole mission of the workload model replayed on the virtual backend in
simulated time (kubesim/replay.py): planned by `prepare` with `lengths` uniform or profile for
its slots, sized from the model's profile, every range (a cut piece and a merged run too) run at
the cost the model gives its ledgers (`Workload.cost_of`: the setup of its first grid range, then
its ledgers' replay). The setup at the tip is an assumption (sim/model.py), so each is run at 10,
30 and 60 minutes.

Targets at 2096 slots and 30 min of setup (issue 25's Done-when): the cut's makespan at most
1.1 x max(work including the added setups / slots, the longest piece no cut can shorten) and at
most 0.6 x uniform's; node-hours at most 1.10 x uniform's; no more OOM retries. At 1092 slots, no
slower than uniform.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.harness.report import write_result
from catchup_assets.core.forecast.ledger_cost import LedgerCost
from catchup_assets.core.plan.pieces import uncuttable_seconds
from catchup_assets.core.plan.ranges import plan_ranges
from catchup_assets.core.size.measures import measures_from_rows
from catchup_assets.sim.workload import Workload, WorkloadShape
from kubesim.replay import ReplayReport, replay

SLOTS = (1092, 2096)
TIP_SETUP_MINUTES = (10, 30, 60)


def uncuttable_hours(w: Workload) -> float:
    """The longest piece no cut shortens: a grid range's setup and its costliest checkpoint."""
    cost = LedgerCost.from_measures(measures_from_rows(w.profile_table().to_pylist()))
    return uncuttable_seconds(cost, plan_ranges(w.span)) / 3600


def row(minutes: int, lengths: str, r: ReplayReport, uniform: ReplayReport, floor_h: float) -> list[object]:
    hours = r.makespan_seconds / 3600
    bound = max(r.work_hours / r.slots, floor_h)
    return [
        minutes,
        r.slots,
        lengths,
        r.ranges,
        f"{hours:.2f}",
        f"{hours / (r.work_hours / r.slots):.3f}",
        f"{hours / bound:.3f}",
        f"{r.makespan_seconds / uniform.makespan_seconds:.3f}",
        f"{r.node_hours:,.0f}",
        f"{r.node_hours / uniform.node_hours:.3f}",
        f"{r.cost.dollars:,.2f}",
        f"{r.cost.dollars / uniform.cost.dollars:.3f}",
        r.retries.get("oom", 0),
        r.retries.get("disrupted", 0),
        f"{r.wall_seconds:.0f}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.range_lengths", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--slots", type=int, nargs="+", default=list(SLOTS))
    p.add_argument("--setup-minutes", type=int, nargs="+", default=list(TIP_SETUP_MINUTES))
    p.add_argument("--mission-seed", type=int, default=1, help="which reclaims and runtime jitter the mission draws")
    p.add_argument("--poll-seconds", type=float, default=10.0)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.smoke:
        args.ranges, args.slots, args.setup_minutes = 80, [10, 20], [30]
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)  # Z4 stall alerts are expected here
    started = time.perf_counter()
    rows = []
    for minutes in args.setup_minutes:
        shape = replace(WorkloadShape(), setup_seconds=(WorkloadShape().setup_seconds[0], minutes * 60.0))
        w = Workload(ranges=args.ranges, shape=shape)
        floor_h = uncuttable_hours(w)
        for slots in args.slots:
            runs = {
                lengths: replay(
                    w, slots=slots, mission_seed=args.mission_seed, poll_seconds=args.poll_seconds, lengths=lengths
                )
                for lengths in ("uniform", "profile")
            }
            for lengths, r in runs.items():
                rows.append(row(minutes, lengths, r, runs["uniform"], floor_h))
            print(f"  {minutes} min setup, {slots} slots done", file=sys.stderr)
    header = [
        "setup at tip min",
        "slots",
        "lengths",
        "ranges",
        "makespan h",
        "makespan / (work / slots)",
        "makespan / bound",
        "makespan / uniform",
        "node-hours",
        "node-hours / uniform",
        "cost USD",
        "cost / uniform",
        "OOM retries",
        "reclaims",
        "wall s",
    ]
    notes = (
        f"Workload: {args.ranges} ranges of 16000 ledgers (seed 0), setup at genesis "
        f"{WorkloadShape().setup_seconds[0]:.0f} s growing to the tip's; mission draw {args.mission_seed} "
        f"(reclaims on ~7% of ranges, +-5% runtime jitter against the profile); poll {args.poll_seconds:g} s; "
        f"whole benchmark {time.perf_counter() - started:.0f} s wall.\n\n"
        "Work is this mission's clean range seconds (each cut piece pays its setup again; a merged run pays "
        "one); bound = max(work / slots, the longest piece no cut can shorten: a grid range's setup and its "
        "costliest checkpoint). Node-hours and dollars count every attempt, retries included, at its pod's "
        "share of its node (prices as in benchmarks.cost). Node start-up is not modelled."
    )
    write_result(
        "range_lengths",
        "Ranges cut to the profile against the uniform grid",
        [("Replayed missions", header, rows)],
        notes,
        out_dir=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
