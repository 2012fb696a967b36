"""A real cluster: one tiny mission through the Kubernetes backend (skipped by default).

Run against a cluster you may create Jobs in (kind, minikube, a dev cluster):

    CATCHUP_CLUSTER_TESTS=1 CATCHUP_K8S_NAMESPACE=catchup-smoke \\
    CATCHUP_K8S_IMAGE=stellar/stellar-core:22 CATCHUP_K8S_CORE_CONFIG=pubnet-catchup.cfg \\
    KUBECONFIG=~/.kube/config \\
    uv run pytest -m cluster tests/deploy/test_k8s_cluster_smoke.py

The namespace must exist and the kubeconfig's user needs the RBAC listed in
docs/deploy.md ("RBAC"). Peaks are read from each node's kubelet, so
from outside the cluster the nodes' addresses must be reachable (kind: they
are, from its host) and the kubelets need a token they accept and a CA:
CATCHUP_K8S_KUBELET_TOKEN_FILE (e.g. `kubectl create token SA > token`),
CATCHUP_K8S_KUBELET_CA_FILE, or CATCHUP_K8S_KUBELET_INSECURE=1 for self-signed
kubelet certificates (kind's). The image must carry `/bin/sh` and
`stellar-core` on PATH; with `CATCHUP_K8S_CORE=/path` another binary is used.
CATCHUP_K8S_CORE_CONFIG names a stellar-core config that can catch up pubnet
offline (history archives, `DATABASE` and `BUCKET_DIR_PATH` under /data).
Two small ranges of early history are caught up for real (minutes).
"""

import os

import pytest

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        os.environ.get("CATCHUP_CLUSTER_TESTS") != "1", reason="needs a real cluster (CATCHUP_CLUSTER_TESTS=1)"
    ),
]


def test_a_small_mission_completes_on_a_real_cluster(tmp_path):
    from catchup_assets.core.plan.config import MissionConfig
    from catchup_assets.core.plan.ranges import MissionSpan
    from catchup_assets.defs.resources import CatchupResource, KubernetesConfig
    from catchup_assets.mission.plan import prepare
    from catchup_assets.mission.profile import build_profile
    from catchup_assets.mission.run import run_mission

    catchup = CatchupResource(
        storage_root=str(tmp_path / "storage"),
        work_dir=str(tmp_path / "work"),
        backend="kubernetes",
        kubernetes=KubernetesConfig(
            namespace=os.environ["CATCHUP_K8S_NAMESPACE"],
            image=os.environ["CATCHUP_K8S_IMAGE"],
            kubeconfig=os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config")),
            storage_mode="ephemeral",
            pooled=False,
            core_config_file=os.environ["CATCHUP_K8S_CORE_CONFIG"],
            kubelet_insecure_skip_tls_verify=os.environ.get("CATCHUP_K8S_KUBELET_INSECURE") == "1",
            **{
                field: os.environ[env]
                for field, env in (
                    ("kubelet_token_file", "CATCHUP_K8S_KUBELET_TOKEN_FILE"),
                    ("kubelet_ca_file", "CATCHUP_K8S_KUBELET_CA_FILE"),
                )
                if os.environ.get(env)
            },
        ),
        sizing={"unprofiled_memory_gib": 2},
    )
    cfg = MissionConfig(
        mission="smoke",
        span=MissionSpan(1, 2 * 16000),
        storage_root=catchup.root(),
        parallelism=2,
        retry=catchup.retry_policy(),
        placement=catchup.placement(),
        poll_seconds=5,
        env={"STELLAR_CORE": os.environ.get("CATCHUP_K8S_CORE", "stellar-core")},
    )
    result = run_mission(prepare(cfg), catchup.backend_for("smoke"))
    assert result.condemned == {}, result.condemned
    rows = build_profile(cfg.storage_root, "smoke").profile.to_pylist()
    assert len(rows) == 2 and all(r["peak_anon_bytes"] and r["seconds"] for r in rows)
