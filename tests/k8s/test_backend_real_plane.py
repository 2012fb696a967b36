"""The backend on the real control plane: the twin mission's Jobs made, bound, run by virtual nodes and counted
by the real kube-apiserver, Job controller, scheduler, PV binder and PodGC (issue 34 items 3-4).

The same mission, records, profile and tier map as on kubesim (tests/backends/test_k8s_backend.py, both
through kit.twin.check_twin): only the kubelet (kubesim's, as a client of the API server) and the cloud
(the reclaim, the volume provisioner) are virtual.
"""

import json
from dataclasses import replace

import pytest
from kubernetes.client import BatchV1Api, CoreV1Api

from catchup_assets.backends.kubernetes.names import pvc_name
from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import NS, SETTINGS, A, C, chain, mission
from kit.real_plane import ScaledClock, real_backend, runner_access, virtual_nodes
from kit.run_worker import wait_for
from kit.twin import check_twin

pytestmark = pytest.mark.k8s


def test_L4_L19_L22_the_twin_mission_ends_on_the_real_control_plane_as_on_kubesim(control_plane, tmp_path):
    control_plane.create_namespace(NS, exist_ok=True)  # the chart's release namespace too (test_chart_real_plane)
    clock = ScaledClock()
    with virtual_nodes(control_plane, clock) as remote, control_plane.api_client() as api:
        access = runner_access(control_plane, remote, tmp_path)
        backend = real_backend(api, SETTINGS, access, tmp_path, clock, stats_interval=10)
        cfg = mission(tmp_path)
        result = run_mission(prepare(cfg), backend, clock=clock)
        assert remote.errors == 0
        # A second of the wall is 20 mission seconds (SCALE): a loaded machine may see the reclaim that late, or
        # run the last pass that saw the pod that early (CI: 189.85 s). Either still tells it apart from PodGC's
        # 40-60 s quarantine (800-1200 mission seconds).
        check_twin(cfg, result, slack=20.0)
        # What the real API server holds afterwards: no Job left (L2), only the condemned range's PVC (L3),
        # its volume bound by the real PV binder to what the virtual provisioner made.
        core = CoreV1Api(api)
        assert json.loads(BatchV1Api(api).list_namespaced_job(NS, _preload_content=False).data)["items"] == []
        # The others' deletes were sent; the real pvc-protection finalizer lets each go once its pod is gone,
        # which a loaded machine saw after the mission ended: wait for that, bounded.
        expected = [(pvc_name("m1", C), "Bound")]
        seen: list = []

        def only_the_condemned() -> bool:
            claims = core.list_namespaced_persistent_volume_claim(NS).items
            seen[:] = [(c.metadata.name, c.status.phase, c.metadata.deletion_timestamp) for c in claims]
            return [(name, phase) for name, phase, _ in seen] == expected

        assert wait_for(only_the_condemned, timeout=90.0, every=1.0), seen


def test_L4_a_pod_the_real_pod_security_admission_refuses_ends_rejected_naming_the_refusal(control_plane, tmp_path):
    """An operator's setting (no runAsNonRoot) in a namespace enforcing `restricted`: kube-apiserver's PodSecurity
    admission refuses each pod the real Job controller makes, which says so only in FailedCreate events."""
    ns = "catchup-restricted"
    control_plane.create_namespace(ns, {"pod-security.kubernetes.io/enforce": "restricted"})
    settings = replace(SETTINGS, namespace=ns, run_as_non_root=False, storage_mode="ephemeral")
    clock = ScaledClock()
    with virtual_nodes(control_plane, clock) as remote, control_plane.api_client() as api:
        access = runner_access(control_plane, remote, tmp_path, ns)
        backend = real_backend(api, settings, access, tmp_path, clock, config_error_seconds=60)
        span = MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320)  # range A alone
        cfg = mission(tmp_path, span=span, retry=RetryPolicy(environmental=1))
        result = run_mission(prepare(cfg), backend, clock=clock)
        assert remote.errors == 0
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert [r.outcome for r in chain(records, A)] == ["rejected", "rejected"] and A in result.condemned
    for r in records.values():
        assert "FailedCreate" in r.reason and 'is forbidden: violates PodSecurity "restricted:latest"' in r.reason
        assert "runAsNonRoot != true" in r.reason, r.reason  # the admission's own words, from the real server
