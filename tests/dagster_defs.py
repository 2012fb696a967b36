"""The project's assets with test-sized resources, importable by subprocesses.

The storage root comes from $CATCHUP_STORAGE_ROOT at run time (each test sets
its own); memory and time are scaled down so a range takes a second.
"""

import os

import dagster as dg

from catchup_assets.defs.assets.profile_diff import profile_diff
from catchup_assets.defs.assets.range_assets import mission_plan, range_catchup
from catchup_assets.defs.assets.range_profile import range_profile, tier_map
from catchup_assets.defs.assets.tier_ladder import tier_ladder
from catchup_assets.defs.mission.jobs import mission_plan_job, profile_job, range_catchup_job
from catchup_assets.defs.resources import CatchupResource

LEDGERS_PER_RANGE = 1_250_048  # the simulated history in 48 ranges
# Ranges (their last ledger) whose archive is broken in the runs a code server launches: those processes
# import this file afresh and inherit the environment, so a test condemns ranges there by setting it.
FAIL_TARGETS_ENV = "CATCHUP_TEST_FAIL_TARGETS"

catchup = CatchupResource(
    memory_scale=1 / 200,
    sim_speed=300_000,
    poll_seconds=0.1,
    status_every=5,
    sim_fail_targets=[int(t) for t in os.environ.get(FAIL_TARGETS_ENV, "").split(",") if t],
)
defs = dg.Definitions(
    assets=[mission_plan, range_catchup, range_profile, tier_map, profile_diff, tier_ladder],
    jobs=[mission_plan_job, range_catchup_job, profile_job],
    resources={"catchup": catchup},
    # Steps run in the run's own process: killing it kills the dispatcher.
    executor=dg.in_process_executor,
)


def catchup_job():
    return defs.resolve_job_def("range_catchup_job")


def plan_config(mission: str, n_ranges: int, first_range: int = 0, **extra) -> dict:
    """mission_plan's run config over `n_ranges` grid ranges; `lengths=None` leaves the form's default (auto).

    The grid unless asked: `auto` cuts or not by the seconds the previous mission measured, run for real
    on a shared machine, so a test over the grid's keys would see them superseded on a loaded one."""
    cfg = {
        "mission": mission,
        "first_ledger": first_range * LEDGERS_PER_RANGE + 1,
        "last_ledger": (first_range + n_ranges) * LEDGERS_PER_RANGE,
        "ledgers_per_range": LEDGERS_PER_RANGE,
        "overlap": 0,
        "parallelism": 4,
        "lengths": "uniform",
        **extra,
    }
    if cfg["lengths"] is None:
        del cfg["lengths"]
    return {"ops": {"mission_plan": {"config": cfg}}}
