"""Driving benchmarks/dagster_backfill.py's backfill as the UI and the daemons send it: the mission planned in
process, the code location's server started, `launchPartitionBackfill` sent, one backfill daemon and one run
queue iteration, then the waits for `live` attempts and for the run's end, and what the instance holds after it
(event log, partition marks, storage growth)."""

from __future__ import annotations

import contextlib
import cProfile
import logging
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import dagster as dg

from benchmarks.harness.backfill_process import environment, first, read_notes, wait_until
from benchmarks.harness.dagster_location import ENV, build_defs
from benchmarks.harness.dagster_storage import dir_bytes, instance_storage
from catchup_assets.defs.mission.range_events import SUBSET_ENV
from catchup_assets.defs.mission.run_context import ledger_ranges_partitions_def

LOCATION_FILE = str(Path(__file__).resolve().with_name("dagster_location.py"))


PYCACHE = Path(tempfile.gettempdir()) / "catchup-bench-pycache"


MISSION = "bench"


LEDGERS, OVERLAP = 16_000, 320


def plan_config(args, previous: str) -> dict:
    cfg = {
        "mission": MISSION,
        "first_ledger": 1,
        "last_ledger": args.ranges * LEDGERS,
        "ledgers_per_range": LEDGERS,
        "overlap": OVERLAP,
        "parallelism": args.parallelism,
        "order": args.order,
        "lengths": "uniform",  # `--ranges` partitions, the grid: auto (the default since issue 37) may cut them
        "previous_profile": previous,
    }
    return {"ops": {"mission_plan": {"config": cfg}}}


