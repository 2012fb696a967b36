"""The mission namespace the chart creates, its Pod Security labels, and the NetworkPolicy around
the range pods (issue 24), rendered with real Helm and validated against the Kubernetes 1.30 schema
(kubernetes-validate, strict). The policy is judged by what it lets through: a small reading of
NetworkPolicy semantics (kubernetes.io/docs/concepts/services-networking/network-policies/) asks
it about each destination a range pod might try.
"""

from __future__ import annotations

import ipaddress

import helm_python as helm
import kubernetes_validate
import pytest

from kit.chart import K8S_VERSION, MISSION_NS, NS, catchup_json, decode, one, render

PSA = "pod-security.kubernetes.io"
KUBE_DNS = ({"kubernetes.io/metadata.name": "kube-system"}, {"k8s-app": "kube-dns"})
RANGE_POLICY = "cu-catchup-assets-range-pods"  # the mission namespace's; the release namespace has two more


def valid(doc: dict) -> dict:
    assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == K8S_VERSION
    return doc


def _selects(selector: dict | None, labels: dict) -> bool:
    assert set(selector or {}) <= {"matchLabels"}, selector  # all this chart renders
    return all(labels.get(k) == v for k, v in (selector or {}).get("matchLabels", {}).items())


def egress_allowed(policy: dict, port: int, protocol: str = "TCP", ip: str | None = None,
                   pod: tuple[dict, dict] | None = None) -> bool:  # fmt: skip
    """May a selected pod reach `ip` (outside the cluster) or `pod` (its namespace's labels, its own)?"""
    spec = policy["spec"]
    if "Egress" not in spec["policyTypes"]:
        return True
    for rule in spec.get("egress") or []:
        ports = rule.get("ports")
        if ports and not any(p.get("protocol", "TCP") == protocol and p.get("port") == port for p in ports):
            continue
        for peer in rule.get("to") or [{}]:
            if peer == {}:
                return True
            if "ipBlock" in peer and ip is not None:
                block, addr = peer["ipBlock"], ipaddress.ip_address(ip)
                inside = addr in ipaddress.ip_network(block["cidr"])
                if inside and not any(addr in ipaddress.ip_network(e) for e in block.get("except", [])):
                    return True
            if pod is not None and "ipBlock" not in peer:
                ns_labels, pod_labels = pod
                here = ns_labels.get("kubernetes.io/metadata.name") == policy["metadata"]["namespace"]
                in_ns = _selects(peer["namespaceSelector"], ns_labels) if "namespaceSelector" in peer else here
                if in_ns and ("podSelector" not in peer or _selects(peer["podSelector"], pod_labels)):
                    return True
    return False


