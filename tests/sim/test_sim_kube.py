"""The simulated Kubernetes API, driven with the official client over HTTP (T1).

Every assertion is on what the server holds or what the real client got back:
models, `ApiException` statuses and bodies, raw log bytes, request counts.
The lifecycle shapes (OOM, disruption, eviction, deadline, never-starting
pods, stats, logs) are in test_sim_kube_lifecycle.py.
"""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client import ApiException, BatchV1Api, CoreV1Api

from kit.sim_kube import job_manifest
from kubesim.kube_api import KubeApiServer
from kubesim.kube_script import Script
from kubesim.kubelet import Kubelet


@pytest.fixture
def cluster():
    with KubeApiServer() as api:
        kubelet = Kubelet(api.store, script=lambda job: Script(duration=30))
        kubelet.add_node("n1")
        yield api, kubelet, BatchV1Api(api.api_client), CoreV1Api(api.api_client)


def test_create_sets_server_fields_and_a_second_create_is_409_already_exists(cluster):
    """L11: a lost create race answers 409 with a real Status body."""
    api, _, batch, _ = cluster
    job = batch.create_namespaced_job("ns", job_manifest("r1"))
    assert job.metadata.uid and job.metadata.resource_version and job.metadata.creation_timestamp
    assert job.spec.backoff_limit == 0
    # Server-side defaulting the backend relies on: the selector and pod labels.
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert job.spec.template.metadata.labels["job-name"] == "r1"
    assert job.spec.template.metadata.labels["controller-uid"] == uid
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job("ns", job_manifest("r1"))
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "AlreadyExists", 409)
    assert body["message"] == 'jobs.batch "r1" already exists'
    assert api.store.count("jobs", "ns") == 1


def test_get_list_delete_and_404(cluster):
    api, _, batch, core = cluster
    batch.create_namespaced_job("ns", job_manifest("r1"))
    assert batch.read_namespaced_job("r1", "ns").metadata.name == "r1"
    listed = batch.list_namespaced_job("ns")
    assert [j.metadata.name for j in listed.items] == ["r1"]
    assert int(listed.metadata.resource_version) >= int(listed.items[0].metadata.resource_version)
    status = batch.delete_namespaced_job("r1", "ns", propagation_policy="Background")
    assert status.status == "Success" and status.details.name == "r1"
    for call in (
        lambda: batch.read_namespaced_job("r1", "ns"),
        lambda: batch.delete_namespaced_job("r1", "ns"),
        lambda: core.read_namespaced_config_map("cm", "ns"),
        lambda: core.read_namespaced_secret("s", "ns"),
    ):
        with pytest.raises(ApiException) as err:
            call()
        assert err.value.status == 404
        assert json.loads(err.value.body)["reason"] == "NotFound"
    assert api.store.count("jobs") == 0


