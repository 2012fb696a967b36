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
# An attempt's start (defs/metadata/ranges.py attempt_metadata): the chain while a range runs, no
# mark. Read past it, or a run that dies after starting a condemned range's attempt would erase
# who condemned it.
ATTEMPT = "attempt"


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
    started: set[str] = set()  # newest word an attempt's start: the mark, if any, is older
    for i in range(0, len(later), 500):
        records = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=RANGE_KEY, storage_ids=later[i : i + 500]), limit=500
        ).records
        for r in records:
            if (mark := _mark(r)) is not None:
                if mark[0] == ATTEMPT:
                    started.add(r.asset_observation.partition)
                else:
                    out[r.asset_observation.partition] = mark
    if started:
        out.update(_marks_before_attempts(instance, started, done))
    return out


def _mark(record) -> tuple[str, str] | None:
    obs = record.asset_observation
    if obs is None or not obs.partition:
        return None
    kind, mission = obs.metadata.get("kind"), obs.metadata.get("mission")
    return (str(kind.value), str(mission.value)) if kind is not None and mission is not None else None


def _marks_before_attempts(instance: dg.DagsterInstance, keys: set[str], done: Mapping[str, int]):
    """The newest mark of each of `keys` older than its attempts' starts, newest first, back to its
    last materialization: a page of a few rows per range (two an attempt)."""
    out: dict[str, tuple[str, str]] = {}
    left, cursor = set(keys), None
    after = min(done.get(k, -1) for k in keys)
    after = after if after >= 0 else None
    while left:
        page = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=RANGE_KEY, asset_partitions=sorted(left), after_storage_id=after),
            limit=1000,
            cursor=cursor,
            ascending=False,
        )
        for r in page.records:
            k = r.asset_observation.partition if r.asset_observation else None
            if k in left and r.storage_id > done.get(k, -1) and (mark := _mark(r)) and mark[0] != ATTEMPT:
                out[k] = mark
                left.discard(k)
        if not page.has_more:
            break
        cursor = page.cursor
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
