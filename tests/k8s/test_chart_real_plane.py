"""The chart applied for real (issue 34 item 5): every object server-side, `dryRun=All` first, into the
restricted namespace it makes, its PodMonitor and PrometheusRule too, against the Prometheus Operator's CRDs
(tools/crds/build.sh generates them from the operator's Go types, as upstream does); then the twin mission
under the chart's own ServiceAccount, its token from the TokenRequest API, against the real RBAC authorizer and
PodSecurity admission."""

import copy
import functools
import json
import os
import subprocess
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import helm_python as helm
import pytest
import yaml
from kubernetes.client import ApiException, CoreV1Api, RbacAuthorizationV1Api
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.dispatch.ports import TransientBackendError
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from kit.chart import CHART, MISSION_NS, NS, ROOT, WORKER_CM, catchup_json, one, render
from kit.k8s_backend import SETTINGS, mission
from kit.real_plane import ScaledClock, real_backend, virtual_nodes
from kit.twin import check_twin

pytestmark = pytest.mark.k8s

ORDER = ("Namespace", "ServiceAccount", "ClusterRole", "Role")  # what others refer to, first
MANAGER = "catchup-chart-test"
# The chart's Prometheus Operator objects, both on (the metrics port is the chart's default, 9464).
MONITORING = {"monitoring": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}}
CRDS = {"PodMonitor": "podmonitors", "PrometheusRule": "prometheusrules"}  # kind: plural
GROUP = "monitoring.coreos.com"
DEADLINE = 60.0


