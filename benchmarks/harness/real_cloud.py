"""What stays virtual beside the real control plane, in a process of its own: the cloud's volume provisioner and,
when asked, kubesim's kubelet as a client of the API server (kubesim/kubelet_remote.py) running the nodes whose
pods' logs and memory the dispatcher reads.

A process of its own so that neither its CPU nor its memory counts as the dispatcher's or the control plane's.
Its sync loop is driven here, not on the kubelet's thread, to time each sync: the kubelet lists every pod on each
one (it has no watch), so at 2000 pods a sync costs what it costs, and the benchmark reports it.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from dataclasses import dataclass

from benchmarks.harness.real_plane import NAMESPACE, node_allocatable
from benchmarks.harness.sim_cluster import TIER, TIER_LABEL, TIER_TAINT, VariedAttempts

RUNNER_USER = f"system:serviceaccount:{NAMESPACE}:cu-mission"  # whom the run pod's projected token names


@dataclass(frozen=True)
class CloudSpec:
    kubeconfig: str
    client_ca: str  # the API server's kubelet client certificate is signed by it (pods/log reaches the kubelet)
    nodes: int = 0  # virtual kubelet nodes; 0: the provisioner alone (kwok runs the nodes)
    pods_per_node: int = 50
    attempts: VariedAttempts = VariedAttempts()
    # Sync intervals: a real kubelet and CSI provisioner watch; these list, so they list at most once a second.
    kubelet_every: float = 1.0
    provisioner_every: float = 1.0


@dataclass(frozen=True)
class CloudReport:
    syncs: int
    sync_mean: float  # seconds a kubelet sync took
    sync_p95: float
    sync_max: float
    errors: int  # syncs that failed
    stats_reads: int  # /stats/summary reads the kubelets answered
    provisioned: int
    cpu: float  # this process's CPU seconds
    rss: int


def _serve(conn, parent_end, spec: CloudSpec) -> None:
    import kubernetes

    from kubesim.kubelet_remote import RemoteKubelet
    from kubesim.volume_provisioner import VolumeProvisioner

    parent_end.close()  # forked with both ends: only then does a dead parent read as EOF here
    api = kubernetes.config.new_client_from_config(config_file=spec.kubeconfig)
    provisioner = VolumeProvisioner(api)
    provisioner.install()
    provisioner.start(spec.provisioner_every)
    remote, access = None, None
    if spec.nodes:
        # Tokens the kubelets issue themselves, as on kubesim: the API server's TokenReview is not asked on
        # each stats read (a real kubelet caches its answers for 2 minutes), so it adds no requests there.
        remote = RemoteKubelet(api, spec.attempts, client_ca=spec.client_ca)
        access = (remote.endpoints.ca_file, str(remote.endpoints.project_token(RUNNER_USER)))
        for i in range(spec.nodes):
            remote.add_node(
                f"{TIER}-{i}",
                labels={TIER_LABEL: TIER},
                taints=[{"key": TIER_TAINT, "value": TIER, "effect": "NoSchedule"}],
                allocatable=node_allocatable(spec.pods_per_node),
            )
    conn.send(access)
    syncs, errors = [], 0
    try:
        while True:
            if conn.poll(spec.kubelet_every):
                try:
                    op = conn.recv()
                except EOFError:
                    return
                if op == "report":
                    conn.send(_report(remote, provisioner, syncs, errors))
                    continue
                return  # "stop"
            if remote is not None:
                t0 = time.perf_counter()
                try:
                    remote.step()
                except Exception:  # noqa: BLE001 - a kubelet keeps running through a failed sync; counted
                    errors += 1
                syncs.append(time.perf_counter() - t0)
    finally:
        provisioner.stop()
        if remote is not None:
            remote.endpoints.stop()


def _report(remote, provisioner, syncs: list[float], errors: int) -> CloudReport:
    import psutil

    me = psutil.Process()
    t = me.cpu_times()
    ordered = sorted(syncs)
    return CloudReport(
        len(syncs),
        statistics.fmean(syncs) if syncs else 0.0,
        ordered[int(0.95 * (len(ordered) - 1))] if ordered else 0.0,
        ordered[-1] if ordered else 0.0,
        errors,
        remote.endpoints.requests.count("get", "nodes/stats") if remote is not None else 0,
        provisioner.provisioned,
        t.user + t.system,
        me.memory_info().rss,
    )


class Cloud:
    """`with Cloud(spec) as cloud:`; `cloud.kubelet_access` is (CA file, token file) when it runs nodes."""

    def __init__(self, spec: CloudSpec):
        self.spec = spec
        # Forked: the child needs what this process imported (the client alone takes seconds).
        self._ctx = multiprocessing.get_context("fork")
        self.kubelet_access: tuple[str, str] | None = None

    def __enter__(self) -> Cloud:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, parent, self.spec), name="cloud", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self.kubelet_access = parent.recv()
        return self

    @property
    def pid(self) -> int:
        return self._proc.pid

    def report(self) -> CloudReport:
        self._conn.send("report")
        return self._conn.recv()

    def __exit__(self, *exc) -> None:
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._conn.close()
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
