"""The forecast under noise against the real dispatcher's replay (issue 26 item 5).

For each runtime spread sigma the workload model's missions wander from their profile by
exp(N(0, sigma)) per range, and their peaks by exp(N(0, memory sigma)), so some profiled ranges
outgrow their request and OOM. The forecast (`mission.plan.forecast_band`: Monte Carlo over the
list schedule, seeded) predicts the expected makespan and a p10-p90 band from the profile alone;
the replays (kubesim/replay.py, the real dispatcher in simulated time, reclaims included) are
missions drawn with other seeds. Targets: the expected makespan within 3% of the replays' mean,
and every replay inside the band.
"""

from __future__ import annotations

import argparse
import io
import logging
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.harness.report import write_result
from catchup_assets.core.forecast.forecast import list_schedule
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.mission.plan import forecast_band, forecast_mission, prepare
from catchup_assets.sim.workload import Workload, WorkloadShape
from catchup_assets.store.root import Store
from kubesim.replay import replay

SIGMAS = (0.05, 0.10, 0.20)
MEMORY_SIGMA = 0.10


def planned(w: Workload, slots: int):
    """The mission as `prepare` plans it from the model's profile: what the forecast reads."""
    store = Store("memory://forecast-spread")
    buf = io.BytesIO()
    pq.write_table(w.profile_table(), buf)
    store.write_bytes("previous/range_profile.parquet", buf.getvalue())
    cfg = MissionConfig(
        mission="forecast",
        span=w.span,
        storage_root=store.root,
        parallelism=slots,
        order="longest-first",
        previous_profile=store.url("previous/range_profile.parquet"),
        lengths="uniform",  # the grid, as its figures were measured; auto's choice: benchmarks/range_lengths.py
    )
    return prepare(cfg)


def drawn_makespan(w: Workload, keys: list[str], slots: int, mission_seed: int) -> float:
    """The list schedule of the workload's mission `mission_seed`, its ranges in `keys`' order on `slots`."""
    return list_schedule([w.cost_of(k).seconds * w.draw(k, mission_seed).seconds_factor for k in keys], slots)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.forecast_spread", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--slots", type=int, default=1092)
    p.add_argument("--sigmas", type=float, nargs="+", default=list(SIGMAS))
    p.add_argument("--memory-sigma", type=float, default=MEMORY_SIGMA)
    p.add_argument("--mission-seeds", type=int, nargs="+", default=[1, 2, 3, 4], help="the replayed missions' draws")
    p.add_argument(
        "--drawn",
        type=int,
        default=200,
        help="missions drawn from the workload (seeds 1001..) and list-scheduled in the dispatcher's order: "
        "what as many replays give (each replay's own draw is checked against it)",
    )
    p.add_argument("--poll-seconds", type=float, default=10.0)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.drawn < 2:
        p.error("--drawn must be 2 or more (their mean and sd are reported)")
    if args.smoke:
        args.ranges, args.slots, args.sigmas, args.mission_seeds, args.drawn = 80, 8, [0.1], [1], 20
    logging.getLogger("catchup_assets").setLevel(logging.CRITICAL)  # Z4 stall alerts are expected here
    started = time.perf_counter()
    rows = []
    for sigma in args.sigmas:
        shape = replace(WorkloadShape(), mission_jitter=sigma, memory_jitter=args.memory_sigma)
        w = Workload(ranges=args.ranges, shape=shape)
        prepared = planned(w, args.slots)
        exact = next(f for f in forecast_mission(prepared, (1.0,)))
        band = forecast_band(prepared, sigma, args.memory_sigma)
        runs = [replay(w, slots=args.slots, mission_seed=s, poll_seconds=args.poll_seconds) for s in args.mission_seeds]
        mean = statistics.fmean(r.makespan_seconds for r in runs)
        inside = all(band.p10_seconds <= r.makespan_seconds <= band.p90_seconds for r in runs)
        keys = [r.key for r in prepared.ordered]
        own = [drawn_makespan(w, keys, args.slots, s) for s in args.mission_seeds]
        drawn = [drawn_makespan(w, keys, args.slots, 1000 + s) for s in range(1, args.drawn + 1)]
        drawn_mean = statistics.fmean(drawn)
        within = sum(band.p10_seconds <= m <= band.p90_seconds for m in drawn) / len(drawn)
        rows.append(
            [
                sigma,
                args.memory_sigma,
                f"{exact.makespan_seconds / 3600:.2f}",
                f"{band.expected_seconds / 3600:.2f}",
                f"{band.p10_seconds / 3600:.2f}-{band.p90_seconds / 3600:.2f}",
                " ".join(f"{r.makespan_seconds / 3600:.2f}" for r in runs),
                f"{exact.makespan_seconds / mean - 1:+.1%}",
                f"{band.expected_seconds / mean - 1:+.1%}",
                "yes" if inside else "no",
                f"{band.expected_oom_retries:.1f}",
                " ".join(str(r.retries.get("oom", 0)) for r in runs),
                " ".join(f"{r.makespan_seconds / m - 1:+.1%}" for r, m in zip(runs, own, strict=True)),
                f"{drawn_mean / 3600:.2f} (sd {statistics.pstdev(drawn) / 3600:.2f})",
                f"{band.expected_seconds / drawn_mean - 1:+.1%}",
                f"{within:.0%}",
            ]
        )
        print(f"  sigma {sigma} done", file=sys.stderr)
    header = [
        "sigma",
        "memory sigma",
        "forecast, exact seconds h",
        "expected h",
        "p10-p90 h",
        "replays h",
        "exact vs replays",
        "expected vs replays",
        "replays inside the band",
        "expected OOM retries",
        "replays' OOM retries",
        "each replay vs its own draw list-scheduled",
        f"{args.drawn} drawn missions, mean h",
        "expected vs drawn",
        "drawn inside the band",
    ]
    notes = (
        f"Workload: {args.ranges} ranges (seed 0) at {args.slots} slots, longest-first; replayed mission seeds "
        f"{', '.join(map(str, args.mission_seeds))} (reclaims on ~7% of ranges too, which the forecast leaves out); "
        f"poll {args.poll_seconds:g} s; the forecast 200 seeded draws; whole benchmark "
        f"{time.perf_counter() - started:.0f} s wall.\n\n"
        "'Forecast, exact seconds' is the forecast before this one: each range's profiled seconds taken as exact.\n\n"
        f"Drawn missions: {args.drawn} more missions of the same workload (mission seeds 1001 on), each range's "
        "seconds times its draw's factor, list-scheduled in the dispatcher's order at the same slots: no "
        "dispatcher, no reclaims, no OOMs. The column before it shows what that leaves out: each replay against "
        "the list schedule of its own draw. A mission's makespan wanders from mission to mission (the sd); two "
        "replays' mean is one sample of that, the drawn missions' mean is the expectation the forecast claims."
    )
    write_result(
        "forecast_spread",
        "The forecast under noise against the replay",
        [("Forecast and replays", header, rows)],
        notes,
        out_dir=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
