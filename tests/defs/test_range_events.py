"""Dagster's partition marking with one planned event per run (issue 26 item 1), on a real instance.

The instance plans a run's partitions as one subset (DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS,
set for the tests in conftest.py as the chart sets it); defs/mission/range_events.py writes each started
range's planned row from the run. The first test pins what Dagster itself does (nothing): if an
upgrade starts marking a subset-planned run's partitions, it fails, and range_events.py is to be
revisited. The status is read as the UI reads it (`get_status_by_partition`, the status cache).
"""

import dagster as dg
import pytest

from catchup_assets.defs.mission.range_events import SUBSET_ENV, planned_as_subset
from kit.assets import RANGE, plan, run_ranges, statuses, with_resource
from kit.range_events import run, seen, status

S = dg.AssetPartitionStatus


def test_issue26_pin_dagster_marks_no_partition_of_a_failed_run_it_planned_as_one_subset(instance):
    """What range_events.py makes up for. Fails if a Dagster upgrade marks subsets itself: revisit it then."""
    result = run(instance, mode="dagster")
    assert not result.success and seen["subset"]
    planned = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ).records
    assert len(planned) == 1  # one for the run, not one per partition
    assert status(instance) == {"a": "MATERIALIZED", "b": None, "c": None, "d": None}


def test_issue26_a_started_range_is_in_progress_while_the_run_runs_and_its_unfinished_ranges_fail_with_it(instance):
    assert run(instance, mode="ours", succeed="1").success  # an earlier success of every partition
    result = run(instance, mode="ours")
    assert not result.success and seen["subset"]
    assert seen["b_in_progress"]  # written by the background writer while the step still ran
    # Only the started range shades; the others keep their last word, the earlier success.
    assert seen["while_running"] == {"a": "MATERIALIZED", "b": "IN_PROGRESS", "c": "MATERIALIZED", "d": "MATERIALIZED"}
    # The step raised: what it left unfinished is FAILED, over the earlier success; a completed again.
    assert status(instance) == {"a": "MATERIALIZED", "b": "FAILED", "c": "FAILED", "d": "FAILED"}
    # The start's observation is in the run's log, from its step, on its partition.
    (obs,) = [
        e
        for e in instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION)
        if e.dagster_event.asset_observation_data.asset_observation.partition == "b"
    ]
    assert obs.step_key == "thing" and obs.dagster_event.step_key == "thing"
    assert obs.dagster_event.asset_observation_data.asset_observation.metadata["phase"].value == "pending"


def test_issue26_a_run_planned_per_partition_gets_no_rows_of_ours_and_dagster_marks_it(instance, monkeypatch):
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    result = run(instance, mode="ours")
    assert not result.success and not seen["subset"]
    planned = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ).records
    assert len(planned) == 4  # the instance's own, one per partition; none added by the run
    assert seen["while_running"]["b"] == "IN_PROGRESS"
    assert status(instance) == {"a": "MATERIALIZED", "b": "FAILED", "c": "FAILED", "d": "FAILED"}


@pytest.mark.parametrize("subset", [True, False], ids=["subset", "per-partition"])
def test_L9_issue26_a_condemned_range_alone_shows_failed_in_either_planning_mode(instance, monkeypatch, subset):
    if not subset:
        monkeypatch.delenv(SUBSET_ENV, raising=False)
    assert plan(instance, "m1", 3).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    bad = keys[1]
    result = run_ranges(instance, keys, "m1", with_resource(sim_fail_targets=[int(bad[-10:])]))
    assert not result.success
    assert planned_as_subset(instance, result.run_id, RANGE) is subset
    st = statuses(instance, keys)
    assert st[bad] == S.FAILED
    assert [st[k] for k in keys if k != bad] == [S.MATERIALIZED] * 2
