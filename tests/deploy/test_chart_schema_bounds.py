"""The chart's schema refuses what the code location would refuse at load (issue 35 item 5), rendered
with real Helm (helm-python-sdk, which applies values.schema.json as `helm template` and `helm install` do).

One test per value the issue names, each asserting the error names the value; then every bound a
model declares, walked from the declarations themselves, refused by the schema and by the resource alike.
"""

from __future__ import annotations

from dataclasses import fields

import helm_python as helm
import pytest

from catchup_assets.backends.kubernetes.settings import SYSTEM_NAMESPACES, K8sSettings
from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.errors import declared_bounds, integer_fields
from catchup_assets.core.plan.config import DISPATCH_SETTINGS, MissionConfig
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.sizing import MemoryLadder, SizingPolicy
from catchup_assets.core.units import GiB
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.resources.chart_keys import values_name
from kit.chart import render


def refusal(chart, values: dict) -> str:
    with pytest.raises(helm.HelmValuesError) as e:
        render(chart, values)
    return str(e.value)


def test_poll_seconds_below_zero_is_refused_naming_it(chart):
    assert "at '/pollSeconds': exclusiveMinimum: got -1, want 0" in refusal(chart, {"pollSeconds": -1})


def test_a_parallelism_no_cluster_holds_is_refused_naming_it(chart):
    said = refusal(chart, {"parallelism": 1_000_000_000_000})
    assert "at '/parallelism': maximum: got 1×10¹², want 150,000" in said  # MissionConfig's own cap
    # Unset, maxParallelism is the resource's 2000, which the code location refuses parallelism past.
    assert "at '/parallelism': maximum: got 5,000, want 2,000" in refusal(chart, {"parallelism": 5000})
    render(chart, {"parallelism": 5000, "maxParallelism": 6000})  # within a cap the operator raised


@pytest.mark.parametrize("namespace", SYSTEM_NAMESPACES)
def test_a_system_namespace_is_refused_as_the_mission_namespace(chart, namespace):
    said = refusal(chart, {"missionNamespace": {"name": namespace}})
    assert "at '/missionNamespace/name': 'not' failed" in said
    assert "at '/missionNamespace': 'not' failed" in refusal(chart, {"missionNamespace": namespace})  # older form
    render(chart, {"missionNamespace": {"name": f"{namespace}-ranges"}})  # only the names themselves


def test_the_code_refuses_a_system_namespace_too():
    for namespace in SYSTEM_NAMESPACES:
        with pytest.raises(ValueError, match=f"k8s setting 'namespace': '{namespace}' is a system namespace"):
            CatchupResource(backend="kubernetes", kubernetes={"namespace": namespace, "image": "i"})


def test_an_unknown_key_is_refused_naming_it(chart):
    assert "at '': additional properties 'pollSecond' not allowed" in refusal(chart, {"pollSecond": 2})


