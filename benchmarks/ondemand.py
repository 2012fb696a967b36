"""What moving reclaimed ranges to on-demand costs, and what it saves in makespan (issue 21 item 6).

Each row is a whole mission of the seed-shaped workload model replayed by the
real dispatcher in simulated time (kubesim/replay.py), longest first, sized
from the model's own profile and priced by the cost model (default catalog:
spot ASSUMED at 40% of on-demand). Besides the model's own draw (~7% of ranges
reclaimed once), spot reclaims every attempt at `--rates` per hour it runs on
spot (exponential, per attempt); an attempt on on-demand is never reclaimed.
A reclaimed attempt resumes from its range's volume (L16), so what a reclaim
costs is the rework of its last leg, the resume, and the tail it adds to a
long range. Rows: the fallback off (`reclaims_before_on_demand` 0) and after
1, 3 (the default) and 5 reclaims.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
from pathlib import Path

from benchmarks.harness.report import write_result
from catchup_assets.core.size.sizing import Placement
from catchup_assets.sim.workload import Workload
from kubesim.replay import ReplayReport, replay

THRESHOLDS = (0, 1, 3, 5)
HEADER = ["on-demand fallback", "makespan h", "makespan / bound", "makespan saved h", "cost USD", "extra USD",
          "spot / on-demand USD", "of it fallback USD", "reclaims", "attempts", "condemned", "wall s"]  # fmt: skip


def row(k: int, r: ReplayReport, off: ReplayReport) -> list[object]:
    return [
        "off" if k == 0 else f"after {k}",
        f"{r.makespan_seconds / 3600:.2f}",
        f"{r.ratio:.4f}",
        f"{(off.makespan_seconds - r.makespan_seconds) / 3600:+.2f}",
        f"{r.cost.dollars:,.2f}",
        f"{r.cost.dollars - off.cost.dollars:+,.2f}",
        f"{r.cost.spot_dollars:,.2f} / {r.cost.on_demand_dollars:,.2f}",
        f"{r.cost.fallback_dollars:,.2f}",
        r.retries.get("disrupted", 0),
        r.attempts,
        r.condemned,
        f"{r.wall_seconds:.0f}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ondemand", description=__doc__)
    p.add_argument("--ranges", type=int, default=1000)
    p.add_argument("--slots", type=int, default=273, help="default: 1092 x ranges / 4000, the production ratio")
    p.add_argument("--rates", type=float, nargs="+", default=[0.2, 1.0], help="spot reclaims per spot-hour")
    p.add_argument("--start-delay", type=float, default=120.0, help="node launch + image pull before a pod runs, s")
    p.add_argument("--seed", type=int, default=0, help="the workload model's seed")
    p.add_argument("--mission-seed", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.smoke:
        args.ranges, args.slots, args.rates = 60, 15, [1.0]
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)  # Z4 stall alerts are expected here
    started = time.perf_counter()
    w = Workload(ranges=args.ranges, seed=args.seed)
    base = Placement()
    tables = []
    for rate in args.rates:
        reports = []
        for k in THRESHOLDS:
            sizing = dataclasses.replace(base.sizing, reclaims_before_on_demand=k)
            rep = replay(w, order="longest-first", slots=args.slots, mission_seed=args.mission_seed,
                         placement=dataclasses.replace(base, sizing=sizing), reclaims_per_spot_hour=rate,
                         start_delay_seconds=args.start_delay)  # fmt: skip
            reports.append((k, rep))
            print(f"  rate {rate:g}, reclaims_before_on_demand {k} done", file=sys.stderr)
        off = reports[0][1]
        caption = f"Replayed missions at {args.slots} slots, spot reclaims at {rate:g} per spot-hour"
        tables.append((caption, HEADER, [row(k, r, off) for k, r in reports]))
    costs = list(w)
    notes = (
        f"Workload: {len(costs)} ranges (seed {args.seed}), {sum(c.seconds for c in costs) / 3600:,.0f} h of clean "
        f"work, longest {max(c.seconds for c in costs) / 3600:.2f} h; {args.slots} slots; mission draw "
        f"{args.mission_seed}; spot reclaims at the rate above per spot-hour of each attempt, on top of the "
        f"model's own (~7% of ranges once); every attempt starts {args.start_delay:g} s after its submit (node "
        f"launch, image pull) and a resumed one spends 60 s reopening its database. Prices: the default catalog "
        f"({base.catalog.source}). Whole benchmark {time.perf_counter() - started:.0f} s."
    )
    write_result("ondemand", "The on-demand fallback for reclaimed ranges (issue 21)", tables, notes,
                 out_dir=args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
