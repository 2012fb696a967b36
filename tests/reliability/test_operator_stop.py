"""A stop never condemns (L37): SIGTERM or SIGINT to a process dispatching a mission stops
new dispatches at once, shuts the attempts in flight down, records them `stopped`, charged
to no budget, and the next run completes every range.

Each process is a real one, signalled as an operator's terminal, `timeout` or Dagster's
run termination does: a local mission's run worker (as a run launcher starts it), and
`catchup-assets demo`. The assertions read the attempt records, the local backend's
registry and the Dagster instance.

Issue 36 item 3: a stop is not a failure. The stopped run ends CANCELED, as a termination from the
UI does, so none of its ranges shows FAILED (the red of a condemned range), and no next mission is
planned from its profile.
"""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.cli.demo.observe import judge_from_records
from catchup_assets.core.classify.outcomes import RetryPolicy, decide
from catchup_assets.core.dispatch.range_book import past_attempts
from catchup_assets.defs.assets.range_assets import (
    MISSION_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    ledger_ranges_partitions_def,
)
from catchup_assets.defs.location import load_location
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from catchup_assets.defs.sensors.next_mission import next_mission_sensor
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table
from dagster_defs import catchup, catchup_job, defs
from kit.run_worker import plan_and_start, run_worker_said, wait_for

TESTS = Path(__file__).parents[1]
GRACE = 15.0  # the run's shutdown grace (range_catchup, DispatchConfig.stop_grace_seconds)


def tick(instance, sensor):
    """One tick of `sensor` on the test deployment, as the daemon evaluates it (with the instance's ref)."""
    resources = {"catchup": CatchupResource(**catchup.model_dump())}
    d = dg.Definitions(assets=defs.assets, jobs=defs.jobs, sensors=[sensor], resources=resources)
    with dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), definitions=d, resources=resources
    ) as context:
        return sensor.evaluate_tick(context)


def assert_nothing_charged(records: RecordStore, keys, stopped_ids: set[str]) -> None:
    """Every attempt the stop ended is recorded `stopped`, and no range spent a budget on it."""
    recs, done = records.load()
    assert done == set(recs)  # each recorded, done mark last
    outcomes = {f"{k}-a{a:03d}": r.outcome for (k, a), r in recs.items()}
    assert {i: outcomes.get(i) for i in stopped_ids} == dict.fromkeys(stopped_ids, "stopped")
    assert not {"failed", "interrupted", "unknown", "disrupted"} & set(outcomes.values()), outcomes
    _, condemned = judge_from_records(records, keys, RetryPolicy())
    assert condemned == {}
    for key in keys:
        mine = {a: r for (k, a), r in recs.items() if k == key}
        charged = decide(past_attempts(mine, set(mine)), RetryPolicy()).counts
        assert {g: n for g, n in charged.items() if n and g != "oom"} == {}, (key, mine)


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_L37_issue36_a_signalled_run_worker_condemns_nothing_fails_no_range_plans_no_next_and_the_next_run_completes(
    tmp_path, home, signum
):
    instance = home
    keys, tags, proc = plan_and_start(instance, "ms", 6, first_range=44)  # 4 at once: 2 wait
    backend = LocalBackend(tmp_path / "work", "ms")
    live = lambda: {s.attempt_id for s in backend.observe() if s.live}  # noqa: E731
    assert wait_for(lambda: len(live()) == 4, timeout=60), "mission never got going"
    in_flight = live()
    # Issue 26: planned as one subset, the run marks what it started: those 4 in progress, the 2 waiting not.
    marked = lambda: Counter(  # noqa: E731
        s and s.value
        for s in instance.get_status_by_partition(
            dg.AssetKey("range_catchup"), keys, ledger_ranges_partitions_def
        ).values()
    )
    assert wait_for(lambda: marked() == {"IN_PROGRESS": 4, None: 2}, timeout=10), marked()
    os.kill(proc.pid, signum)
    t0 = time.monotonic()
    proc.wait(timeout=60)
    assert time.monotonic() - t0 < GRACE  # within the shutdown grace
    assert live() == set()  # nothing left running unowned
    run = instance.get_runs(filters=dg.RunsFilter(tags={MISSION_TAG: "ms"}))[0]
    assert run.status == dg.DagsterRunStatus.CANCELED  # stopped, as a termination from the UI: not a failure
    assert run.tags["catchup/ended"] == "stopped"
    failure = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)[0]
    assert f"run interrupted, stopped by the operator ({signal.Signals(signum).name})" in str(
        failure.dagster_event.event_specific_data.error.message
    )
    assert instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_RESTARTED) == []
    records = RecordStore(Store(os.environ["CATCHUP_STORAGE_ROOT"]), "ms")
    # Attempts that started after the look above were stopped too: at least those were in flight.
    recs, _ = records.load()
    stopped = {f"{k}-a{a:03d}" for (k, a), r in recs.items() if r.outcome == "stopped"}
    ended_by_themselves = {f"{k}-a{a:03d}" for (k, a), r in recs.items() if r.outcome in ("ok", "oom")}
    assert stopped >= in_flight - ended_by_themselves, (
        {k: (r.outcome, r.reason) for k, r in recs.items()},
        run_worker_said(),
    )
    assert_nothing_charged(records, keys, stopped)
    # Issue 36: stopped, not condemned: no range shows FAILED. Those that completed before the stop are
    # materialized; the rest, started or not, show not started (missing) until a run completes them.
    completed = {k for (k, _), r in recs.items() if r.outcome == "ok"}
    assert marked() == {k: n for k, n in {"MATERIALIZED": len(completed), None: 6 - len(completed)}.items() if n}
    assert run.tags["catchup/ranges-left"] == str(6 - len(completed))

    # The stopped run is profiled, and no next mission is planned from it; the tick says why.
    [request] = [r for r in tick(instance, mission_finished_sensor).run_requests if r.partition_key == "ms"]
    profile = defs.resolve_job_def("profile_job")
    assert profile.execute_in_process(instance=instance, partition_key="ms", tags=request.tags).success
    skipped = tick(instance, next_mission_sensor)
    assert not skipped.run_requests
    assert skipped.skip_message.startswith(
        f"no next mission after ms: its last run was stopped (stopped, {6 - len(completed)} ranges left, "
        f"run {run.run_id})"
    )

    # The operator's next run over the same partitions: every range completes, resumed.
    again = dg.execute_job(
        dg.reconstructable(catchup_job),
        instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(run.run_id, instance),
        tags=tags,
    )
    assert again.success
    assert marked() == {"MATERIALIZED": 6}
    recs, done = records.load()
    assert done == set(recs)
    for key in keys:
        chain = [recs[(key, a)] for a in sorted(a for k, a in recs if k == key)]
        assert chain[-1].outcome == "ok" and {r.outcome for r in chain} <= {"stopped", "oom", "ok"}, chain


