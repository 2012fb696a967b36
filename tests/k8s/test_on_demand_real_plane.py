"""A range spot keeps reclaiming moves to on-demand, on the real control plane (issue 34 item 4): its 4th attempt's
pod, as the real API server holds it, selects `karpenter.sh/capacity-type: on-demand`, and the real scheduler
binds it to the tier's on-demand node. The kubesim tier pins the same in tests/backends/test_k8s_on_demand.py.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from kubernetes.client import CoreV1Api

from catchup_assets.backends.kubernetes.names import mission_selector
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.size.sizing import Placement, SizingPolicy
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import SETTINGS, mission
from kit.real_plane import ScaledClock, held, real_backend, runner_access, settles, virtual_nodes
from kubesim.kube_script import Script

pytestmark = pytest.mark.k8s

KEY = "0059904001-0059968000"
CAPACITY = "karpenter.sh/capacity-type"


def reclaimed_thrice(job: dict) -> Script:
    """Spot reclaims the range's first three attempts (the kubelet's graceful node shutdown: DisruptionTarget
    `TerminationByKubelet`); the fourth finishes."""
    attempt = int(job["metadata"]["labels"]["catchup.stellar.org/attempt"])
    if attempt <= 3:
        return Script(duration=100, disrupt="TerminationByKubelet", disrupt_mode="exit")
    return Script(duration=100)


def test_a_range_reclaimed_3_times_runs_its_4th_attempt_on_demand_on_the_real_plane(control_plane, tmp_path):
    ns = "ctl-on-demand"
    control_plane.create_namespace(ns)
    settings = replace(SETTINGS, namespace=ns)
    placement = Placement(sizing=SizingPolicy(reclaims_before_on_demand=3))  # the default, said
    nebula = placement.tiers.no_profile  # no profile: the range runs on the catch-all

    def nodes(kubelet) -> None:
        # The spot node is the roomier, so the real scheduler's LeastAllocated score puts an attempt that
        # selects no capacity type there, never on the on-demand node beside it (a tie would be a coin toss).
        for name, capacity, memory in (
            ("nebula-spot", "spot", nebula.node_memory_bytes),
            ("nebula-od", "on-demand", 16 * GiB),
        ):
            kubelet.add_node(
                name,
                labels={settings.tier_node_label: nebula.name, CAPACITY: capacity},
                taints=[{"key": settings.tier_taint_key, "value": nebula.name, "effect": "NoSchedule"}],
                allocatable={"memory": str(memory), "cpu": "64"},
            )

    pods: dict[int, tuple[dict, str]] = {}  # attempt -> (its pod's nodeSelector, the node it was bound to)

    def watch(status) -> None:
        raw = CoreV1Api(api).list_namespaced_pod(ns, label_selector=mission_selector("m1"), _preload_content=False)
        for pod in json.loads(raw.data)["items"]:
            if pod["spec"].get("nodeName"):
                attempt = int(pod["metadata"]["labels"]["catchup.stellar.org/attempt"])
                pods[attempt] = (pod["spec"].get("nodeSelector") or {}, pod["spec"]["nodeName"])

    clock = ScaledClock()
    span = MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
    cfg = mission(tmp_path, span=span, parallelism=2, placement=placement, status_every=1)
    with (
        virtual_nodes(control_plane, clock, scripts=reclaimed_thrice, nodes=nodes) as remote,
        control_plane.api_client() as api,
    ):
        access = runner_access(control_plane, remote, tmp_path, ns)
        backend = real_backend(api, settings, access, tmp_path, clock)
        result = run_mission(prepare(cfg), backend, clock=clock, on_status=watch)
        assert sorted(result.done) == [KEY] and result.condemned == {}
        assert settles(lambda: held(api, ns), {"jobs": 0, "pods": 0, "pvcs": 0}) == {"jobs": 0, "pods": 0, "pvcs": 0}
        assert remote.errors == 0
    # The pods the API server held: three reclaimed on the tier alone, on spot; the fourth on-demand.
    assert sorted(pods) == [1, 2, 3, 4]
    for attempt in (1, 2, 3):
        assert pods[attempt] == ({settings.tier_node_label: "nebula"}, "nebula-spot")
    assert pods[4] == ({settings.tier_node_label: "nebula", CAPACITY: "on-demand"}, "nebula-od")
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    chain = [records[(KEY, a)] for a in (1, 2, 3, 4)]
    assert [r.outcome for r in chain] == ["disrupted", "disrupted", "disrupted", "ok"]
    assert [r.capacity_type for r in chain] == ["spot", "spot", "spot", "on-demand"]
    assert {r.tier for r in chain} == {"nebula"} and [r.node for r in chain] == ["nebula-spot"] * 3 + ["nebula-od"]
    assert all("TerminationByKubelet" in r.reason for r in chain[:3]), [r.reason for r in chain[:3]]
