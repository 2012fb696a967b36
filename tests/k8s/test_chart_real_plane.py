"""The chart applied for real (issue 34 item 5): every object server-side, `dryRun=All` first, into the
restricted namespace it makes; then the twin mission under the chart's own ServiceAccount, its token from
the TokenRequest API, against the real RBAC authorizer and PodSecurity admission."""

from contextlib import contextmanager
from dataclasses import replace

import helm_python as helm
import pytest
from kubernetes.client import CoreV1Api, RbacAuthorizationV1Api
from kubernetes.dynamic import DynamicClient

from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.dispatch.ports import TransientBackendError
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from kit.chart import BASE, CHART, MISSION_NS, NS, WORKER_CM, catchup_json, render
from kit.k8s_backend import SETTINGS, mission
from kit.real_plane import ScaledClock, real_backend, virtual_nodes
from kit.twin import check_twin

pytestmark = pytest.mark.k8s

ORDER = ("Namespace", "ServiceAccount", "ClusterRole", "Role")  # what others refer to, first
MANAGER = "catchup-chart-test"


@pytest.fixture(scope="module")
def applied(control_plane):
    """The chart's objects as the API server stored them, applied as `helm install --server-side` would."""
    with helm.Chart.load(CHART) as chart:
        docs = render(chart, BASE)
    control_plane.create_namespace(NS, exist_ok=True)  # the release's namespace: helm's, not the chart's
    stored = {}
    with control_plane.api_client() as admin:
        dyn = DynamicClient(admin)
        for doc in sorted(docs, key=lambda d: ORDER.index(d["kind"]) if d["kind"] in ORDER else len(ORDER)):
            res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            dyn.server_side_apply(res, body=doc, field_manager=MANAGER, dry_run="All")  # refused here, nothing made
            obj = dyn.server_side_apply(res, body=doc, field_manager=MANAGER)
            stored[(doc["kind"], doc["metadata"]["name"])] = obj.to_dict()
    return docs, stored


def chart_backend(control_plane, remote, tmp_path, docs, clock):
    """The backend as the chart configures it, calling the API as the chart's mission ServiceAccount."""
    k8s = catchup_json(docs)["kubernetes"]
    account = next(d for d in docs if d["kind"] == "RoleBinding")["subjects"][0]
    with control_plane.api_client() as admin:
        body = {"spec": {"expirationSeconds": 3600}}
        token = CoreV1Api(admin).create_namespaced_service_account_token(account["name"], account["namespace"], body)
    (tmp_path / "token").write_text(token.status.token)
    settings = replace(
        SETTINGS,
        namespace=k8s["namespace"],
        configmap=k8s["configmap"],
        worker_service_account=k8s["worker_service_account"],
        storage_class=k8s["storage_class"],
    )
    api = control_plane.api_client(token.status.token)
    access = KubeletAccess(ca_file=remote.endpoints.ca_file, token_file=str(tmp_path / "token"))
    backend = real_backend(api, settings, access, tmp_path, clock)
    return backend, api


@contextmanager
def role_rules(control_plane, role: dict, rules: list[dict]):
    """The chart's mission Role with `rules` instead of its own, and its own again after (for the next tests)."""
    name = role["metadata"]["name"]
    with control_plane.api_client() as admin:
        RbacAuthorizationV1Api(admin).patch_namespaced_role(name, MISSION_NS, {"rules": rules})
    try:
        yield
    finally:
        with control_plane.api_client() as admin:
            RbacAuthorizationV1Api(admin).patch_namespaced_role(name, MISSION_NS, {"rules": role["rules"]})


def test_the_chart_applies_server_side_into_a_namespace_enforcing_restricted(applied):
    docs, stored = applied
    assert len(stored) == len(docs)
    labels = stored[("Namespace", MISSION_NS)]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert set(stored[("ConfigMap", WORKER_CM)]["data"]) == {"entrypoint.sh", "stellar-core.cfg"}


def test_L4_L14_the_twin_mission_runs_under_the_chart_s_account_every_pod_admitted(control_plane, applied, tmp_path):
    docs, _ = applied
    clock = ScaledClock()
    storage_class = catchup_json(docs)["kubernetes"]["storage_class"]
    with virtual_nodes(control_plane, clock, storage_class) as remote:
        backend, api = chart_backend(control_plane, remote, tmp_path, docs, clock)
        with api:
            cfg = mission(tmp_path)
            result = run_mission(prepare(cfg), backend, clock=clock)
            # Every call of a whole mission allowed by the chart's Role and ClusterRoles; every range pod
            # admitted by PodSecurity `restricted` (a refused one would have ended `rejected`).
            check_twin(cfg, result, slack=20.0)
            assert backend.kubelet_refused is None and backend.blocked is None


def test_a_role_without_one_verb_blocks_the_mission_naming_the_verb_and_resource(control_plane, applied, tmp_path):
    docs, _ = applied
    role = next(d for d in docs if d["kind"] == "Role")
    rules = [r for r in role["rules"] if r["resources"] != ["jobs"]]
    rules.append({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch", "delete"]})  # no create
    with role_rules(control_plane, role, rules):
        clock = ScaledClock()
        with virtual_nodes(control_plane, clock, catchup_json(docs)["kubernetes"]["storage_class"]) as remote:
            backend, api = chart_backend(control_plane, remote, tmp_path, docs, clock)
            with api:
                result = run_mission(prepare(mission(tmp_path)), backend, clock=clock)
    assert {r.status for r in result.results.values()} == {"not_run"}
    for r in result.results.values():  # kube-apiserver's own words: the account, the verb, the resource
        assert 'cannot create resource "jobs" in API group "batch"' in r.reason, r.reason
        assert "system:serviceaccount:catchup:cu-catchup-assets-mission" in r.reason


def test_a_role_without_list_on_pods_leaves_each_pass_unknown_naming_what_it_lacks(control_plane, applied, tmp_path):
    """A LIST refused: nothing is known that pass, nothing is charged, and the pass says why in kube-apiserver's
    words (the dispatcher logs it each pass, and alerts after `transient_alert_passes`), never a traceback."""
    docs, _ = applied
    role = next(d for d in docs if d["kind"] == "Role")
    rules = [r for r in role["rules"] if r["resources"] != ["pods"]]
    with role_rules(control_plane, role, rules):
        clock = ScaledClock()
        with virtual_nodes(control_plane, clock, catchup_json(docs)["kubernetes"]["storage_class"]) as remote:
            backend, api = chart_backend(control_plane, remote, tmp_path, docs, clock)
            with api, pytest.raises(TransientBackendError) as refused:
                backend.observe()
    said = str(refused.value)
    assert 'cannot list resource "pods" in API group "" in the namespace "catchup-missions"' in said, said
    assert "system:serviceaccount:catchup:cu-catchup-assets-mission" in said and "mission's Role" in said
