"""Backfilling failed ranges the way the UI does it.

The closest in-process equivalent of the UI and the daemon that CI can run:
the same GraphQL mutation the UI sends (`launchPartitionBackfill`) executed
against the real schema over an out-of-process code location, then the
backfill daemon's own iteration (`execute_backfill_iteration`) and the run
queue daemon's (`QueuedRunCoordinatorDaemon.run_iteration`), which hands the
runs to the instance's real run launcher: each run executes in its own
process, concurrently, as under `dagster dev`.
"""

import logging
import time

import dagster as dg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from dagster._daemon.backfill import execute_backfill_iteration
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from catchup_assets.defs.resources.backend import mission_seed
from catchup_assets.sim.disruption import disruption_delay
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from dagster_defs import defs, plan_config
from kit.assets import run_ranges, statuses, with_resource

DEFS_FILE = str(__import__("pathlib").Path(__file__).parents[1].joinpath("dagster_defs.py"))
RATE, WINDOW = 0.33, (0.3, 2.0)


def reclaim_seed(keys, hit, mission):
    """A seed whose simulated spot reclaims hit exactly `hit` on their first attempt, late enough to resume."""
    for seed in range(5000):
        drawn = mission_seed(seed, mission)
        delays = {k: disruption_delay(drawn, RATE, WINDOW, k, 1) for k in keys}
        again = [disruption_delay(drawn, RATE, WINDOW, k, 2) for k in hit]
        if (
            {k for k, d in delays.items() if d is not None} == set(hit)
            and all(delays[k] > 1.2 for k in hit)
            and again == [None, None]
        ):
            return seed
    raise AssertionError("no seed found")


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
def test_backfill_of_failed_ranges_runs_exactly_those_sharing_the_mission_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("CATCHUP_STORAGE_ROOT", str(tmp_path / "storage"))
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        # Six mid-history ranges (a few seconds each, none OOMs), one slot: parallelism 1.
        assert (
            defs.resolve_job_def("mission_plan_job")
            .execute_in_process(run_config=plan_config("mb", 6, first_range=36, parallelism=1), instance=instance)
            .success
        )
        keys = instance.get_dynamic_partitions("ledger_ranges")
        hit = [keys[1], keys[4]]  # two groups that are not contiguous
        # A spot storm with no environmental budget condemns them mid-replay.
        stormy = with_resource(disruption_rate=RATE, sim_seed=reclaim_seed(keys, hit, "mb"), retry={"environmental": 0})
        first = run_ranges(instance, keys, "mb", stormy)
        assert not first.success
        st = statuses(instance, keys)
        assert sorted(k for k, s in st.items() if s == dg.AssetPartitionStatus.FAILED) == sorted(hit)

        with define_out_of_process_context(DEFS_FILE, None, instance) as context:
            # What the UI sends for "Launch backfill" on the failed partitions (Partition selection "Failed").
            result = execute_dagster_graphql(
                context,
                LAUNCH_PARTITION_BACKFILL_MUTATION,
                {"backfillParams": {"assetSelection": [{"path": ["range_catchup"]}], "partitionNames": hit}},
            )
            assert result.data["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", result.data
            list(execute_backfill_iteration(context.process_context, logging.getLogger("backfill")))
            runs = instance.get_runs(
                filters=dg.RunsFilter(tags={"dagster/backfill": result.data["launchPartitionBackfill"]["backfillId"]})
            )
            # One run per contiguous group: exactly the two failed ranges.
            assert sorted(
                (r.tags[ASSET_PARTITION_RANGE_START_TAG], r.tags[ASSET_PARTITION_RANGE_END_TAG]) for r in runs
            ) == sorted((k, k) for k in hit)
            list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(context.process_context))
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and any(not instance.get_run_by_id(r.run_id).is_finished for r in runs):
                time.sleep(0.5)
            assert [instance.get_run_by_id(r.run_id).status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * 2
        assert set(statuses(instance, keys).values()) == {dg.AssetPartitionStatus.MATERIALIZED}
        records, _ = RecordStore(Store(str(tmp_path / "storage")), "mb").load(hit)
        retries = []
        for key in hit:
            chain = [records[(key, a)] for a in sorted(a for k, a in records if k == key)]
            assert [r.outcome for r in chain][:1] == ["disrupted"] and chain[-1].outcome == "ok"
            # The kept data directory was resumed, not started over (L16, L3).
            assert chain[1].fresh_start is False and chain[1].resumed_from_ledger >= int(key[:10]) - 1
            retries.append(chain[1])
        # Two runs at once, one slot between them: their attempts never overlapped (L11).
        a, b = sorted(retries, key=lambda r: r.started_at)
        assert a.finished_at <= b.started_at


def launch_backfill(context, keys) -> list[dg.DagsterRun]:
    """What the UI sends for "Launch backfill" on `keys`, and the backfill daemon's pass: its runs, queued."""
    result = execute_dagster_graphql(
        context,
        LAUNCH_PARTITION_BACKFILL_MUTATION,
        {"backfillParams": {"assetSelection": [{"path": ["range_catchup"]}], "partitionNames": keys}},
    )
    assert result.data["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", result.data
    list(execute_backfill_iteration(context.process_context, logging.getLogger("backfill")))
    backfill_id = result.data["launchPartitionBackfill"]["backfillId"]
    return instance_runs(context.instance, backfill_id)


def instance_runs(instance, backfill_id) -> list[dg.DagsterRun]:
    return instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
def test_a_backfill_run_carries_its_mission_tag_from_the_queue_not_only_once_it_starts(tmp_path, monkeypatch):
    """Issue 22: the instance's run coordinator (the repository's dagster.yaml) tags a backfill run
    of range_catchup with the mission that owns its ranges (defs/instance/ownership.py) as it queues."""
    import yaml

    from catchup_assets.defs.location import INSTANCE_YAML
    from catchup_assets.defs.mission.run_context import MISSION_TAG

    monkeypatch.setenv("CATCHUP_STORAGE_ROOT", str(tmp_path / "storage"))
    (tmp_path / "home").mkdir()
    coordinator = yaml.safe_load(INSTANCE_YAML)["run_coordinator"]
    with dg.instance_for_test(temp_dir=str(tmp_path / "home"), overrides={"run_coordinator": coordinator}) as instance:
        assert defs.resolve_job_def("mission_plan_job").execute_in_process(
            run_config=plan_config("m1", 3, first_range=36), instance=instance
        )
        keys = instance.get_dynamic_partitions("ledger_ranges")
        assert not run_ranges(instance, keys, "m1", with_resource(sim_fail_targets=[int(keys[1][-10:])])).success
        # A later mission over other ranges is now the newest plan; m1's condemned range is still m1's.
        assert defs.resolve_job_def("mission_plan_job").execute_in_process(
            run_config=plan_config("m2", 2, first_range=39), instance=instance
        )
        later = instance.get_dynamic_partitions("ledger_ranges")[3:]

        with define_out_of_process_context(DEFS_FILE, None, instance) as context:
            [run] = launch_backfill(context, [keys[1]])
            queued = instance.get_run_by_id(run.run_id)
            assert queued.status == dg.DagsterRunStatus.QUEUED and queued.tags[MISSION_TAG] == "m1"
            events = [e.message for e in instance.all_logs(run.run_id) if e.is_dagster_event]
            assert any(f"tagged {MISSION_TAG}=m1 at launch" in (m or "") for m in events), events
            # A range no mission condemned belongs to the newest plan.
            [fresh] = launch_backfill(context, [later[0]])
            assert instance.get_run_by_id(fresh.run_id).tags[MISSION_TAG] == "m2"
            # m1's failure in one run with a range it did not fail, m2 the newest plan: the rule does
            # not decide, the run queues untagged and refuses itself at start, saying how to choose.
            [mixed] = launch_backfill(context, [keys[1], keys[2]])
            assert MISSION_TAG not in instance.get_run_by_id(mixed.run_id).tags
            assert instance.run_coordinator.cancel_run(mixed.run_id)

            # The tagged run runs m1's range under m1 and completes it.
            list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(context.process_context))
            deadline = time.monotonic() + 180
            waiting = [run.run_id, fresh.run_id]
            while time.monotonic() < deadline and not all(instance.get_run_by_id(i).is_finished for i in waiting):
                time.sleep(0.5)
            assert [instance.get_run_by_id(i).status for i in waiting] == [dg.DagsterRunStatus.SUCCESS] * 2
        assert statuses(instance, [keys[1]])[keys[1]] == dg.AssetPartitionStatus.MATERIALIZED
        assert RecordStore(Store(str(tmp_path / "storage")), "m1").load([keys[1]])[0]
