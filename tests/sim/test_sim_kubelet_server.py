"""The simulated kubelets' HTTPS endpoint, seen as a client sees a real kubelet (T1).

A client finds a kubelet from its Node object, read with the official client,
and talks HTTPS to it with urllib3, verifying the certificate against the
cluster CA. The answers are the kubelet's own (pkg/kubelet/server/server.go,
InstallAuthFilter): 401 "Unauthorized" without a token it knows, 403
"Forbidden (...)" with the attributes of the docs' path table, else the summary.
"""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client import BatchV1Api, CoreV1Api

from catchup_assets.core.units import GiB
from kit.sim_kube import job_manifest
from kubesim import kube_tls
from kubesim.kube_api import KubeApiServer
from kubesim.kube_script import Script, Usage
from kubesim.kubelet import Kubelet
from kubesim.kubelet_server import KubeletServer, request_attributes

USER = "system:serviceaccount:ns:reader"


@pytest.fixture
def sim():
    """(api, kubelet, kubelets, core, token): node n1 served, one token issued to USER."""
    with KubeApiServer() as api:
        kubelet = Kubelet(api.store, script=lambda job: Script(duration=100, memory=[(0.0, Usage(GiB, 2 * GiB, 0))]))
        kubelets = KubeletServer(kubelet)
        token = kubelets.project_token(USER).read_text()
        kubelet.add_node("n1")
        yield api, kubelet, kubelets, CoreV1Api(api.api_client), token
        kubelets.stop()


def where(core: CoreV1Api, node: str) -> tuple[str, int]:
    """The kubelet's address and port from the Node, as the client's models decode them."""
    status = core.read_node(node).status
    internal = [a.address for a in status.addresses if a.type == "InternalIP"]
    return internal[0], status.daemon_endpoints.kubelet_endpoint.port


def get(kubelets: KubeletServer, host: str, port: int, path: str, token: str | None = None, ca: str | None = None):
    http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=ca or kubelets.ca_file, retries=False)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return http.connection_from_host(host, port, scheme="https").urlopen("GET", path, headers=headers)


def test_a_node_says_where_its_kubelet_listens_and_it_serves_the_summary_there(sim):
    api, kubelet, kubelets, core, token = sim
    BatchV1Api(api.api_client).create_namespaced_job("ns", job_manifest("r1"))
    kubelet.advance(20, tick=5)
    host, port = where(core, "n1")
    assert host == "127.0.0.1" and port > 0
    resp = get(kubelets, host, port, "/stats/summary", token)
    assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
    summary = json.loads(resp.data)
    assert summary == kubelet.stats_summary("n1")  # the body the node proxy served
    assert summary["pods"][0]["containers"][0]["memory"]["rssBytes"] == GiB
    assert [(r.node, r.path, r.authorization, r.code) for r in kubelets.received] == [
        ("n1", "/stats/summary", f"Bearer {token}", 200)
    ]
    assert kubelets.requests.snapshot() == {("get", "nodes/stats"): 1}


def test_each_node_has_its_own_kubelet(sim):
    api, kubelet, kubelets, core, token = sim
    kubelet.add_node("n2")
    assert where(core, "n1")[1] != where(core, "n2")[1]
    assert json.loads(get(kubelets, *where(core, "n2"), "/stats/summary", token).data)["node"]["nodeName"] == "n2"


@pytest.mark.parametrize("token", [None, "forged"])
def test_no_token_or_an_unknown_one_is_401(sim, token):
    _, _, kubelets, core, _ = sim
    resp = get(kubelets, *where(core, "n1"), "/stats/summary", token)
    assert (resp.status, resp.data) == (401, b"Unauthorized")


def test_an_authenticated_request_is_authorized_with_the_kubelet_s_attributes(sim):
    _, _, kubelets, core, token = sim
    asked = []
    kubelets.authorize = lambda *attrs: asked.append(attrs) or attrs[3] == "stats"
    host, port = where(core, "n1")
    assert get(kubelets, host, port, "/stats/summary", token).status == 200
    resp = get(kubelets, host, port, "/pods", token)  # every pod's spec and env: nodes/proxy
    assert resp.status == 403
    assert resp.data == f"Forbidden (user={USER}, verb=get, resource=nodes, subresource=proxy)".encode()
    assert asked == [(USER, "get", "nodes", "stats"), (USER, "get", "nodes", "proxy")]
    assert kubelets.requests.snapshot() == {("get", "nodes/stats"): 1, ("get", "nodes/proxy"): 1}


@pytest.mark.parametrize(
    "method, path, attrs",
    [
        ("GET", "/stats/summary", ("get", "stats")),
        ("GET", "/metrics/cadvisor", ("get", "metrics")),
        ("GET", "/logs/syslog", ("get", "log")),
        ("GET", "/spec/", ("get", "spec")),
        ("GET", "/containerLogs/ns/p/c", ("get", "proxy")),
        ("POST", "/exec/ns/p/c", ("create", "proxy")),
        ("GET", "/statsx", ("get", "proxy")),
    ],
)
def test_request_attributes_follow_the_kubelet_s_path_table(method, path, attrs):
    assert request_attributes(method, path) == attrs


def test_the_certificate_verifies_only_against_the_cluster_ca(sim, tmp_path):
    _, _, kubelets, core, token = sim
    other = kube_tls.cluster_ca_signed(tmp_path).ca_file
    with pytest.raises(urllib3.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(kubelets, *where(core, "n1"), "/stats/summary", token, ca=other)
    assert list(kubelets.received) == []  # refused in the handshake, before any request


def test_a_node_gone_takes_its_kubelet_with_it(sim):
    _, kubelet, kubelets, core, token = sim
    host, port = where(core, "n1")
    kubelet.remove_node("n1")
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        get(kubelets, host, port, "/stats/summary", token)


def test_faults_reach_kubelet_reads(sim):
    _, _, kubelets, core, token = sim
    kubelets.faults.add(status=503, resource="nodes/stats", count=1)
    kubelets.faults.add(truncate=True, resource="nodes/stats", count=1)
    host, port = where(core, "n1")
    assert get(kubelets, host, port, "/stats/summary", token).status == 503
    with pytest.raises(urllib3.exceptions.ProtocolError):
        get(kubelets, host, port, "/stats/summary", token)
    assert get(kubelets, host, port, "/stats/summary", token).status == 200
    assert kubelets.faults.pending() == 0
