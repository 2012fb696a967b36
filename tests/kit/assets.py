"""The planning and range jobs of tests/dagster_defs.py run in process, and the partition statuses they leave."""

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.defs.assets.range_assets import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.defs.resources import CatchupResource
from dagster_defs import catchup, defs, plan_config

RANGE = dg.AssetKey("range_catchup")


def with_resource(**changes) -> dg.Definitions:
    res = CatchupResource(**{**catchup.model_dump(), **changes})
    return dg.Definitions(
        assets=defs.assets, jobs=defs.jobs, resources={"catchup": res}, executor=dg.in_process_executor
    )


def plan(instance, mission, n, d=defs, **extra):
    job = d.resolve_job_def("mission_plan_job")
    return job.execute_in_process(run_config=plan_config(mission, n, **extra), instance=instance, raise_on_error=False)


def run_ranges(instance, keys, mission, d=defs):
    job = d.resolve_job_def("range_catchup_job")
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: mission}
    return job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)


def statuses(instance, keys):
    return instance.get_status_by_partition(RANGE, keys, ledger_ranges_partitions_def)


def failure_text(result) -> str:
    return " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