def test_the_chart_creates_the_mission_namespace_labelled_restricted_and_keeps_it(chart):
    docs = render(chart)
    ns = valid(one(docs, "Namespace"))
    assert decode(ns, "V1Namespace").metadata.name == MISSION_NS
    labels = ns["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert (labels[f"{PSA}/{mode}"], labels[f"{PSA}/{mode}-version"]) == ("restricted", "latest")
    assert ns["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"  # uninstall keeps the range PVCs
    # Everything the chart places outside the release namespace lives in the one it creates.
    placed = {d["metadata"].get("namespace") for d in docs} - {None, NS}
    assert placed == {MISSION_NS} == {catchup_json(docs)["kubernetes"]["namespace"]}


@pytest.mark.parametrize(
    "values, name",
    [({"missionNamespace": {"create": False}}, MISSION_NS), ({"missionNamespace": {"name": "ranges", "create": False}},
     "ranges"), ({"missionNamespace": "ranges"}, "ranges")],
    ids=["create-false", "named", "string-form"],
)  # fmt: skip
def test_a_namespace_the_operator_made_is_not_rendered_but_still_used(chart, values, name):
    """The older string form names an operator's namespace, as before: an upgrade never takes it over."""
    docs = render(chart, values)
    assert [d for d in docs if d["kind"] == "Namespace"] == []
    assert catchup_json(docs)["kubernetes"]["namespace"] == one(docs, "Role")["metadata"]["namespace"] == name
    assert one(docs, "NetworkPolicy", RANGE_POLICY)["metadata"]["namespace"] == name


def test_a_created_mission_namespace_named_after_a_release_s_is_refused(chart):
    with pytest.raises(helm.HelmError, match="is the release namespace"):
        render(chart, {"missionNamespace": {"name": NS}})


def test_commonlabels_cannot_loosen_the_pod_security_labels(chart):
    with pytest.raises(helm.HelmValuesError, match="invalid propertyName 'pod-security.kubernetes.io/enforce'"):
        render(chart, {"commonLabels": {f"{PSA}/enforce": "privileged"}})


def test_the_network_policy_fences_every_range_pod(chart):
    """No ingress; egress to the cluster's DNS and to public addresses on 443 and 80 only."""
    from catchup_assets.backends.kubernetes.manifests import job_manifest, to_dict
    from catchup_assets.core.dispatch.ports import AttemptSpec
    from catchup_assets.defs.resources import CatchupResource

    docs = render(chart)
    policy = valid(one(docs, "NetworkPolicy", RANGE_POLICY))
    decode(policy, "V1NetworkPolicy")
    # It selects the range pods the backend makes from this release's settings, in their namespace.
    resource = CatchupResource(**catchup_json(docs))
    spec = AttemptSpec("m1", "0000000001-0000016000", 1, 16000, 16320, 2**30, 2**30, "dwarf", 1.0)
    tier = resource.placement().tiers.by_name("dwarf")
    job = to_dict(job_manifest(spec, tier, False, resource.kubernetes.settings()))
    assert job["metadata"]["namespace"] == policy["metadata"]["namespace"] == MISSION_NS
    assert _selects(policy["spec"]["podSelector"], job["spec"]["template"]["metadata"]["labels"])
    assert "Ingress" in policy["spec"]["policyTypes"] and not policy["spec"].get("ingress")  # none at all
    assert egress_allowed(policy, 53, "UDP", pod=KUBE_DNS) and egress_allowed(policy, 53, "TCP", pod=KUBE_DNS)
    assert egress_allowed(policy, 443, ip="151.101.1.1") and egress_allowed(policy, 80, ip="34.120.0.9")
    refused = [
        (53, "UDP", {"ip": "8.8.8.8"}),  # DNS only through the cluster's resolver
        (53, "UDP", {"pod": ({"kubernetes.io/metadata.name": "kube-system"}, {"app": "other"})}),
        (53, "UDP", {"pod": ({"kubernetes.io/metadata.name": "default"}, {"k8s-app": "kube-dns"})}),
        (22, "TCP", {"ip": "151.101.1.1"}),
        (80, "TCP", {"ip": "169.254.169.254"}),  # the cloud's metadata service
        (443, "TCP", {"ip": "10.0.0.1"}),  # the cluster's own network: the API server, Postgres
        (443, "TCP", {"ip": "172.20.0.10"}),
        (443, "TCP", {"ip": "192.168.1.1"}),
        (5432, "TCP", {"pod": ({"kubernetes.io/metadata.name": NS}, {"app": "postgresql"})}),
    ]
    for port, protocol, where in refused:
        assert not egress_allowed(policy, port, protocol, **where), (port, protocol, where)


def test_egress_is_widened_and_narrowed_from_values(chart):
    mirror = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "archives"}}}],
              "ports": [{"protocol": "TCP", "port": 8080}]}  # fmt: skip
    values = {"networkPolicy": {"archives": {"ipBlocks": [{"cidr": "203.0.113.0/24"}], "ports": [443]},
                                "dns": [{"namespace": "dns", "podLabels": {"app": "coredns"}}],
                                "extraEgress": [mirror]}}  # fmt: skip
    policy = valid(one(render(chart, values), "NetworkPolicy", RANGE_POLICY))
    assert egress_allowed(policy, 443, ip="203.0.113.7") and not egress_allowed(policy, 443, ip="151.101.1.1")
    assert not egress_allowed(policy, 80, ip="203.0.113.7")
    assert egress_allowed(policy, 53, "UDP", pod=({"kubernetes.io/metadata.name": "dns"}, {"app": "coredns"}))
    assert not egress_allowed(policy, 53, "UDP", pod=KUBE_DNS)
    assert egress_allowed(policy, 8080, pod=({"kubernetes.io/metadata.name": "archives"}, {"app": "mirror"}))
    # No archive blocks: DNS alone (and extraEgress); disabled: no policy.
    policy = valid(one(render(chart, {"networkPolicy": {"archives": {"ipBlocks": []}}}), "NetworkPolicy", RANGE_POLICY))
    assert not egress_allowed(policy, 443, ip="151.101.1.1") and egress_allowed(policy, 53, "UDP", pod=KUBE_DNS)
    docs = render(chart, {"networkPolicy": {"enabled": False}})
    assert [d for d in docs if d["kind"] == "NetworkPolicy"] == []


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"missionNamespace": {"create": "yes"}}, "/missionNamespace"),
        ({"missionNamespace": {"name": "Ranges"}}, "/missionNamespace"),
        ({"networkPolicy": {"archives": {"ipBlocks": [{"cidr": "everywhere"}]}}}, "/networkPolicy/archives"),
        ({"networkPolicy": {"archives": {"ports": [0]}}}, "/networkPolicy/archives/ports/0"),
        ({"networkPolicy": {"archives": {"ports": []}}}, "/networkPolicy/archives/ports"),  # would allow every port
        ({"networkPolicy": {"dns": [{"namespace": "kube-system", "podLabels": {}}]}}, "/networkPolicy/dns/0/podLabels"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_schema_refuses_bad_namespace_and_policy_values(chart, bad, where):
    with pytest.raises(helm.HelmValuesError) as e:
        render(chart, bad)
    assert where in str(e.value)


def test_the_namespace_grant_is_get_on_the_mission_namespace_alone(chart):
    """The dispatcher's label check is a cluster-scoped read: limited by resourceNames to one namespace."""
    docs = render(chart, {"missionNamespace": "ranges"})
    rules = [r for d in docs if d["kind"] == "ClusterRole" for r in d["rules"] if "namespaces" in r["resources"]]
    assert rules == [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["ranges"], "verbs": ["get"]}]
