"""The chart's mission console (issue 46 item 1: "in the chart it is a Deployment and a Service (ClusterIP),
restricted pods, with RBAC for nothing beyond what it reads"), rendered with real Helm.

It reads the storage root only, never the API server: its own ServiceAccount mounts no token and nothing
binds it. Its pods are the restricted profile's (tests/pss.py), and not the code location's selector (whose
gRPC Service would route to them). Failures of issue 46 pinned: 1 (no place shows the mission: the chart
installs that place) and 3 (writes through an ingress: --public-url from the values).
"""

from __future__ import annotations

import helm_python as helm
import pytest

from kit.chart import NS, decode, one, render
from pss import RESTRICTED, pods_of, violations

ON = {
    "console": {
        "enabled": True,
        "tokenSecret": {"name": "console-token", "key": "tok"},
        "publicUrl": "https://console.example",
        "dagsterUrl": "http://dagster-dagster-webserver:80",
        "dagsterUiUrl": "https://dagster.example",
    },
    "storageCredentialsSecret": {"name": "s3-creds"},
}


def console_docs(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "console"]


def test_issue46_disabled_by_default_the_chart_renders_nothing_of_the_console(chart):
    docs = render(chart)
    assert console_docs(docs) == []
    assert not any("console" in d["metadata"]["name"] for d in docs)


def test_issue46_the_console_runs_the_cli_verb_on_the_storage_root_with_its_token_and_urls(chart):
    docs = render(chart, ON)
    assert sorted((d["kind"], d["metadata"]["name"]) for d in console_docs(docs)) == [
        ("Deployment", "cu-catchup-assets-console"),
        ("Service", "cu-catchup-assets-console"),
        ("ServiceAccount", "cu-catchup-assets-console"),
    ]
    deployment = one(docs, "Deployment", "cu-catchup-assets-console")
    decode(deployment, "V1Deployment")  # what the API server would accept
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["catchup-assets", "console"]
    assert container["args"] == [
        "--root", "s3://catchup/missions", "--work-dir", "/tmp/console-work", "--host", "0.0.0.0", "--port", "8080",
        "--token-file", "/var/run/catchup-console/token",
        "--public-url", "https://console.example",
        "--dagster-url", "http://dagster-dagster-webserver:80",
        "--dagster-ui-url", "https://dagster.example",
    ]  # fmt: skip
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["token"]["secret"] == {
        "secretName": "console-token",
        "defaultMode": 0o400,
        "items": [{"key": "tok", "path": "token"}],
    }
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["token"] == {"name": "token", "mountPath": "/var/run/catchup-console", "readOnly": True}
    assert container["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]  # the storage root's credentials
    service = one(docs, "Service", "cu-catchup-assets-console")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    code_location = one(docs, "Service", "catchup-assets")["spec"]["selector"]
    assert not all(labels.get(k) == v for k, v in code_location.items()), "the gRPC Service would route to it"


def test_issue46_without_a_token_secret_the_console_is_read_only(chart):
    docs = render(chart, {"console": {"enabled": True}})
    pod = one(docs, "Deployment", "cu-catchup-assets-console")["spec"]["template"]["spec"]
    assert "--token-file" not in pod["containers"][0]["args"] and "--dagster-url" not in pod["containers"][0]["args"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]


def test_issue46_the_console_s_pod_is_restricted_and_its_account_has_no_token_and_no_grant(chart):
    docs = render(chart, ON)
    pods = dict(pods_of(docs))
    pod = pods["Deployment/cu-catchup-assets-console"]
    assert violations(pod, RESTRICTED) == []
    spec = pod["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["containers"][0]["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert spec["serviceAccountName"] == "cu-catchup-assets-console" and spec["automountServiceAccountToken"] is False
    account = one(docs, "ServiceAccount", "cu-catchup-assets-console")
    assert account["automountServiceAccountToken"] is False
    # RBAC for nothing: no binding names the console's account, in any namespace.
    bound = [
        d["metadata"]["name"]
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in d.get("subjects", [])
        if s.get("name") == "cu-catchup-assets-console" or s.get("kind") == "Group"
    ]
    assert bound == []
    # And the chart's grants are those without the console: enabling it adds no rule anywhere.
    rules = lambda ds: sorted(str(d.get("rules")) for d in ds if d["kind"] in ("Role", "ClusterRole"))  # noqa: E731
    assert rules(docs) == rules(render(chart, {k: v for k, v in ON.items() if k != "console"}))
    assert all(d["metadata"]["namespace"] == NS for d in console_docs(docs))


@pytest.mark.parametrize(
    "console, field",
    [
        ({"dagsterUrl": "http://user:pw@dagster:80"}, "dagsterUrl"),
        ({"dagsterUrl": "http://dagster/?q=1"}, "dagsterUrl"),
        ({"dagsterUiUrl": "javascript:alert(1)"}, "dagsterUiUrl"),
        ({"publicUrl": "https://console.example/sub"}, "publicUrl"),
        ({"publicUrl": "console.example"}, "publicUrl"),
        ({"tokenSecret": {"name": "Bad_Name"}}, "tokenSecret"),
        ({"port": 70000}, "port"),
        ({"enable": True}, "enable"),
    ],
)
def test_issue46_a_bad_console_value_is_refused_by_the_chart_naming_it(chart, console, field):
    """Hostile input: refused at `helm install`, naming the value, before any pod exists."""
    with pytest.raises((helm.HelmValuesError, helm.HelmRenderError)) as e:
        render(chart, {"console": {"enabled": True, **console}})
    assert field in str(e.value)
