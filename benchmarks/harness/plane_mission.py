"""One mission through the real Dispatcher and KubernetesBackend in a fresh interpreter, on kubesim or on the real
control plane: the same mission, cadence and backend either way, so that only the cluster differs.

A fresh interpreter (spawned, refusing pandas as a production install does) so that its CPU and RSS are the
dispatcher's alone: kubesim's cluster is its forked child (`sim_cluster`), the real plane's processes and the
virtual kubelet (`real_cloud`) are other processes. Plain data comes back.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.meter import PassRow
from benchmarks.harness.sim_cluster import VariedAttempts


@dataclass(frozen=True)
class Shape:
    """The mission: `in_flight` slots, `ranges_per_slot` ranges each, attempts of `attempts` seconds."""

    in_flight: int
    ranges_per_slot: float = 1.5
    attempts: VariedAttempts = VariedAttempts(60.0, 240.0)
    poll_seconds: float = 1.0  # DispatchConfig's default: the production cadence
    pods_per_node: int = 50
    submit_concurrency: int = 8  # KubernetesConfig's default
    stats_interval: float = 10.0  # the backend's default; kwok nodes serve no summary: 1e12, read never

    @property
    def ranges(self) -> int:
        return round(self.ranges_per_slot * self.in_flight)


@dataclass(frozen=True)
class RealTarget:
    """How the dispatcher reaches the real plane: its API server, CA and token; each kubelet's CA and token."""

    server: str
    ca_file: str
    token_file: str
    kubelet_ca: str
    kubelet_token: str


@dataclass
class MissionRun:
    shape: Shape
    cluster: str  # "kubesim" | "real"
    statuses: Counter  # range status -> ranges
    attempts: int
    passes: list[PassRow]
    steady: list[int]
    cpu: dict[str, float]  # the dispatcher's process CPU by activity
    events: dict[str, int]
    wall: float
    run_cpu: float
    setup_rss: int
    all_running_at: float | None  # seconds after the start when every slot's pod first ran, if it did
    log_reads: Counter = field(default_factory=Counter)  # doomed / final
    requests: Counter = field(default_factory=Counter)  # kubesim: what its server and kubelets counted
    pass_times: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, in flight, pending)


def _mission(shape: Shape, tmp: Path):
    from benchmarks.harness.sim_cluster import mission_config, mission_ranges
    from catchup_assets.core.dispatch.dispatch_config import DispatchConfig

    mission = mission_config(
        shape.ranges, tmp / "storage", parallelism=shape.in_flight, poll_seconds=shape.poll_seconds, status_every=10**9
    )
    return DispatchConfig(mission, mission_ranges(shape.ranges))


def _real_dispatcher(shape: Shape, target: RealTarget, tmp: Path):
    import kubernetes.client as k8s

    from benchmarks.harness.k8s_mission import SETTINGS
    from catchup_assets.backends.kubernetes.backend import KubernetesBackend
    from catchup_assets.backends.kubernetes.connect import backend_client
    from catchup_assets.backends.kubernetes.identity import MissionIdentity
    from catchup_assets.backends.kubernetes.stats import KubeletAccess
    from catchup_assets.core.dispatch.reconciler import Dispatcher
    from catchup_assets.core.size.sizing import Tiers
    from catchup_assets.store.records import RecordStore
    from catchup_assets.store.root import Store

    config = k8s.Configuration(host=target.server, ssl_ca_cert=target.ca_file)
    config.api_key = {"authorization": "Bearer " + Path(target.token_file).read_text().strip()}
    api = backend_client(config)  # as a run configures it (issue 45 item 8)
    backend = KubernetesBackend(
        "m1",
        SETTINGS,
        Tiers(),
        batch_api=k8s.BatchV1Api(api),
        core_api=k8s.CoreV1Api(api),
        kubelet=KubeletAccess(ca_file=target.kubelet_ca, token_file=target.kubelet_token),
        spool_dir=tmp / "spool",
        identity=MissionIdentity("5eed" * 8),
        stats_interval=shape.stats_interval,
        submit_concurrency=shape.submit_concurrency,
    )
    dispatcher = Dispatcher(_mission(shape, tmp), backend, RecordStore(Store(tmp / "storage"), "m1"))
    return dispatcher, backend


def _metered(dispatcher, backend):
    from benchmarks.harness.k8s_mission import _count_log_reads
    from benchmarks.harness.meter import DispatcherMeter

    meter = DispatcherMeter(
        dispatcher,
        backend,
        parts=((backend, "_sample_peaks", "kubelet summaries"), (backend.spool, "poll_many", "log polls")),
    )
    reads: Counter = Counter()
    _count_log_reads(backend, reads)  # observe()'s reads (a pod about to go); the rest are final reads
    return meter, reads


