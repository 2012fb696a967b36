"""One mission through the real Dispatcher and KubernetesBackend against the simulated cluster.

Shared by the API-request and the dispatcher-cost benchmarks: the wiring of
tests/backends/test_k8s_backend.py (official client, in-process simulated API server,
simulated kubelet, virtual time), with the cluster in a child process
(`sim_cluster`) and a `DispatcherMeter` on the dispatcher.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.meter import DispatcherMeter, MachineLoad
from benchmarks.harness.sim_cluster import ClusterProcess, ClusterSpec, VariedAttempts, mission_config, mission_ranges
from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.identity import MissionIdentity
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.dispatch.results import MissionResult
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

NAMESPACE = "catchup"
SETTINGS = K8sSettings(namespace=NAMESPACE, image="stellar/stellar-core:22")


@dataclass(frozen=True)
class K8sMission:
    parallelism: int
    ranges_per_slot: float = 1.5  # ranges = this x parallelism: the cap is held until a wave has half finished
    poll_seconds: float = 1800.0  # virtual seconds between passes
    attempts: VariedAttempts = VariedAttempts()
    pods_per_node: int = 50
    stats_interval: float = 10.0  # KubernetesBackend's default
    peak_flush_seconds: float = 60.0  # DispatchConfig's default
    profile_steady_pass: bool = False
    trace_steady_pass: bool = False
    submit_concurrency: int = 1  # the backend's (issue 26 item 3); KubernetesConfig's default is 8

    @property
    def ranges(self) -> int:
        return round(self.ranges_per_slot * self.parallelism)


@dataclass
class K8sMissionRun:
    mission: K8sMission
    result: MissionResult
    requests: dict[tuple[str, str], int]
    after_pass: list[dict[tuple[str, str], int]]  # cumulative request counts after each pass
    meter: DispatcherMeter
    log_reads: Counter = field(default_factory=Counter)  # doomed (a pod about to go) / final
    wall: float = 0.0
    nodes: int = 0
    jobs_left: int = 0
    setup_rss: int = 0  # bytes, before the first pass
    run_cpu: float = 0.0  # process CPU seconds of the whole run (every pass, and the closing snapshot)
    other_cores: float = math.nan  # what the rest of the machine used meanwhile

    @property
    def attempts(self) -> int:
        return sum(r.attempts for r in self.result.results.values())

    @property
    def passes(self) -> int:
        return self.result.passes


def _count_log_reads(backend: KubernetesBackend, reads: Counter) -> None:
    """Count the reads observe() makes (only of a pod about to go); whatever else is read is a final read."""
    poll_many = backend.spool.poll_many

    def counted(targets):
        reads["doomed"] += len(targets)
        return poll_many(targets)

    backend.spool.poll_many = counted


def run_k8s_mission(m: K8sMission, work_dir: str | Path | None = None) -> K8sMissionRun:
    # After our backend's import, as in production: the client is then imported lean (lean_import).
    from kubernetes.client import BatchV1Api, CoreV1Api

    spec = ClusterSpec.for_parallelism(m.parallelism, m.pods_per_node, attempts=m.attempts)
    with tempfile.TemporaryDirectory(prefix="k8s-mission-", dir=work_dir) as tmp, ClusterProcess(spec) as cluster:
        api = cluster.api_client()
        backend = KubernetesBackend(
            "m1",
            SETTINGS,
            Tiers(),
            batch_api=BatchV1Api(api),
            core_api=CoreV1Api(api),
            # Each node's kubelet over HTTPS, as in production: the cluster CA and a projected token.
            kubelet=KubeletAccess(ca_file=cluster.kubelet_ca_file, token_file=cluster.kubelet_token_file),
            spool_dir=Path(tmp) / "spool",
            identity=MissionIdentity("5eed" * 8),
            clock=cluster.clock.time,
            sleeper=lambda s: None,
            stats_interval=m.stats_interval,
            submit_concurrency=m.submit_concurrency,
        )
        mission = mission_config(
            m.ranges, Path(tmp) / "storage", parallelism=m.parallelism, poll_seconds=m.poll_seconds, status_every=10**9
        )
        config = DispatchConfig(mission, mission_ranges(m.ranges), peak_flush_seconds=m.peak_flush_seconds)
        dispatcher = Dispatcher(config, backend, RecordStore(Store(Path(tmp) / "storage"), "m1"), clock=cluster.clock)
        meter = DispatcherMeter(
            dispatcher,
            backend,
            parts=(
                (backend, "_sample_peaks", "kubelet summaries"),
                (backend.spool, "poll_many", "log polls"),
            ),
            profile_steady_pass=m.profile_steady_pass,
            trace_steady_pass=m.trace_steady_pass,
        )
        reads: Counter = Counter()
        _count_log_reads(backend, reads)
        setup_rss = meter.rss()
        t0, c0 = time.perf_counter(), time.process_time()
        with MachineLoad(helpers=(cluster.pid,)) as load:
            result = dispatcher.run()
        wall, run_cpu = time.perf_counter() - t0, time.process_time() - c0
        requests = cluster.requests()
        reads["final"] = requests.get(("get", "pods/log"), 0) - reads["doomed"]
        jobs_left = cluster.count("jobs", NAMESPACE)
        api.close()
        backend.spool._pool.shutdown(wait=True)
        # The last pass's requests are not followed by a sleep: close the series with them.
        return K8sMissionRun(
            m,
            result,
            requests,
            [*cluster.after_pass, requests],
            meter,
            reads,
            wall,
            spec.nodes,
            jobs_left,
            setup_rss,
            run_cpu,
            load.other_cores,
        )
