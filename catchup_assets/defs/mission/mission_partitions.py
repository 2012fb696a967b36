"""The `missions` partitions: one per mission planned on the storage root, added where a mission enters.

`mission_plan` adds its mission as it plans it; `mission_finished_sensor` adds a finished run's
mission should it be missing. An instance upgraded from before these assets were partitioned
holds no partition for the missions already on its storage root: both adopt every planned
mission they find there (`planned_missions`), so an old mission's profile is a partition too
(a backfill of profile_job over them re-materializes their views).
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

from catchup_assets.core.plan.config import validate_mission
from catchup_assets.defs.mission.run_context import missions_partitions_def
from catchup_assets.mission.saved import planned_missions
from catchup_assets.store import layout
from catchup_assets.store.root import Store

MISSIONS = missions_partitions_def.name


def missing_missions(instance: dg.DagsterInstance, names: Iterable[str]) -> list[str]:
    """Those of `names` (each checked as a mission name) that are not yet a partition, sorted."""
    wanted = {validate_mission(n) for n in names}
    return sorted(wanted - set(instance.get_dynamic_partitions(MISSIONS)))


def unadopted(instance: dg.DagsterInstance, store: Store) -> list[str]:
    """The missions planned on the storage root that have no partition yet.

    One listing of the root's directories; only a name that is not yet a partition costs a
    look for its plan, so a sensor can ask every tick.
    """
    present = set(instance.get_dynamic_partitions(MISSIONS))
    return planned_missions(store, [n for n in store.dirs() if n not in present])


def add_missions(instance: dg.DagsterInstance, names: Iterable[str]) -> list[str]:
    """Add `names` not yet partitions; returns those added."""
    new = missing_missions(instance, names)
    if new:
        instance.add_dynamic_partitions(MISSIONS, new)
    return new


def is_planned(store: Store, mission: str) -> bool:
    return store.exists(layout.plan(mission))
