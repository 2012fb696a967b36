"""What the sensors read of the Dagster instance: new materializations and their metadata,
runs by tag, and whether a run worked on `range_catchup`."""

from __future__ import annotations

import dagster as dg

from catchup_assets.defs.assets.range_assets import ledger_ranges_partitions_def
from catchup_assets.defs.mission.live_runs import targets_range_catchup  # noqa: F401 - the sensors name it here

PARTITIONS = ledger_ranges_partitions_def.name
BATCH = 50


def new_materializations(context: dg.SensorEvaluationContext, key: dg.AssetKey) -> list[dg.EventLogRecord]:
    after = int(context.cursor) if context.cursor else None
    return list(
        context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_storage_id=after), limit=BATCH, ascending=True
        ).records
    )


def meta(record: dg.EventLogRecord, name: str):
    value = record.asset_materialization.metadata.get(name)
    return None if value is None else value.value


def has_runs(instance: dg.DagsterInstance, **filters) -> bool:
    return bool(instance.get_run_records(filters=dg.RunsFilter(**filters), limit=1))