@pytest.mark.parametrize(
    "selector,expected",
    [
        ("mission=m1", ["a", "b", "c"]),
        ("mission==m1,tier=small", ["a"]),
        ("tier!=small", ["b", "c", "d"]),
        ("tier in (small,large)", ["a", "b"]),
        ("tier notin (small)", ["b", "c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("mission=m1,!tier", ["c"]),
    ],
)
def test_label_selectors(cluster, selector, expected):
    _, _, batch, _ = cluster
    for name, labels in (
        ("a", {"mission": "m1", "tier": "small"}),
        ("b", {"mission": "m1", "tier": "large"}),
        ("c", {"mission": "m1"}),
        ("d", {"mission": "m2"}),
    ):
        batch.create_namespaced_job("ns", job_manifest(name, labels))
    got = batch.list_namespaced_job("ns", label_selector=selector)
    assert [j.metadata.name for j in got.items] == expected


def test_field_selectors_on_pods_and_unsupported_field_is_400(cluster):
    api, kubelet, batch, core = cluster
    batch.create_namespaced_job("ns", job_manifest("ok"))
    batch.create_namespaced_job("ns", job_manifest("stuck", nodeSelector={"tier": "none"}))
    kubelet.step()
    running = core.list_namespaced_pod("ns", field_selector="status.phase=Running")
    assert [p.metadata.labels["job-name"] for p in running.items] == ["ok"]
    on_n1 = core.list_namespaced_pod("ns", field_selector="spec.nodeName=n1,status.phase!=Failed")
    assert [p.metadata.labels["job-name"] for p in on_n1.items] == ["ok"]
    pending = core.list_pod_for_all_namespaces(field_selector="status.phase=Pending")
    assert [p.metadata.labels["job-name"] for p in pending.items] == ["stuck"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("ns", field_selector="spec.bogus=x")
    assert err.value.status == 400
    assert "field label not supported: spec.bogus" in err.value.body


def test_list_pagination_with_limit_and_continue(cluster):
    _, _, batch, _ = cluster
    for i in range(5):
        batch.create_namespaced_job("ns", job_manifest(f"r{i}"))
    first = batch.list_namespaced_job("ns", limit=2)
    assert len(first.items) == 2 and first.metadata.remaining_item_count == 3
    rest = batch.list_namespaced_job("ns", limit=10, _continue=first.metadata._continue)
    assert [j.metadata.name for j in first.items + rest.items] == [f"r{i}" for i in range(5)]
    assert rest.metadata._continue is None


def test_job_delete_background_takes_pods_and_default_orphans_them(cluster):
    """batch/v1 orphans pods unless told otherwise: L2's reaping must say Background."""
    api, kubelet, batch, core = cluster
    batch.create_namespaced_job("ns", job_manifest("bg"))
    batch.create_namespaced_job("ns", job_manifest("orphan"))
    kubelet.step()
    batch.delete_namespaced_job("bg", "ns", propagation_policy="Background")
    batch.delete_namespaced_job("orphan", "ns")
    pods = core.list_namespaced_pod("ns").items
    assert [p.metadata.labels["job-name"] for p in pods] == ["orphan"]
    assert not pods[0].metadata.owner_references


def test_job_validation_rejects_restart_policy_always_and_bad_names(cluster):
    _, _, batch, _ = cluster
    bad = job_manifest("r1")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    for manifest in (bad, job_manifest("Upper_Case"), job_manifest("x" * 64)):
        with pytest.raises(ApiException) as err:
            batch.create_namespaced_job("ns", manifest)
        assert err.value.status == 422
        assert json.loads(err.value.body)["reason"] == "Invalid"


def test_pvc_configmap_and_nodes_crud(cluster):
    api, kubelet, _, core = cluster
    core.create_namespaced_persistent_volume_claim(
        "ns",
        {
            "metadata": {"name": "data-r1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}},
        },
    )
    core.create_namespaced_config_map("ns", {"metadata": {"name": "core-cfg"}, "data": {"stellar-core.cfg": "x"}})
    assert core.read_namespaced_persistent_volume_claim("data-r1", "ns").status.phase == "Pending"
    assert core.read_namespaced_config_map("core-cfg", "ns").data == {"stellar-core.cfg": "x"}
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]
    core.delete_namespaced_persistent_volume_claim("data-r1", "ns")
    assert api.store.count("persistentvolumeclaims") == 0


def test_pvc_deleted_while_in_use_lingers_until_its_pod_finishes(cluster):
    """L3: releasing a claim a live pod mounts leaves it Terminating, not gone."""
    api, kubelet, batch, core = cluster
    core.create_namespaced_persistent_volume_claim(
        "ns", {"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    )
    batch.create_namespaced_job(
        "ns", job_manifest("r1", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    )
    kubelet.step()
    assert core.read_namespaced_persistent_volume_claim("data", "ns").status.phase == "Bound"
    core.delete_namespaced_persistent_volume_claim("data", "ns")
    kubelet.step()
    pvc = core.read_namespaced_persistent_volume_claim("data", "ns")
    assert pvc.metadata.deletion_timestamp is not None
    kubelet.advance(31)
    assert api.store.count("persistentvolumeclaims") == 0


def test_ttl_after_finished_deletes_job_and_pods(cluster):
    api, kubelet, batch, _ = cluster
    batch.create_namespaced_job("ns", job_manifest("r1", job_spec={"ttlSecondsAfterFinished": 60}))
    kubelet.step()
    kubelet.advance(30, tick=5)
    assert api.store.get("jobs", "ns", "r1")["status"]["succeeded"] == 1
    kubelet.advance(55, tick=5)
    assert api.store.count("jobs") == 1
    kubelet.advance(10, tick=5)
    assert api.store.count("jobs") == 0 and api.store.count("pods") == 0


@pytest.mark.parametrize(
    "code,reason",
    [(429, "TooManyRequests"), (500, "InternalError"), (503, "ServiceUnavailable"), (504, "Timeout"), (410, "Expired")],
)
def test_injected_faults_are_api_exceptions_with_status_bodies(cluster, code, reason):
    api, _, batch, _ = cluster
    api.faults.add(code, verb="create", resource="jobs", count=2, retry_after=7)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            batch.create_namespaced_job("ns", job_manifest("r1"))
        assert err.value.status == code
        assert json.loads(err.value.body)["reason"] == reason
        if code == 429:
            assert err.value.headers["Retry-After"] == "7"
    assert api.store.count("jobs") == 0
    batch.create_namespaced_job("ns", job_manifest("r1"))  # the fault is spent
    assert api.faults.pending() == 0 and api.store.count("jobs") == 1


def test_get_429_is_retried_inside_the_client_as_against_a_real_server(cluster):
    """urllib3's default Retry honours Retry-After on idempotent verbs (sleeping
    that long): the caller sees the last answer, the server counted every try."""
    api, _, batch, _ = cluster
    api.faults.add(429, verb="list", resource="jobs", count=2, retry_after=0)
    assert batch.list_namespaced_job("ns").items == []
    assert api.requests.count("list", "jobs") == 3
    api.requests.reset()
    api.faults.add(429, verb="list", resource="jobs", count=10, retry_after=0)
    with pytest.raises(ApiException) as err:
        batch.list_namespaced_job("ns")
    assert err.value.status == 429
    assert api.requests.count("list", "jobs") == 4  # urllib3's Retry(total=3), then give up


def test_fault_by_method_and_path_regex(cluster):
    api, _, batch, core = cluster
    api.faults.add(500, method="POST", path=r"/jobs$")
    core.create_namespaced_config_map("ns", {"metadata": {"name": "cm"}})  # not matched
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job("ns", job_manifest("r1"))
    assert err.value.status == 500 and api.store.count("jobs") == 0


def test_hang_past_client_timeout_still_creates_so_the_retry_is_409(cluster):
    """L11: the create that timed out happened; its retry must be adopted."""
    api, _, batch, _ = cluster
    api.faults.add(hang=0.3, verb="create", resource="jobs")
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        batch.create_namespaced_job("ns", job_manifest("r1"), _request_timeout=0.1)
    assert api.wait_idle()
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job("ns", job_manifest("r1"))
    assert err.value.status == 409


def test_the_node_proxy_is_not_served(cluster):
    """Summaries come from the kubelets themselves (kubelet_server.py): nothing may lean on the proxy."""
    api, _, _, core = cluster
    with pytest.raises(ApiException) as err:
        core.connect_get_node_proxy_with_path("n1", "stats/summary")
    assert err.value.status == 404


def test_request_accounting_per_verb_and_resource(cluster):
    api, kubelet, batch, core = cluster
    api.requests.reset()
    batch.create_namespaced_job("ns", job_manifest("r1"))
    kubelet.step()
    batch.list_namespaced_job("ns", label_selector="mission=m1")
    core.list_namespaced_pod("ns", label_selector="mission=m1")
    core.read_namespaced_pod_log(api.store.list("pods")[0]["metadata"]["name"], "ns")
    core.read_node("n1")
    batch.delete_namespaced_job("r1", "ns", propagation_policy="Background")
    assert api.requests.snapshot() == {
        ("create", "jobs"): 1,
        ("list", "jobs"): 1,
        ("list", "pods"): 1,
        ("get", "pods/log"): 1,
        ("get", "nodes"): 1,
        ("delete", "jobs"): 1,
    }
    assert api.requests.total == 6 and api.requests.count(verb="list") == 2
    api.requests.reset()
    assert api.requests.total == 0


def test_patch_and_replace_keep_identity_and_bump_resource_version(cluster):
    api, _, batch, core = cluster
    job = batch.create_namespaced_job("ns", job_manifest("r1"))
    patched = batch.patch_namespaced_job("r1", "ns", {"metadata": {"labels": {"done": "true"}}})
    assert patched.metadata.labels["done"] == "true" and patched.metadata.uid == job.metadata.uid
    assert int(patched.metadata.resource_version) > int(job.metadata.resource_version)
    core.create_namespaced_config_map("ns", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    stale = core.read_namespaced_config_map("cm", "ns")
    core.replace_namespaced_config_map("cm", "ns", {"metadata": {"name": "cm"}, "data": {"a": "2"}})
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cm", "ns", stale)
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    assert api.store.get("configmaps", "ns", "cm")["data"] == {"a": "2"}


def test_background_kubelet_on_a_real_clock_runs_jobs_to_completion():
    """The benchmark mode: wall-clock time, a stepping thread, no test driving it."""
    import time

    with KubeApiServer(clock=time.time) as api:
        kubelet = Kubelet(api.store, script=lambda job: Script(duration=0.2))
        kubelet.add_node("n1")
        batch = BatchV1Api(api.api_client)
        batch.create_namespaced_job("ns", job_manifest("r1"))
        kubelet.start(interval=0.01)
        try:
            deadline = time.monotonic() + 5
            while not (batch.read_namespaced_job("r1", "ns").status.succeeded or time.monotonic() > deadline):
                time.sleep(0.02)
        finally:
            kubelet.stop()
        assert batch.read_namespaced_job("r1", "ns").status.succeeded == 1
