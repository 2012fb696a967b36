"""A dispatcher killed mid-mission and retried by Dagster finishes the mission:
no range runs twice at once, no measurement is lost (L10, T2).

The run executes in its own process (as under a run launcher); the test kills
that process group with SIGKILL while attempts are in flight, then does what
the daemons do for a dead run: run monitoring marks it failed, and the run
retry daemon re-executes it from failure with a retry number tag.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.defs.assets.range_assets import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from dagster_defs import catchup_job, defs, plan_config

TESTS = Path(__file__).parents[1]
RUN_SCRIPT = textwrap.dedent(
    """
    import sys
    import dagster as dg
    from dagster import reconstructable
    from dagster_defs import catchup_job
    tags = dict(arg.split("=", 1) for arg in sys.argv[1:])
    dg.execute_job(reconstructable(catchup_job), dg.DagsterInstance.get(), tags=tags)
    """
)


def wait_for(predicate, timeout=60.0, every=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return False


def plan_and_start(instance, mission, n, first_range):
    """Plan a mission in-process, then run all its ranges in a process of their own."""
    defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config=plan_config(mission, n, first_range=first_range, parallelism=min(n, 4)), instance=instance
    )
    keys = instance.get_dynamic_partitions("ledger_ranges")
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: mission}
    # Its stderr (the dispatcher's warnings) is kept beside the instance: a failing test shows it.
    with open(run_worker_log(), "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUN_SCRIPT, *(f"{k}={v}" for k, v in tags.items())],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return keys, tags, proc


def run_worker_log() -> Path:
    return Path(os.environ["DAGSTER_HOME"]).parent / "run_worker.log"


def run_worker_said(lines: int = 60) -> str:
    """The last lines the run worker wrote to stderr, for a failing assertion's message."""
    try:
        return "\n".join(run_worker_log().read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no run worker log)"


@pytest.mark.slow
def test_L10_killed_dispatcher_retried_by_dagster_finishes_without_double_runs(tmp_path, home):
    instance, storage = home, tmp_path / "storage"
    # Six heavy ranges near the tip (a few seconds each), four at a time.
    keys, tags, proc = plan_and_start(instance, "mk", 6, first_range=42)
    backend = LocalBackend(tmp_path / "work", "mk")

    def materialized():
        st = instance.get_status_by_partition(dg.AssetKey("range_catchup"), keys, ledger_ranges_partitions_def) or {}
        return [k for k, s in st.items() if s == dg.AssetPartitionStatus.MATERIALIZED]

    live = lambda: [s for s in backend.observe() if s.live]  # noqa: E731
    try:
        assert wait_for(lambda: materialized() and live(), timeout=90), "mission never got going"
        time.sleep(1.5)  # the run's marks of the ranges it started are written each second (issue 26)
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
        assert [r.attempt for r in chain] == list(range(1, len(chain) + 1))
        assert [r.outcome for r in chain] == ["oom"] * (len(chain) - 1) + ["ok"], chain
        for before, after in zip(chain, chain[1:], strict=False):
            assert before.finished_at <= after.started_at
        # No measurement lost: every attempt has its peaks and time; the last its transactions.
        assert all(r.peak_anon_bytes and r.seconds for r in chain) and chain[-1].tx_apply_count


@pytest.mark.slow
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
