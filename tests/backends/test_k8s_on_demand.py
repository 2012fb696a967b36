"""A range spot keeps reclaiming moves to on-demand, on the simulated cluster (issue 21 item 6).

The real dispatcher and Kubernetes backend against kubesim: a range reclaimed
3 times runs its 4th attempt with `karpenter.sh/capacity-type: on-demand` in
its pod's nodeSelector (read from the pods the API server holds), on a node of
the same tier that carries that label; its record says so, and the mission's
cost splits accordingly.
"""

from __future__ import annotations

import pytest

from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.identity import MissionIdentity
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.forecast.cost import node_share
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.size.sizing import Placement, SizingPolicy
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.report import attempt_uses
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import production_apis
from kubesim.kube_api import KubeApiServer
from kubesim.kube_script import Script
from kubesim.kubelet import Kubelet
from kubesim.kubelet_server import KubeletServer

NS = "catchup"
KEY = "0059904001-0059968000"
SETTINGS = K8sSettings(namespace=NS, image="stellar/stellar-core:22")
CAPACITY = "karpenter.sh/capacity-type"
SA_USER = f"system:serviceaccount:{NS}:cu-mission"  # whom TokenReview says the run pod's token is


def script(job: dict) -> Script:
    """Spot reclaims the range's first three attempts; the fourth finishes."""
    attempt = int(job["metadata"]["labels"]["catchup.stellar.org/attempt"])
    if attempt <= 3:
        return Script(duration=100, disrupt="TerminationByKubelet", disrupt_mode="exit")
    return Script(duration=100)


class WatchingClock:
    """The dispatcher's clock: a sleep moves the cluster on, and notes every pod the API server holds."""

    def __init__(self, api: KubeApiServer, kubelet: Kubelet):
        self.api, self.kubelet, self.pods = api, kubelet, {}

    def time(self) -> float:
        return self.kubelet.clock()

    def sleep(self, seconds: float) -> None:
        self.kubelet.advance(seconds, tick=5)
        for pod in self.api.store.list("pods", NS):
            attempt = int(pod["metadata"]["labels"]["catchup.stellar.org/attempt"])
            if pod["spec"].get("nodeName"):
                self.pods[attempt] = (pod["spec"].get("nodeSelector") or {}, pod["spec"]["nodeName"])


def test_a_range_reclaimed_3_times_runs_its_4th_attempt_on_demand(tmp_path):
    placement = Placement(sizing=SizingPolicy(reclaims_before_on_demand=3))  # the default, said
    nebula = placement.tiers.no_profile  # no profile: the range runs on the catch-all
    with KubeApiServer() as api:
        kubelet = Kubelet(api.store, script=script, stats_period=10.0)
        kubelets = KubeletServer(kubelet)  # each node's kubelet on a loopback port, over HTTPS
        kubelets.project_token(SA_USER)
        for name, capacity in (("nebula-spot", "spot"), ("nebula-od", "on-demand")):
            kubelet.add_node(
                name,
                labels={SETTINGS.tier_node_label: nebula.name, CAPACITY: capacity},
                taints=[{"key": SETTINGS.tier_taint_key, "value": nebula.name, "effect": "NoSchedule"}],
                allocatable={"memory": str(nebula.node_memory_bytes), "cpu": "64"},
            )
        cfg = MissionConfig(
            mission="m1",
            span=MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320),
            storage_root=str(tmp_path / "storage"),
            parallelism=2,
            poll_seconds=10,
            placement=placement,
        )
        batch_api, core_api = production_apis(api)
        backend = KubernetesBackend(
            "m1",
            SETTINGS,
            placement.tiers,
            batch_api=batch_api,
            core_api=core_api,
            spool_dir=tmp_path / "spool",
            identity=MissionIdentity("5eed" * 8),
            clock=kubelet.clock,
            sleeper=lambda s: None,
            stats_interval=10,
            kubelet=KubeletAccess(ca_file=kubelets.ca_file, token_file=str(kubelets.token_files[SA_USER])),
        )
        clock = WatchingClock(api, kubelet)
        result = run_mission(prepare(cfg), backend, clock=clock)
        kubelets.stop()
    assert sorted(result.done) == [KEY]
    # The pods the API server held: three reclaimed on the tier alone, the fourth on-demand.
    assert sorted(clock.pods) == [1, 2, 3, 4]
    for attempt in (1, 2, 3):
        assert CAPACITY not in clock.pods[attempt][0]
    selector, node = clock.pods[4]
    assert selector == {SETTINGS.tier_node_label: "nebula", CAPACITY: "on-demand"}
    assert node == "nebula-od"
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    chain = [records[(KEY, a)] for a in (1, 2, 3, 4)]
    assert [r.outcome for r in chain] == ["disrupted", "disrupted", "disrupted", "ok"]
    assert [r.capacity_type for r in chain] == ["spot", "spot", "spot", "on-demand"]
    assert {r.tier for r in chain} == {"nebula"} and chain[3].node == "nebula-od"
    # The cost splits by what each attempt bought: the reclaimed ones at spot, the last on-demand.
    from catchup_assets.core.forecast.cost import mission_cost

    cost = mission_cost(attempt_uses(records.values()), placement)
    shape = placement.shape_of("nebula")
    share = node_share(nebula, shape, 12 * GiB, nebula.cpu)
    spot = sum(share * shape.spot_hourly * r.seconds / 3600 for r in chain[:3])
    assert cost.spot_dollars == pytest.approx(spot) and spot > 0
    assert cost.on_demand_dollars == pytest.approx(share * shape.on_demand_hourly * chain[3].seconds / 3600)
    assert cost.fallback_dollars == pytest.approx(cost.on_demand_dollars) and cost.on_demand_dollars > 0