def bytecode_env(args) -> dict[str, str | None]:
    """Child processes keep compiled bytecode in a cache of their own (not in the venv), unless `--bytecode as-is`."""
    if args.bytecode == "as-is":
        return {}
    return {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": str(PYCACHE)}


# What the code server, the run worker and the step worker import, compiled once before the timing.
WARM = """
import runpy, sys
import dagster._cli, dagster._cli.api, dagster._grpc.server, dagster._core.executor.multiprocess
import dagster._core.execution.api, dagster._core.execution.plan.execute_step
import dagster_graphql.schema
import pyarrow.dataset, pandas, fsspec.implementations.local
runpy.run_path(sys.argv[1])
"""


def warm_bytecode(args) -> float:
    t = time.perf_counter()
    if args.bytecode != "as-is":
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
        subprocess.run(
            [sys.executable, "-W", "ignore", "-c", WARM, LOCATION_FILE],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    return time.perf_counter() - t


def bench_env(args, storage: Path, report: Path, profile: Path | None) -> dict[str, str | None]:
    return {
        **bytecode_env(args),
        # Dagster's own switch (read where runs are created, i.e. in this process): one planned event per
        # asset with the partition subset, instead of one per partition (defs/mission/range_events.py).
        SUBSET_ENV: "true" if args.planned_events == "subset" else None,
        "CATCHUP_STORAGE_ROOT": str(storage),
        ENV["ranges"]: str(args.ranges),
        ENV["live"]: str(args.live),
        ENV["speed"]: repr(args.speed),
        ENV["poll_seconds"]: repr(args.poll),
        ENV["report"]: str(report),
        ENV["profile"]: str(profile or ""),
        ENV["condemn"]: str(args.condemn),
    }


def failure_text(instance, run_id: str) -> str:
    out = []
    for e in instance.all_logs(run_id):
        if e.dagster_event is not None and e.dagster_event.is_failure:
            error = getattr(e.dagster_event.event_specific_data, "error", None)
            out.append((error.message if error else e.user_message)[:500])
    return "; ".join(out) or "no failure event"


def measure_dagster(args, tmp: Path, previous: str) -> dict:
    """Plan, launch the backfill as the UI and daemons do, wait for `live`, then for the run to finish."""
    # Deferred: dagster_graphql and the daemons are heavy imports, the smoke test pays them once.
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
    from dagster._serdes import serialize_value
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    home, storage, report = tmp / "home", tmp / "storage", tmp / "run.jsonl"
    profile = tmp / "step.prof" if args.profile else None
    home.mkdir()
    quiet = logging.getLogger("catchup_bench.daemons")
    quiet.setLevel(logging.WARNING)
    out: dict = {}
    with (
        instance_storage(args.storage, home, args.postgres_url) as store,
        environment({**bench_env(args, storage, report, profile), **store.env}),
        dg.instance_for_test(temp_dir=str(home), overrides=store.overrides) as instance,
    ):
        out["storage_label"], out["storage_what"] = store.size_label, store.what
        t = time.perf_counter()
        settings = {"ranges": args.ranges, "live": args.live, "speed": args.speed, "poll_seconds": args.poll}
        plan = (
            build_defs(**settings)
            .resolve_job_def("mission_plan_job")
            .execute_in_process(run_config=plan_config(args, previous), instance=instance)
        )
        assert plan.success, "mission_plan failed"
        out["plan_s"] = time.perf_counter() - t
        keys = instance.get_dynamic_partitions("ledger_ranges")
        assert len(keys) == args.ranges, f"{len(keys)} partitions registered, expected {args.ranges}"

        t = time.perf_counter()
        with define_out_of_process_context(LOCATION_FILE, None, instance) as context:
            out["code_server_s"] = time.perf_counter() - t
            history_before = store.size_bytes()
            t0 = time.time()
            result = execute_dagster_graphql(
                context,
                LAUNCH_PARTITION_BACKFILL_MUTATION,
                {"backfillParams": {"assetSelection": [{"path": ["range_catchup"]}], "partitionNames": keys}},
            )
            out["t_mutation"] = time.time()
            launched = result.data["launchPartitionBackfill"]
            assert launched["__typename"] == "LaunchBackfillSuccess", result.data
            backfill_id = launched["backfillId"]
            profiler = cProfile.Profile() if args.profile else None
            with profiler or contextlib.nullcontext():
                list(execute_backfill_iteration(context.process_context, quiet))
            if profiler is not None:
                out["backfill_profile"] = profile_top(profiler, args.profile_lines)
            out["t_backfill_iteration"] = time.time()
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            assert len(runs) == 1, f"the backfill made {len(runs)} runs, expected one"
            run_id = runs[0].run_id
            list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(context.process_context))
            out["t_queue_iteration"] = time.time()

            def live_or_dead():
                if first(read_notes(report), "live"):
                    return True
                run = instance.get_run_by_id(run_id)
                if run.is_finished:
                    raise RuntimeError(
                        f"run {run_id} ended {run.status.value} before {args.live} live: "
                        + failure_text(instance, run_id)
                    )
                return False

            out["terminated"] = False
            try:
                wait_until(live_or_dead, args.timeout, f"{args.live} attempts live")
                out["t_live_seen"] = time.time()
                # What the UI shades as the run reaches `live`, then once the writer's next batch is in.
                out["marks_at_live"] = marking(instance, keys)
                time.sleep(2.0)
                out["marks_after_live"] = marking(instance, keys)
                # The drain: let the run finish, so its event log covers every range; past the timeout, stop it.
                with contextlib.suppress(TimeoutError):
                    wait_until(lambda: instance.get_run_by_id(run_id).is_finished, args.timeout, "the run", 0.25)
            finally:
                if not instance.get_run_by_id(run_id).is_finished:
                    out["terminated"] = True
                    instance.run_launcher.terminate(run_id)
                    with contextlib.suppress(TimeoutError):
                        wait_until(lambda: instance.get_run_by_id(run_id).is_finished, 60, "the terminated run", 0.25)
            out["t_run_finished_seen"] = time.time()
            t = time.perf_counter()
            list(execute_backfill_iteration(context.process_context, quiet))
            out["backfill_final_iteration_s"] = time.perf_counter() - t
            out["backfill_status"] = instance.get_backfill(backfill_id).status.value
        out["t0"] = t0
        out["run_id"] = run_id
        run = instance.get_run_by_id(run_id)
        out["run_status"] = run.status.value
        out["run_tags"] = {k: v for k, v in run.tags.items() if k.startswith("dagster/asset_partition_range")}
        entries = list(instance.all_logs(run_id))
        out["events"] = entries_summary(entries, serialize_value)
        out["history_bytes"] = store.size_bytes() - history_before
        out["compute_log_bytes"] = dir_bytes(home / "storage")
        materialized = instance.get_materialized_partitions(dg.AssetKey("range_catchup"))
        out["materialized"] = len(materialized)
        out["marks_at_end"] = marking(instance, keys)
        out["condemned"] = condemned_in(instance, run_id)
    out["notes"] = read_notes(report)
    if profile is not None and profile.exists():
        out["profile"] = profile_top(profile, args.profile_lines)
    return out


def marking(instance, keys) -> dict[str, int]:
    """How many partitions the status cache (as the UI reads it) has in each state."""
    got = instance.get_status_by_partition(dg.AssetKey("range_catchup"), keys, ledger_ranges_partitions_def)
    return dict(Counter(v.value if v is not None else "none" for v in got.values()))


def condemned_in(instance, run_id: str) -> int:
    """The ranges the step's failure names as condemned (range_catchup's `condemned` metadata), 0 if it succeeded."""
    for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        meta = getattr(e.dagster_event.event_specific_data.user_failure_data, "metadata", None) or {}
        if "condemned" in meta:
            return len(meta["condemned"].value)
    return 0


def entries_summary(entries, serialize_value) -> dict:
    by_type: Counter = Counter()
    times: dict[str, tuple[float, int | None]] = {}
    size = 0
    for e in entries:
        kind = e.dagster_event.event_type.name if e.dagster_event is not None else "LOG_MESSAGE"
        by_type[kind] += 1
        size += len(serialize_value(e))
        if kind not in times:
            times[kind] = (e.timestamp, e.dagster_event.pid if e.dagster_event is not None else None)
        if kind in ("STEP_SUCCESS", "STEP_FAILURE", "RUN_SUCCESS", "RUN_FAILURE", "RUN_CANCELED"):
            times[kind] = (e.timestamp, e.dagster_event.pid)
    return {"count": len(entries), "by_type": dict(by_type), "serialized_bytes": size, "times": times}


def profile_top(source: Path | cProfile.Profile, lines: int) -> list[list[object]]:
    stats = pstats.Stats(str(source) if isinstance(source, Path) else source)
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:lines]:
        where = f"{Path(file).name}:{line}({fn})" if line else fn
        rows.append([where, nc, round(tt, 2), round(ct, 2)])
    return rows
