"""The baseline of benchmarks/dagster_backfill.py: the same mission, backend and poll through `run_mission` in
the benchmark's process, without Dagster."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from benchmarks.harness.backfill_drive import LEDGERS, MISSION, OVERLAP
from benchmarks.harness.backfill_process import first, read_notes
from benchmarks.harness.dagster_location import VirtualCatchupResource
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.assets.range_assets import policies
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission


def measure_direct(args, tmp: Path, previous: str) -> dict:
    """The same mission, backend and poll through `run_mission` in this process, without Dagster."""
    root, report = tmp / "direct-storage", tmp / "direct.jsonl"
    res = VirtualCatchupResource(
        storage_root=str(root),
        ranges=args.ranges,
        live=args.live,
        speed=args.speed,
        poll_seconds=args.poll,
        report=str(report),
        condemn=args.condemn,
    )
    cfg = MissionConfig(
        mission=MISSION,
        span=MissionSpan(1, args.ranges * LEDGERS, LEDGERS, OVERLAP),
        storage_root=res.root(),
        parallelism=args.parallelism,
        order=args.order,
        previous_profile=previous,
        lengths="uniform",  # the grid, as the baseline was measured (auto, the default since issue 37, may cut)
        **policies(res),
    )
    catchup_log = logging.getLogger("catchup_assets")
    level = catchup_log.level
    catchup_log.setLevel(logging.ERROR)  # the reclaims' warnings, one line each
    try:
        t = time.perf_counter()
        prepared = prepare(cfg)
        prepare_s = time.perf_counter() - t
        backend = res.backend_for(MISSION)
        t = time.perf_counter()
        result = run_mission(prepared, backend, write_plan=False)
        wall = time.perf_counter() - t
    finally:
        catchup_log.setLevel(level)
    notes = read_notes(report)
    base = first(notes, "backend_for")["t"]
    return {
        "prepare_s": prepare_s,
        "wall_s": wall,
        "done": len(result.done),
        "passes": result.passes,
        "submits": backend.submits,
        "first_submit_s": first(notes, "first_submit")["t"] - base,
        "live_s": first(notes, "live")["t"] - base,
    }
