"""Profile a mission: its finished attempt records -> range_profile.parquet, and the tier map it sizes."""

from __future__ import annotations

from dataclasses import dataclass, field

from catchup_assets.core.aggregate.profile_table import profile_rows
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.mission.plan import require_plan
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import PROFILE_SCHEMA, Table, read_table, table, tier_map_table, write_table


@dataclass
class ProfileOutput:
    profile: Table
    unmeasured: list[str]
    url: str
    records: list[AttemptRecord] = field(default_factory=list)  # every finished attempt the profile read


def build_profile(storage_root: str, mission: str) -> ProfileOutput:
    """Every finished attempt record of the mission -> range_profile.parquet."""
    store = Store(storage_root)
    record_store = RecordStore(store, mission)
    records, done = record_store.load()
    if record_store.unsnapshotted:
        # Left outside the snapshot log by a killed run: appended as one segment, so the next
        # read of them is one file (a segment, not a rewrite of the whole base: store/snapshot_log.py).
        record_store.append_segment(records[i] for i in record_store.unsnapshotted)
    finished = [r for ident, r in records.items() if ident in done]
    rows, unmeasured = profile_rows(finished)
    profile = table(rows, PROFILE_SCHEMA)
    return ProfileOutput(profile, unmeasured, write_table(store, layout.profile(mission), profile), finished)


def build_tier_map(
    storage_root: str,
    mission: str,
    placement: Placement = Placement(),
) -> tuple[Table, str]:
    """Every planned range of the mission placed from its profile -> tier_map.parquet."""
    store = Store(storage_root)
    require_plan(store, mission)
    plan = read_table(store, layout.plan(mission))
    ranges = sorted(parse_key(k) for k in plan.column("range_key").to_pylist())
    profile = read_table(store, layout.profile(mission)).to_pylist()
    tier_map = tier_map_table(ranges, profile, placement)
    return tier_map, write_table(store, layout.tier_map(mission), tier_map)
