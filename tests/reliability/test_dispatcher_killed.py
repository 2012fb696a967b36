"""A dispatcher killed mid-mission and retried by Dagster finishes the mission:
no range runs twice at once, no measurement is lost (L10, T2).

The run executes in its own process (as under a run launcher); the test kills
that process group with SIGKILL while attempts are in flight, then does what
the daemons do for a dead run: run monitoring marks it failed, and the run
retry daemon re-executes it from failure with a retry number tag.
"""

import os
import signal
import time

import dagster as dg

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.defs.assets.range_assets import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from dagster_defs import catchup_job
from kit.run_worker import plan_and_start, wait_for


def test_L10_killed_dispatcher_retried_by_dagster_finishes_without_double_runs(tmp_path, home):
    instance, storage = home, tmp_path / "storage"
    # Six heavy ranges near the tip (a few seconds each), four at a time.
    keys, tags, proc = plan_and_start(instance, "mk", 6, first_range=42)
    backend = LocalBackend(tmp_path / "work", "mk")

    def materialized():
        st = instance.get_status_by_partition(dg.AssetKey("range_catchup"), keys, ledger_ranges_partitions_def) or {}
        return [k for k, s in st.items() if s == dg.AssetPartitionStatus.MATERIALIZED]

    live = lambda: [s for s in backend.observe() if s.live]  # noqa: E731

    def every_live_range_marked() -> bool:
        """The run marks a range in progress within its writer's 1 s linger of its start (issue 26)."""
        st = instance.get_status_by_partition(dg.AssetKey("range_catchup"), keys, ledger_ranges_partitions_def) or {}
        running = {s.range_key for s in live()}
        return bool(running) and all(st.get(k) == dg.AssetPartitionStatus.IN_PROGRESS for k in running)

    try:
        assert wait_for(lambda: materialized() and every_live_range_marked(), timeout=90), "mission never got going"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the dispatcher dies; its attempts live on
    proc.wait()
    in_flight_at_kill = {s.attempt_id for s in live()}
    assert in_flight_at_kill
    run = instance.get_runs(filters=dg.RunsFilter(tags={MISSION_TAG: "mk"}))[0]
    assert run.status == dg.DagsterRunStatus.STARTED  # nobody told Dagster
    instance.report_run_failed(run)  # what run monitoring does for a dead run worker
    # Planned as one subset, a dead step leaves the ranges it started and did not complete FAILED.
    st = instance.get_status_by_partition(dg.AssetKey("range_catchup"), keys, ledger_ranges_partitions_def)
    started = {k for k in keys if any(a.startswith(k) for a in in_flight_at_kill)}
    assert {st[k] for k in started} <= {dg.AssetPartitionStatus.FAILED, dg.AssetPartitionStatus.MATERIALIZED}
    assert dg.AssetPartitionStatus.FAILED in {st[k] for k in started}, st
    retry = dg.execute_job(
        dg.reconstructable(catchup_job),
        instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(run.run_id, instance),
        # The retry daemon copies the parent's tags (use_parent_run_tags) and numbers the retry.
        tags={**tags, "dagster/retry_number": "1"},
    )
    assert retry.success
    assert sorted(materialized()) == sorted(keys)
    records, done = RecordStore(Store(str(storage)), "mk").load()
    assert done == set(records)
    assert {f"{k}-a{a:03d}" for k, a in records} >= in_flight_at_kill  # adopted, recorded
    for key in keys:
        chain = [records[(key, a)] for a in sorted(a for k, a in records if k == key)]
        # A retry only after a failed attempt (the heavy ranges OOM once on the
        # catch-all tier), and never while the previous attempt still ran.
        numbers = [r.attempt for r in chain]
        # Each number started once, in order. One may be missing: claimed, then the kill came before
        # its Job; the retry reads the claim and spends the number rather than reuse it (claims.py).
        spent = set(range(1, numbers[-1] + 1)) - set(numbers)
        assert len(spent) <= 1 and all((storage / layout.claim("mk", key, a)).exists() for a in spent), chain
        assert [r.outcome for r in chain] == ["oom"] * (len(chain) - 1) + ["ok"], chain
        for before, after in zip(chain, chain[1:], strict=False):
            assert before.finished_at <= after.started_at
        # No measurement lost: every attempt has its peaks and time; the last its transactions.
        assert all(r.peak_anon_bytes and r.seconds for r in chain) and chain[-1].tx_apply_count


def test_L37_a_terminated_run_stops_its_attempts_first(tmp_path, home):
    instance = home
    keys, tags, proc = plan_and_start(instance, "mt", 4, first_range=44)
    backend = LocalBackend(tmp_path / "work", "mt")
    assert wait_for(lambda: len([s for s in backend.observe() if s.live]) == 4, timeout=60)
    time.sleep(1)
    # Dagster interrupts a run it terminates (SIGINT to the run process).
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) is not None
    assert [s.attempt_id for s in backend.observe() if s.live] == []  # nothing left running unowned
    run = instance.get_runs(filters=dg.RunsFilter(tags={MISSION_TAG: "mt"}))[0]
    assert run.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
    steps = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_RESTARTED)
    assert steps == []  # the step was not retried into starting them all again
