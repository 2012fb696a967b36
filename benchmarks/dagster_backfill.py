"""Through Dagster: one backfill (a single run) of 4000 partitions, from launch to 2000 attempts live.

The backfill goes the way the UI and the daemons send it, on a temporary
instance with the project's instance config (dagster.yaml; `--storage postgres`:
the Helm chart's, dagster-postgres on a throwaway server): the UI's GraphQL
mutation `launchPartitionBackfill` over an out-of-process code location
(benchmarks/harness/dagster_location.py: the project's definitions, attempts on a
`VirtualBackend` over the seed-shaped `Workload`), then one backfill daemon
iteration (it creates the run: `BackfillPolicy.single_run()`), one run queue
daemon iteration (the instance's run launcher asks the code server to start
the run worker process; the default executor starts the step in its own
process), and the step's dispatcher submits attempts.

Measured: the time from sending the mutation until the backend holds `live`
attempts (target: 2000 within 30 s, and at most 0.3x the `--planned-events
per-partition` run back to back: issue 26), split by milestone; then, once the
run has driven every range to done (the virtual clock runs `speed` times faster
once `live` is reached), the run's event log per range and the run's wall time
per range against the same mission through `run_mission` without Dagster.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import logging
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import psutil
import pyarrow.parquet as pq

from benchmarks.harness.dagster_location import ENV, VirtualCatchupResource, build_defs
from benchmarks.harness.dagster_storage import dir_bytes, instance_storage
from benchmarks.harness.report import write_result
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.assets.range_assets import policies
from catchup_assets.defs.mission.range_events import SUBSET_ENV
from catchup_assets.defs.mission.run_context import ledger_ranges_partitions_def
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.sim.workload import Workload

LOCATION_FILE = str(Path(__file__).resolve().parent / "harness" / "dagster_location.py")
PYCACHE = Path(tempfile.gettempdir()) / "catchup-bench-pycache"
MISSION = "bench"
LEDGERS, OVERLAP = 16_000, 320
TARGET_LIVE_S = 30.0  # issue 26: Dagster should not be the slow part of a launch


@contextlib.contextmanager
def environment(values: dict[str, str | None]):
    """Set (None: unset) environment variables for the block; the code server and the run processes inherit them."""
    saved = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read_notes(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line being written
            out.append(json.loads(line))
    return out


def first(notes: list[dict], event: str, pid: int | None = None) -> dict | None:
    return next((n for n in notes if n["event"] == event and (pid is None or n["pid"] == pid)), None)


def plan_config(args, previous: str) -> dict:
    cfg = {
        "mission": MISSION,
        "first_ledger": 1,
        "last_ledger": args.ranges * LEDGERS,
        "ledgers_per_range": LEDGERS,
        "overlap": OVERLAP,
        "parallelism": args.parallelism,
        "order": args.order,
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


def wait_until(check, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


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


def measure_direct(args, tmp: Path, previous: str) -> dict:
    """The same mission, backend and poll through `run_mission` in this process, without Dagster."""
    root, report = tmp / "direct-storage", tmp / "direct.jsonl"
    res = VirtualCatchupResource(
        storage_root=str(root),
        ranges=args.ranges,
        live=args.live,
        speed=args.speed,
        poll_seconds=args.poll,
        report=str(report),
        condemn=args.condemn,
    )
    cfg = MissionConfig(
        mission=MISSION,
        span=MissionSpan(1, args.ranges * LEDGERS, LEDGERS, OVERLAP),
        storage_root=res.root(),
        parallelism=args.parallelism,
        order=args.order,
        previous_profile=previous,
        **policies(res),
    )
    catchup_log = logging.getLogger("catchup_assets")
    level = catchup_log.level
    catchup_log.setLevel(logging.ERROR)  # the reclaims' warnings, one line each
    try:
        t = time.perf_counter()
        prepared = prepare(cfg)
        prepare_s = time.perf_counter() - t
        backend = res.backend_for(MISSION)
        t = time.perf_counter()
        result = run_mission(prepared, backend, write_plan=False)
        wall = time.perf_counter() - t
    finally:
        catchup_log.setLevel(level)
    notes = read_notes(report)
    base = first(notes, "backend_for")["t"]
    return {
        "prepare_s": prepare_s,
        "wall_s": wall,
        "done": len(result.done),
        "passes": result.passes,
        "submits": backend.submits,
        "first_submit_s": first(notes, "first_submit")["t"] - base,
        "live_s": first(notes, "live")["t"] - base,
    }


class OtherCpu(threading.Thread):
    """CPU-seconds used by processes outside this benchmark's process tree, sampled every `interval` s."""

    def __init__(self, interval: float = 1.0):
        super().__init__(daemon=True)
        self.interval = interval
        self.started = time.time()
        self.first: dict[tuple[int, float], float] = {}
        self.last: dict[tuple[int, float], float] = {}
        self.done = threading.Event()

    def sample(self) -> None:
        me = psutil.Process()
        ours = {me.pid, *(c.pid for c in me.children(recursive=True))}
        for p in psutil.process_iter(["cpu_times", "create_time"]):
            times, created = p.info["cpu_times"], p.info["create_time"]
            if p.pid in ours or times is None or created is None:
                continue
            key, used = (p.pid, created), times.user + times.system
            self.first.setdefault(key, used if created < self.started else 0.0)
            self.last[key] = used

    def run(self) -> None:
        while not self.done.wait(self.interval):
            with contextlib.suppress(psutil.Error):
                self.sample()

    def stop(self) -> float:
        self.done.set()
        self.join()
        with contextlib.suppress(psutil.Error):
            self.sample()
        return sum(self.last[k] - self.first[k] for k in self.last)


