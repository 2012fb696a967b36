"""Every retry, sizing, memory-ladder and disk knob reaches its policy from the resource and the chart alike.

No table to keep: the test walks the fields of RetryPolicy, SizingPolicy and MemoryLadder,
so a new knob is one field on the policy (and, to document it, one example in
the chart's values.yaml); the resource and the chart pass it through by name.
"""

from __future__ import annotations

import json
from dataclasses import fields

import helm_python as helm
import pytest
import yaml

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.sizing import MemoryLadder, SizingPolicy
from catchup_assets.core.units import GiB
from catchup_assets.defs.resources import CatchupResource
from kit.chart import BASE, CHART, NS, merge

POLICIES = {"retry": RetryPolicy, "sizing": SizingPolicy, "ladder": MemoryLadder, "disk": DiskPolicy}
KNOBS = [(block, f) for block, policy in POLICIES.items() for f in fields(policy)]


def knob(block: str, f) -> tuple[str, float, object]:
    """(config key, a value unlike the default, what the policy then holds)."""
    if f.name.endswith("_bytes"):
        return f.name[: -len("_bytes")] + "_gib", 3.5, int(3.5 * GiB)
    if isinstance(f.default, int):
        return f.name, f.default + 2, f.default + 2
    value = 3.0 if f.default is None else f.default * 1.5 + 0.25
    return f.name, value, value


def placement_part(resource: CatchupResource, block: str):
    if block == "retry":
        return resource.retry_policy()
    return getattr(resource.placement(), block)


@pytest.mark.parametrize("block, f", KNOBS, ids=[f"{b}.{f.name}" for b, f in KNOBS])
def test_settable_from_the_resource(block, f):
    key, value, expected = knob(block, f)
    part = placement_part(CatchupResource(**{block: {key: value}}), block)
    assert getattr(part, f.name) == expected != f.default


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART) as c:
        yield c


@pytest.mark.parametrize("block, f", KNOBS, ids=[f"{b}.{f.name}" for b, f in KNOBS])
def test_settable_from_the_chart(chart, block, f):
    key, value, expected = knob(block, f)
    out = chart.render(values=merge(BASE, {block: {key: value}}), name="cu", namespace=NS, is_install=True)
    docs = [d for path, text in out.items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "catchup.json" in d.get("data", {})]
    resource = CatchupResource(**json.loads(cm["data"]["catchup.json"]))
    assert getattr(placement_part(resource, block), f.name) == expected


def test_unset_knobs_keep_the_policy_s_defaults():
    placement = CatchupResource().placement()
    assert (placement.sizing, placement.ladder, placement.disk) == (SizingPolicy(), MemoryLadder(), DiskPolicy())
    assert CatchupResource().retry_policy() == RetryPolicy()


@pytest.mark.parametrize(
    "block, key, value, field",
    [
        ("sizing", "margin", 0.9, "margin"),
        ("ladder", "factor", 1.0, "factor"),
        ("ladder", "cap_gib", 0, "cap_bytes"),
    ],
)
def test_L34_a_bad_knob_is_refused_at_load_naming_it(block, key, value, field):
    with pytest.raises(Exception, match=field):
        CatchupResource(**{block: {key: value}})


NAN, INF = float("nan"), float("inf")
K8S = {"namespace": "n", "image": "i"}
# (a resource setting, the field its refusal names): issue 24 item 7, refused at load, not at the first mission_plan
BAD_SETTINGS = [
    ({"poll_seconds": NAN}, "poll_seconds\n  Input should be a finite number"),  # YAML's .nan
    ({"poll_seconds": -1}, "poll_seconds must be a finite number > 0 and <= 3600, got -1"),
    ({"poll_seconds": 0}, "poll_seconds"),
    ({"poll_seconds": INF}, "poll_seconds"),
    ({"stall_seconds": NAN}, "stall_seconds"),
    ({"stall_seconds": -60}, "stall_seconds"),
    ({"stall_factor": 0.5}, "stall_factor"),
    ({"stall_factor": INF}, "stall_factor"),
    ({"profile_timeout_seconds": INF}, "profile_timeout_seconds"),
    ({"profile_timeout_seconds": 0}, "profile_timeout_seconds"),
    ({"status_every": 0}, "status_every"),
    ({"breaker_attempts": -1}, "breaker_attempts"),
    ({"tip_timeout_seconds": INF}, "tip_timeout_seconds"),
    ({"sim_speed": INF}, "sim_speed"),
    ({"retry": {"environmental": -1}}, "retry budget 'environmental' must be >= 0 and <= 1000, got -1"),
    ({"retry": {"ordinary": -1}}, "'ordinary'"),
    ({"retry": {"failed": -1}}, "'failed'"),
    ({"retry": {"oom_rungs": 0}}, "'oom_rungs'"),
    ({"sizing": {"margin": NAN}}, "sizing.margin\n  Input should be a finite number"),
    ({"sizing": {"margin": INF}}, "sizing.margin"),
    ({"sizing": {"cache_bump_ratio": NAN}}, "sizing.cache_bump_ratio"),
    ({"sizing": {"cpu_request": -1}}, "sizing 'cpu_request' must be a finite number > 0 and <= 1024, got -1"),
    ({"ladder": {"factor": INF}}, "ladder.factor"),
    ({"disk": {"margin": NAN}}, "disk.margin"),
    ({"disk": {"factor": INF}}, "disk.factor"),
    ({"backend": "kubernetes", "kubernetes": {**K8S, "stats_interval_seconds": INF}}, "stats_interval_seconds"),
    ({"backend": "kubernetes", "kubernetes": {**K8S, "kubelet_read_timeout": INF}}, "kubelet_read_timeout"),
    ({"disruption_rate": NAN}, "disruption_rate"),
    ({"memory_scale": NAN}, "memory_scale"),
    ({"mission_defaults": {"overlap": 10**12}}, "mission_defaults.overlap\n  Input should be less than or equal to"),
    ({"mission_defaults": {"overlap": 16000, "last_ledger": 64000}}, "overlap .* below ledgers_per_range"),
    ({"mission_defaults": {"ledgers_per_range": 100}}, "ledgers_per_range must be a positive multiple of 64"),
    (
        {"mission_defaults": {"last_ledger": 2**40}},
        "mission_defaults.last_ledger\n  Input should be less than or equal",
    ),
]


@pytest.mark.parametrize("settings, named", BAD_SETTINGS, ids=[str(s) for s, _ in BAD_SETTINGS])
def test_L34_a_bad_setting_is_refused_at_load_naming_the_field(settings, named):
    with pytest.raises(ValueError, match=named):
        CatchupResource(**settings)


@pytest.mark.parametrize("block, key", [("sizing", "marginn"), ("ladder", "cap"), ("retry", "environmentl")])
def test_L34_a_misspelt_knob_is_refused_at_load_naming_it(block, key):
    with pytest.raises(Exception, match=key):
        CatchupResource(**{block: {key: 1}})


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"environmental_budget": 0}, "environmental_budget"),  # the name before retry={...}
        ({"backend": "kubernetes", "kubernetes": {"namespace": "n", "image": "i", "pvc_sise": "1Gi"}}, "pvc_sise"),
    ],
)
def test_L34_an_unknown_resource_setting_is_refused_at_load(settings, key):
    with pytest.raises(Exception, match=key):
        CatchupResource(**settings)
