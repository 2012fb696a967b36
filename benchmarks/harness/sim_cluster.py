"""The simulated Kubernetes cluster in a process of its own, moved by the dispatcher's clock.

The API server (`sim.kube_api`) and the kubelet (`sim.kubelet`, each node's
/stats/summary served over HTTPS by `sim.kubelet_server`) run in a child
process, so whatever this process measures (CPU, RSS, tracemalloc) is the
dispatcher's alone; the official client talks HTTP to the child as it would to
a real API server, and the backend reads each node's kubelet as in production.
Time is virtual: the dispatcher's `sleep` moves the child's kubelet forward and
a mirror clock here by the same amount, so both sides always agree on "now".
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass

from catchup_assets.core.units import GiB
from catchup_assets.sim.core_log import tx_apply_report
from kubesim.kube_meta import ManualClock
from kubesim.kube_script import Script, Usage

TIER = "nebula"  # where every range of a mission without a profile is placed
TIER_LABEL = TIER_TAINT = "catchup.stellar.org/tier"  # K8sSettings' defaults
POD_MEMORY = 12 * GiB  # the unprofiled request (SizingPolicy.unprofiled_memory_bytes)
POD_CPU = 4  # the nebula tier's cpu request


@dataclass(frozen=True)
class VariedAttempts:
    """Each attempt runs for its own duration in [shortest, longest], fixed by its identity."""

    shortest: float = 600.0
    longest: float = 20_000.0
    seed: int = 0

    def duration(self, range_key: str, attempt: int) -> float:
        digest = hashlib.sha256(f"{self.seed}:{range_key}:{attempt}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        return self.shortest + u * (self.longest - self.shortest)

    def __call__(self, job: dict) -> Script:
        labels = job["metadata"]["labels"]
        key, attempt = labels["catchup.stellar.org/range-key"], int(labels["catchup.stellar.org/attempt"])
        # A fresh start and the tx-apply report the profile reads, as stellar-core prints it.
        lines = ["RESUME DECLINED: no range marker in the data dir", *tx_apply_report(1000, 1.47073e06)]
        flat = [(0.0, Usage(2 * GiB, 3 * GiB, 2 * GiB)), (1e9, Usage(2 * GiB, 3 * GiB, 2 * GiB))]
        return Script(duration=self.duration(key, attempt), memory=flat, lines=lines)


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int
    pods_per_node: int
    attempts: VariedAttempts = VariedAttempts()
    stats_period: float = 10.0

    @classmethod
    def for_parallelism(cls, parallelism: int, pods_per_node: int = 50, **kw) -> ClusterSpec:
        """Enough nodes for every pod in flight, with one to spare."""
        return cls(nodes=math.ceil(parallelism / pods_per_node) + 1, pods_per_node=pods_per_node, **kw)


def _serve(conn, parent_end, spec: ClusterSpec) -> None:
    """The child: an API server and a kubelet, stepped on request until told to stop or orphaned."""
    from kubesim.kube_api import KubeApiServer
    from kubesim.kubelet import Kubelet
    from kubesim.kubelet_server import KubeletServer

    parent_end.close()  # forked with both ends: only then does a dead parent read as EOF here

    with KubeApiServer() as api:
        kubelet = Kubelet(api.store, script=spec.attempts, stats_period=spec.stats_period)
        kubelets = KubeletServer(kubelet)
        token = kubelets.project_token("system:serviceaccount:catchup:mission")
        n = spec.pods_per_node
        for i in range(spec.nodes):
            kubelet.add_node(
                f"{TIER}-{i}",
                labels={TIER_LABEL: TIER},
                taints=[{"key": TIER_TAINT, "value": TIER, "effect": "NoSchedule"}],
                allocatable={
                    "memory": str((n + 1) * POD_MEMORY),
                    "cpu": str((n + 1) * POD_CPU),
                    "pods": str(n + 10),
                    "ephemeral-storage": f"{(n + 1) * 100}Gi",
                },
            )
        conn.send((api.host, kubelets.ca_file, str(token)))

        def requests() -> dict[tuple[str, str], int]:
            # What the API server served and what the kubelets authorized: distinct keys.
            return {**api.requests.snapshot(), **kubelets.requests.snapshot()}

        while True:
            try:
                op, arg = conn.recv()
            except EOFError:
                kubelets.stop()
                return
            if op == "advance":
                # Two steps: pods of the Jobs just created start a second later, not a
                # whole poll later; within the long step every exit lands at its own time.
                settle = min(1.0, arg)
                kubelet.advance(settle, tick=settle)
                if arg > settle:
                    kubelet.advance(arg - settle, tick=arg - settle)
                conn.send(requests())
            elif op == "requests":
                conn.send(requests())
            elif op == "count":
                conn.send(api.store.count(*arg))
            elif op == "stop":
                kubelets.stop()
                conn.send(None)
                return


class ClusterProcess:
    """Start with `with ClusterProcess(spec) as cluster:`; `cluster.clock` is the dispatcher's."""

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.now = ManualClock()  # mirrors the child's ManualClock (same epoch, same advances)
        self.clock = VirtualClock(self)
        self.after_pass: list[dict[tuple[str, str], int]] = []  # request counts at each sleep
        # Forked, not spawned: the child needs what this process has imported already (the
        # Kubernetes client alone takes seconds to import), and it only serves HTTP and steps.
        self._ctx = multiprocessing.get_context("fork")
        self._conn = None
        self._proc = None
        self.host = ""
        self.kubelet_ca_file = self.kubelet_token_file = ""  # what a run pod's ServiceAccount volume holds

    def __enter__(self) -> ClusterProcess:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, parent, self.spec), name="sim-cluster", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self.host, self.kubelet_ca_file, self.kubelet_token_file = parent.recv()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._ask("stop")
        except (EOFError, OSError):
            pass  # the child is gone already
        finally:
            self._conn.close()
            self._proc.join(timeout=10)
            if self._proc.is_alive():
                self._proc.kill()

    def _ask(self, op: str, arg=None):
        self._conn.send((op, arg))
        return self._conn.recv()

    def advance(self, seconds: float) -> None:
        self.after_pass.append(self._ask("advance", seconds))
        self.now.advance(seconds)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def requests(self) -> dict[tuple[str, str], int]:
        return self._ask("requests")

    def count(self, plural: str, namespace: str | None = None) -> int:
        """How many objects the server holds, e.g. Jobs left behind."""
        return self._ask("count", (plural, namespace))

    def api_client(self):
        """A client configured as a run's is (connect.py), urllib3's status retries off (issue 45 item 8)."""
        import kubernetes.client

        from catchup_assets.backends.kubernetes.connect import backend_client

        cfg = kubernetes.client.Configuration()
        cfg.host = self.host
        return backend_client(cfg)


