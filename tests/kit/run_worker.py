"""A mission planned in process and its ranges run by a run worker of their own, as a run launcher starts one."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.defs.assets.range_assets import MISSION_TAG
from dagster_defs import defs, plan_config

RUN_SCRIPT = textwrap.dedent(
    """
    import sys
    import dagster as dg
    from dagster import reconstructable
    from dagster_defs import catchup_job
    tags = dict(arg.split("=", 1) for arg in sys.argv[1:])
    dg.execute_job(reconstructable(catchup_job), dg.DagsterInstance.get(), tags=tags)
    """
)


def wait_for(predicate, timeout=60.0, every=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return False


def plan_and_start(instance, mission, n, first_range):
    """Plan a mission in-process, then run all its ranges in a process of their own."""
    defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config=plan_config(mission, n, first_range=first_range, parallelism=min(n, 4)), instance=instance
    )
    keys = instance.get_dynamic_partitions("ledger_ranges")
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: mission}
    # Its stderr (the dispatcher's warnings) is kept beside the instance: a failing test shows it.
    with open(run_worker_log(), "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUN_SCRIPT, *(f"{k}={v}" for k, v in tags.items())],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return keys, tags, proc


def run_worker_log() -> Path:
    return Path(os.environ["DAGSTER_HOME"]).parent / "run_worker.log"


def run_worker_said(lines: int = 60) -> str:
    """The last lines the run worker wrote to stderr, for a failing assertion's message."""
    try:
        return "\n".join(run_worker_log().read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no run worker log)"
