"""The backend on the real control plane: the twin mission's Jobs made, bound, run by virtual nodes and counted
by the real kube-apiserver, Job controller, scheduler, PV binder and PodGC (issue 34 items 3-4).

The same mission, records, profile and tier map as on kubesim (tests/backends/test_k8s_backend.py, both
through kit.twin.check_twin): only the kubelet (kubesim's, as a client of the API server) and the cloud
(the reclaim, the volume provisioner) are virtual.
"""

import json

import pytest
from kubernetes.client import BatchV1Api, CoreV1Api

from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.names import pvc_name
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from kit.k8s_backend import NS, SETTINGS, C, mission
from kit.real_plane import ScaledClock, runner_access, virtual_nodes
from kit.twin import check_twin

pytestmark = pytest.mark.k8s


def test_L4_L19_L22_the_twin_mission_ends_on_the_real_control_plane_as_on_kubesim(control_plane, tmp_path):
    control_plane.create_namespace(NS)
    clock = ScaledClock()
    with virtual_nodes(control_plane, clock) as remote, control_plane.api_client() as api:
        backend = KubernetesBackend(
            "m1",
            SETTINGS,
            Tiers(),
            batch_api=BatchV1Api(api),
            core_api=CoreV1Api(api),
            kubelet=runner_access(control_plane, remote, tmp_path),
            spool_dir=tmp_path / "spool",
            clock=clock,
            sleeper=clock.sleep,
            stats_interval=10,
        )
        cfg = mission(tmp_path)
        result = run_mission(prepare(cfg), backend, clock=clock)
        assert remote.errors == 0
        check_twin(cfg, result, slack=5.0)  # a 50 ms sync of the kubelet is 1 mission second at SCALE 20
        # What the real API server holds afterwards: no Job left (L2), only the condemned range's PVC (L3),
        # its volume bound by the real PV binder to what the virtual provisioner made.
        core = CoreV1Api(api)
        assert json.loads(BatchV1Api(api).list_namespaced_job(NS, _preload_content=False).data)["items"] == []
        claims = core.list_namespaced_persistent_volume_claim(NS).items
        assert [(c.metadata.name, c.status.phase) for c in claims] == [(pvc_name("m1", C), "Bound")]
