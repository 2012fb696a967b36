"""The runs that hold partitions now: each not-finished range_catchup run, its mission and the ranges it covers.

Two missions must never dispatch over the same ledgers at once (two dispatchers, two
budgets, two records per range): `mission_plan` refuses a plan over ledgers a live run of
another mission holds (`holding`), before it adds a partition. Here, not in the sensors
(which import the assets), so the asset can ask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from catchup_assets.core.values.ledger_range import RangeKeyError, parse_key
from catchup_assets.defs.mission.run_context import MISSION_TAG, RANGE_END_TAG, RANGE_START_TAG

CATCHUP_KEY = dg.AssetKey("range_catchup")
RANGE_CATCHUP_JOB = "range_catchup_job"  # defs/mission/jobs.py's name for it
PARTITION_TAG = "dagster/partition"  # a run of one partition
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def targets_range_catchup(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    # UI backfills run as an asset job selecting the asset; `dg.materialize` and
    # `dagster asset materialize` as an ephemeral job that only its plan names.
    if run.job_name == RANGE_CATCHUP_JOB or CATCHUP_KEY in (run.asset_selection or ()):
        return True
    snapshot = run.execution_plan_snapshot_id and instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
    return bool(snapshot) and CATCHUP_KEY.to_python_identifier() in (snapshot.step_keys_to_execute or ())


@dataclass(frozen=True)
class Holder:
    """A live range_catchup run: its mission (None: not yet tagged) and the ledgers it covers."""

    run_id: str
    mission: str | None
    spans: tuple[tuple[int, int], ...]

    def who(self) -> str:
        return f"mission {self.mission}" if self.mission else "a run not yet tagged with its mission"


def live_holders(instance: dg.DagsterInstance, partitions: Sequence[str]) -> list[Holder]:
    """Every not-finished range_catchup run, with the ledgers of the partitions it covers."""
    order = {k: i for i, k in enumerate(partitions)}
    out = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT)):
        run = record.dagster_run
        if not targets_range_catchup(instance, run):
            continue
        spans = _spans(run.tags, partitions, order)
        if spans:
            out.append(Holder(run.run_id, run.tags.get(MISSION_TAG), spans))
    return out


def _spans(tags, partitions: Sequence[str], order: dict[str, int]) -> tuple[tuple[int, int], ...]:
    """A run's ranges: its partition, or its span of the partition set's order (the ledgers between
    its two ends, should either have been retired since)."""
    try:
        if PARTITION_TAG in tags:
            r = parse_key(tags[PARTITION_TAG])
            return ((r.first, r.last),)
        start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
        if not start or not end:
            return ()
        if start in order and end in order and order[start] <= order[end]:
            keys = partitions[order[start] : order[end] + 1]
            return tuple((r.first, r.last) for r in map(parse_key, keys))
        return ((parse_key(start).first, parse_key(end).last),)
    except RangeKeyError:
        return ()  # not a key: such a run is refused when it starts, and holds nothing


def holding(holders: Sequence[Holder], keys: Sequence[str], mission: str) -> list[tuple[Holder, list[str]]]:
    """The live runs of missions other than `mission` over ledgers of `keys`, each with the keys it holds."""
    planned = [(k, parse_key(k)) for k in keys]
    out = []
    for h in holders:
        if h.mission == mission:
            continue  # the same mission replanned: its runs are its own
        hit = [k for k, r in planned if any(first <= r.last and r.first <= last for first, last in h.spans)]
        if hit:
            out.append((h, hit))
    return out
