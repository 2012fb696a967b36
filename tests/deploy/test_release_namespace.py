"""The release namespace's fences (issue 35 item 5), rendered with real Helm and validated against the
Kubernetes 1.30 schema: the code server admits only the dagster chart's webserver and daemon, on its gRPC
port; this release's run pods admit only the metrics scraper, on their metrics port.

The chart does not create the release namespace (Helm's `--create-namespace` or the operator does), so it
has no Pod Security label to set there. Each policy is judged by what it lets in: a small reading of
NetworkPolicy ingress semantics (kubernetes.io/docs/concepts/services-networking/network-policies/).
"""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from kit.chart import K8S_VERSION, NS, one, render

CODE_SERVER, RUN_PODS = "cu-catchup-assets-code-server", "cu-catchup-assets-run-pods"
# The dagster chart's own pod labels (helm/dagster/templates/deployment-webserver.yaml, deployment-daemon.yaml).
DAGSTER = {"app.kubernetes.io/name": "dagster", "app.kubernetes.io/instance": "dagster"}
WEBSERVER, DAEMON = {**DAGSTER, "component": "dagster-webserver"}, {**DAGSTER, "component": "dagster-daemon"}
PROMETHEUS = ({"kubernetes.io/metadata.name": "monitoring"}, {"app.kubernetes.io/name": "prometheus"})


def valid(doc: dict) -> dict:
    assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == K8S_VERSION
    return doc


def _selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # all this chart renders
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def ingress_allowed(policy: dict, port: int, ns_labels: dict, pod_labels: dict, protocol: str = "TCP") -> bool:
    """May a pod (its namespace's labels, its own) reach a pod the policy selects on `port`?"""
    spec = policy["spec"]
    if "Ingress" not in spec["policyTypes"]:
        return True
    here = ns_labels.get("kubernetes.io/metadata.name") == policy["metadata"]["namespace"]
    for rule in spec.get("ingress") or []:
        ports = rule.get("ports")
        if ports and not any(p.get("protocol", "TCP") == protocol and p.get("port") == port for p in ports):
            continue
        for peer in rule.get("from") or [{}]:
            if peer == {}:
                return True
            in_ns = _selects(peer["namespaceSelector"], ns_labels) if "namespaceSelector" in peer else here
            if in_ns and ("podSelector" not in peer or _selects(peer["podSelector"], pod_labels)):
                return True
    return False


def _pods(docs: list[dict]) -> tuple[dict, dict]:
    """The code server's pod labels and a run pod's (the container context's, plus the launcher's run_worker)."""
    deployment = one(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    context = json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])["k8s"]
    return deployment["spec"]["template"]["metadata"]["labels"], {
        **context["labels"],
        "app.kubernetes.io/component": "run_worker",
    }


RELEASE = {"kubernetes.io/metadata.name": NS}


def test_the_code_server_admits_only_the_webserver_and_the_daemon_on_its_grpc_port(chart):
    docs = render(chart)
    policy = valid(one(docs, "NetworkPolicy", CODE_SERVER))
    code_server, run_pod = _pods(docs)
    assert policy["metadata"]["namespace"] == NS and _selects(policy["spec"]["podSelector"], code_server)
    assert not _selects(policy["spec"]["podSelector"], run_pod)
    grpc = one(docs, "Service")["spec"]["ports"][0]["port"]
    assert ingress_allowed(policy, grpc, RELEASE, WEBSERVER) and ingress_allowed(policy, grpc, RELEASE, DAEMON)
    refused = [
        (grpc, RELEASE, run_pod),  # a run pod holds the Job-creating token: it never needs the code server
        (grpc, RELEASE, {**DAGSTER, "component": "postgresql"}),
        (grpc, {"kubernetes.io/metadata.name": "other"}, WEBSERVER),  # a webserver of another namespace
        (grpc, *PROMETHEUS),
        (22, RELEASE, WEBSERVER),
    ]
    for port, ns, pod in refused:
        assert not ingress_allowed(policy, port, ns, pod), (port, ns, pod)
    # It follows the code location's port.
    policy = one(render(chart, {"codeLocation": {"port": 4040}}), "NetworkPolicy", CODE_SERVER)
    assert ingress_allowed(policy, 4040, RELEASE, WEBSERVER) and not ingress_allowed(policy, grpc, RELEASE, WEBSERVER)


def test_the_run_pods_admit_only_the_scraper_on_their_metrics_port(chart):
    docs = render(chart)
    policy = valid(one(docs, "NetworkPolicy", RUN_PODS))
    code_server, run_pod = _pods(docs)
    assert policy["metadata"]["namespace"] == NS and _selects(policy["spec"]["podSelector"], run_pod)
    assert not _selects(policy["spec"]["podSelector"], code_server)
    # Another code location's run pods carry Dagster's run_worker label too: this policy is not theirs.
    assert not _selects(policy["spec"]["podSelector"], {"app.kubernetes.io/component": "run_worker"})
    assert ingress_allowed(policy, 9464, *PROMETHEUS)
    for port, ns, pod in [(9464, RELEASE, WEBSERVER), (9464, RELEASE, DAEMON), (8080, *PROMETHEUS),
                          (9464, {"kubernetes.io/metadata.name": "other"}, PROMETHEUS[1])]:  # fmt: skip
        assert not ingress_allowed(policy, port, ns, pod), (port, ns, pod)


@pytest.mark.parametrize(
    "values, closed",
    [
        ({"metricsPort": 0}, RUN_PODS),  # run pods serve no /metrics
        ({"networkPolicy": {"metricsScrapers": []}}, RUN_PODS),
        ({"networkPolicy": {"codeServerClients": []}}, CODE_SERVER),
    ],
    ids=["no-metrics-port", "no-scrapers", "no-clients"],
)
def test_without_a_peer_or_a_port_nothing_is_admitted(chart, values, closed):
    policy = valid(one(render(chart, values), "NetworkPolicy", closed))
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []
    assert not ingress_allowed(policy, 9464, *PROMETHEUS) and not ingress_allowed(policy, 3030, RELEASE, WEBSERVER)


def test_the_fences_follow_the_values_and_the_switch(chart):
    scrapers = [{"namespace": "obs", "podLabels": {"app": "vm"}}]
    values = {"metricsPort": 9100, "networkPolicy": {"metricsScrapers": scrapers, "codeServerClients": [{"app": "ui"}]}}
    docs = render(chart, values)
    run_pods, code_server = one(docs, "NetworkPolicy", RUN_PODS), one(docs, "NetworkPolicy", CODE_SERVER)
    assert ingress_allowed(run_pods, 9100, {"kubernetes.io/metadata.name": "obs"}, {"app": "vm"})
    assert not ingress_allowed(run_pods, 9100, *PROMETHEUS)
    assert ingress_allowed(code_server, 3030, RELEASE, {"app": "ui"})
    assert not ingress_allowed(code_server, 3030, RELEASE, WEBSERVER)
    assert [d for d in render(chart, {"networkPolicy": {"enabled": False}}) if d["kind"] == "NetworkPolicy"] == []


def test_the_chart_creates_no_release_namespace(chart):
    """Nothing to label restricted: the release namespace is Helm's (`-n`), and also holds the dagster chart's pods."""
    assert [d["metadata"]["name"] for d in render(chart) if d["kind"] == "Namespace"] == ["catchup-missions"]