class VirtualClock:
    """The dispatcher's clock: sleeping moves the simulated cluster forward."""

    def __init__(self, cluster: ClusterProcess):
        self.cluster = cluster

    def time(self) -> float:
        return self.cluster.now()

    def sleep(self, seconds: float) -> None:
        self.cluster.advance(seconds)


def request_delta(after: dict, before: dict) -> dict[tuple[str, str], int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0)}


def split_requests(counts: dict[tuple[str, str], int]) -> tuple[int, int, int]:
    """(per-pass LISTs and watch polls, per-node reads, everything else). Per node: the kubelet
    summaries, read from each kubelet, and one GET of each Node (where its kubelet is, then cached).
    The informer lists Jobs and pods once, then polls a watch of each per pass (issue 26 item 2)."""
    lists = sum(n for (verb, _), n in counts.items() if verb in ("list", "watch"))
    per_node = sum(n for (_, res), n in counts.items() if res in ("nodes/stats", "nodes"))
    return lists, per_node, sum(counts.values()) - lists - per_node


def mission_span(count: int, ledgers_per_range: int = 16_000):
    from catchup_assets.core.plan.ranges import MissionSpan

    return MissionSpan(1, count * ledgers_per_range, ledgers_per_range=ledgers_per_range, overlap=320)


def mission_ranges(count: int, ledgers_per_range: int = 16_000) -> Sequence:
    """`count` full ranges from genesis, tip first."""
    from catchup_assets.core.plan.ranges import plan_ranges
    from catchup_assets.core.values.ledger_range import dispatch_order

    return dispatch_order(plan_ranges(mission_span(count, ledgers_per_range)), "tip-first")


def mission_config(count: int, storage_root: str, **settings):
    """The MissionConfig of `mission_ranges(count)`, named m1."""
    from catchup_assets.core.plan.config import MissionConfig

    return MissionConfig(mission="m1", span=mission_span(count), storage_root=str(storage_root), **settings)