def stop_leftovers(before: set[int]) -> int:
    """End processes this benchmark started that are still alive (by pid, descendants of this process)."""
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(left, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return len(left)


def launch_rows(d: dict, live: int) -> tuple[list[list[object]], float]:
    """Milestones from sending the mutation to `live` attempts held, seconds since the mutation."""
    t0, notes, times = d["t0"], d["notes"], d["events"]["times"]
    run_pid = times.get("RUN_START", (None, None))[1]
    step_pid = times.get("STEP_START", (None, None))[1]
    run_loaded = first(notes, "location_loaded", run_pid) if run_pid else None
    step_loaded = first(notes, "location_loaded", step_pid) if step_pid else None
    step_notes = [n for n in notes if n["pid"] == step_pid] if step_pid else notes

    def ev(kind):
        return times[kind][0] if kind in times else None

    marks = [
        ("backfill requested: GraphQL launchPartitionBackfill returned", d["t_mutation"]),
        ("backfill daemon iteration returned: the run is created and queued", d["t_backfill_iteration"]),
        ("run queue daemon iteration returned: the code server was asked to launch it", d["t_queue_iteration"]),
        ("run worker process created", run_loaded["created"] if run_loaded else None),
        ("run worker loaded the code location", run_loaded["t"] if run_loaded else None),
        ("RUN_START event", ev("RUN_START")),
        ("step worker process created", step_loaded["created"] if step_loaded else None),
        ("step worker loaded the code location", step_loaded["t"] if step_loaded else None),
        ("STEP_START event", ev("STEP_START")),
        ("resource set up (range_catchup body starts)", (first(step_notes, "resource_setup") or {}).get("t")),
        ("mission loaded and prepared: backend_for", (first(step_notes, "backend_for") or {}).get("t")),
        ("first attempt submitted", (first(step_notes, "first_submit") or {}).get("t")),
        (f"{live} attempts live", (first(step_notes, "live") or {}).get("t")),
    ]
    rows, prev = [], t0
    for label, t in sorted((m for m in marks if m[1] is not None), key=lambda m: m[1]):
        rows.append([label, f"{t - t0:.2f}", f"{t - prev:+.2f}"])
        prev = t
    rows += [[label, "n/a", "n/a"] for label, t in marks if t is None]
    live_t = (first(step_notes, "live") or {}).get("t")
    return rows, (live_t - t0) if live_t else float("nan")


def main(argv: list[str] | None = None) -> int:
    bench(argv)
    return 0


def bench(argv: list[str] | None = None) -> dict:
    """Run the benchmark, write its result file; returns what was measured (for the smoke test)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.dagster_backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--ranges", type=int, default=4000, help="partitions in the backfill (the workload's ranges)")
    p.add_argument("--parallelism", type=int, default=2000, help="the mission's parallelism")
    p.add_argument("--live", type=int, default=None, help="attempts live to time to (default: the parallelism)")
    p.add_argument("--speed", type=float, default=2000.0, help="virtual seconds per real second once `live` is reached")
    p.add_argument("--poll", type=float, default=0.5, help="the dispatcher's poll, real seconds")
    p.add_argument("--order", default="longest-first", choices=["longest-first", "tip-first"])
    p.add_argument("--timeout", type=float, default=900.0, help="for each wait on the run")
    p.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the backfill daemon iteration, and the step process from resource setup to `live`",
    )
    p.add_argument("--profile-lines", type=int, default=25)
    p.add_argument(
        "--condemn",
        type=int,
        default=8,
        help="ranges whose every attempt fails (exit 1, a broken archive): condemned, so the run fails and its "
        "marking shows them FAILED",
    )
    p.add_argument("--skip-direct", action="store_true", help="skip the run_mission baseline")
    p.add_argument(
        "--bytecode",
        choices=["cached", "as-is"],
        default="cached",
        help="cached: the Dagster processes keep compiled bytecode under $TMPDIR/catchup-bench-pycache "
        "(warmed before the timing), as an image with compiled packages does; as-is: this "
        "environment's setting (PYTHONDONTWRITEBYTECODE compiles every import of every process)",
    )
    p.add_argument(
        "--planned-events",
        choices=["per-partition", "subset"],
        default="subset",
        help=f"subset: as the chart and the demo run, {SUBSET_ENV}=true: one "
        "ASSET_MATERIALIZATION_PLANNED event per run, and range_catchup writes each started range's "
        "(defs/mission/range_events.py); per-partition: Dagster's default, one per partition as the run is created",
    )
    p.add_argument(
        "--storage",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the instance's run, event log and schedule storage: the embedded default's SQLite, or the Helm "
        "chart's dagster-postgres (a throwaway local server unless --postgres-url)",
    )
    p.add_argument(
        "--postgres-url",
        default=None,
        help="with --storage postgres: an existing empty database, postgresql+psycopg2://user:password@host:port/db",
    )
    p.add_argument("--smoke", action="store_true", help="tiny sizes (40 partitions, 20 live, 20000x), for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    p.add_argument("--keep", type=Path, default=None, help="keep the instance and storage under this directory")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):
        p.set_defaults(ranges=40, parallelism=20, speed=20_000.0, condemn=2)  # an explicit option still wins
    args = p.parse_args(argv)
    args.live = args.live or args.parallelism
    if not 1 <= args.live <= min(args.parallelism, args.ranges):
        p.error("--live must be between 1 and min(parallelism, ranges)")
    if not 0 <= args.condemn < args.ranges:
        p.error("--condemn must be between 0 and ranges - 1 (some range must materialize)")

    started = time.perf_counter()
    other_cpu = OtherCpu()
    other_cpu.sample()
    other_cpu.start()
    load_before = os.getloadavg()
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    tmp = Path(tempfile.mkdtemp(prefix="dagster-backfill-"))
    try:
        workload = Workload(ranges=args.ranges)
        buf = io.BytesIO()
        pq.write_table(workload.profile_table(), buf)
        previous = tmp / "previous_range_profile.parquet"
        previous.write_bytes(buf.getvalue())
        prev = str(previous) if args.order == "longest-first" else ""
        warm_s = 0.0 if args.smoke else warm_bytecode(args)  # smoke: the cache as it stands
        d = measure_dagster(args, tmp, prev)
        print(f"  dagster run {d['run_status']}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        leftovers = stop_leftovers(before)
        load_mid = os.getloadavg()
        direct = None if args.skip_direct else measure_direct(args, tmp, prev)
        load_after = os.getloadavg()
    finally:
        stop_leftovers(before)
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.perf_counter() - started
    others = other_cpu.stop()
    result = report(args, d, direct, leftovers, (load_before, load_mid, load_after), total, warm_s, others)
    path = write_result(
        "dagster_backfill",
        "Through Dagster: one backfill of a mission, launch to attempts live"
        + (" (Postgres storage)" if args.storage == "postgres" else ""),
        result["tables"],
        result["notes"],
        out_dir=args.out,
        # The SQLite figures stay beside the Postgres ones.
        file_stem="dagster_backfill" if args.storage == "sqlite" else "dagster_backfill_postgres",
    )
    return {"dagster": d, "direct": direct, "leftovers": leftovers, "live_s": result["live_s"], "path": path}


def report(
    args, d: dict, direct: dict | None, leftovers: int, loads, total: float, warm_s: float, others_cpu: float
) -> dict:
    n = args.ranges
    rows, live_s = launch_rows(d, args.live)
    ev = d["events"]
    times = ev["times"]
    step_notes = [x for x in d["notes"] if x["pid"] == times.get("STEP_START", (0, -1))[1]]
    live_note = first(step_notes, "live") or {}

    def span(a, b):
        return times[b][0] - times[a][0] if a in times and b in times else float("nan")

    end_kind = "STEP_SUCCESS" if "STEP_SUCCESS" in times else "STEP_FAILURE"
    run_end = next((k for k in ("RUN_SUCCESS", "RUN_FAILURE", "RUN_CANCELED") if k in times), None)
    backend_for = (first(step_notes, "backend_for") or {}).get("t")
    dispatch_s = times[end_kind][0] - backend_for if backend_for and end_kind in times else float("nan")
    run_s = span("RUN_START", run_end) if run_end else float("nan")
    event_rows = [
        ["event-log entries of the run", ev["count"], f"{ev['count'] / n:.2f}"],
        *[[f"  {k}", v, f"{v / n:.3f}"] for k, v in sorted(ev["by_type"].items(), key=lambda kv: -kv[1])],
        ["serialized entries, bytes", f"{ev['serialized_bytes']:,}", f"{ev['serialized_bytes'] / n:,.0f}"],
        [
            d["storage_label"],
            f"{d['history_bytes']:,}",
            f"{d['history_bytes'] / n:,.0f}",
        ],
        ["compute logs (storage/), bytes", f"{d['compute_log_bytes']:,}", f"{d['compute_log_bytes'] / n:,.0f}"],
    ]
    wall_rows = [
        ["Dagster: RUN_START to " + (run_end or "?"), f"{run_s:.1f}", f"{run_s / n * 1000:.1f}"],
        [
            "Dagster: STEP_START to " + end_kind,
            f"{span('STEP_START', end_kind):.1f}",
            f"{span('STEP_START', end_kind) / n * 1000:.1f}",
        ],
        [
            "Dagster: step's dispatch (backend_for to " + end_kind + ")",
            f"{dispatch_s:.1f}",
            f"{dispatch_s / n * 1000:.1f}",
        ],
    ]
    if direct:
        wall_rows += [
            [
                "run_mission without Dagster (same workload, backend, poll)",
                f"{direct['wall_s']:.1f}",
                f"{direct['wall_s'] / n * 1000:.1f}",
            ],
            [
                "overhead: step's dispatch - run_mission",
                f"{dispatch_s - direct['wall_s']:.1f}",
                f"{(dispatch_s - direct['wall_s']) / n * 1000:.1f}",
            ],
            [
                "overhead: whole run - run_mission",
                f"{run_s - direct['wall_s']:.1f}",
                f"{(run_s - direct['wall_s']) / n * 1000:.1f}",
            ],
        ]
    tables = [
        (
            f"Launch to {args.live} attempts live ({n} partitions, one run; seconds since the mutation was sent)",
            ["milestone", "at s", "since previous s"],
            rows,
        ),
        (f"Event log of the run that drove all {n} ranges", ["what", "total", "per range"], event_rows),
        ("Wall time of the run against the same mission without Dagster", ["what", "s", "ms per range"], wall_rows),
        (
            f"Partition marking of the run, from the status cache as the UI reads it ({d['condemned']} ranges "
            "condemned by the run)",
            ["when", "IN_PROGRESS", "FAILED", "MATERIALIZED", "no status"],
            [
                [when, *(d[key].get(state, 0) for state in ("IN_PROGRESS", "FAILED", "MATERIALIZED", "none"))]
                for when, key in (
                    (f"as {args.live} attempts are live", "marks_at_live"),
                    ("2 s later", "marks_after_live"),
                    (f"after the run ({d['run_status']})", "marks_at_end"),
                )
            ],
        ),
    ]
    if d.get("backfill_profile"):
        tables.append(
            (
                "cProfile of the backfill daemon iteration that created the run (top by cumulative)",
                ["function", "calls", "own s", "cumulative s"],
                d["backfill_profile"],
            )
        )
    if d.get("profile"):
        tables.append(
            (
                f"cProfile of the step process, resource setup to {args.live} live (top by cumulative)",
                ["function", "calls", "own s", "cumulative s"],
                d["profile"],
            )
        )
    met = live_s <= TARGET_LIVE_S
    # Subset mode: the daemon writes one, the run one per range it starts (and per unfinished range if it fails).
    planned_all = ev["by_type"].get("ASSET_MATERIALIZATION_PLANNED", 0)
    planned = 1 if args.planned_events == "subset" else planned_all
    iteration = d["t_backfill_iteration"] - d["t_mutation"]
    first_submit = (first(step_notes, "first_submit") or {}).get("t")
    submits = live_note.get("submits", 0)
    per_submit = float("nan")
    if first_submit and live_note:
        per_submit = (live_note["t"] - first_submit) / max(submits - 1, 1) * 1000
    created_to_live = live_s - (d["t_backfill_iteration"] - d["t0"])
    lines = [
        f"**{args.live} attempts live {live_s:.1f} s after the backfill's launch** "
        f"(target: within {TARGET_LIVE_S:g} s): "
        + ("met" if met else f"missed by {live_s - TARGET_LIVE_S:.1f} s")
        + ". "
        f"The backfill daemon iteration that creates the run took {iteration:.1f} s"
        + (
            f": it writes the run's {planned} ASSET_MATERIALIZATION_PLANNED events one by one, "
            + (
                "each opening SQLite connections and committing to the run's shard and to the index"
                if args.storage == "sqlite"
                else "each its own Postgres transaction (insert, asset index updates, commit, NOTIFY)"
            )
            + f" ({iteration / planned * 1000:.1f} ms "
            "of the iteration per planned event; "
            if planned > 1
            else f" with {planned} ASSET_MATERIALIZATION_PLANNED event for the whole partition range ("
        )
        + f"`--planned-events {args.planned_events}`"
        + (
            f"; the run wrote the other {planned_all - planned}, one per range it started, in batches off the "
            "dispatcher's thread"
            if args.planned_events == "subset"
            else ""
        )
        + "). From the run's creation to "
        f"{args.live} live: {created_to_live:.1f} s, of which the dispatcher's first pass "
        f"{per_submit:.1f} ms per attempt submitted (attempt record as Parquet, fsync'd, then submit).",
        "",
        (
            f"The run did not finish within --timeout {args.timeout:g} s and was terminated: the per-range figures "
            f"below divide by all {n} partitions though only {d['materialized']} completed.\n\n"
            if d["terminated"]
            else ""
        )
        + f"Run `{d['run_id'][:8]}` {d['run_status']}; the backfill {d['backfill_status']} "
        f"(its next daemon iteration took {d['backfill_final_iteration_s']:.1f} s); "
        f"{d['materialized']} of {n} partitions materialized; run tags {d['run_tags']}. "
        f"Setup outside the timing: mission_plan (execute_in_process) {d['plan_s']:.1f} s, code server start "
        f"{d['code_server_s']:.1f} s. Whole benchmark {total:.0f} s wall; {leftovers} run process(es) left at the end "
        "(ended by pid).",
        "",
        f"Mission: {n} ranges of {LEDGERS} ledgers (overlap {OVERLAP}), `{args.order}` "
        + ("from the workload's own profile" if args.order == "longest-first" else "without a profile")
        + f", parallelism {args.parallelism}; dispatcher poll {args.poll:g} s real, status line every 30 passes. "
        f"Attempts on `VirtualBackend` over `Workload(ranges={n})`: the backend's clock is real time until "
        f"{args.live} attempts are held (nothing of the workload ends within minutes), then {args.speed:g}x, so the "
        "run drains the mission's hours in minutes; the dispatcher keeps its system clock. The step's "
        f"first pass submitted {live_note.get('submits', '?')} attempts to reach {live_note.get('held', '?')} held.",
        "",
        "The pipeline is the production one except for the daemons' clocks: the benchmark runs one backfill "
        "daemon iteration right after the mutation and one run queue iteration right after that. A deployment "
        "adds up to one backfill daemon interval (30 s by default) before the run is created and up to one "
        "queue interval (`dequeue_interval_seconds`, 5 s by default) before it is launched: up to ~35 s more, "
        "~17 s on average. The code server was already running (as under `dagster dev`); the run worker and the "
        "step worker (the default multiprocess executor) are new processes that import Dagster and the code location.",
        "",
        (
            "Bytecode: this environment sets PYTHONDONTWRITEBYTECODE, so every new process compiles every module it "
            "imports (~5 s more per process here). The Dagster processes ran with it unset and a bytecode cache of "
            "their own (PYTHONPYCACHEPREFIX, "
            + (f"warmed before the timing in {warm_s:.1f} s" if not args.smoke else "not warmed in --smoke")
            + "), as a deployment image with "
            "compiled packages runs; `--bytecode as-is` measures without."
            if args.bytecode == "cached"
            else "Bytecode: as this environment has it (`--bytecode as-is`): with PYTHONDONTWRITEBYTECODE set, the run "
            "worker and the step worker compile every module they import."
        ),
        "",
        "Event log: every entry of the run (`instance.all_logs`), including the materialization-planned events the "
        "backfill daemon writes; bytes as Dagster serializes them, and the growth of the instance's storage "
        f"between the launch and the run's end. {d['storage_what']} Wall: the run's own event timestamps; the "
        "baseline is `run_mission` "
        "in the benchmark process, after the Dagster run, over a fresh storage root, with the same resource's "
        "policies and backend"
        + (
            f" (its prepare {direct['prepare_s']:.2f} s is outside its wall; it reached {args.live} live "
            f"{direct['live_s']:.1f} s after backend_for, the Dagster step "
            f"{(live_note.get('t', float('nan')) - (backend_for or float('nan'))):.1f} s; "
            f"{direct['submits']} submits, {direct['passes']} passes, {direct['done']} done)."
            if direct
            else "."
        ),
        "",
        f"Other work on the machine: {others_cpu:.0f} CPU-seconds during the benchmark "
        f"({others_cpu / total:.2f} of the {os.cpu_count()} cores on average; processes outside this benchmark's "
        "process tree, sampled each second)"
        + (": the machine was shared, timings are inflated accordingly" if others_cpu / total > 0.25 else "")
        + f". Load average (1, 5, 15 min, this benchmark included) at the start {fmt_load(loads[0])}, after the "
        f"Dagster run {fmt_load(loads[1])}, at the end {fmt_load(loads[2])}.",
    ]
    return {"tables": tables, "notes": "\n".join(lines), "live_s": live_s}


def fmt_load(load) -> str:
    return "/".join(f"{x:.1f}" for x in load)


if __name__ == "__main__":
    raise SystemExit(main())