def _watch_passes(dispatcher, conn, in_flight: int, t0: float) -> list[tuple[float, int, int]]:
    """Each pass's (seconds, in flight, pending); the parent is told once every slot's pod runs."""
    times: list[tuple[float, int, int]] = []
    inner = dispatcher.pass_once
    told = False

    def watched():
        nonlocal told
        status = inner()
        times.append((time.perf_counter() - t0, status.in_flight, status.pending))
        if status.in_flight == in_flight and status.pending == 0 and not told:
            told = True
            conn.send(("all running", times[-1][0]))
        return status

    dispatcher.pass_once = watched
    return times


def _passes_until_stopped(dispatcher, conn, poll: float) -> None:
    """Passes at the mission's cadence until the parent says stop: attempts on kwok never end by themselves.
    Not `Dispatcher.stop()`, which would delete every Job first (L37); the plane goes with the run."""
    while not conn.poll(poll):
        dispatcher.pass_once()
    conn.recv()


def _run(cluster: str, shape: Shape, target: RealTarget | None, conn, until_stopped: bool) -> MissionRun:
    from benchmarks.harness.dispatcher_case import _warm_up

    _warm_up("kubernetes")  # what the first pass would import lazily, so that the baseline holds it
    with tempfile.TemporaryDirectory(prefix="plane-mission-") as tmp:
        if cluster == "kubesim":
            return _run_kubesim(shape, Path(tmp))
        dispatcher, backend = _real_dispatcher(shape, target, Path(tmp))
        meter, reads = _metered(dispatcher, backend)
        setup_rss = meter.rss()
        t0, c0 = time.perf_counter(), time.process_time()
        times = _watch_passes(dispatcher, conn, shape.in_flight, t0)
        if until_stopped:
            _passes_until_stopped(dispatcher, conn, shape.poll_seconds)
            result = None
        else:
            result = dispatcher.run()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        backend.spool._pool.shutdown(wait=True)
        return _plain(cluster, shape, result, meter, reads, Counter(), wall, cpu, setup_rss, times)


def _run_kubesim(shape: Shape, tmp: Path) -> MissionRun:
    """`k8s_mission`'s run, the simulated cluster forked from this process; nothing to tell the parent."""
    from benchmarks.harness import k8s_mission
    from benchmarks.harness.k8s_mission import K8sMission

    mission = K8sMission(
        shape.in_flight,
        ranges_per_slot=shape.ranges_per_slot,
        poll_seconds=shape.poll_seconds,
        attempts=shape.attempts,
        pods_per_node=shape.pods_per_node,
        stats_interval=shape.stats_interval,
        submit_concurrency=shape.submit_concurrency,
    )
    run = k8s_mission.run_k8s_mission(mission, tmp)
    reads, requests = run.log_reads, Counter(run.requests)
    return _plain("kubesim", shape, run.result, run.meter, reads, requests, run.wall, run.run_cpu, run.setup_rss, [])


def _plain(cluster, shape, result, meter, reads, requests, wall, cpu, setup_rss, times) -> MissionRun:
    # A run stopped by the parent has no result: its attempts are the ones it submitted.
    statuses = Counter(str(r.status) for r in result.results.values()) if result else Counter()
    attempts = sum(r.attempts for r in result.results.values()) if result else meter.events["submit"]
    running = next((t for t, n, pending in times if n == shape.in_flight and pending == 0), None)
    return MissionRun(
        shape,
        cluster,
        statuses,
        attempts,
        meter.passes,
        meter.steady_indices(),
        dict(meter.cpu),
        dict(meter.events),
        wall,
        cpu,
        setup_rss,
        running,
        Counter(reads),
        requests,
        times,
    )


def _child(conn, cluster: str, shape: Shape, target: RealTarget | None, until_stopped: bool) -> None:
    from benchmarks.harness.as_installed import as_installed

    as_installed()
    try:
        conn.send(("done", _run(cluster, shape, target, conn, until_stopped)))
    except BaseException:  # noqa: BLE001 - the parent reports it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


class MissionProcess:
    """The mission in a spawned interpreter: `start()`, then `messages()` until it is done; `stop()` ends a run
    started `until_stopped`."""

    def __init__(self, cluster: str, shape: Shape, target: RealTarget | None = None, until_stopped: bool = False):
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_child, args=(child, cluster, shape, target, until_stopped), name=f"mission-{cluster}"
        )
        self._child_end = child
        self.result: MissionRun | None = None

    def start(self) -> MissionProcess:
        self._proc.start()
        self._child_end.close()
        return self

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self, timeout: float) -> tuple[str, object] | None:
        """The child's next message within `timeout` seconds, or None."""
        if not self._conn.poll(timeout):
            return None
        try:
            kind, value = self._conn.recv()
        except EOFError:
            self._proc.join()
            raise RuntimeError(f"the mission's process died, exit code {self._proc.exitcode}") from None
        if kind == "error":
            self._proc.join()
            raise RuntimeError(f"the mission failed:\n{value}")
        if kind == "done":
            self.result = value
            self._proc.join()
        return kind, value

    def stop(self) -> None:
        self._conn.send("stop")

    def wait(self) -> MissionRun:
        while self.result is None:
            self.poll(1.0)
        return self.result
