"""Every Kubernetes setting reaches the backend from the Dagster resource and from the chart alike.

The table below has a row per `K8sSettings` field; a field without a row fails
the first test, so a new knob is one field, its manifest line and one row here:
KubernetesConfig takes the field from the dataclass, and the chart's value
(its camelCase name) and schema are generated (defs/resources/chart_schema.py).
The chart side renders with Helm (helm-python-sdk) and loads the rendered
`catchup.json` as the code location does.
"""

from __future__ import annotations

import json
from dataclasses import fields

import helm_python as helm
import pytest
import yaml

from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.defs.resources import CatchupResource, KubernetesConfig
from kit.chart import BASE, CHART, NS, merge

TOLERATION = {"key": "karpenter.sh/capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}

# field -> (value given to KubernetesConfig, chart values (and release namespace), what K8sSettings holds)
CASES = {
    "namespace": ("other-ns", {"missionNamespace": "other-ns"}, "other-ns"),
    "image": ("r.example/core:23", {"workerImage": {"repository": "r.example/core", "tag": "23"}}, "r.example/core:23"),
    "image_pull_policy": ("Always", {"workerImage": {"pullPolicy": "Always"}}, "Always"),
    "worker_service_account": ("sa-x", {"workerServiceAccount": {"name": "sa-x"}}, "sa-x"),
    "storage_mode": ("ephemeral", {"storageMode": "ephemeral"}, "ephemeral"),
    "storage_class": ("fast", {"storageClass": "fast"}, "fast"),
    "pvc_size": ("200Gi", {"pvcSize": "200Gi"}, "200Gi"),
    "ephemeral_request": ("30Gi", {"ephemeralRequest": "30Gi"}, "30Gi"),
    "ephemeral_limit": ("50Gi", {"ephemeralLimit": "50Gi"}, "50Gi"),
    "cpu_limit": ("4", {"cpuLimit": "4"}, "4"),
    "ttl_seconds_after_finished": (600, {"ttlSecondsAfterFinished": 600}, 600),
    "configmap": ("mine-worker", {"fullnameOverride": "mine"}, "mine-worker"),
    "core_config_key": ("core.cfg", {"coreConfigKey": "core.cfg"}, "core.cfg"),
    "tier_node_label": ("example.com/tier", {"tierNodeLabel": "example.com/tier"}, "example.com/tier"),
    "tier_taint_key": ("example.com/pool", {"tierTaintKey": "example.com/pool"}, "example.com/pool"),
    "extra_tolerations": (
        [{**TOLERATION, "toleration_seconds": 30}],
        {"extraTolerations": [{**TOLERATION, "tolerationSeconds": 30}]},
        ({**TOLERATION, "toleration_seconds": 30},),
    ),
    "extra_node_selector": (
        {"topology.kubernetes.io/zone": "us-east-1a"},
        {"extraNodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"}},
        (("topology.kubernetes.io/zone", "us-east-1a"),),
    ),
    "pooled": (False, {"pooled": False}, False),
    "run_as_non_root": (False, {"runAsNonRoot": False}, False),
    "run_as_user": (2000, {"runAsUser": 2000}, 2000),
    "cluster_version": ("1.31", {"clusterVersion": "1.31"}, "1.31"),
    "priority_class_name": ("catchup-batch", {"priorityClassName": "catchup-batch"}, "catchup-batch"),
    "allow_broad_tolerations": (True, {"allowBroadTolerations": True}, True),
}


# Settings the chart offers only the restricted Pod Security Standard's values of (its mission namespace
# enforces it): the chart's value and what the backend then holds. Its schema refuses the rest
# (tests/deploy/test_chart_schema_bounds.py).
RESTRICTED_IN_THE_CHART = {"run_as_non_root": ({"runAsNonRoot": True}, True)}


def test_every_setting_has_a_row():
    assert set(CASES) == {f.name for f in fields(K8sSettings)}


def test_every_setting_is_a_resource_field_with_the_same_default():
    config = KubernetesConfig(namespace="ns", image="i")
    defaults = K8sSettings(namespace="ns", image="i")
    assert config.settings() == defaults  # one default per setting, declared on K8sSettings