@pytest.mark.parametrize(
    "values, said",
    [
        ({"codeLocation": {"securityContext": {"privileged": True}}}, "at '/codeLocation/securityContext'"),
        ({"image": {"digest": "sha256:00"}}, "at '/image'"),
        ({"karpenter": {"nodeClassRef": {"namespace": "x"}}}, "at '/karpenter/nodeClassRef'"),
        ({"serviceAccount": {"automount": True}}, "at '/serviceAccount'"),
        ({"codeLocation": {"resources": {"request": {"cpu": "1"}}}}, "at '/codeLocation/resources'"),
        ({"networkPolicy": {"extraEgress": [{"from": []}]}}, "at '/networkPolicy/extraEgress/0'"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_an_unknown_key_inside_a_closed_object_is_refused_naming_where(chart, values, said):
    assert said in refusal(chart, values) and "not allowed" in refusal(chart, values)


def test_run_as_non_root_false_is_refused_naming_it(chart):
    assert "at '/runAsNonRoot': value must be one of true" in refusal(chart, {"runAsNonRoot": False})
    render(chart, {"runAsNonRoot": True})
    render(chart, {"runAsNonRoot": None})  # the project's default: true


def test_run_as_user_root_is_refused_naming_it(chart):
    assert "at '/runAsUser': minimum: got 0, want 1" in refusal(chart, {"runAsUser": 0})
    said = refusal(chart, {"codeLocation": {"securityContext": {"runAsUser": 0}}})
    assert "at '/codeLocation/securityContext/runAsUser': minimum: got 0, want 1" in said


@pytest.mark.parametrize(
    "values, where",
    [
        ({"slackTokenSecret": {"name": "a b/../c"}}, "/slackTokenSecret/name"),
        ({"imagePullSecrets": [{"name": "a b/../c"}]}, "/imagePullSecrets/0/name"),
        ({"serviceAccount": {"name": "a b/../c"}}, "/serviceAccount/name"),
        ({"storageClass": "a b/../c"}, "/storageClass"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_a_secret_or_other_object_name_that_is_no_dns_subdomain_is_refused(chart, values, where):
    assert f"at '{where}': 'a b/../c' does not match pattern" in refusal(chart, values)


@pytest.mark.parametrize("channel", ["#ops\nWARNING forged", "a" * 100_000, "#Ops"], ids=["newline", "100k", "upper"])
def test_issue36_a_slack_channel_slack_would_not_have_is_refused_naming_it(chart, channel):
    assert "at '/slackChannel'" in refusal(chart, {"slackChannel": channel})
    with pytest.raises(ValueError, match="slack_channel: .* is not a Slack channel"):
        CatchupResource(slack_channel=channel)  # the code location, at load, the same


def test_a_slack_channel_by_name_or_id_renders(chart):
    for channel in ("#catchup-alerts", "catchup_alerts", "C024BE91L", ""):
        render(chart, {"slackChannel": channel})


@pytest.mark.parametrize(
    "values",
    [
        {"commonLabels": {"a b": "x"}},
        {"codeLocation": {"nodeSelector": {"a b": "x"}}},
        {"monitoring": {"podMonitor": {"labels": {"a b": "x"}}}},
        {"codeLocation": {"podAnnotations": {"a b": "x"}}},
    ],  # fmt: skip
    ids=["commonLabels", "nodeSelector", "podMonitor.labels", "podAnnotations"],
)
def test_a_label_key_with_a_space_is_refused_naming_it(chart, values):
    assert "invalid propertyName 'a b'" in refusal(chart, values)


@pytest.mark.parametrize(
    "key, ok",
    [("app", True), ("example.com/tier", True), ("a" * 63, True), ("a" * 64, False), ("x" * 253 + "/n", True),
     ("x" * 254 + "/n", False), ("Example.com/n", False), ("a/b/c", False), ("-a", False), ("a..b/n", False)],
)  # fmt: skip
def test_label_keys_are_kubernetes_qualified_names(chart, key, ok):
    values = {"commonLabels": {key: "v"}}
    if ok:
        render(chart, values)
    else:
        assert f"invalid propertyName '{key}'" in refusal(chart, values)


# Every bound a model declares (core/errors.py `bounded`), with its values path and how the resource takes it.
_POLICIES = {"retry": RetryPolicy, "sizing": SizingPolicy, "ladder": MemoryLadder, "disk": DiskPolicy}
_K8S = {"namespace": "n", "image": "i"}


def _past(bound: str, at: float, integer: bool) -> float:
    """A value just past a bound."""
    step = 1 if integer else 0.5
    return {"ge": at - step, "gt": at, "le": at + step, "lt": at}[bound]


def _declared():
    """(values path, the chart's value, the resource's config, the field its refusal names) for one value past
    each declared bound."""
    out = []
    for block, policy in _POLICIES.items():
        for f in fields(policy):
            for bound, at in declared_bounds(policy, f.name).items():
                key = f.name.removesuffix("_bytes") + "_gib" if f.name.endswith("_bytes") else f.name
                at = at / GiB if key != f.name else at  # a `*_bytes` bound, as its `*_gib` value says it
                value = _past(bound, at, f.name in integer_fields(policy) and key == f.name)
                out.append((f"{block}/{key}", {block: {key: value}}, {block: {key: value}}, f.name))
    for name in (*DISPATCH_SETTINGS, "parallelism", "deadline_seconds"):
        for bound, at in declared_bounds(MissionConfig, name).items():
            value = _past(bound, at, name in integer_fields(MissionConfig))
            config = {name: value} if name in DISPATCH_SETTINGS else {"mission_defaults": {name: value}}
            out.append((values_name(name), {values_name(name): value}, config, name))
    for f in fields(K8sSettings):
        for bound, at in declared_bounds(K8sSettings, f.name).items():
            value = _past(bound, at, f.name in integer_fields(K8sSettings))
            config = {"backend": "kubernetes", "kubernetes": {**_K8S, f.name: value}}
            out.append((values_name(f.name), {values_name(f.name): value}, config, f.name))
    return out


DECLARED = _declared()


def test_the_walk_finds_every_kind_of_bound():
    paths = {p for p, *_ in DECLARED}
    assert {"pollSeconds", "parallelism", "retry/oom_rungs", "sizing/margin", "ladder/cap_gib"} <= paths
    assert {"disk/factor", "ttlSecondsAfterFinished", "runAsUser", "breakerAttempts"} <= paths
    # Issue 45 failures 18 and 19: every bound has its upper side too, `retry.failed` and `ladder.cap_gib` among them.
    ids = {f"{p}={v}" for p, v, *_ in DECLARED}
    assert "retry/failed={'retry': {'failed': 101}}" in ids and "ladder/cap_gib={'ladder': {'cap_gib': 32768.5}}" in ids


@pytest.mark.parametrize("path, values, config, field", DECLARED, ids=[f"{p}={v}" for p, v, *_ in DECLARED])
def test_every_declared_bound_is_refused_by_the_schema_and_at_load_alike(chart, path, values, config, field):
    assert f"at '/{path}'" in refusal(chart, values)
    with pytest.raises(ValueError, match=field):
        CatchupResource(**config)
