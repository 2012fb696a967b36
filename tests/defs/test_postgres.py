"""The mission path on a Postgres-backed instance, configured as the Helm chart configures it.

A throwaway PostgreSQL server (tests/pg_server.py) holds the run, event log and
schedule storage of dagster-postgres, as charts/dagster-values.yaml has the
dagster chart render them. The backfills go the UI's way, as in test_backfill:
the GraphQL mutation over an out-of-process code location, then one iteration
each of the backfill daemon and the run queue daemon, whose run launcher starts
each run in its own process (which opens the same Postgres storage).
Without PostgreSQL binaries the tests are skipped, not failed.
"""

import logging
import time
import uuid

import dagster as dg
import psycopg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from dagster._daemon.backfill import execute_backfill_iteration
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

from catchup_assets.defs.mission.range_events import planned_as_subset
from dagster_defs import FAIL_TARGETS_ENV
from kit.assets import RANGE, plan, statuses
from kit.range_events import run as run_thing
from kit.range_events import seen
from kit.range_events import status as thing_status
from pg_server import PASSWORD, chart_instance_config, fresh_database, missing_reason, postgres_server

DEFS_FILE = str(__import__("pathlib").Path(__file__).parents[1].joinpath("dagster_defs.py"))


@pytest.fixture(scope="module")
def pg_server():
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    with postgres_server() as server:
        yield server


@pytest.fixture
def pg_instance(pg_server, tmp_path, monkeypatch):
    monkeypatch.setenv("CATCHUP_STORAGE_ROOT", str(tmp_path / "storage"))
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", PASSWORD)
    (tmp_path / "home").mkdir()
    with fresh_database(pg_server, f"catchup_{uuid.uuid4().hex[:12]}") as db:
        overrides = chart_instance_config(pg_server, db)
        with dg.instance_for_test(temp_dir=str(tmp_path / "home"), overrides=overrides) as instance:
            yield instance, {**pg_server, "dbname": db}


def backfill(instance, keys) -> list[dg.DagsterRun]:
    """Backfill `keys` as the UI and the daemons do; wait for its runs; return them finished.

    Each call starts its own code server, so the runs it launches inherit the environment as it is now.
    """
    with define_out_of_process_context(DEFS_FILE, None, instance) as context:
        result = execute_dagster_graphql(
            context,
            LAUNCH_PARTITION_BACKFILL_MUTATION,
            {"backfillParams": {"assetSelection": [{"path": ["range_catchup"]}], "partitionNames": keys}},
        )
        assert result.data["launchPartitionBackfill"]["__typename"] == "LaunchBackfillSuccess", result.data
        backfill_id = result.data["launchPartitionBackfill"]["backfillId"]
        list(execute_backfill_iteration(context.process_context, logging.getLogger("backfill")))
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(context.process_context))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and any(not instance.get_run_by_id(r.run_id).is_finished for r in runs):
            time.sleep(0.5)
        return [instance.get_run_by_id(r.run_id) for r in runs]


def range_tags(run: dg.DagsterRun) -> tuple[str, str]:
    return run.tags[ASSET_PARTITION_RANGE_START_TAG], run.tags[ASSET_PARTITION_RANGE_END_TAG]


def rows_in_postgres(server: dict, run_id: str) -> int:
    """The run's event-log rows, read from the database itself rather than through Dagster."""
    with psycopg.connect(host=server["host"], port=server["port"], user=server["user"], dbname=server["dbname"]) as c:
        return c.execute("SELECT count(*) FROM event_logs WHERE run_id = %s", (run_id,)).fetchone()[0]


