"""`thing`, a four-partition asset whose run fails part-way, with its job, its partitions' status and `seen`."""

import time

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.defs.mission.range_events import RangeEvents, planned_as_subset

PARTS = dg.StaticPartitionsDefinition(["a", "b", "c", "d"])
KEY = dg.AssetKey("thing")
seen: dict = {}  # what the step saw, for the tests to read: updated in place, never rebound


def status(instance) -> dict:
    got = instance.get_status_by_partition(KEY, PARTS.get_partition_keys(), PARTS)
    return {k: (v.value if v else None) for k, v in got.items()}


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@dg.asset(partitions_def=PARTS, backfill_policy=dg.BackfillPolicy.single_run(), output_required=False)
def thing(context: dg.AssetExecutionContext):
    """a completes; b starts; the step raises with b, c, d unfinished. `seen` keeps what the run saw."""
    mode = context.run.tags.get("mode")
    events = RangeEvents(context) if mode == "ours" else None
    seen["subset"] = planned_as_subset(context.instance, context.run.run_id, KEY)
    failed = True
    try:
        if events is not None:
            events.started("b", dg.AssetObservation(asset_key=KEY, partition="b", metadata={"phase": "pending"}))
            seen["b_in_progress"] = wait_for(lambda: status(context.instance)["b"] == "IN_PROGRESS")
            seen["while_running"] = status(context.instance)
            events.finished("a")
        context.log_event(dg.AssetMaterialization(asset_key=KEY, partition="a"))
        if context.run.tags.get("succeed"):
            for k in "bcd":
                if events is not None:
                    events.finished(k)
                context.log_event(dg.AssetMaterialization(asset_key=KEY, partition=k))
            failed = False
            yield from ()
            return
        raise dg.Failure("b, c and d did not complete")
    finally:
        if events is not None:
            events.close(failed)


JOB = dg.Definitions(assets=[thing], executor=dg.in_process_executor).resolve_implicit_global_asset_job_def()


def run(instance, **tags):
    tags = {ASSET_PARTITION_RANGE_START_TAG: "a", ASSET_PARTITION_RANGE_END_TAG: "d", **tags}
    return JOB.execute_in_process(instance=instance, tags=tags, raise_on_error=False)
