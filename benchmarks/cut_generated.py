"""`lengths: auto` on seeded profiles the workload model does not make (issue 37 item 3).

Each row is one generated profile (benchmarks/harness/generated_profile.py: a heavy
band at a random place, setups of 5-60 min, a runtime spread of 0.05-0.3) of 4000
grid ranges, planned as the planner plans it: `profile_cut` at the mission's slots
compared under the profile's spread, then `choose` (mission/plan.py) forecasting
the grid and the cut under that spread and taking one. Nothing is replayed: the
figures are the plan's own (exact list schedule, longest first, at the profile's
seconds), and the expected makespans under the spread beside them.

Targets at 2096 slots (issue 37's Done-when): the chosen plan's makespan at most
0.65 x the grid's in the median, at most 1.12 x its own bound at every profile, and
at most 1.10 x the grid's node-hours at every profile. The bound is max(work with
the added setups / slots, the longest piece no cut can shorten); the grid's own is
max(work / slots, its longest range).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.generated_profile import GeneratedShape, generated_shape, profile_table, span
from benchmarks.harness.report import write_result
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.cut import profile_cut
from catchup_assets.mission.plan import choose
from catchup_assets.store.io import write_parquet
from catchup_assets.store.profiles import load_previous_profile

SEEDS = 20
SLOTS = 2096
TARGETS = {"median / grid": 0.65, "worst / bound": 1.12, "worst node-hours / grid": 1.10}


def plan_one(shape: GeneratedShape, ranges: int, slots: int, folder: Path) -> list[object]:
    path = str(folder / f"generated-{shape.seed}.parquet")
    write_parquet(profile_table(shape, ranges), path)
    previous = load_previous_profile(path)
    cfg = MissionConfig(
        mission="generated",
        span=span(ranges),
        storage_root="memory://catchup-assets-bench",
        parallelism=slots,
        previous_profile=path,
    )
    started = time.perf_counter()
    measures = previous.index.measures()
    cut = profile_cut(measures, cfg.span, slots, shape.sigma, cfg.cut_node_hours_cap, cfg.placement)
    choice = choose(cfg, previous, cut, shape.sigma)
    took = time.perf_counter() - started
    grid_h = cut.uniform_makespan_seconds / 3600
    if choice.lengths == "profile":
        hours, bound, nh = cut.makespan_seconds / 3600, cut.bound_seconds / 3600, choice.node_hours_ratio
        expected = choice.cut.expected_seconds / 3600
    else:
        grid_secs = max(cut.uniform_work_seconds / slots, cut.uniform_makespan_seconds)  # the tip range, or work
        hours, bound, nh = grid_h, grid_secs / 3600, 1.0
        expected = choice.grid.expected_seconds / 3600
    low, high = shape.setup_minutes
    return [
        shape.seed,
        shape.band_ledgers(ranges),
        f"{low:.0f}-{high:.0f}",
        f"{shape.sigma:.2f}",
        f"{grid_h:.2f}",
        choice.lengths,
        f"{hours:.2f}",
        f"{bound:.2f}",
        f"{hours / bound:.4f}",  # 4 digits: 1.1201 is past 1.12
        f"{hours / grid_h:.3f}",
        f"{nh:.3f}",
        f"{choice.grid.expected_seconds / 3600:.2f}",
        f"{expected:.2f}",
        f"{took:.0f}",
    ]


HEADER = [
    "seed",
    "band (ledgers)",
    "setup min (genesis-tip)",
    "sigma",
    "grid h",
    "chosen",
    "its h",
    "its bound h",
    "/ bound",
    "/ grid",
    "node-hours / grid",
    "grid expected h",
    "chosen expected h",
    "plan s",
]


def summary(rows: list[list[object]]) -> list[list[object]]:
    ratio = [float(r[9]) for r in rows]
    bound = [float(r[8]) for r in rows]
    nh = [float(r[10]) for r in rows]
    got = {"median / grid": statistics.median(ratio), "worst / bound": max(bound), "worst node-hours / grid": max(nh)}
    rows = [[k, f"<= {TARGETS[k]:g}", f"{v:.4f}", "yes" if v <= TARGETS[k] else "no"] for k, v in got.items()]
    target = TARGETS["worst / bound"]
    within = sum(1 for b in bound if b <= target)
    met = "yes" if within == len(bound) else "no"
    rows.append([f"profiles within {target:g} x their bound", str(len(bound)), str(within), met])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cut_generated", description=__doc__)
    p.add_argument("--seeds", type=int, default=SEEDS, help="profiles 1..N")
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--slots", type=int, default=SLOTS)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.smoke:
        args.seeds, args.ranges, args.slots = 2, 120, 60
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(1, args.seeds + 1):
            rows.append(plan_one(generated_shape(seed), args.ranges, args.slots, Path(folder)))
            print(f"  profile {seed}: {rows[-1][5]} {rows[-1][8]} of its bound", file=sys.stderr)
    notes = (
        f"{args.seeds} generated profiles of {args.ranges} ranges of 16000 ledgers at {args.slots} slots; "
        f"whole benchmark {time.perf_counter() - started:.0f} s wall. h: the plan's makespan at the profile's "
        "seconds (list schedule, longest first); expected h: the mean over the choice's seeded draws under the "
        "profile's sigma. Node-hours as the choice forecasts them (each range at its tier's node share)."
    )
    write_result(
        "cut_generated",
        "lengths auto on generated profiles",
        [("Plans", HEADER, rows), ("Targets", ["figure", "target", "got", "met"], summary(rows))],
        notes,
        out_dir=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