@functools.cache
def crd_dir() -> Path:
    """tools/crds/build.sh's dir of the operator's CRDs, generated when missing (~40 s cold, a few ms warm);
    skips the test without it (fails in CI), as kit.control_plane.bin_dir does for the binaries."""
    done = subprocess.run(["bash", str(ROOT / "tools/crds/build.sh")], capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip():
        return Path(done.stdout.split()[-1])
    reason = (
        f"no Prometheus Operator CRDs (made by `tools/crds/build.sh`): it exited {done.returncode}: "
        f"{done.stderr.strip()[-800:]}"
    )
    (pytest.fail if os.environ.get("CI") else pytest.skip)(reason)


def resource(dyn: DynamicClient, api_version: str, kind: str):
    """The API resource of a kind, once discovery serves it (a CRD's, soon after it is Established)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            return dyn.resources.get(api_version=api_version, kind=kind)  # a miss re-reads discovery once
        except ResourceNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def monitoring_crds(control_plane):
    """The PodMonitor and PrometheusRule CRDs, applied server-side and Established, as the API server stored them."""
    stored = {}
    with control_plane.api_client() as admin:
        dyn = DynamicClient(admin)
        crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        for kind, plural in CRDS.items():
            body = yaml.safe_load((crd_dir() / f"{GROUP}_{plural}.yaml").read_text())
            assert body["spec"]["names"]["kind"] == kind
            dyn.server_side_apply(crds, body=body, field_manager=MANAGER)
        deadline = time.monotonic() + DEADLINE
        for plural in CRDS.values():
            while True:
                crd = crds.get(name=f"{plural}.{GROUP}").to_dict()
                conditions = {c["type"]: c for c in crd.get("status", {}).get("conditions") or []}
                if conditions.get("Established", {}).get("status") == "True":
                    break
                assert time.monotonic() < deadline, f"{plural}.{GROUP} not Established: {conditions}"
                time.sleep(0.1)
            stored[plural] = crd
    return stored


@pytest.fixture(scope="module")
def applied(control_plane, monitoring_crds):
    """The chart's objects as the API server stored them, applied as `helm install --server-side` would, with
    its PodMonitor and PrometheusRule on (their CRDs installed first, as docs/deploy.md asks)."""
    with helm.Chart.load(CHART) as chart:
        docs = render(chart, MONITORING)  # over kit.chart.BASE
    control_plane.create_namespace(NS, exist_ok=True)  # the release's namespace: helm's, not the chart's
    stored = {}
    with control_plane.api_client() as admin:
        dyn = DynamicClient(admin)
        for doc in sorted(docs, key=lambda d: ORDER.index(d["kind"]) if d["kind"] in ORDER else len(ORDER)):
            res = resource(dyn, doc["apiVersion"], doc["kind"])
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


def test_the_podmonitor_and_prometheusrule_are_stored_whole_by_the_operator_s_crds(applied, monitoring_crds):
    """The generated CRDs are structural: the server prunes what its schema does not name, so a field the
    chart writes wrongly (or the schema lacks) would be missing from what it stored."""
    docs, stored = applied
    for crd in monitoring_crds.values():
        assert crd["metadata"]["annotations"]["operator.prometheus.io/version"], crd["metadata"]["annotations"]
    monitor = one(docs, "PodMonitor")
    got = stored[("PodMonitor", monitor["metadata"]["name"])]["spec"]
    assert got == monitor["spec"]
    assert got["selector"]["matchLabels"] == {
        "app.kubernetes.io/component": "run_worker",
        "catchup.stellar.org/dispatcher": "cu-catchup-assets",
    }
    assert got["namespaceSelector"] == {"matchNames": [NS]}
    assert [(e["port"], e["path"]) for e in got["podMetricsEndpoints"]] == [("metrics", "/metrics")]
    rule = one(docs, "PrometheusRule")
    got = stored[("PrometheusRule", rule["metadata"]["name"])]["spec"]
    assert got == rule["spec"]
    assert [(g["name"], [r["alert"] for r in g["rules"]]) for g in got["groups"]] == [
        (
            "catchup-assets",
            [
                "CatchupMissionStalled",
                "CatchupBreakerTripped",
                "CatchupRangesCondemned",
                "CatchupPodsUnschedulable",
                "CatchupNoCompletion",
            ],
        )
    ]


# A PodMonitor's endpoints the schema forbids: the field, and kube-apiserver's words for it.
BAD_ENDPOINTS = {
    "wrong-type": (
        "x",
        "spec.podMetricsEndpoints",
        'Invalid value: "string": spec.podMetricsEndpoints in body must be of type array',
    ),
    "unknown-enum": (
        [{"port": "metrics", "scheme": "gopher"}],
        "spec.podMetricsEndpoints[0].scheme",
        'Unsupported value: "gopher": supported values: "http", "https", "HTTP", "HTTPS"',
    ),
}


@pytest.mark.parametrize("case", BAD_ENDPOINTS)
def test_the_real_server_refuses_a_podmonitor_its_crd_schema_forbids_422_naming_the_field(control_plane, applied, case):
    """The CRD's schema is live: a create (`helm install` without --server-side, `kubectl create`) is refused
    422 naming the field, and so is a server-side apply of the bad enum. A server-side apply of the wrong type
    fails earlier, and worse: the apply patch does not convert to the schema's typed object, a plain error that
    kube-apiserver v1.37 answers 500, still naming the field (kubernetes/kubernetes#139253, open)."""
    docs, _ = applied
    endpoints, field, said = BAD_ENDPOINTS[case]
    bad = copy.deepcopy(one(docs, "PodMonitor"))
    bad["metadata"]["name"], bad["spec"]["podMetricsEndpoints"] = "bad", endpoints
    with control_plane.api_client() as admin:
        dyn = DynamicClient(admin)
        res = resource(dyn, bad["apiVersion"], "PodMonitor")
        with pytest.raises(ApiException) as created:
            res.create(body=bad, namespace=NS, dry_run="All")
        with pytest.raises(ApiException) as ssa:
            dyn.server_side_apply(res, body=bad, field_manager=MANAGER, dry_run="All")
        assert res.get(namespace=NS, field_selector="metadata.name=bad").items == []
    for refused in (created, ssa) if case == "unknown-enum" else (created,):
        status = json.loads(refused.value.body)
        assert (status["code"], status["reason"]) == (422, "Invalid"), json.dumps(status)
        assert f'PodMonitor.{GROUP} "bad" is invalid: {field}: {said}' in status["message"], status["message"]
        assert [c["field"] for c in status["details"]["causes"]] == [field], json.dumps(status)
    if case == "wrong-type":
        status = json.loads(ssa.value.body)
        assert status["code"] == 500, json.dumps(status)
        assert status["message"] == (
            f"failed to create typed patch object ({NS}/bad; {GROUP}/v1, Kind=PodMonitor): "
            ".spec.podMetricsEndpoints: expected list, got &{x}"
        ), status["message"]


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
