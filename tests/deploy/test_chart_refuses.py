"""The chart refuses what the code location refuses, and the code location loads whatever the chart renders
(issue 45 item 5, and item 4's chart part), rendered with real Helm (helm-python-sdk applies values.schema.json
and the templates' `fail`, as `helm template` and `helm install` do).

Issue 45's "Why" numbers its 27 failures in order; this file pins 13-19:
  13 `storageRoot: s3://KEY:SECRET@bucket/...` rendered into the code location's ConfigMap;
  14 `parallelism 50` with `maxParallelism 10` rendered, the code location crash-looping on load;
  15 `ephemeralRequest 80Gi` over `ephemeralLimit 40Gi`, the same;
  16 `missionNamespace: default` accepted;
  17 `extraTolerations: [{operator: Exists}]` letting range pods onto every tainted node;
  18 `retry.failed: 1000000` accepted without bound;
  19 `ladder.cap_gib: 1e9` accepted without bound.

REFUSED: a row per rule, each failure's number in its id; the refusal names the values key, and the
code refuses the same setting at load (the row's `code` patch on a rendered catchup.json). LOADS: the
edges of every bound and every pair at equality, rendered, and the settings loaded from the rendered
ConfigMap as the code location's pod loads them.
"""

from __future__ import annotations

import copy
import json

import helm_python as helm
import pytest

from catchup_assets.defs.assets.launchpad import mission_plan_config
from catchup_assets.defs.location import load_location
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.resources.chart_schema import SCHEMA_PATH
from catchup_assets.defs.resources.deployment import deployment_catchup, describe
from kit.chart import LOCATION_CM, catchup_json, merge, one, render

MAX_LEDGER = 2**32 - 1
# A shape of the values' own catalog whose allocatable is given: the tier rows' edges are exact there.
SHAPE = {"name": "x1.big", "memoryGib": 32, "cpu": 4, "onDemandHourly": 0.25, "spotHourly": 0.1,
         "allocatableMemoryGib": 30, "allocatableCpu": 3.5}  # fmt: skip
ONE_TIER = {"tiers": [{"name": "only", "memoryCutGib": 15, "shape": "x1.big", "cpu": 1.75, "podsPerNode": 2}],
            "unprofiledTier": {"name": "up", "memoryCutGib": 14, "shape": "x1.big", "cpu": 1},
            "noProfileTier": {"name": "np", "memoryCutGib": 14, "shape": "x1.big", "cpu": 1},
            "catalog": [SHAPE]}  # fmt: skip
