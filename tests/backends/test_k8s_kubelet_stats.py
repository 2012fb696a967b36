"""Peaks read from each node's kubelet, not through the API server's node proxy (L19).

The real dispatcher and backend run missions against the simulated API server and
kubelets: each node's kubelet listens on a loopback port of its own, which its
Node object reports (`status.addresses`, `status.daemonEndpoints.kubeletEndpoint.Port`),
serves HTTPS with a certificate the cluster CA signed, and checks bearer tokens as
a kubelet with --anonymous-auth=false does (kubesim/kubelet_server.py). The
assertions are on what the kubelets received (path, Authorization header, answer),
the records' peaks, and what the backend reported.
"""

from __future__ import annotations

import logging

import pytest

from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import SA_USER, C, SimClock, backend, kubelet_access, mission
from kubesim import kube_tls

BACKEND_LOG = "catchup_assets.backends.kubernetes.backend"


def run(api, kubelet, tmp_path, access=None, clock=None):
    cfg = mission(tmp_path)
    b = backend(api, kubelet, tmp_path, access=access)
    result = run_mission(prepare(cfg), b, clock=clock or SimClock(kubelet))
    assert result.condemned.keys() == {C}  # the twin mission's outcomes, peaks or not
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    return b, records


def answered(received, records) -> list:
    """What the kubelets answered. The reclaimed node's kubelet answers nothing: the backend's kept
    connection to it dies once, and the Node read after that says it is gone."""
    reclaimed = {r.node for r in records.values() if r.outcome == "disrupted"}
    silent = [r for r in received if r.code is None]
    assert {r.node for r in silent} <= reclaimed and len(silent) <= len(reclaimed), silent
    return [r for r in received if r.code is not None]


def peaks(records) -> set:
    return {(r.peak_anon_bytes, r.peak_working_set_bytes, r.peak_ephemeral_bytes) for r in records.values()}


def errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == BACKEND_LOG and r.levelno >= logging.ERROR]


def test_L19_each_summary_comes_from_the_pod_s_own_kubelet_with_the_service_account_token(cluster, tmp_path):
    api, kubelet = cluster
    kubelets = kubelet.endpoints
    token = kubelets.token_files[SA_USER].read_text()
    b, records = run(api, kubelet, tmp_path)
    received = answered(kubelets.received, records)
    assert received
    assert {(r.method, r.path, r.authorization, r.code) for r in received} == {
        ("GET", "/stats/summary", f"Bearer {token}", 200)
    }
    # Only kubelets of nodes our pods ran on were asked: the Node's address and port led there.
    assert {r.node for r in received} <= {r.node for r in records.values()}
    assert all(r.peak_anon_bytes for r in records.values() if r.outcome == "ok")
    assert not [key for key in api.requests.snapshot() if key[1] == "nodes/proxy"]
    assert b.kubelet_refused is None


@pytest.mark.parametrize(
    "case, code, said",
    [
        ("no token file", 401, "no token was sent"),
        ("a token nobody issued", 401, "its token was refused"),
        ("no nodes/stats grant", 403, "Forbidden (user=system:serviceaccount:catchup:cu-mission, verb=get, "),
    ],
)
def test_a_refusing_kubelet_is_reported_once_and_the_mission_goes_on(cluster, tmp_path, caplog, case, code, said):
    """Not a crash loop: the pass carries on, the cause is logged once and kept on the backend."""
    api, kubelet = cluster
    kubelets = kubelet.endpoints
    access, header = kubelet_access(kubelet), f"Bearer {kubelets.token_files[SA_USER].read_text()}"
    if case == "no token file":
        access, header = kubelet_access(kubelet, token_file=str(tmp_path / "absent")), None
    elif case == "a token nobody issued":
        (tmp_path / "forged").write_text("not-a-token\n")
        access, header = kubelet_access(kubelet, token_file=str(tmp_path / "forged")), "Bearer not-a-token"
    else:
        kubelets.authorize = lambda user, verb, resource, subresource: False
    b, records = run(api, kubelet, tmp_path, access)
    assert {(r.authorization, r.code) for r in answered(kubelets.received, records)} == {(header, code)}
    assert len(kubelets.received) > 1  # asked again each interval, reported once
    assert peaks(records) == {(None, None, None)}
    (logged,) = errors(caplog)
    assert f"answered {code}" in logged and said in logged
    assert said in b.kubelet_refused


