"""What a mission of the seed-shaped model costs on each ladder, replayed; and whether the demo's profile pays.

Each row is a whole mission of the workload model (4000 ranges) replayed by
the real dispatcher in simulated time (kubesim/replay.py), longest first
at 1092 slots, sized from the model's own profile, every attempt priced by
the cost model (catchup_assets/core/forecast/cost.py, default catalog):

    flat                  every range alone on the cheapest node that holds the largest
    default ladder        the seed's cuts, one range per node (exclusive)
    default ladder packed the seed's cuts, ranges packed by their requests (the default)
    fitted ladder         catchup-assets fit-tiers on the model's profile
    no profile            the catch-all tier, tip first (what a first mission pays)

Targets (issue 15): default ladder packed <= 0.6 x flat; fitted <= 0.4 x flat,
makespan <= 1.03 x its lower bound at 1092 slots, no more OOM retries than the
default ladder; and the demo's profiled mission costs less than its
unprofiled one, on every demo run (`--demo-runs`, seeds 0..N-1).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import logging
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.report import write_result
from catchup_assets.core.forecast.cost import flat_shape
from catchup_assets.core.forecast.fit import evaluate, fit_ladder, profile_ranges
from catchup_assets.core.size.sizing import Placement, Tier, Tiers, exclusive_ladder
from catchup_assets.sim.workload import Workload
from kubesim.replay import ReplayReport, replay


def flat_placement(base: Placement, largest_request: int) -> Placement:
    """One exclusive tier on the cheapest shape that holds the largest request: flat sizing as a ladder."""
    cpu = base.tiers.ladder[0].cpu
    shape = flat_shape(base, largest_request, cpu)
    tier = Tier("flat", shape.allocatable_memory_bytes, shape.memory_bytes, cpu, 1, shape.name)
    return dataclasses.replace(base, tiers=Tiers((tier,), base.tiers.unprofiled, base.tiers.no_profile))


def demo_costs(runs: int, ranges: int) -> list[tuple[int, float, float, str]]:
    """(seed, unprofiled USD, profiled USD, verdict) of `runs` demos, each in a directory of its own."""
    from catchup_assets.cli.demo.run import run_demo
    from catchup_assets.cli.demo.settings import DemoSettings

    out = []
    for seed in range(runs):
        with tempfile.TemporaryDirectory() as d:
            text = io.StringIO()
            run_demo(DemoSettings(Path(d), ranges=ranges, seed=seed), out=text)
        lines = text.getvalue().splitlines()
        usd = next(ln for ln in lines if ln.startswith("cost (USD)")).split()[2:]
        verdict = next(ln for ln in lines if ln.startswith("cost: ")).split(";")[0][len("cost: ") :]
        out.append((seed, float(usd[0].replace(",", "")), float(usd[1].replace(",", "")), verdict))
        print(f"  demo seed {seed} done", file=sys.stderr)
    return out


def row(name: str, r: ReplayReport, flat_usd: float, predicted_usd: float | None) -> list[object]:
    return [
        name,
        f"{r.cost.dollars:,.2f}",
        "-" if predicted_usd is None else f"{predicted_usd:,.2f}",
        f"{r.cost.dollars / flat_usd:.3f}",
        f"{r.cost.spot_dollars:,.2f} / {r.cost.on_demand_dollars:,.2f}",
        f"{r.makespan_seconds / 3600:.2f}",
        f"{r.ratio:.4f}",
        r.retries.get("oom", 0),
        ", ".join(f"{k} {v}" for k, v in r.retries.items()) or "none",
        f"{r.wall_seconds:.0f}",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cost", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--slots", type=int, default=1092)
    p.add_argument("--seed", type=int, default=0, help="the workload model's seed")
    p.add_argument("--mission-seed", type=int, default=1, help="which reclaims and runtime jitter the mission draws")
    p.add_argument("--demo-runs", type=int, default=3, help="demos to run (0: none)")
    p.add_argument("--demo-ranges", type=int, default=48)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.smoke:
        args.ranges, args.slots, args.demo_runs = 60, 12, 0
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)  # Z4 stall alerts are expected here
    started = time.perf_counter()
    w = Workload(ranges=args.ranges, seed=args.seed)
    ranges, index = profile_ranges(w.profile_table().to_pylist())
    packed = Placement()
    fit = fit_ladder(ranges, index, packed, packed.catalog, args.slots)
    largest = max(packed.size(r.last, index).memory_request_bytes for r in ranges)
    ladders = [
        ("flat", flat_placement(packed, largest)),
        ("default ladder", dataclasses.replace(packed, tiers=dataclasses.replace(
            packed.tiers, ladder=exclusive_ladder(packed.tiers.ladder)))),
        ("default ladder packed", packed),
        ("fitted ladder", fit.placement),
    ]  # fmt: skip
    reports = []
    for name, placement in ladders:
        rep = replay(w, order="longest-first", slots=args.slots, mission_seed=args.mission_seed, placement=placement)
        reports.append((name, rep, evaluate(ranges, index, placement, args.slots)[0].dollars))
        print(f"  {name} done", file=sys.stderr)
    cold = replay(w, order="tip-first", slots=args.slots, profiled=False, mission_seed=args.mission_seed)
    reports.append(("no profile (catch-all, tip-first)", cold, None))
    flat_usd = reports[0][1].cost.dollars
    rows = [row(n, r, flat_usd, pred) for n, r, pred in reports]
    header = ["ladder", "cost USD", "predicted USD", "cost / flat", "spot / on-demand USD", "makespan h",
              "makespan / bound", "OOM retries", "retries", "wall s"]  # fmt: skip
    tables = [(f"Replayed missions at {args.slots} slots", header, rows)]
    demos = demo_costs(args.demo_runs, args.demo_ranges) if args.demo_runs else []
    if demos:
        tables.append(
            (
                "The demo, unprofiled then profiled (production-scale USD)",
                ["seed", "unprofiled USD", "profiled USD", "profiled / unprofiled", "verdict"],
                [[s, f"{a:,.2f}", f"{b:,.2f}", f"{b / a:.3f}", v] for s, a, b, v in demos],
            )
        )
    fitted = "; ".join(f"{t.name} {t.memory_cut_bytes / 2**30:g} GiB on {t.shape}" for t in fit.placement.tiers.ladder)
    costs = list(w)
    notes = (
        f"Workload: {len(costs)} ranges (seed {args.seed}), {sum(c.seconds for c in costs) / 3600:,.0f} h of clean "
        f"work; mission draw {args.mission_seed} (reclaims on ~7% of ranges, +-5% runtime jitter). Prices: the "
        f"default catalog ({packed.catalog.source}). Fitted ladder: {fitted}. Flat: every attempt alone on "
        f"{ladders[0][1].tiers.ladder[0].shape}. Cost counts every attempt, reclaimed ones included; predicted is "
        f"the plan's first attempts at the profile's seconds. Whole benchmark {time.perf_counter() - started:.0f} s."
    )
    write_result("cost", "Cost by tier ladder (issue 15)", tables, notes, out_dir=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
