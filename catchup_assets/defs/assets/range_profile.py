"""range_profile and tier_map: a mission's profile and the tiers it gives the next one, one partition per mission.

Thin wrappers around mission/profile.py; downstream of every range_catchup partition.
"""

import dagster as dg

from catchup_assets.defs.assets.range_assets import range_catchup
from catchup_assets.defs.metadata.cost import mission_cost_metadata, tier_map_cost_metadata
from catchup_assets.defs.metadata.profile_metadata import kpi_metadata, profile_metadata, tier_map_metadata
from catchup_assets.defs.mission.run_context import mission_partition, missions_partitions_def, refused
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.plan import require_plan
from catchup_assets.mission.profile import build_profile, build_tier_map
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table


@dg.asset(
    group_name="mission",
    partitions_def=missions_partitions_def,
    # A mission's ranges are some of all ranges, and no built-in mapping can say which: all of them.
    deps=[dg.AssetDep(range_catchup, partition_mapping=dg.AllPartitionMapping())],
    kinds={"parquet"},
    check_specs=[
        dg.AssetCheckSpec("covers_mission", asset="range_profile", description="every completed range is profiled"),
        dg.AssetCheckSpec("no_measurement_free_rows", asset="range_profile", description="L25: each row is measured"),
        dg.AssetCheckSpec(
            "only_completed_chains_size",
            asset="range_profile",
            description="a range that never completed sizes the next mission by its OOM floor only",
        ),
    ],
)
def range_profile(context: dg.AssetExecutionContext, catchup: CatchupResource):
    """Every range's memory, disk and time, aggregated over its resumed chain."""
    mission = mission_partition(context)
    store = Store(catchup.root())
    try:
        require_plan(store, mission)
        out = build_profile(catchup.root(), mission)
    except ValueError as exc:
        raise refused("range_profile", exc) from None
    plan = read_table(store, layout.plan(mission))
    plan_keys = set(plan.column("range_key").to_pylist())
    rows = out.profile.to_pylist()
    profiled = {r["range_key"] for r in rows}
    completed_unprofiled = sorted(set(out.unmeasured) & plan_keys)
    missing = sorted(plan_keys - profiled)
    # Issue 36: a profile of a drained, stopped or condemned mission says how much of it is not done.
    done = ({r["range_key"] for r in rows if r["completed"]} | set(out.unmeasured)) & plan_keys
    yield dg.MaterializeResult(
        metadata={
            "ranges_left": len(plan_keys - done),
            "ranges_done": len(done),
            **profile_metadata(mission, out, plan_keys, catchup.scale()),
            **mission_cost_metadata(out.records, plan.to_pylist(), catchup.placement(), catchup.scale()),
            **kpi_metadata(out.records, catchup.placement(), catchup.scale()),
        }
    )
    yield dg.AssetCheckResult(
        check_name="covers_mission",
        passed=not missing,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "planned": len(plan_keys),
            "profiled": len(profiled & plan_keys),
            "missing": dg.MetadataValue.json(missing[:50]),
        },
    )
    partial = [
        r["range_key"]
        for r in rows
        if not r["completed"] and (r["peak_anon_bytes"] != r["oom_floor_bytes"] or r["seconds"] is not None)
    ]
    yield dg.AssetCheckResult(
        check_name="only_completed_chains_size",
        passed=not partial,
        metadata={
            "sized_from_incomplete_chains": dg.MetadataValue.json(partial[:50]),
            "condemned_by_oom_floor": len([r for r in rows if not r["completed"]]),
        },
    )
    junk = [r["range_key"] for r in rows if r["peak_anon_bytes"] is None]
    yield dg.AssetCheckResult(
        check_name="no_measurement_free_rows",
        passed=not junk,
        metadata={
            "measurement_free": dg.MetadataValue.json(junk),
            "left_out_unmeasured": dg.MetadataValue.json(completed_unprofiled[:50]),
        },
    )


@dg.asset(
    group_name="mission",
    partitions_def=missions_partitions_def,
    deps=[range_profile],
    kinds={"parquet"},
    check_specs=[
        dg.AssetCheckSpec("every_range_placed", asset="tier_map", description="each profiled range has a tier")
    ],
)
def tier_map(context: dg.AssetExecutionContext, catchup: CatchupResource):
    """The node tier and memory each range gets next mission (L15, L27)."""
    mission = mission_partition(context)
    try:
        table, url = build_tier_map(catchup.root(), mission, catchup.placement())
    except ValueError as exc:
        raise refused("tier_map", exc) from None
    rows = table.to_pylist()
    known = {t.name for t in catchup.placement().tiers.all()}
    unplaced = [r["range_key"] for r in rows if r["tier"] not in known or not r["memory_request_bytes"]]
    yield dg.MaterializeResult(
        metadata={
            **tier_map_metadata(mission, rows, url, catchup),
            **tier_map_cost_metadata(rows, catchup.placement(), catchup.scale()),
        }
    )
    yield dg.AssetCheckResult(
        check_name="every_range_placed", passed=not unplaced, metadata={"unplaced": dg.MetadataValue.json(unplaced)}
    )
