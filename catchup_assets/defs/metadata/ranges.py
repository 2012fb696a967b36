"""A range's partition metadata: what its attempts measured, or, condemned, its cause and its log's tail;
while it runs, each attempt's start."""

from __future__ import annotations

from typing import Any

import dagster as dg

from catchup_assets.core.dispatch.live import AttemptEvent
from catchup_assets.core.size.scale import FULL, Scale
from catchup_assets.defs.metadata.log_tail import log_tail
from catchup_assets.defs.metadata.tables import mib


def range_metadata(mission: str, result, adopted: bool, scale: Scale = FULL) -> dict[str, Any]:
    """`seconds` and `wall_seconds` at production time, as tx_apply_seconds (the core's own report) already is."""
    row = scale.rows([result.row or {}])[0]
    meta: dict[str, Any] = {
        "mission": mission,
        "attempts": result.attempts,
        "outcomes": result.outcomes,
        "tier": result.tier or "",
        "memory_limit_mib": mib(result.memory_limit_bytes or 0),
        "recorded_by_earlier_run": adopted,
    }
    for field in ("seconds", "wall_seconds", "tx_apply_seconds"):
        if row.get(field) is not None:
            meta[field] = round(float(row[field]), 1)
    for field in ("seconds_estimated", "tx_apply_count"):
        if row.get(field) is not None:
            meta[field] = row[field]
    for field in ("peak_anon_bytes", "peak_working_set_bytes", "peak_ephemeral_bytes"):
        if row.get(field) is not None:
            meta[field[: -len("_bytes")] + "_mib"] = mib(row[field])
    if result.log_path:
        meta["log_path"] = dg.MetadataValue.path(result.log_path)
    if scale.time != 1 or scale.memory != 1:
        # Issue 36: one page, one scale said: seconds are production's, MiB the deployment's own.
        meta["scale"] = (
            f"seconds: measured x {scale.time:,.0f} (a simulated stellar-core), production's; "
            f"MiB: this deployment's, each standing for {1 / scale.memory:,.4g} MiB in production"
        )
    return meta


# What a completed range's materialization shows (range_metadata) that a condemned one's page must not
# show from an earlier mission: the partition page lists the newest observation's entries first and
# then the latest materialization's, one per label (the UI's AssetEventMetadataEntriesTable, uniqBy label).
FIGURES = (
    "seconds",
    "wall_seconds",
    "tx_apply_seconds",
    "seconds_estimated",
    "tx_apply_count",
    "peak_anon_mib",
    "peak_working_set_mib",
    "peak_ephemeral_mib",
    "recorded_by_earlier_run",
    "scale",
)


def failure_metadata(mission: str, result, scale: Scale = FULL, earlier: str | None = None) -> dict[str, Any]:
    """A condemned range's evidence, on its partition: this mission's cause, the outcome of each
    attempt, stellar-core's last error line and the log's last lines, each short enough for the
    UI to show in place (text, and Markdown under its inline limit) rather than behind a dialog.

    Issue 36: the page shows this mission's attempt first. Every figure a materialization carries is
    this mission's here (what its attempts measured, or `none: <mission> did not complete it`), so none of an earlier
    mission's seconds or peaks shows beside this cause; `earlier` names the mission whose completion
    the page's "Materialized" heading still shows."""
    meta: dict[str, Any] = {"cause": result.reason, "phase": "condemned", "outcomes": result.outcomes}
    if result.log_path:
        tail, last_error = log_tail(result.log_path)
        if last_error:
            meta["last_error"] = last_error
        meta["log_tail"] = dg.MetadataValue.md(tail)
    meta.update(
        {
            "mission": mission,
            "kind": "condemned",  # catchup_assets.defs.instance.ownership reads it
            "attempts": result.attempts,
            "tier": result.tier or "",
            "memory_limit_mib": mib(result.memory_limit_bytes or 0),
        }
    )
    if result.log_path:
        meta["log_path"] = dg.MetadataValue.path(result.log_path)
    measured = range_metadata(mission, result, False, scale)
    for label in FIGURES:
        meta[label] = measured.get(label, f"none: {mission} did not complete it")
    if earlier is not None:
        meta["materialized_by"] = f"mission {earlier}: its completion, not this mission's attempt"
    return meta


def materialized_by(instance: dg.DagsterInstance, asset_key: dg.AssetKey, key: str) -> str | None:
    """The mission of the partition's latest materialization (the page's "Materialized" heading), if any."""
    flt = dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[key])
    records = instance.fetch_materializations(flt, limit=1).records
    mission = records[0].asset_materialization.metadata.get("mission") if records else None
    return str(mission.value) if mission is not None else None


def attempt_metadata(mission: str, event: AttemptEvent) -> dict[str, Any]:
    """An attempt's start, on its partition: submitted (pending), then running on its node. Marked
    `kind: attempt`, which catchup_assets.defs.instance.ownership reads past: the chain, not a range's last word."""
    meta: dict[str, Any] = {
        "mission": mission,
        "kind": "attempt",
        "attempt": event.attempt,
        "phase": event.phase.value,
        "tier": event.tier or "",
    }
    if event.memory_limit_bytes is not None:
        meta["memory_limit_mib"] = mib(event.memory_limit_bytes)
    if event.memory_request_bytes is not None:
        meta["memory_request_mib"] = mib(event.memory_request_bytes)
    if event.capacity_type:
        meta["capacity_type"] = event.capacity_type
    if event.node:
        meta["node"] = event.node
    if event.started_at is not None:
        meta["started_at"] = dg.MetadataValue.timestamp(event.started_at)
    return meta