TOLERATION = {"key": "karpenter.sh/capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


def refusal(chart, values: dict) -> str:
    with pytest.raises((helm.HelmValuesError, helm.HelmRenderError)) as e:
        render(chart, values)
    return str(e.value)


def deep(a: dict, b: dict) -> dict:
    """`a` with `b` merged in, dicts key by key (lists replaced), as a values file merges."""
    return merge(copy.deepcopy(a), b)


# (id, values, what the refusal says, the same setting in the resource's own spelling: a patch on the
# catchup.json the chart renders without it; None: a chart-only rule).
REFUSED = [
    (
        "f13-userinfo",
        {"storageRoot": "s3://KEY:SECRET@bucket/missions"},
        "storageRoot: holds credentials (user:password@ before the host)",
        None,
    ),
    (
        "f13-presigned",
        {"storageRoot": "s3://bucket/missions?X-Amz-Signature=deadbeef"},
        "storageRoot: holds a presigned signature or token",
        None,
    ),
    (
        "f14-parallelism-over-max",
        {"parallelism": 50, "maxParallelism": 10},
        "parallelism (50) must be <= maxParallelism (10)",
        {"mission_defaults": {"parallelism": 50, "max_parallelism": 10}},
    ),
    (
        "f14-default-parallelism-over-max",
        {"maxParallelism": 500},
        "parallelism (1000) must be <= maxParallelism (500)",
        {"mission_defaults": {"max_parallelism": 500}},
    ),
    (
        "f15-ephemeral-request-over-limit",
        {"ephemeralRequest": "80Gi", "ephemeralLimit": "40Gi"},
        "ephemeralRequest (80Gi) must be <= ephemeralLimit (40Gi)",
        {"kubernetes": {"ephemeral_request": "80Gi", "ephemeral_limit": "40Gi"}},
    ),
    (
        "f15-ephemeral-request-over-default-limit",
        {"ephemeralRequest": "40961Mi", "ephemeralLimit": None},
        "ephemeralRequest (40961Mi) must be <= ephemeralLimit (40Gi)",
        {"kubernetes": {"ephemeral_request": "40961Mi"}},
    ),
    (
        "f16-default-namespace",
        {"missionNamespace": {"name": "default"}},
        "at '/missionNamespace/name': 'not' failed",
        {"kubernetes": {"namespace": "default"}},
    ),
    (
        "f16-default-namespace-older-form",
        {"missionNamespace": "default"},
        "at '/missionNamespace': 'not' failed",
        {"kubernetes": {"namespace": "default"}},
    ),
    (
        "f17-exists-without-key",
        {"extraTolerations": [{"operator": "Exists"}]},
        "extraTolerations[0]: matches every taint",
        {"kubernetes": {"extra_tolerations": [{"operator": "Exists"}]}},
    ),
    (
        "f17-exists-without-key-one-effect",
        {"extraTolerations": [TOLERATION, {"operator": "Exists", "effect": "NoSchedule"}]},
        "extraTolerations[1]: matches every taint",
        {"kubernetes": {"extra_tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}},
    ),
    (
        "f17-control-plane",
        {"extraTolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]},
        "extraTolerations[0]: tolerates the control-plane taint node-role.kubernetes.io/control-plane",
        {"kubernetes": {"extra_tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}},
    ),
    (
        "f17-master",
        {"extraTolerations": [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule", "operator": "Exists"}]},
        "tolerates the control-plane taint node-role.kubernetes.io/master",
        {"kubernetes": {"extra_tolerations": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}]}},
    ),
    (
        "f17-no-key-equal-even-with-opt-in",
        {"allowBroadTolerations": True, "extraTolerations": [{"effect": "NoSchedule"}]},
        "extraTolerations[0]: has no key",
        {"kubernetes": {"allow_broad_tolerations": True, "extra_tolerations": [{"effect": "NoSchedule"}]}},
    ),
    (
        "f18-retry-failed-unbounded",
        {"retry": {"failed": 1_000_000}},
        "at '/retry/failed': maximum: got 1×10⁰⁶, want 100",
        {"retry": {"failed": 1_000_000}},
    ),
    (
        "f19-ladder-cap-unbounded",
        {"ladder": {"cap_gib": 1e9}},
        "at '/ladder/cap_gib': maximum",
        {"ladder": {"cap_gib": 1e9}},
    ),
    (
        "api-wait-cap-over-budget",
        {"apiWaitCapSeconds": 120, "apiWaitBudgetSeconds": 60},
        "apiWaitCapSeconds (120) must be <= apiWaitBudgetSeconds (60)",
        {"kubernetes": {"api_wait_cap_seconds": 120, "api_wait_budget_seconds": 60}},
    ),
    (
        "api-wait-cap-over-default-budget",
        {"apiWaitCapSeconds": 61},
        "apiWaitCapSeconds (61) must be <= apiWaitBudgetSeconds (60)",
        {"kubernetes": {"api_wait_cap_seconds": 61}},
    ),
    (
        "last-before-first",
        {"firstLedger": 640, "lastLedger": 64},
        "lastLedger (64) must be >= firstLedger (640)",
        {"mission_defaults": {"first_ledger": 640, "last_ledger": 64}},
    ),
    (
        "ledgers-per-range-no-checkpoint",
        {"ledgersPerRange": 100, "overlap": 0},
        "ledgersPerRange (100) must be a multiple of 64",
        {"mission_defaults": {"ledgers_per_range": 100, "overlap": 0}},
    ),
    (
        "overlap-a-whole-range",
        {"ledgersPerRange": 320},
        "overlap (320) must be below ledgersPerRange (320)",
        {"mission_defaults": {"ledgers_per_range": 320}},
    ),
    (
        "too-many-ranges",
        {"lastLedger": 64 * 20_001, "ledgersPerRange": 64, "overlap": 0},
        "ledgersPerRange (64) cuts firstLedger..lastLedger into 20001 ranges, more than 20000",
        {"mission_defaults": {"last_ledger": 64 * 20_001, "ledgers_per_range": 64, "overlap": 0}},
    ),
    (
        "tip-source-port-out-of-range",
        {"tipSource": "https://history.example.org:99999/archive"},
        "at '/tipSource'",
        {"tip_source": "https://history.example.org:99999/archive"},
    ),
    (
        "kubelet-ca-and-insecure",
        {"kubelet": {"caFile": "/etc/ca.crt", "insecureSkipTLSVerify": True}},
        "at '/kubelet': 'not' failed",
        {"kubernetes": {"kubelet_ca_file": "/etc/ca.crt", "kubelet_insecure_skip_tls_verify": True}},
    ),
    (
        "kubelet-token-file-empty",
        {"kubelet": {"tokenFile": ""}},
        "at '/kubelet/tokenFile'",
        {"kubernetes": {"kubelet_token_file": ""}},
    ),
    (
        "selector-on-the-tier-label",
        {"extraNodeSelector": {"catchup.stellar.org/tier": "giant"}},
        "extraNodeSelector: catchup.stellar.org/tier is tierNodeLabel",
        {"kubernetes": {"extra_node_selector": {"catchup.stellar.org/tier": "giant"}}},
    ),
    (
        "pvc-past-a-volume",
        {"pvcSize": "65Ti"},
        "pvcSize (65Ti) is past the most one volume holds",
        {"kubernetes": {"pvc_size": "65Ti"}},
    ),
    ("pvc-zero", {"pvcSize": "0Gi"}, "at '/pvcSize': 'not' failed", {"kubernetes": {"pvc_size": "0Gi"}}),
    (
        "cpu-limit-past-a-node",
        {"cpuLimit": "2000"},
        "cpuLimit (2000) is past the most CPUs one node has",
        {"kubernetes": {"cpu_limit": "2000"}},
    ),
    (
        "cluster-too-old",
        {"clusterVersion": "1.24"},
        "at '/clusterVersion'",
        {"kubernetes": {"cluster_version": "1.24"}},
    ),
    (
        "tier-cuts-not-increasing",
        {
            "tiers": [
                {"name": "a", "memoryCutGib": 13, "shape": "r6i.large", "cpu": 1},
                {"name": "b", "memoryCutGib": 6.5, "shape": "m6i.large", "cpu": 1},
            ]
        },
        "tiers[1] (b): memoryCutGib 6.5 must be above the tier before's (13)",
        {
            "tiers": [
                {"name": "a", "memory_cut_gib": 13, "shape": "r6i.large", "cpu": 1},
                {"name": "b", "memory_cut_gib": 6.5, "shape": "m6i.large", "cpu": 1},
            ]
        },
    ),
    (
        "tier-name-taken",
        {"unprofiledTier": {"name": "giant", "memoryCutGib": 14, "shape": "r6i.xlarge", "cpu": 2}},
        "unprofiledTier: tier name giant is taken by another tier",
        {"unprofiled_tier": {"name": "giant", "memory_cut_gib": 14, "shape": "r6i.xlarge", "cpu": 2}},
    ),
    (
        "tier-cut-over-node",
        {"noProfileTier": {"name": "nebula", "memoryCutGib": 40, "nodeMemoryGib": 32, "cpu": 2, "shape": None}},
        "noProfileTier (nebula): memoryCutGib 40 must be <= nodeMemoryGib 32",
        {"no_profile_tier": {"name": "nebula", "memory_cut_gib": 40, "node_memory_gib": 32, "cpu": 2, "shape": ""}},
    ),
    (
        "tier-exclusive-and-pods",
        {
            "noProfileTier": {
                "name": "nebula",
                "memoryCutGib": 14,
                "shape": "r6i.xlarge",
                "cpu": 2,
                "exclusive": True,
                "podsPerNode": 2,
            }
        },
        "noProfileTier (nebula): exclusive means one range per node, not podsPerNode 2",
        {
            "no_profile_tier": {
                "name": "nebula",
                "memory_cut_gib": 14,
                "shape": "r6i.xlarge",
                "cpu": 2,
                "exclusive": True,
                "pods_per_node": 2,
            }
        },
    ),
    (
        "tier-shape-unknown",
        {"noProfileTier": {"name": "nebula", "memoryCutGib": 14, "shape": "z9.huge", "cpu": 2}},
        "noProfileTier (nebula): shape z9.huge is not in the catalog",
        {"no_profile_tier": {"name": "nebula", "memory_cut_gib": 14, "shape": "z9.huge", "cpu": 2}},
    ),
    (
        "tier-node-memory-not-the-shape-s",
        {"noProfileTier": {"name": "nebula", "memoryCutGib": 14, "shape": "r6i.xlarge", "nodeMemoryGib": 64, "cpu": 2}},
        "noProfileTier (nebula): nodeMemoryGib 64 is not shape r6i.xlarge's memory",
        {
            "no_profile_tier": {
                "name": "nebula",
                "memory_cut_gib": 14,
                "shape": "r6i.xlarge",
                "node_memory_gib": 64,
                "cpu": 2,
            }
        },
    ),
    (
        "tier-no-shape-of-that-memory",
        {"noProfileTier": {"name": "nebula", "memoryCutGib": 14, "nodeMemoryGib": 48, "cpu": 2, "shape": None}},
        "noProfileTier (nebula): no catalog shape has 48 GiB",
        {"no_profile_tier": {"name": "nebula", "memory_cut_gib": 14, "node_memory_gib": 48, "cpu": 2, "shape": ""}},
    ),
    (
        "tier-slots-past-allocatable-memory",
        deep(ONE_TIER, {"tiers": [{**ONE_TIER["tiers"][0], "memoryCutGib": 15.01}]}),
        "tiers[0] (only): 2 x memoryCutGib 15.01 exceeds what x1.big can give pods",
        {"tiers": [{"name": "only", "memory_cut_gib": 15.01, "shape": "x1.big", "cpu": 1.75, "pods_per_node": 2}]},
    ),
    (
        "tier-slots-past-allocatable-cpu",
        deep(ONE_TIER, {"tiers": [{**ONE_TIER["tiers"][0], "cpu": 1.76}]}),
        "tiers[0] (only): 2 x cpu 1.76 exceeds x1.big's 3.5 allocatable",
        {"tiers": [{"name": "only", "memory_cut_gib": 15, "shape": "x1.big", "cpu": 1.76, "pods_per_node": 2}]},
    ),
    (
        "catalog-name-twice",
        deep(ONE_TIER, {"catalog": [SHAPE, SHAPE]}),
        "catalog[1]: shape name x1.big is listed twice",
        "catalog-twice",
    ),
    (
        "catalog-allocatable-over-memory",
        deep(ONE_TIER, {"catalog": [{**SHAPE, "allocatableMemoryGib": 33}]}),
        "catalog[0] (x1.big): need 0 < allocatable memory <= memoryGib",
        {"catalog": [{"allocatable_memory_gib": 33}]},
    ),
    (
        "catalog-allocatable-cpu-over-cpu",
        deep(ONE_TIER, {"catalog": [{**SHAPE, "allocatableCpu": 5}]}),
        "catalog[0] (x1.big): need 0 < allocatableCpu <= cpu 4",
        {"catalog": [{"allocatable_cpu": 5}]},
    ),
    (
        "catalog-estimate-leaves-nothing",
        deep(
            ONE_TIER,
            {
                "catalog": [
                    SHAPE,
                    {**SHAPE, "name": "tiny", "memoryGib": 1, "allocatableMemoryGib": None, "maxPods": 110},
                ]
            },
        ),
        "catalog[1] (tiny): need 0 < allocatable memory",
        "catalog-tiny",
    ),
]


def _code_patch(settings: dict, patch) -> dict:
    """The rendered settings with the row's violation in the resource's spelling."""
    out = copy.deepcopy(settings)
    if patch == "catalog-twice":
        out["catalog"] = [out["catalog"][0], out["catalog"][0]]
    elif patch == "catalog-tiny":
        out["catalog"].append({**out["catalog"][0], "name": "tiny", "memory_gib": 1, "max_pods": 110})
        del out["catalog"][-1]["allocatable_memory_gib"]
    elif "catalog" in patch:
        out["catalog"] = [{**out["catalog"][0], **patch["catalog"][0]}]
    else:
        out = merge(out, patch)
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("values, said, code", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_issue45_the_chart_refuses_what_the_code_location_refuses_naming_the_value(chart, values, said, code):
    assert said in refusal(chart, values)
    if code is None:
        return
    # The rule is the code's own: the same setting in catchup.json is refused when the code location loads.
    settings = catchup_json(render(chart, ONE_TIER if "catalog" in values else {}))
    with pytest.raises(ValueError):
        CatchupResource(**_code_patch(settings, code))


def _numeric(prop: dict) -> bool:
    kinds = prop.get("type")
    return bool({"integer", "number"} & set(kinds if isinstance(kinds, list) else [kinds]))


def _leaves():
    """Every numeric value of the schema a resource field takes, as (values path, its schema)."""
    props = json.loads(SCHEMA_PATH.read_text())["properties"]
    for key, prop in props.items():
        if _numeric(prop):
            yield (key,), prop
        if key in ("retry", "sizing", "ladder", "disk", "kubelet"):
            for inner, p in prop["properties"].items():
                if _numeric(p):
                    yield (key, inner), p


def _edges(prop: dict) -> list[float]:
    """The values at each of `prop`'s bounds: the bound itself, or just inside an exclusive one."""
    step = 1 if "integer" in str(prop["type"]) else 0.001
    out = [prop[k] for k in ("minimum", "maximum") if k in prop]
    out += [prop["exclusiveMinimum"] + step] if "exclusiveMinimum" in prop else []
    out += [prop["exclusiveMaximum"] - step] if "exclusiveMaximum" in prop else []
    return out


# What an edge needs of other values to be a setting at all (each the code's own cross-field rule).
COMPANIONS = {
    ("parallelism", 150_000): {"maxParallelism": 150_000},
    ("maxParallelism", 1): {"parallelism": 1},
    ("lastLedger", MAX_LEDGER): {"firstLedger": MAX_LEDGER - 16000 * 100},
    ("ledgersPerRange", 1): {"ledgersPerRange": 64, "overlap": 0},
    ("ledgersPerRange", MAX_LEDGER): {"ledgersPerRange": MAX_LEDGER // 64 * 64},
    ("overlap", MAX_LEDGER): {"overlap": MAX_LEDGER // 64 * 64 - 1, "ledgersPerRange": MAX_LEDGER // 64 * 64},
    ("apiWaitCapSeconds", 600): {"apiWaitBudgetSeconds": 600},
    ("apiWaitBudgetSeconds", 0.001): {"apiWaitCapSeconds": 0.001},
}


def _edge_rows():
    rows = []
    for path, prop in _leaves():
        for edge in _edges(prop):
            values: dict = {path[0]: {path[1]: edge}} if len(path) == 2 else {path[0]: edge}
            values = deep(values, COMPANIONS.get((path[-1], edge), {}))
            rows.append(pytest.param(values, id=f"{'.'.join(path)}={edge}"))
    return rows


EDGES = _edge_rows()

# Each pair a rule compares, at equality; and typical production values.
PAIRS_AND_PRODUCTION = {
    "the-chart-s-defaults": {},
    "parallelism-at-max": {"parallelism": 3000, "maxParallelism": 3000},
    "ephemeral-request-at-limit": {"storageMode": "ephemeral", "ephemeralRequest": "40Gi", "ephemeralLimit": "40960Mi"},
    "sizes-at-a-volume-s-most": {
        "pvcSize": "64Ti",
        "ephemeralRequest": "64Ti",
        "ephemeralLimit": "65536Gi",
        "cpuLimit": "1024",
    },
    "tip-source-at-the-top-port": {"tipSource": "https://[2001:db8::1]:65535/archive"},
    "api-wait-cap-at-budget": {"apiWaitCapSeconds": 45, "apiWaitBudgetSeconds": 45},
    "last-at-first": {"firstLedger": 640, "lastLedger": 640},
    "overlap-one-below-a-range": {"ledgersPerRange": 320, "overlap": 319},
    "ranges-at-the-most": {"lastLedger": 64 * 20_000, "ledgersPerRange": 64, "overlap": 0},
    "tier-slots-at-allocatable": ONE_TIER,
    "tier-cut-at-node-memory-exclusive": deep(
        ONE_TIER,
        {
            "catalog": [SHAPE, {**SHAPE, "name": "x1.whole", "allocatableMemoryGib": 32}],
            "noProfileTier": {
                "name": "np",
                "memoryCutGib": 32,
                "shape": "x1.whole",
                "nodeMemoryGib": 32,
                "cpu": 1,
                "exclusive": True,
            },
        },
    ),
    "broad-tolerations-opted-in": {
        "allowBroadTolerations": True,
        "extraTolerations": [
            {"operator": "Exists"},
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
        ],
    },
    "production-ephemeral-on-demand": {
        "storageRoot": "s3://stellar-catchup/missions",
        "storageCredentialsSecret": {"name": "catchup-s3"},
        "storageMode": "ephemeral",
        "ephemeralRequest": "35Gi",
        "ephemeralLimit": "40Gi",
        "parallelism": 2000,
        "maxParallelism": 2096,
        "extraTolerations": [TOLERATION],
        "extraNodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"},
        "retry": {"environmental": 20, "oom_rungs": 5, "ordinary": 5, "failed": 0},
        "ladder": {"factor": 1.5, "cap_gib": 48},
        "sizing": {"margin": 1.25, "cache_headroom_gib": 1, "unprofiled_memory_gib": 12},
        "disk": {"cap_gib": 200},
        "deadlineSeconds": 8 * 3600,
        "tipSource": "https://history.stellar.org/prd/core-live/core_live_001",
        "karpenter": {"enabled": True},
        "lastLedger": 60_000_000,
    },
}


def load_as_the_pod_does(docs: list[dict], tmp_path) -> CatchupResource:
    """The code location's settings, loaded from its rendered ConfigMap as its pod mounts and loads it."""
    cm = one(docs, "ConfigMap", LOCATION_CM)
    for key in ("catchup_location.py", "catchup.json"):
        (tmp_path / key).write_text(cm["data"][key])
    return deployment_catchup(load_location(tmp_path))


def load_the_settings(docs: list[dict]) -> CatchupResource:
    """What of the location's load depends on the settings (definitions_for): the resource, the launchpad's
    mission_plan config with its defaults, the Resources page's description."""
    resource = CatchupResource(**catchup_json(docs))
    mission_plan_config(resource.mission_defaults)
    describe(resource)
    return resource


@pytest.mark.timeout(60)
@pytest.mark.parametrize("values", EDGES)
def test_issue45_every_bound_s_edge_renders_and_the_code_location_loads_it(chart, values):
    load_the_settings(render(chart, values))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_issue45_every_bound_s_edge_loads_through_the_location_file(chart, tmp_path):
    """The same edges, each through catchup_location.py as the pod runs it (1-3 s a load)."""
    for i, param in enumerate(EDGES):
        (tmp_path / str(i)).mkdir()
        load_as_the_pod_does(render(chart, param.values[0]), tmp_path / str(i))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("values", PAIRS_AND_PRODUCTION.values(), ids=PAIRS_AND_PRODUCTION.keys())
def test_issue45_pairs_at_equality_and_production_values_render_and_load_in_the_code_location(chart, values, tmp_path):
    docs = render(chart, values)
    loaded = load_as_the_pod_does(docs, tmp_path)
    assert loaded.model_dump() == CatchupResource(**catchup_json(docs)).model_dump()


def test_issue45_the_walk_covers_every_numeric_value_and_each_has_an_upper_bound():
    """Failures 18, 19: every numeric value the chart passes to a resource field has a maximum (the walk
    above renders and loads each)."""
    leaves = dict(_leaves())
    assert {("retry", "failed"), ("ladder", "cap_gib"), ("parallelism",), ("kubelet", "concurrency")} <= set(leaves)
    unbounded = [p for p, prop in leaves.items() if "maximum" not in prop and "exclusiveMaximum" not in prop]
    assert unbounded == []
    assert len(EDGES) >= 2 * len(leaves)
    # And the chart's own numbers (replicas, uids, alert thresholds), which no resource field holds.
    everywhere = [path for path, prop in _every_number(json.loads(SCHEMA_PATH.read_text()), "")]
    assert "/codeLocation/replicas" in everywhere
    # (A quantity, `type: [string, number]`, is the API server's to bound: the code location's own pod resources.)
    numbers = [
        (p, prop)
        for p, prop in _every_number(json.loads(SCHEMA_PATH.read_text()), "")
        if "string" not in str(prop["type"])
    ]
    assert [p for p, prop in numbers if "maximum" not in prop and "exclusiveMaximum" not in prop] == []


def _every_number(node, path: str):
    """Every numeric schema anywhere in `node`, with where it is."""
    if isinstance(node, dict):
        if _numeric(node):
            yield path, node
        for key, sub in node.items():
            yield from _every_number(sub, f"{path}/{key}" if key not in ("properties", "anyOf", "oneOf") else path)
    elif isinstance(node, list):
        for sub in node:
            yield from _every_number(sub, path)


def test_issue45_f13_storage_credentials_come_from_a_secret_and_no_rendered_manifest_holds_them(chart):
    """Failure 13: with the credentials in a Secret the chart names, the code server and every run pod
    take its keys as env (envFrom), and the rendered manifests hold no secret text."""
    secret_key, secret = "AKIAEXAMPLEKEY0001", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    docs = render(chart, {"storageRoot": "s3://bucket/missions", "storageCredentialsSecret": {"name": "catchup-s3"}})
    text = json.dumps(docs)
    assert secret_key not in text and secret not in text and "@bucket" not in text
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["envFrom"] == [{"secretRef": {"name": "catchup-s3"}}]
    context = json.loads(
        next(e["value"] for e in container["env"] if e["name"] == "DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT")
    )
    assert context["k8s"]["env_secrets"] == ["catchup-s3"]  # the K8sRunLauncher's envFrom for each run pod
    assert catchup_json(docs)["storage_root"] == "s3://bucket/missions"
    # Without one named, no envFrom: nothing asked for.
    (plain,) = one(render(chart), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "envFrom" not in plain
    # Inline, refused before anything renders, the message saying where they go instead.
    said = refusal(chart, {"storageRoot": f"s3://{secret_key}:{secret}@bucket/missions"})
    assert "storageCredentialsSecret.name" in said and "AWS_ACCESS_KEY_ID" in said and secret not in said