def test_a_rotated_token_is_read_again_from_its_file(cluster, tmp_path):
    """Projected tokens rotate: the kubelet revokes the old one here, so any read that kept it gets 401."""
    api, kubelet = cluster
    kubelets = kubelet.endpoints
    path = kubelets.token_files[SA_USER]
    first = path.read_text()
    start = kubelet.clock()

    class Rotating(SimClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if path.read_text() == first and self.time() >= start + 100:
                kubelets.rotate(path)

    _, records = run(api, kubelet, tmp_path, clock=Rotating(kubelet))
    second = path.read_text()
    assert second != first
    sent = [r.authorization for r in kubelets.received if r.code is not None]
    assert {r.code for r in answered(kubelets.received, records)} == {200}
    assert sent[0] == f"Bearer {first}" and sent[-1] == f"Bearer {second}"
    switched = sent.index(f"Bearer {second}")
    assert set(sent[switched:]) == {f"Bearer {second}"}


def test_a_kubelet_certificate_the_ca_did_not_sign_is_refused_before_the_token_is_sent(cluster, tmp_path, caplog):
    """As where kubelets sign their own certificates (no serverTLSBootstrap) and the CA is the cluster's."""
    api, kubelet = cluster
    other_ca = kube_tls.cluster_ca_signed(tmp_path).ca_file
    b, records = run(api, kubelet, tmp_path, kubelet_access(kubelet, ca_file=other_ca))
    assert list(kubelet.endpoints.received) == []  # the handshake failed: no request, no token
    assert peaks(records) == {(None, None, None)}
    (logged,) = errors(caplog)
    assert "does not verify" in logged and "serverTLSBootstrap" in logged


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # urllib3's, meant
def test_verification_off_reads_the_same_kubelets_when_asked_to(cluster, tmp_path):
    api, kubelet = cluster
    b, records = run(api, kubelet, tmp_path, kubelet_access(kubelet, ca_file=None, insecure_skip_tls_verify=True))
    assert {r.code for r in answered(kubelet.endpoints.received, records)} == {200}
    assert all(r.peak_anon_bytes for r in records.values() if r.outcome == "ok")


@pytest.mark.parametrize("types, reads", [(("InternalIP", "ExternalIP", "Hostname"), True), (("InternalIP",), False)])
def test_the_node_address_is_taken_in_the_preferred_order(cluster, tmp_path, caplog, types, reads):
    """Nodes reporting no InternalIP (Kubernetes API reference, NodeAddress): the default order goes on
    to ExternalIP; a preference for InternalIP alone finds no address, and says so without a request."""
    api, kubelet = cluster
    for node in api.store.select("nodes"):
        addresses = node["status"]["addresses"]
        node["status"]["addresses"] = [
            {"type": "Hostname", "address": node["metadata"]["name"]},
            {"type": "ExternalIP", "address": next(a["address"] for a in addresses if a["type"] == "InternalIP")},
        ]
    b, records = run(api, kubelet, tmp_path, kubelet_access(kubelet, preferred_address_types=types))
    if reads:
        assert {r.code for r in answered(kubelet.endpoints.received, records)} == {200} and not errors(caplog)
        assert all(r.peak_anon_bytes for r in records.values() if r.outcome == "ok")
    else:
        assert list(kubelet.endpoints.received) == []
        (logged,) = errors(caplog)
        assert "has no address of types ['InternalIP']" in logged


@pytest.mark.parametrize("concurrency", [1, 4])
def test_L19_summaries_are_read_concurrently_up_to_the_bound(cluster, tmp_path, concurrency):
    """At 1000 nodes, one summary after another would take longer than stats_interval and
    hold the dispatcher's pass: they are read `kubelet_concurrency` at a time."""
    api, kubelet = cluster
    kubelets = kubelet.endpoints
    b = backend(api, kubelet, tmp_path, access=kubelet_access(kubelet, concurrency=concurrency))
    nodes = [f"dwarf-{n}" for n in range(3)] + [f"giant-{n}" for n in range(3)]
    kubelets.faults.add(hang=0.3, count=len(nodes), resource="nodes/stats")  # each kubelet slow to answer
    read = b.kubelet.summaries(nodes)
    assert [node for node, _ in read] == nodes
    assert all(isinstance(summary, dict) and summary["node"]["nodeName"] == node for node, summary in read)
    assert kubelets.most_in_flight == min(concurrency, len(nodes))