def demo_attempts(d: Path) -> list[Path]:
    return sorted(d.glob("work/*/attempts/*/supervisor.json"))


def test_L37_sigterm_to_the_demo_exits_interrupted_within_the_grace_condemns_nothing_and_the_next_run_completes(
    tmp_path,
):
    script = Path(sys.executable).parent / "catchup-assets"
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CATCHUP_STORAGE_ROOT")}
    d = tmp_path / "demo"
    proc = subprocess.Popen(
        [
            str(script),
            "demo",
            "--dir",
            str(d),
            "--ranges",
            "8",
            "--parallelism",
            "4",
            "--speed",
            "1000000",
            "--disruption-rate",
            "0",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: signalled as a terminal's Ctrl-C would be
    )
    try:
        assert wait_for(lambda: len(demo_attempts(d)) >= 4, timeout=120), "the demo never dispatched"
        os.killpg(proc.pid, signal.SIGTERM)  # the whole group, as `kill -TERM -PGID` does
        t0 = time.monotonic()
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert took < GRACE, took
    (mission,) = [p.name for p in (d / "storage").iterdir() if p.is_dir()]  # the second mission never began
    assert f"catchup-assets demo: interrupted by SIGTERM: mission {mission}: " in out
    assert "0 ranges condemned" in out
    records = RecordStore(Store(str(d / "storage")), mission)
    recs, _ = records.load()
    stopped = {f"{k}-a{a:03d}" for (k, a), r in recs.items() if r.outcome == "stopped"}
    assert stopped, recs
    keys = sorted({k for k, _ in recs})
    assert_nothing_charged(records, keys, stopped)
    # Its supervisors were stopped by the dispatcher, each writing its verdict: none runs on.
    assert LocalBackend(d / "work", mission).observe() == []

    # The operator's next run of the mission's partitions, on the demo's own instance: all complete.
    plan_keys = sorted(read_table(Store(str(d / "storage")), layout.plan(mission)).column("range_key").to_pylist())
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        again = (
            load_location(d)
            .resolve_job_def("range_catchup_job")
            .execute_in_process(
                instance=instance,
                tags={MISSION_TAG: mission, RANGE_START_TAG: plan_keys[0], RANGE_END_TAG: plan_keys[-1]},
                raise_on_error=False,
            )
        )
        assert again.success
        status = instance.get_status_by_partition(dg.AssetKey("range_catchup"), plan_keys, ledger_ranges_partitions_def)
    assert set(status.values()) == {dg.AssetPartitionStatus.MATERIALIZED}
    recs, done = records.load()
    assert done == set(recs) and {r.outcome for r in recs.values()} <= {"stopped", "oom", "ok"}