@pytest.mark.parametrize("field", sorted(CASES))
def test_settable_from_the_resource(field):
    value, _, expected = CASES[field]
    config = KubernetesConfig(**{"namespace": "ns", "image": "i", field: value})
    settings = config.settings()
    assert getattr(settings, field) == expected != getattr(K8sSettings(namespace="ns", image="i"), field)


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART) as c:
        yield c


@pytest.mark.parametrize("field", sorted(CASES))
def test_settable_from_the_chart(chart, field):
    _, values, expected = CASES[field]
    values, expected = RESTRICTED_IN_THE_CHART.get(field, (values, expected))
    out = chart.render(values=merge(BASE, values), name="cu", namespace=NS, is_install=True)
    docs = [d for path, text in out.items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "catchup.json" in d.get("data", {})]
    settings = CatchupResource(**json.loads(cm["data"]["catchup.json"])).kubernetes.settings()
    assert getattr(settings, field) == expected
    if field == "core_config_key":  # the ConfigMap the range Jobs mount holds the core config under that key
        (worker,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == settings.configmap]
        assert expected in worker["data"] and worker["metadata"]["namespace"] == settings.namespace


# KubeletAccess field -> (KubernetesConfig `kubelet_<field>` value, chart values, what KubeletAccess holds).
KUBELET_CASES = {
    "preferred_address_types": (
        ["Hostname", "InternalIP"],
        {"kubelet": {"preferredAddressTypes": ["Hostname", "InternalIP"]}},
        ("Hostname", "InternalIP"),
    ),
    "ca_file": ("/etc/kubelet-ca/ca.crt", {"kubelet": {"caFile": "/etc/kubelet-ca/ca.crt"}}, "/etc/kubelet-ca/ca.crt"),
    "insecure_skip_tls_verify": (True, {"kubelet": {"insecureSkipTLSVerify": True}}, True),
    "token_file": ("/var/run/other/token", {"kubelet": {"tokenFile": "/var/run/other/token"}}, "/var/run/other/token"),
    "connect_timeout": (2.0, {"kubelet": {"connectTimeout": 2.0}}, 2.0),
    "read_timeout": (3.0, {"kubelet": {"readTimeout": 3.0}}, 3.0),
    "concurrency": (64, {"kubelet": {"concurrency": 64}}, 64),
}


def test_every_kubelet_setting_has_a_row_and_the_resource_s_default():
    assert set(KUBELET_CASES) == {f.name for f in fields(KubeletAccess)}
    assert KubernetesConfig(namespace="ns", image="i").kubelet_access() == KubeletAccess()


@pytest.mark.parametrize("field", sorted(KUBELET_CASES))
def test_kubelet_setting_from_the_resource_and_the_chart(chart, field):
    value, values, expected = KUBELET_CASES[field]
    access = KubernetesConfig(namespace="ns", image="i", **{f"kubelet_{field}": value}).kubelet_access()
    assert getattr(access, field) == expected != getattr(KubeletAccess(), field)
    if values is None:
        return
    out = chart.render(values=merge(BASE, values), name="cu", namespace=NS, is_install=True)
    docs = [d for path, text in out.items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "catchup.json" in d.get("data", {})]
    resource = CatchupResource(**json.loads(cm["data"]["catchup.json"]))
    assert getattr(resource.kubernetes.kubelet_access(), field) == expected


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"kubelet_preferred_address_types": []}, "non-empty"),
        ({"kubelet_preferred_address_types": ["InternalIP", "NodeIP"]}, "names a type other than"),
        ({"kubelet_ca_file": "/ca.crt", "kubelet_insecure_skip_tls_verify": True}, "choose one"),
    ],
)
def test_a_bad_kubelet_setting_is_refused_at_load_naming_it(bad, why):
    with pytest.raises(ValueError, match=why):
        CatchupResource(backend="kubernetes", kubernetes={"namespace": "ns", "image": "i", **bad})
