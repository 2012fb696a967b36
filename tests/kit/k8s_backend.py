"""The twin mission on the simulated cluster: its four ranges and their scripted pods, the cluster, clock, backend."""

from __future__ import annotations

from contextlib import contextmanager

from kubernetes.client import BatchV1Api, CoreV1Api

from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.connect import backend_client
from catchup_assets.backends.kubernetes.identity import MissionIdentity
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.core.units import GiB
from catchup_assets.sim.core_log import tx_apply_report
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kubesim.kube_api import KubeApiServer
from kubesim.kube_script import Script, Usage
from kubesim.kubelet import Kubelet
from kubesim.kubelet_server import KubeletServer

NS = "catchup"
SPAN = MissionSpan(59_712_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
A, B, C, D = "0059904001-0059968000", "0059840001-0059904000", "0059776001-0059840000", "0059712001-0059776000"
SETTINGS = K8sSettings(namespace=NS, image="stellar/stellar-core:22")
# The test mission's identity (issue 45): what its mission.json's nonce signs; a second deployment has another.
IDENTITY = MissionIdentity("5eed" * 8)
# The silence that ends a pass's watch poll (informer.py; 50 ms in production, twice a pass): kubesim
# changes only between passes, so all a poll reads is queued before it opens and comes in one burst.
# The idle bounds the stream only, not the wait for the watch's headers (informer.py says why).
WATCH_IDLE = 0.01
SA_USER = f"system:serviceaccount:{NS}:cu-mission"  # whom TokenReview says the run pod's token is
OUTCOMES = sorted(["oom", "ok", "disrupted", "ok", "failed", "ok"])  # the attempts of a clean run of `script`


def medida(count: int) -> list[str]:
    """The exit report of `--metric ledger.transaction.apply`, in stellar-core's format."""
    return tx_apply_report(count, 1.47073e06)


def flat(rss: int, ws: int) -> list:
    return [(0.0, Usage(rss, ws, 2 * GiB)), (1e9, Usage(rss, ws, 2 * GiB))]


def script(job: dict) -> Script:
    labels = job["metadata"]["labels"]
    key, attempt = labels["catchup.stellar.org/range-key"], int(labels["catchup.stellar.org/attempt"])
    fresh = ["RESUME DECLINED: no range marker in the data dir (never started here)", *medida(1000)]
    if key == A:  # needs 14 GiB: OOMs at the unprofiled 12 GiB, fits the next rung (18 GiB)
        return Script(duration=400, memory=flat(14 * GiB, 15 * GiB), lines=fresh)
    if key == B and attempt == 1:  # a spot reclaim takes the node with the pod
        return Script(
            duration=200,
            disrupt="TerminationByKubelet",
            disrupt_mode="node_gone",
            memory=flat(9 * GiB, 10 * GiB),
            lines=fresh,
        )
    if key == B:
        return Script(
            duration=300,
            memory=flat(3 * GiB, 4 * GiB),
            lines=[f"RESUME: range {B} from LCL 59870000 toward target 59904000", *medida(700)],
        )
    if key == C:  # a corrupt archive: fails for real
        return Script(
            duration=50,
            exit_code=1,
            lines=['{now} [default FATAL] Got an exception: Invariant "ConservationOfLumens" does not hold'],
        )
    # D's page cache is big for its anon: its working set moves it a tier up next time (L27).
    return Script(duration=250, memory=flat(2 * GiB, 8 * GiB), lines=fresh)


class SimClock:
    """The dispatcher's clock: sleeping moves the simulated cluster forward."""

    def __init__(self, kubelet: Kubelet):
        self.kubelet = kubelet

    def time(self) -> float:
        return self.kubelet.clock()

    def sleep(self, seconds: float) -> None:
        self.kubelet.advance(seconds, tick=5)


@contextmanager
def sim_cluster(scripts=script, nodes=None):
    """An API server and kubelet running `scripts` (the twin mission's), on `nodes(kubelet)` (three per tier)."""
    with KubeApiServer() as api:
        kubelet = Kubelet(api.store, script=scripts, stats_period=10.0)
        kubelets = KubeletServer(kubelet)  # each node's kubelet on a loopback port of its own, over HTTPS
        kubelets.project_token(SA_USER)
        (nodes or tier_nodes)(kubelet)
        yield api, kubelet
        kubelets.stop()


def tier_nodes(kubelet: Kubelet, per_tier: int = 3) -> None:
    """`per_tier` nodes for each tier of the default ladder, labelled and tainted as its node pool."""
    for tier in Tiers().all():
        for n in range(per_tier):
            kubelet.add_node(
                f"{tier.name}-{n}",
                labels={SETTINGS.tier_node_label: tier.name},
                taints=[{"key": SETTINGS.tier_taint_key, "value": tier.name, "effect": "NoSchedule"}],
                allocatable={"memory": str(tier.node_memory_bytes), "cpu": "64"},
            )


def kubelet_access(kubelet: Kubelet, **kw) -> KubeletAccess:
    """The run pod's view: the cluster CA and its ServiceAccount token, as files."""
    kubelets = kubelet.endpoints
    return KubeletAccess(**{"ca_file": kubelets.ca_file, "token_file": str(kubelets.token_files[SA_USER]), **kw})


def production_apis(api: KubeApiServer) -> tuple[BatchV1Api, CoreV1Api]:
    """The simulated server's Batch and Core clients, configured as a run's are (connect.py): kubesim's own
    `api_client` keeps urllib3's default Retry, which sleeps out every Retry-After itself (issue 45 item 8)."""
    client = backend_client(api.configuration())
    return BatchV1Api(client), CoreV1Api(client)


def backend(api, kubelet, tmp_path, settings=SETTINGS, access: KubeletAccess | None = None, **kw) -> KubernetesBackend:
    batch_api, core_api = production_apis(api)
    return KubernetesBackend(
        "m1",
        settings,
        Tiers(),
        batch_api=batch_api,
        core_api=core_api,
        kubelet=access or kubelet_access(kubelet),
        spool_dir=tmp_path / "spool",
        clock=kubelet.clock,
        sleeper=lambda s: None,
        stats_interval=10,
        watch_idle=WATCH_IDLE,
        **{"identity": IDENTITY, **kw},
    )


def mission(tmp_path, **kw) -> MissionConfig:
    return MissionConfig(
        **{
            "mission": "m1",
            "span": SPAN,
            "storage_root": str(tmp_path / "storage"),
            "parallelism": 4,
            "poll_seconds": 10,
            **kw,
        }
    )


def chain(records, key):
    return [records[(key, a)] for a in sorted(a for k, a in records if k == key)]


def outcomes(cfg) -> list[str]:
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    return sorted(r.outcome for r in records.values())
