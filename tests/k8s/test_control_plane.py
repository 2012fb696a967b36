"""What the session's control plane holds: its version, a Job run to Succeeded, PodSecurity and RBAC enforced."""

import json
import time

import kubernetes.client as k8s
import pytest

from kit.control_plane import k8s_version

pytestmark = pytest.mark.k8s

WAIT = 60.0
TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}


def eventually(probe, what: str, wait: float = WAIT):
    """probe()'s first truthy value, polled until `wait` seconds pass."""
    deadline = time.monotonic() + wait
    while not (value := probe()):
        assert time.monotonic() < deadline, f"not within {wait:.0f} s: {what}"
        time.sleep(0.2)
    return value


def test_version_is_the_pinned_release(control_plane):
    with control_plane.api_client() as api:
        assert k8s.VersionApi(api).get_code().git_version == k8s_version()


def test_job_runs_to_succeeded_on_a_kwok_node(control_plane):
    control_plane.create_namespace("jobs")
    with control_plane.api_client() as api:
        core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
        node = {
            "metadata": {"name": "kwok-smoke", "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [TAINT]},
        }
        core.create_node(node)
        eventually(lambda: _ready(core.read_node("kwok-smoke")), "kwok marks its node Ready")
        pod_spec = {
            "restartPolicy": "Never",
            "tolerations": [{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "fake"}],
        }
        job = {"metadata": {"name": "one"}, "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}}}
        batch.create_namespaced_job("jobs", job)
        done = eventually(lambda: batch.read_namespaced_job_status("one", "jobs").status.succeeded, "Job succeeded")
        assert done == 1
        conditions = {c.type: c.status for c in batch.read_namespaced_job_status("one", "jobs").status.conditions}
        assert conditions.get("Complete") == "True"
        (pod,) = core.list_namespaced_pod("jobs", label_selector="job-name=one").items
        # The Job controller made it, the scheduler bound it, kwok's pod-ready then pod-complete stages ran it.
        assert pod.metadata.owner_references[0].kind == "Job"
        assert pod.spec.node_name == "kwok-smoke"
        assert pod.status.phase == "Succeeded"
        assert pod.status.container_statuses[0].state.terminated.reason == "Completed"


def _ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def _pod(name: str, **container) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "fake", **container}]}}


def test_pod_security_restricted_refuses_unhardened_pods(control_plane):
    control_plane.create_namespace("restricted", {"pod-security.kubernetes.io/enforce": "restricted"})
    with control_plane.api_client() as api:
        core = k8s.CoreV1Api(api)
        privileged = _pod("privileged", securityContext={"privileged": True})
        for pod, violation in ((_pod("plain"), "allowPrivilegeEscalation != false"), (privileged, "privileged (")):
            with pytest.raises(k8s.ApiException) as refused:
                core.create_namespaced_pod("restricted", pod)
            assert refused.value.status == 403
            message = json.loads(refused.value.body)["message"]
            assert 'violates PodSecurity "restricted:latest"' in message
            assert violation in message
        hardened = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert core.create_namespaced_pod("restricted", _pod("hardened", securityContext=hardened)).metadata.uid


def test_rbac_refuses_a_service_account_without_a_role(control_plane):
    control_plane.create_namespace("rbac")
    with control_plane.api_client() as api:
        core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
        core.create_namespaced_service_account("rbac", {"metadata": {"name": "nobody"}})
        request = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
        token = core.create_namespaced_service_account_token("nobody", "rbac", request).status.token
        with control_plane.api_client(token) as as_nobody:
            with pytest.raises(k8s.ApiException) as refused:
                k8s.CoreV1Api(as_nobody).list_namespaced_pod("rbac")
            # 403 and not 401: the token authenticated, RBAC refused it.
            assert refused.value.status == 403
            message = json.loads(refused.value.body)["message"]
            assert 'User "system:serviceaccount:rbac:nobody" cannot list resource "pods"' in message
            rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
            rbac.create_namespaced_role("rbac", {"metadata": {"name": "pods"}, "rules": [rule]})
            subject = {"kind": "ServiceAccount", "name": "nobody", "namespace": "rbac"}
            role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"}
            rbac.create_namespaced_role_binding(
                "rbac", {"metadata": {"name": "pods"}, "subjects": [subject], "roleRef": role_ref}
            )
            eventually(lambda: _lists_pods(as_nobody), "the bound Role lets it list pods")


def _lists_pods(api) -> bool:
    try:
        k8s.CoreV1Api(api).list_namespaced_pod("rbac")
        return True
    except k8s.ApiException as e:
        if e.status != 403:
            raise
        return False


def test_admin_client_certificate_authenticates(control_plane):
    config = k8s.Configuration(host=control_plane.server, ssl_ca_cert=str(control_plane.ca_file))
    config.cert_file, config.key_file = str(control_plane.client_cert), str(control_plane.client_key)
    with k8s.ApiClient(config) as api:
        review = k8s.AuthenticationV1Api(api).create_self_subject_review({})
    assert review.status.user_info.username == "admin"
    assert "system:masters" in review.status.user_info.groups
