"""The twin mission on the real control plane: virtual nodes (kubesim's kubelet as its client), a scaled clock,
and a run pod's kubelet credentials from the real TokenRequest API."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import kubernetes.client as k8s

from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.names import mission_selector
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.size.sizing import Tiers
from kit.control_plane import ControlPlane
from kit.k8s_backend import IDENTITY, NS, script, tier_nodes
from kubesim.kubelet_remote import RemoteKubelet
from kubesim.volume_provisioner import VolumeProvisioner

SCALE = 20.0  # mission seconds a wall second: the twin mission's 400 s attempt takes 20 s
RUNNER = "cu-mission"  # the run pod's ServiceAccount


class ScaledClock:
    """Mission time running `scale` times the wall's, for the dispatcher and the virtual kubelet alike."""

    def __init__(self, scale: float = SCALE):
        self.scale, self._wall0, self._t0 = scale, time.time(), time.time()

    def __call__(self) -> float:
        return self._t0 + (time.time() - self._wall0) * self.scale

    def time(self) -> float:
        return self()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds / self.scale)


@contextmanager
def virtual_nodes(
    plane: ControlPlane, clock: ScaledClock, storage_class: str = "virtual-ssd", scripts=script, nodes=None
):
    """Nodes (`nodes(kubelet)`, else four per tier) run by a RemoteKubelet that authenticates and authorizes
    through the real API; each pod runs as `scripts` (the twin mission's by default) says."""
    admin = plane.harness_client()
    authn, authz = k8s.AuthenticationV1Api(admin), k8s.AuthorizationV1Api(admin)
    groups: dict[str, list[str]] = {}

    def authenticate(token: str) -> str | None:
        # As a kubelet with --authentication-token-webhook: the API server's TokenReview says who it is.
        review = authn.create_token_review({"spec": {"token": token}})
        if not review.status.authenticated:
            return None
        groups[review.status.user.username] = review.status.user.groups or []
        return review.status.user.username

    def authorize(user: str, verb: str, resource: str, subresource: str) -> bool:
        # As a kubelet with --authorization-mode=Webhook: a SubjectAccessReview of the path's attributes.
        member = groups.get(user) or remote.endpoints.cert_groups.get(user, [])
        attrs = {"verb": verb, "resource": resource, "subresource": subresource}
        spec = {"user": user, "groups": member, "resourceAttributes": attrs}
        review = authz.create_subject_access_review({"spec": spec})
        return bool(review.status.allowed)

    provisioner = VolumeProvisioner(admin, storage_class)
    provisioner.install()
    provisioner.start()
    remote = RemoteKubelet(
        admin, scripts, clock=clock, authenticate=authenticate, authorize=authorize, client_ca=str(plane.ca_file)
    )
    # The twin mission's four unprofiled pods (12 GiB of a 32 GiB node each) on four nodes: the real
    # scheduler's LeastAllocated score gives each an empty node, so B's reclaim takes B alone. On three,
    # which pod shares B's node depends on the order its Jobs' pods reach the scheduler.
    if nodes is None:
        tier_nodes(remote, per_tier=4)
    else:
        nodes(remote)
    remote.start(interval=0.05)
    try:
        schedulable(admin, set(remote.nodes))
        yield remote
    finally:
        provisioner.stop()
        remote.stop()
        for name in list(remote.nodes):
            remote.remove_node(name)
        admin.close()


NOT_READY = "node.kubernetes.io/not-ready"  # kube-apiserver's TaintNodesByCondition admission puts it on a new Node


def schedulable(api, names: set[str], deadline: float = 60.0) -> None:
    """Wait till the node lifecycle controller has taken the not-ready taint off each node (it does once the
    node reports Ready, every --node-monitor-period): before, the scheduler packs pods on the nodes it has."""
    core, end = k8s.CoreV1Api(api), time.monotonic() + deadline
    while True:
        tainted = {
            n.metadata.name
            for n in core.list_node().items
            if n.metadata.name in names and any(t.key == NOT_READY for t in n.spec.taints or ())
        }
        if not tainted:
            return
        if time.monotonic() > end:
            raise TimeoutError(f"nodes still tainted {NOT_READY} after {deadline:.0f} s: {sorted(tainted)}")
        time.sleep(0.2)


def runner_access(plane: ControlPlane, remote: RemoteKubelet, tmp_path: Path, ns: str = NS) -> KubeletAccess:
    """The run pod's view of the kubelets: the CA they serve with and a token the real TokenRequest API issued
    for a ServiceAccount allowed `get` on nodes/stats, as the chart's ClusterRole allows it."""
    with plane.api_client() as admin:
        core, rbac = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin)
        core.create_namespaced_service_account(ns, {"metadata": {"name": RUNNER}})
        name = f"catchup-kubelet-stats-{ns}"
        rule = {"apiGroups": [""], "resources": ["nodes/stats"], "verbs": ["get"]}
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": [rule]})
        subject = {"kind": "ServiceAccount", "name": RUNNER, "namespace": ns}
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
        rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [subject], "roleRef": ref})
        token = core.create_namespaced_service_account_token(RUNNER, ns, {"spec": {"expirationSeconds": 3600}})
    path = tmp_path / "token"
    path.write_text(token.status.token)
    return KubeletAccess(ca_file=remote.endpoints.ca_file, token_file=str(path))


def real_backend(api, settings: K8sSettings, kubelet: KubeletAccess, tmp_path: Path, clock: ScaledClock, **kw):
    """The mission's backend on the real plane, calling the API with `api` on the scaled clock."""
    return KubernetesBackend(
        "m1",
        settings,
        Tiers(),
        batch_api=k8s.BatchV1Api(api),
        core_api=k8s.CoreV1Api(api),
        kubelet=kubelet,
        spool_dir=tmp_path / "spool",
        clock=clock,
        sleeper=clock.sleep,
        **{"identity": IDENTITY, **kw},
    )


def held(api, ns: str, mission: str = "m1") -> dict[str, int]:
    """What the API server holds of the mission, by its label: Jobs, pods and PVCs."""
    core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
    selector = mission_selector(mission)
    lists = {
        "jobs": batch.list_namespaced_job,
        "pods": core.list_namespaced_pod,
        "pvcs": core.list_namespaced_persistent_volume_claim,
    }
    return {kind: len(read(ns, label_selector=selector).items) for kind, read in lists.items()}


def settles(read, want, deadline: float = 60.0):
    """`read()` once it returns `want`, polled on the wall clock (what the real controllers do takes its time:
    the garbage collector deletes a deleted Job's pods, the virtual kubelet ends them); its last value after
    `deadline` seconds, for the assertion to show."""
    end = time.monotonic() + deadline
    while (got := read()) != want and time.monotonic() < end:
        time.sleep(0.2)
    return got
