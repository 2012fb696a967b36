"""Least privilege in the chart, rendered with real Helm: who may do what, where, with which token.

The mission's account (run pods) gets exactly what the backend calls, in the
mission namespace only, plus `get` on nodes and nodes/stats and on the mission namespace itself; the code location
and the range pods mount no token; the range pods' account is bound to nothing.
tests/backends/test_k8s_backend.py holds the grants against the calls a whole mission makes.
"""

from __future__ import annotations

import json

import yaml

from kit.chart import (
    DAGSTER_VALUES,
    LOCATION_CM,
    MISSION_NS,
    NS,
    ROLE_GRANTS,
    WORKER_CM,
    catchup_json,
    decode,
    one,
    render,
)


def test_role_grants_exactly_the_listed_verbs(chart):
    docs = render(chart)
    role = decode(one(docs, "Role"), "V1Role")
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role.rules:
        assert not rule.resource_names and not rule.non_resource_urls
        for group in rule.api_groups:
            for res in rule.resources:
                assert "*" not in (group, res) and "*" not in rule.verbs
                grants.setdefault((group, res), set()).update(rule.verbs)
    assert grants == ROLE_GRANTS
    assert not any(res == "secrets" or res.startswith("secrets/") for _, res in grants)


KUBELET_CR, NAMESPACE_CR = f"{NS}-cu-catchup-assets-kubelet-stats", f"{NS}-cu-catchup-assets-mission-namespace"


def test_cluster_roles_are_only_nodes_and_nodes_stats_get_and_the_mission_namespace_s_get(chart):
    """The Node (where its kubelet is) and /stats/* on the kubelet; never nodes/proxy (every kubelet path).
    And the mission namespace itself, by name, for its Pod Security label (issue 24): no other namespace."""
    docs = render(chart)
    rules = {}
    for doc in docs:
        if doc["kind"] == "ClusterRole":
            cr = decode(doc, "V1ClusterRole")
            assert cr.aggregation_rule is None
            rules[cr.metadata.name] = [
                (r.api_groups, r.resources, r.verbs, r.resource_names, r.non_resource_urls) for r in cr.rules
            ]
    assert rules == {
        KUBELET_CR: [([""], ["nodes"], ["get"], None, None), ([""], ["nodes/stats"], ["get"], None, None)],
        NAMESPACE_CR: [([""], ["namespaces"], ["get"], [MISSION_NS], None)],
    }


def test_bindings_bind_the_mission_service_account(chart):
    docs = render(chart)
    dep = decode(one(docs, "Deployment"), "V1Deployment")
    sa = decode(one(docs, "ServiceAccount", dep.spec.template.spec.service_account_name), "V1ServiceAccount")
    sa = sa.metadata.name
    role = one(docs, "Role")["metadata"]["name"]
    rb = decode(one(docs, "RoleBinding"), "V1RoleBinding")
    assert (rb.role_ref.kind, rb.role_ref.name) == ("Role", role)
    bindings = [rb]
    for cr in (KUBELET_CR, NAMESPACE_CR):
        crb = decode(one(docs, "ClusterRoleBinding", cr), "V1ClusterRoleBinding")
        assert (crb.role_ref.kind, crb.role_ref.name) == ("ClusterRole", cr)
        one(docs, "ClusterRole", cr)  # the role it names is the chart's
        bindings.append(crb)
    for b in bindings:
        assert [(s.kind, s.name, s.namespace) for s in b.subjects] == [("ServiceAccount", sa, NS)]
    # Only these three bindings exist, so nothing else reaches Secrets.
    assert sum(d["kind"].endswith("Binding") for d in docs) == 3


def test_range_jobs_and_the_mission_s_role_live_in_a_namespace_without_dagster_s_secrets(chart):
    """Whoever may create Jobs in a namespace may mount any Secret there into a pod; the run pods'
    token may create Jobs, so it may do so only in the mission namespace, apart from the release's
    (where the dagster chart keeps its Postgres Secret, which run pods read as env)."""
    docs = render(chart)
    where = {(d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace") for d in docs}
    mission_sa = one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert catchup_json(docs)["kubernetes"]["namespace"] == MISSION_NS != NS
    assert where[("Role", "cu-catchup-assets-mission")] == where[("RoleBinding", "cu-catchup-assets-mission")]
    assert where[("Role", "cu-catchup-assets-mission")] == MISSION_NS
    assert where[("ConfigMap", WORKER_CM)] == where[("ServiceAccount", "cu-catchup-assets-worker")] == MISSION_NS
    # The mission's account, the code location and its settings stay in the release namespace, and so
    # do the run pods (the dagster values' jobNamespace, the code location's container context).
    assert where[("ServiceAccount", mission_sa)] == where[("Deployment", "cu-catchup-assets")] == NS
    assert where[("ConfigMap", LOCATION_CM)] == NS
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])["k8s"]["namespace"] == NS
    rb = decode(one(docs, "RoleBinding"), "V1RoleBinding")
    assert [(s.name, s.namespace) for s in rb.subjects] == [(mission_sa, NS)]
    # No Role in the release namespace: the token creates nothing there.
    assert [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == NS] == []
    # The operator's choice of namespace is taken as given.
    docs = render(chart, {"missionNamespace": "ranges"})
    assert catchup_json(docs)["kubernetes"]["namespace"] == one(docs, "Role")["metadata"]["namespace"] == "ranges"


def test_worker_pods_run_under_their_own_account_without_a_token(chart):
    """The range Jobs built from this release's settings name the chart's worker ServiceAccount,
    which no binding grants anything and whose token neither the account nor the pod mounts."""
    from catchup_assets.backends.kubernetes.manifests import job_manifest, to_dict
    from catchup_assets.core.dispatch.ports import AttemptSpec
    from catchup_assets.defs.resources import CatchupResource

    docs = render(chart, {"workerServiceAccount": {"name": "range-pods"}})
    resource = CatchupResource(**catchup_json(docs))
    spec = AttemptSpec("m1", "0000000001-0000016000", 1, 16000, 16320, 2**30, 2**30, "dwarf", 1.0)
    tier = resource.placement().tiers.by_name("dwarf")
    pod = to_dict(job_manifest(spec, tier, False, resource.kubernetes.settings()))["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == ("range-pods", False)
    worker = decode(one(docs, "ServiceAccount", "range-pods"), "V1ServiceAccount")
    assert worker.automount_service_account_token is False
    mission = one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert mission != "range-pods"
    subjects = [s["name"] for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]]
    assert "range-pods" not in subjects and mission in subjects


def test_the_code_location_pod_mounts_no_token_and_run_pods_keep_theirs(chart):
    """The gRPC server never calls the Kubernetes API; the run pods K8sRunLauncher starts under the
    mission's ServiceAccount (its container context) dispatch range Jobs and need the token."""
    docs = render(chart)
    pod = decode(one(docs, "Deployment"), "V1Deployment").spec.template.spec
    assert pod.automount_service_account_token is False
    assert not any(v.projected or v.secret for v in pod.volumes)  # no token volume by another route
    env = {e.name: e.value for e in pod.containers[0].env}
    run_pods = json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])["k8s"]
    named = run_pods["service_account_name"]
    (sa,) = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == named]
    assert decode(sa, "V1ServiceAccount").automount_service_account_token in (None, True)  # mounted in run pods
    launcher = yaml.safe_load(DAGSTER_VALUES.read_text())["runLauncher"]["config"]["k8sRunLauncher"]
    assert "automountServiceAccountToken" not in json.dumps(launcher)  # the dagster values do not take it away
