"""Which mission a run works on when nobody said so (a run launched from the UI).

The sensors and the demo tag every run `catchup/mission=<name>`. A backfill an
operator launches from the partitions page carries no such tag; guessing the
newest plan would re-run an earlier mission's failed ranges under the new
mission's sizing, or refuse them as outside its span. So the selected
partitions decide: a range whose last word is "condemned by mission M" belongs
to M. Ranges of two missions, or failed ranges of one mission mixed with ranges
of the newest plan, are refused with how to choose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dagster as dg
from dagster._core.events import DagsterEventType

from catchup_assets.core.errors import ConfigError

RANGE_KEY = dg.AssetKey("range_catchup")
# The `kind` metadata of the observations this project records on a range's partition.
CONDEMNED = "condemned"
SUPERSEDED = "superseded"


class MissionAmbiguous(ConfigError):
    """The selected partitions do not say which one mission to run."""


@dataclass(frozen=True)
class Owner:
    mission: str
    why: str


def owning_mission(keys: Sequence[str], condemned_by: Mapping[str, str], newest_plan: str | None) -> Owner:
    """The mission of `keys`: the one that condemned them, else the newest plan.

    `condemned_by` maps a range to the mission that last gave it up, for ranges
    whose last event is that (not a later success).
    """
    failed: dict[str, list[str]] = {}
    for k in keys:
        if k in condemned_by:
            failed.setdefault(condemned_by[k], []).append(k)
    rest = [k for k in keys if k not in condemned_by]
    how = "launch one backfill per mission, or add the run tag catchup/mission=<name> to choose (the Launchpad's tags)"
    if len(failed) > 1:
        parts = "; ".join(f"{m}: {len(ks)} ({_some(ks)})" for m, ks in sorted(failed.items()))
        raise MissionAmbiguous(f"the selected ranges were condemned by {len(failed)} missions ({parts}): {how}")
    if failed:
        ((mission, ks),) = failed.items()
        if rest and mission != newest_plan:
            raise MissionAmbiguous(
                f"{len(ks)} selected ranges were condemned by mission {mission}, {len(rest)} others "
                f"({_some(rest)}) belong to no failure of it (the newest plan is {newest_plan}): {how}"
            )
        return Owner(mission, f"the mission that condemned the selected failed ranges ({len(ks)})")
    if newest_plan is None:
        raise MissionAmbiguous("no mission_plan has been materialized: plan a mission first")
    return Owner(newest_plan, "no selected range was condemned by an earlier mission: the newest plan")


def _some(keys: Sequence[str]) -> str:
    return ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")


def latest_marks(instance: dg.DagsterInstance, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each of `keys` whose newest word on range_catchup is one of our observations: (kind, mission).

    A materialization after the observation means the range has since completed: no mark.
    """
    storage = instance.event_log_storage
    wanted = set(keys)
    if not wanted:
        return {}
    observed = storage.get_latest_storage_id_by_partition(RANGE_KEY, DagsterEventType.ASSET_OBSERVATION, wanted)
    if not observed:
        return {}
    done = storage.get_latest_storage_id_by_partition(RANGE_KEY, DagsterEventType.ASSET_MATERIALIZATION, wanted)
    later = [sid for k, sid in observed.items() if sid > done.get(k, -1)]
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(later), 500):
        records = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=RANGE_KEY, storage_ids=later[i : i + 500]), limit=500
        ).records
        for r in records:
            obs = r.asset_observation
            if obs is None or not obs.partition:
                continue
            kind, mission = obs.metadata.get("kind"), obs.metadata.get("mission")
            if kind is not None and mission is not None:
                out[obs.partition] = (str(kind.value), str(mission.value))
    return out


def condemned_by(instance: dg.DagsterInstance, keys: Sequence[str]) -> dict[str, str]:
    """Each of `keys` whose newest word is a condemnation, with the mission that gave it up."""
    return {k: m for k, (kind, m) in latest_marks(instance, keys).items() if kind == CONDEMNED}


def has_history(instance: dg.DagsterInstance, keys: Sequence[str]) -> set[str]:
    """The keys any run has materialized, observed or failed to materialize."""
    storage = instance.event_log_storage
    seen: set[str] = set()
    for kind in (
        DagsterEventType.ASSET_MATERIALIZATION,
        DagsterEventType.ASSET_OBSERVATION,
        DagsterEventType.ASSET_FAILED_TO_MATERIALIZE,
    ):
        seen |= set(storage.get_latest_storage_id_by_partition(RANGE_KEY, kind, set(keys)))
    return seen