def test_L9_mission_on_the_chart_s_postgres_instance_condemned_range_fails_alone_and_its_backfill_completes(
    pg_instance, monkeypatch
):
    instance, server = pg_instance
    # The chart's storage, not the embedded default's SQLite.
    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(instance.schedule_storage, PostgresScheduleStorage)

    assert plan(instance, "pg", 4).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert keys == sorted(keys) and len(keys) == 4
    bad = keys[1]

    # One backfill over the mission's partitions is one run (the asset's single-run backfill policy);
    # the broken archive condemns `bad` in it.
    monkeypatch.setenv(FAIL_TARGETS_ENV, str(int(bad[-10:])))
    (run,) = backfill(instance, keys)
    assert range_tags(run) == (keys[0], keys[-1])
    assert run.status == dg.DagsterRunStatus.FAILURE
    errors = " ".join(
        str(e.dagster_event.event_specific_data.error)
        for e in instance.all_logs(run.run_id)
        if e.dagster_event is not None and e.dagster_event.is_step_failure
    )
    assert bad in errors and "failed budget spent" in errors
    # Planned as one subset (conftest.py sets the chart's switch); the run marks a range in progress with a
    # planned row of its own, written by the range writer within its linger. A range done first is never
    # marked (a mark newer than its materialization would show it in progress, then FAILED), so which of
    # the healthy ranges got a row is timing; what holds always: the condemned range has one, and every
    # row of a materialized range came before its materialization.
    assert planned_as_subset(instance, run.run_id, RANGE)
    planned = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED)
    by_partition = [r.event_log_entry.dagster_event.event_specific_data.partition for r in planned.records]
    assert by_partition.count(None) == 1 and bad in by_partition
    assert set(by_partition) - {None} <= set(keys) and len(by_partition) == len(set(by_partition))
    mats = {
        r.event_log_entry.dagster_event.partition: r.storage_id
        for r in instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    }
    assert sorted(mats) == [k for k in keys if k != bad]
    assert all(r.storage_id < mats.get(p, float("inf")) for r, p in zip(planned.records, by_partition, strict=True))
    # Each attempt's start went in through the same batched INSERTs: every range shows its chain.
    observed = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION, limit=500)
    ranges = [r.event_log_entry.dagster_event for r in observed.records]
    assert {e.partition for e in ranges if e.asset_key == dg.AssetKey("range_catchup")} == set(keys)
    # And the mission's page (issue 36): its counts on range_profile's partition of the mission.
    assert {e.partition for e in ranges if e.asset_key == dg.AssetKey("range_profile")} == {"pg"}
    # L9: condemning it did not stop the others; it alone shows FAILED.
    st = statuses(instance, keys)
    assert st[bad] == dg.AssetPartitionStatus.FAILED
    assert [st[k] for k in keys if k != bad] == [dg.AssetPartitionStatus.MATERIALIZED] * 3
    # Dagster's events went to Postgres: the database holds every entry the instance returns.
    assert rows_in_postgres(server, run.run_id) == len(instance.all_logs(run.run_id)) > 0

    # The archive is fixed; the operator backfills the failed range alone.
    monkeypatch.delenv(FAIL_TARGETS_ENV)
    (again,) = backfill(instance, [bad])
    assert range_tags(again) == (bad, bad)
    assert again.status == dg.DagsterRunStatus.SUCCESS
    assert set(statuses(instance, keys).values()) == {dg.AssetPartitionStatus.MATERIALIZED}
    mats = instance.fetch_materializations(RANGE, limit=50).records
    assert sorted(m.partition_key for m in mats) == sorted(keys)  # one each: nothing ran twice


def test_issue26_on_postgres_a_started_range_is_in_progress_and_the_unfinished_fail_over_an_earlier_success(
    pg_instance,
):
    """tests/kit/range_events.py's run on the chart's storage: the planned rows go in one INSERT a batch."""
    instance, server = pg_instance
    assert run_thing(instance, mode="ours", succeed="1").success
    result = run_thing(instance, mode="ours")
    assert not result.success and seen["subset"] and seen["b_in_progress"]
    assert seen["while_running"] == {"a": "MATERIALIZED", "b": "IN_PROGRESS", "c": "MATERIALIZED", "d": "MATERIALIZED"}
    assert thing_status(instance) == {"a": "MATERIALIZED", "b": "FAILED", "c": "FAILED", "d": "FAILED"}
    assert rows_in_postgres(server, result.run_id) == len(instance.all_logs(result.run_id))
