"""The KPIs of sizing (issue 23) of the workload model's mission, unprofiled and profiled, beside Autopilot's.

Each row is a whole mission of the workload model (4000 ranges) replayed by the real dispatcher
in simulated time (kubesim/replay.py), its attempt records kept on an in-memory storage root and
read back with RecordStore, then measured by `core/aggregate/kpis.py` (docs/cost.md, "The KPIs of
sizing") at the default catalog's prices. No profile: the catch-all tier, tip first (a first
mission); profiled: the model's own profile, longest first (the default).
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from pathlib import Path

from benchmarks.harness.report import write_result
from catchup_assets.core.aggregate.kpis import AUTOPILOT, percent, sizing_kpis
from catchup_assets.core.size.sizing import Placement
from catchup_assets.sim.workload import Workload
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kubesim.replay import replay

HEADER = ["mission", "slack", "median range", "slack by tier", "ranges hit by OOM", "first-attempt ok", "cost eff."]


def kpi_row(name: str, workload: Workload, slots: int, profiled: bool) -> list[object]:
    root = f"memory://kpis-{uuid.uuid4().hex}"
    order = "longest-first" if profiled else "tip-first"
    report = replay(workload, order=order, slots=slots, profiled=profiled, storage_root=root)
    records, done = RecordStore(Store(root), report.mission).load()
    k = sizing_kpis([r for ident, r in records.items() if ident in done], Placement())
    tiers = ", ".join(f"{t} {percent(s)}" for t, s in k.slack_by_tier.items())
    return [name, percent(k.memory_slack), percent(k.median_range_slack), tiers] + [
        percent(k.oom_hit_share),
        percent(k.first_attempt_success),
        percent(k.cost_efficiency),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.kpis", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--slots", type=int, default=1092)
    p.add_argument("--seed", type=int, default=0, help="the workload model's seed")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    ranges, slots = (60, 16) if args.smoke else (args.ranges, args.slots)
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)  # thousands of retry lines
    w = Workload(ranges=ranges, seed=args.seed)
    rows = [
        kpi_row(f"no profile (catch-all, tip-first, {ranges} ranges)", w, slots, profiled=False),
        kpi_row(f"profiled (longest-first, {ranges} ranges)", w, slots, profiled=True),
    ]
    caption = f"workload model, {ranges} ranges, {slots} slots"
    write_result("kpis", "The KPIs of sizing on the workload model", [(caption, HEADER, rows)], AUTOPILOT, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
