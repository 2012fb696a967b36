"""The Helm chart (charts/catchup-assets) rendered with real Helm, offline.

helm-python-sdk embeds Helm's Go SDK, so no binary, cluster or network is
involved. Each rendered document is checked against the Kubernetes 1.30
OpenAPI schema (kubernetes-validate, strict) and decoded into
`kubernetes.client` models; the assertions are about behaviour: values
reaching the objects, the schema refusing bad values (least privilege:
test_chart_privilege.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import helm_python as helm
import jsonschema
import kubernetes
import kubernetes_validate
import pytest
import yaml

from catchup_assets.defs.resources import deployment_catchup
from kit.chart import (
    BASE,
    CHART,
    DAGSTER_VALUES,
    K8S_VERSION,
    LOCATION_CM,
    MISSION_NS,
    NS,
    ROOT,
    WORKER_CM,
    catchup_json,
    decode,
    merge,
    one,
    render,
)

# Not in the Kubernetes schema: NodePools are checked in test_nodepools_*, the Prometheus Operator's
# objects against its CRDs in test_alert_rules.py.
CRD_KINDS = {("karpenter.sh/v1", "NodePool"), ("monitoring.coreos.com/v1", "PodMonitor"),
             ("monitoring.coreos.com/v1", "PrometheusRule")}  # fmt: skip

_api = kubernetes.client.ApiClient()

MODELS = {
    "ServiceAccount": "V1ServiceAccount",
    "Role": "V1Role",
    "RoleBinding": "V1RoleBinding",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "ConfigMap": "V1ConfigMap",
    "Deployment": "V1Deployment",
    "Service": "V1Service",
    "Namespace": "V1Namespace",  # the mission namespace (test_chart_namespace.py)
    "NetworkPolicy": "V1NetworkPolicy",
}


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"storageMode": "ephemeral", "karpenter": {"enabled": True}},
        {"codeLocation": {"nodeSelector": {"pool": "system"}, "tolerations": [{"key": "a", "operator": "Exists"}]}},
        {"monitoring": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}},
    ],
    ids=["defaults", "ephemeral+karpenter", "placement", "monitoring"],
)
def test_every_object_validates_and_decodes(chart, values):
    docs = render(chart, values)
    kinds = sorted(d["kind"] for d in docs)
    assert set(MODELS) <= set(kinds)
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            continue
        assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == K8S_VERSION
        model = decode(doc, MODELS[doc["kind"]])
        assert model.metadata.name
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "Namespace"):
            assert model.metadata.namespace in (NS, MISSION_NS)


def test_worker_entrypoint_copy_is_the_package_s():
    packaged = (ROOT / "catchup_assets" / "backends" / "worker" / "entrypoint.sh").read_bytes()
    assert (CHART / "files" / "entrypoint.sh").read_bytes() == packaged


def test_configmap_carries_entrypoint_core_config_and_values(chart):
    core_cfg = 'NETWORK_PASSPHRASE="Test SDF Network ; September 2015"\nHTTP_PORT=0\n'
    docs = render(
        chart,
        {
            "stellarCoreConfig": core_cfg,
            "storageMode": "ephemeral",
            "storageRoot": "s3://bucket/run-42",
            "parallelism": 77,
            "maxParallelism": 1500,
            "maxRetireShare": 0.01,
            "retry": {"environmental": 3, "oom_rungs": 2, "ordinary": 1, "failed": 0},
            "tiers": [{"name": "small", "memoryCutGib": 3, "nodeMemoryGib": 4, "cpu": 1}],
            "workerImage": {"repository": "stellar/stellar-core", "tag": "23.0.1"},
        },
    )
    cm = decode(one(docs, "ConfigMap", WORKER_CM), "V1ConfigMap")
    packaged = (ROOT / "catchup_assets" / "backends" / "worker" / "entrypoint.sh").read_text()
    assert cm.data["entrypoint.sh"] == packaged
    assert cm.data["stellar-core.cfg"] == core_cfg
    run_config = yaml.safe_load(one(docs, "ConfigMap", LOCATION_CM)["data"]["run-config.yaml"])
    assert run_config["ops"]["mission_plan"]["config"]["parallelism"] == 77
    # Unset, the value is left out and the project's one default applies.
    unset = yaml.safe_load(one(render(chart), "ConfigMap", LOCATION_CM)["data"]["run-config.yaml"])
    assert "parallelism" not in unset["ops"]["mission_plan"]["config"]
    # The launchpad's config is the mission's only: the deployment's settings are catchup.json's.
    assert list(run_config) == ["ops"]
    cfg = catchup_json(docs)
    assert cfg["storage_root"] == "s3://bucket/run-42"
    from catchup_assets.core.classify.outcomes import RetryPolicy
    from catchup_assets.defs.assets.launchpad import mission_plan_config
    from catchup_assets.defs.resources import CatchupResource

    # The launchpad of this deployment offers its parallelism, and a plan past its caps is refused.
    defaults = CatchupResource(**cfg).mission_defaults
    assert (defaults.parallelism, defaults.max_parallelism, defaults.max_retire_share) == (77, 1500, 0.01)
    assert mission_plan_config(defaults)(last_ledger=64).parallelism == 77

    assert CatchupResource(**cfg).retry_policy() == RetryPolicy(environmental=3, oom_rungs=2, ordinary=1, failed=0)
    assert cfg["tiers"] == [{"name": "small", "memory_cut_gib": 3, "node_memory_gib": 4, "cpu": 1}]
    k8s = cfg["kubernetes"]
    assert k8s["storage_mode"] == "ephemeral"
    assert k8s["namespace"] == MISSION_NS == cm.metadata.namespace
    assert k8s["image"] == "stellar/stellar-core:23.0.1"
    # The range Jobs mount the chart's ConfigMap (the Role cannot create one), in their namespace.
    assert k8s["configmap"] == cm.metadata.name
    assert k8s["worker_service_account"] == "cu-catchup-assets-worker"
    assert one(docs, "ServiceAccount", k8s["worker_service_account"])


def test_the_launchpad_config_is_the_missions_and_the_settings_are_the_deployments(chart, tmp_path):
    """Issue 22 item 1: catchup.json validates as CatchupResource; run-config.yaml passes the loaded
    location's config check, and the same with a resource override is refused (it cannot raise a cap)."""
    from catchup_assets.defs.location import load_location
    from catchup_assets.defs.resources import CatchupResource

    docs = render(chart, {"parallelism": 77, "lastLedger": 64000})
    res = CatchupResource(**catchup_json(docs))
    assert res.backend == "kubernetes" and res.kubernetes.namespace == MISSION_NS
    assert [t.name for t in res.tiers][:2] == ["dwarf", "subgiant"]
    cm = one(docs, "ConfigMap", LOCATION_CM)
    for key in ("catchup_location.py", "catchup.json"):
        (tmp_path / key).write_text(cm["data"][key])
    job = load_location(tmp_path).resolve_job_def("mission_plan_job")
    run_config = yaml.safe_load(cm["data"]["run-config.yaml"])
    assert dg.validate_run_config(job, run_config)["ops"]["mission_plan"]["config"]["parallelism"] == 77
    override = {**run_config, "resources": {"catchup": {"config": {"mission_defaults": {"max_parallelism": 5000}}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match='unexpected config entry "mission_defaults"'):
        dg.validate_run_config(job, override)


@pytest.mark.parametrize(
    "tip, expected",
    [
        ("https://history.stellar.org/prd/core-live/core_live_001", "https://history.stellar.org/prd/core-live/core_live_001"),
        ("60000000", "60000000"),
        (60000000, "60000000"),  # `--set tipSource=60000000` gives a number
        ("", ""),
    ],
    ids=["archive", "ledger", "ledger-number", "none"],
)  # fmt: skip
def test_L38_the_tip_source_reaches_the_resource(chart, tip, expected):
    """next_mission_sensor's tip_source and tip_timeout_seconds, from values to the loaded CatchupResource."""
    from catchup_assets.defs.resources import CatchupResource
    from catchup_assets.mission.tip import TIP_TIMEOUT_SECONDS

    docs = render(chart, {"tipSource": tip, "tipTimeoutSeconds": 4.5})
    resource = CatchupResource(**catchup_json(docs))
    assert (resource.tip_source, resource.tip_timeout_seconds) == (expected, 4.5)
    # Unset: no tip (the previous mission's span), and the project's own timeout.
    default = CatchupResource(**catchup_json(render(chart)))
    assert (default.tip_source_spec(), default.tip_timeout_seconds) == (None, TIP_TIMEOUT_SECONDS)


def test_allow_after_failure_reaches_the_resource(chart):
    """Issue 21 item 4: next_mission_sensor's override, off unless the values turn it on."""
    from catchup_assets.defs.resources import CatchupResource

    assert CatchupResource(**catchup_json(render(chart))).allow_after_failure is False
    assert CatchupResource(**catchup_json(render(chart, {"allowAfterFailure": True}))).allow_after_failure is True


def test_the_dispatcher_s_thresholds_and_the_deadline_reach_the_mission_the_code_location_plans(chart, tmp_path):
    """Issue 20: every dispatcher threshold and the attempt deadline, from values to the resource the
    code location loads (its catchup.json), and from there to the MissionConfig a launchpad plan runs."""
    from catchup_assets.core.plan.config import MissionConfig
    from catchup_assets.defs.assets.launchpad import mission_plan_config
    from catchup_assets.defs.location import load_location
    from catchup_assets.defs.resources import CatchupResource

    values = {"pollSeconds": 2.5, "statusEvery": 12, "stallSeconds": 7200, "stallFactor": 3.5, "breakerAttempts": 0,
              "profileTimeoutSeconds": 45, "deadlineSeconds": 5400}  # fmt: skip
    expected = {"poll_seconds": 2.5, "status_every": 12, "stall_seconds": 7200, "stall_factor": 3.5,
                "breaker_attempts": 0, "profile_timeout_seconds": 45, "deadline_seconds": 5400}  # fmt: skip
    cm = one(render(chart, values), "ConfigMap", LOCATION_CM)
    for key in ("catchup_location.py", "catchup.json"):
        (tmp_path / key).write_text(cm["data"][key])
    catchup = deployment_catchup(load_location(tmp_path))
    mission = mission_plan_config(catchup.mission_defaults)(last_ledger=64, previous_profile="none").to_mission(catchup)
    assert {f: getattr(mission, f) for f in expected} == expected
    # Unset: the project's one default for each, and no deadline.
    unset = CatchupResource(**catchup_json(render(chart)))
    planned = mission_plan_config(unset.mission_defaults)(last_ledger=64, previous_profile="none").to_mission(unset)
    defaults = MissionConfig("m", planned.span, "/s")
    assert {f: getattr(planned, f) for f in expected} == {f: getattr(defaults, f) for f in expected}
    assert planned.deadline_seconds is None


def test_deployment_runs_the_code_location_as_non_root(chart):
    docs = render(
        chart,
        {
            "storageRoot": "s3://bucket/prod",
            "codeLocation": {
                "port": 4000,
                "nodeSelector": {"catchup.stellar.org/role": "orchestration"},
                "tolerations": [
                    {
                        "key": "catchup.stellar.org/role",
                        "operator": "Equal",
                        "value": "orchestration",
                        "effect": "NoSchedule",
                    }
                ],
            },
        },
    )
    dep = decode(one(docs, "Deployment"), "V1Deployment")
    pod = dep.spec.template.spec
    (c,) = pod.containers
    assert c.image == "ghcr.io/stellar/catchup-assets:1.2.3"
    assert c.command + c.args == [
        "dagster",
        "api",
        "grpc",
        "-f",
        "/etc/catchup/catchup_location.py",
        "-h",
        "0.0.0.0",
        "-p",
        "4000",
    ]
    assert [p.container_port for p in c.ports] == [4000]
    env = {e.name: e.value for e in c.env}
    assert env["CATCHUP_STORAGE_ROOT"] == "s3://bucket/prod"
    ctx = json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])["k8s"]
    assert ctx["namespace"] == NS and ctx["service_account_name"] == pod.service_account_name
    # Non-root, read-only root filesystem, no capabilities, no escalation.
    assert pod.security_context.run_as_non_root is True
    assert pod.security_context.run_as_user and pod.security_context.run_as_user > 0
    sc = c.security_context
    assert sc.run_as_non_root is True and sc.run_as_user > 0
    assert sc.read_only_root_filesystem is True
    assert sc.allow_privilege_escalation is False
    assert sc.capabilities.drop == ["ALL"] and not sc.capabilities.add
    assert not sc.privileged
    # Its own placement.
    assert pod.node_selector == {"catchup.stellar.org/role": "orchestration"}
    assert [(t.key, t.value, t.effect) for t in pod.tolerations] == [
        ("catchup.stellar.org/role", "orchestration", "NoSchedule")
    ]
    svc = decode(one(docs, "Service"), "V1Service")
    assert [(p.port, p.target_port) for p in svc.spec.ports] == [(4000, "grpc")]
    assert svc.spec.selector.items() <= dep.spec.template.metadata.labels.items()


def test_nodepools_only_when_enabled(chart):
    assert not [d for d in render(chart) if d["kind"] == "NodePool"]
    tiers = [
        {"name": "small", "memoryCutGib": 3, "nodeMemoryGib": 4, "cpu": 1},
        {"name": "big", "memoryCutGib": 28, "nodeMemoryGib": 32, "cpu": 4},
    ]
    docs = render(chart, {"karpenter": {"enabled": True}, "tiers": tiers})
    pools = [d for d in docs if d["kind"] == "NodePool"]
    assert [p["apiVersion"] for p in pools] == ["karpenter.sh/v1"] * 4  # and the two catch-alls
    for pool, tier in zip(pools, tiers, strict=False):
        spec = pool["spec"]["template"]["spec"]
        assert pool["spec"]["template"]["metadata"]["labels"] == {"catchup.stellar.org/tier": tier["name"]}
        assert spec["taints"] == [{"key": "catchup.stellar.org/tier", "value": tier["name"], "effect": "NoSchedule"}]
        assert spec["nodeClassRef"]["name"] and spec["nodeClassRef"]["kind"]
        for req in spec["requirements"]:
            assert req["operator"] in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
            assert all(isinstance(v, str) for v in req.get("values", []))
        # The pool's label is what the range Jobs' nodeSelector uses.
        assert pool["metadata"]["name"] == f"catchup-{tier['name']}"


def test_a_nodepool_for_every_tier_the_sizing_can_choose(chart):
    """The catch-alls (nebula: no profile; protostar: unmeasured) have pools like the ladder's, and
    a tier's own capacity types override the default (spot for the small, on-demand for the big)."""
    from catchup_assets.defs.resources import CatchupResource

    tiers = [
        {"name": "small", "memoryCutGib": 3, "nodeMemoryGib": 4, "cpu": 1},
        {"name": "big", "memoryCutGib": 28, "nodeMemoryGib": 32, "cpu": 4, "capacityTypes": ["on-demand"]},
    ]
    docs = render(chart, {"karpenter": {"enabled": True, "capacityTypes": ["spot"]}, "tiers": tiers})
    pools = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "NodePool"}
    chosen = CatchupResource(**catchup_json(docs)).placement().tiers.all()
    assert sorted(pools) == sorted(f"catchup-{t.name}" for t in chosen)
    assert {t.name for t in chosen} >= {"nebula", "protostar"}
    capacity = {n: next(r["values"] for r in p["requirements"] if r["key"] == "karpenter.sh/capacity-type")
                for n, p in pools.items()}  # fmt: skip
    # Every spot pool admits on-demand too: a range reclaimed reclaims_before_on_demand (3) times selects it.
    both = ["spot", "on-demand"]
    assert capacity == {"catchup-small": both, "catchup-big": ["on-demand"], "catchup-protostar": both,
                        "catchup-nebula": both}  # fmt: skip
    nebula = pools["catchup-nebula"]
    assert nebula["taints"] == [{"key": "catchup.stellar.org/tier", "value": "nebula", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    "sizing, small, big",
    [
        ({}, ["spot", "on-demand"], ["spot", "on-demand"]),  # the default: on-demand after 3 reclaims
        ({"reclaims_before_on_demand": 2}, ["spot", "on-demand"], ["spot", "on-demand"]),
        ({"reclaims_before_on_demand": 0}, ["spot"], ["spot"]),  # fallback off: the pools buy what they said
    ],
)
def test_spot_nodepools_admit_on_demand_while_the_reclaim_fallback_is_on(chart, sizing, small, big):
    """Issue 21: a range moved to on-demand keeps its tier's label and selects karpenter.sh/capacity-type:
    on-demand; its tier's NodePool must admit it, whatever capacity types the pool was given."""
    from catchup_assets.defs.resources import CatchupResource

    tiers = [
        {"name": "small", "memoryCutGib": 3, "nodeMemoryGib": 4, "cpu": 1, "capacityType": "spot"},
        {"name": "big", "memoryCutGib": 28, "nodeMemoryGib": 32, "cpu": 4, "capacityTypes": ["spot"]},
    ]
    values = {"karpenter": {"enabled": True, "capacityTypes": ["spot"]}, "tiers": tiers, "sizing": sizing}
    docs = render(chart, values)
    pools = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "NodePool"}
    capacity = {n: next(r["values"] for r in p["requirements"] if r["key"] == "karpenter.sh/capacity-type")
                for n, p in pools.items()}  # fmt: skip
    assert (capacity["catchup-small"], capacity["catchup-big"]) == (small, big)
    policy = CatchupResource(**catchup_json(docs)).placement().sizing
    assert policy.reclaims_before_on_demand == sizing.get("reclaims_before_on_demand", 3)


def test_the_price_catalog_and_the_tiers_shapes_reach_the_resource_and_the_nodepools(chart):
    """Issue 15: a catalog given in values replaces the default; a tier naming a shape gets a NodePool of
    that instance type buying its capacity type; the resource prices the tier at that shape."""
    from catchup_assets.defs.resources import CatchupResource

    values = {
        "karpenter": {"enabled": True},
        "catalog": [
            {"name": "m7i.large", "memoryGib": 8, "cpu": 2, "onDemandHourly": 0.1008, "spotHourly": 0.04,
             "maxPods": 29},
            {"name": "r7i.xlarge", "memoryGib": 32, "cpu": 4, "onDemandHourly": 0.2646, "spotHourly": 0.1,
             "allocatableMemoryGib": 29, "allocatableCpu": 3.9},
        ],
        "catalogSource": "AWS us-east-1, our own quote",
        "tiers": [
            {"name": "small", "memoryCutGib": 6, "shape": "m7i.large", "cpu": 1},
            {"name": "big", "memoryCutGib": 28, "shape": "r7i.xlarge", "cpu": 2, "capacityType": "on-demand",
             "exclusive": True},
        ],
        "noProfileTier": {"name": "nebula", "memoryCutGib": 14, "shape": "r7i.xlarge", "cpu": 2},
        "unprofiledTier": {"name": "protostar", "memoryCutGib": 14, "shape": "r7i.xlarge", "cpu": 2},
    }  # fmt: skip
    docs = render(chart, values)
    placement = CatchupResource(**catchup_json(docs)).placement()
    assert placement.catalog.source == "AWS us-east-1, our own quote"
    assert [s.name for s in placement.catalog.shapes] == ["m7i.large", "r7i.xlarge"]
    assert placement.shape_of("big").allocatable_cpu == 3.9 and placement.tiers.by_name("big").exclusive
    assert placement.tiers.by_name("big").capacity_type == "on-demand"
    pools = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "NodePool"}
    req = {n: {r["key"]: r["values"] for r in p["requirements"]} for n, p in pools.items()}
    assert req["catchup-big"] == {"karpenter.sh/capacity-type": ["on-demand"],
                                  "node.kubernetes.io/instance-type": ["r7i.xlarge"]}  # fmt: skip
    # No capacityType: priced at spot, the pool may fall back (karpenter.capacityTypes; Karpenter prefers spot).
    assert req["catchup-small"] == {"karpenter.sh/capacity-type": ["spot", "on-demand"],
                                    "node.kubernetes.io/instance-type": ["m7i.large"]}  # fmt: skip


def test_the_fitted_ladder_s_values_render_and_load_as_that_ladder(chart):
    """Issue 15: what `catchup-assets fit-tiers` prints for the workload model is valid values: the chart
    renders them (a NodePool per fitted tier, of its instance type) and the resource loads the same ladder."""
    import yaml

    from catchup_assets.core.forecast.fit import chart_values, fit_ladder, profile_ranges
    from catchup_assets.core.size.sizing import Placement
    from catchup_assets.defs.resources import CatchupResource
    from catchup_assets.sim.workload import Workload

    ranges, index = profile_ranges(Workload(ranges=300).profile_table().to_pylist())
    fitted = fit_ladder(ranges, index, Placement(), Placement().catalog, slots=100).placement
    values = yaml.safe_load(chart_values(fitted))
    docs = render(chart, {**values, "karpenter": {"enabled": True}})
    loaded = CatchupResource(**catchup_json(docs)).placement()
    assert loaded.tiers == fitted.tiers
    pools = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "NodePool"}
    for t in fitted.tiers.all():
        (types,) = [r["values"] for r in pools[f"catchup-{t.name}"]["requirements"]
                    if r["key"] == "node.kubernetes.io/instance-type"]  # fmt: skip
        assert types == [t.shape]


def test_the_range_pods_placement_is_settable_from_values(chart):
    """extraNodeSelector and extraTolerations reach the pod spec of a range Job the backend builds."""
    from catchup_assets.backends.kubernetes.manifests import job_manifest
    from catchup_assets.core.dispatch.ports import AttemptSpec
    from catchup_assets.defs.resources import CatchupResource

    docs = render(chart, {"extraNodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"},
                          "extraTolerations": [{"key": "karpenter.sh/capacity-type", "operator": "Equal",
                                                "value": "spot", "effect": "NoSchedule"}]})  # fmt: skip
    res = CatchupResource(**catchup_json(docs))
    nebula = res.placement().tiers.no_profile
    spec = AttemptSpec("m1", "0000000001-0000016000", 1, 16000, 16320, 2**30, 2**31, nebula.name)
    pod = job_manifest(spec, nebula, False, res.kubernetes.settings()).spec.template.spec
    assert pod.node_selector == {"topology.kubernetes.io/zone": "us-east-1a", "catchup.stellar.org/tier": "nebula"}
    assert {(t.key, t.value) for t in pod.tolerations} == {
        ("catchup.stellar.org/tier", "nebula"),
        ("karpenter.sh/capacity-type", "spot"),
    }


def test_the_range_pods_priority_class_reaches_the_job_the_backend_builds(chart):
    """Issue 20's one new setting, added as every Job or pod setting now is: the K8sSettings field and the
    manifest line; KubernetesConfig, the chart's value (priorityClassName) and its schema follow."""
    from catchup_assets.backends.kubernetes.manifests import job_manifest
    from catchup_assets.core.dispatch.ports import AttemptSpec
    from catchup_assets.defs.resources import CatchupResource

    def pod(values):
        res = CatchupResource(**catchup_json(render(chart, values)))
        nebula = res.placement().tiers.no_profile
        spec = AttemptSpec("m1", "0000000001-0000016000", 1, 16000, 16320, 2**30, 2**31, nebula.name)
        job = job_manifest(spec, nebula, False, res.kubernetes.settings())
        assert kubernetes_validate.validate(_api.sanitize_for_serialization(job), K8S_VERSION, strict=True)
        return job.spec.template.spec

    assert pod({"priorityClassName": "catchup-batch"}).priority_class_name == "catchup-batch"
    assert pod({}).priority_class_name is None  # unset: the cluster's default priority, as before
    with pytest.raises(helm.HelmValuesError, match="/priorityClassName"):
        render(chart, {"priorityClassName": 7})
    with pytest.raises(ValueError, match="priority_class_name"):
        CatchupResource(
            backend="kubernetes", kubernetes={"namespace": "n", "image": "i", "priority_class_name": "Not A Name"}
        )


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"storageMode": "tape"}, "/storageMode"),
        ({"retry": {"environmental": -1}}, "/retry/environmental"),
        ({"retry": {"oomRungs": 2}}, "/retry"),  # an unknown key is refused, not ignored
        ({"image": {"repository": ""}}, "/image/repository"),
        # A moving tag: the code server and the run pods it launches could run different code.
        ({"image": {"tag": "latest"}}, "/image/tag"),
        ({"image": {"tag": "sha256:abc123"}}, "/image/tag"),  # a digest is 64 hex digits
        ({"image": {"tag": "1.2.3@sha256"}}, "/image/tag"),
        ({"workerImage": {"tag": "latest"}}, "/workerImage/tag"),
        ({"parallelism": 0}, "/parallelism"),
        ({"maxRetireShare": 1.5}, "/maxRetireShare"),
        ({"tiers": [{"name": "Big Tier", "memoryCutGib": 1, "nodeMemoryGib": 2, "cpu": 1}]}, "/tiers/0/name"),
        ({"tiers": [{"name": "t", "memoryCutGib": -1, "nodeMemoryGib": 2, "cpu": 1}]}, "/tiers/0/memoryCutGib"),
        ({"tiers": [{"name": "t", "memoryCutGib": 1, "cpu": 1}]}, "/tiers/0"),  # neither a shape nor a node size
        (
            {"tiers": [{"name": "t", "memoryCutGib": 1, "shape": "m6i.large", "cpu": 1, "capacityType": "cheap"}]},
            "/tiers/0/capacityType",
        ),
        ({"catalog": [{"name": "n", "memoryGib": 8, "cpu": 2, "onDemandHourly": 0.1}]}, "/catalog/0"),
        (
            {"catalog": [{"name": "n", "memoryGib": 8, "cpu": 2, "onDemandHourly": 0, "spotHourly": 1}]},
            "/catalog/0/onDemandHourly",
        ),
        ({"pvcSize": "lots"}, "/pvcSize"),
        ({"karpenter": {"enabled": "yes"}}, "/karpenter/enabled"),
        ({"kubelet": {"preferredAddressTypes": ["NodeIP"]}}, "/kubelet/preferredAddressTypes/0"),
        ({"missionNamespace": "Missions"}, "/missionNamespace"),
        ({"extraNodeSelector": {"zone": "a b"}}, "/extraNodeSelector/zone"),
        ({"noProfileTier": {"name": "Nebula", "memoryCutGib": 1, "nodeMemoryGib": 2, "cpu": 1}}, "/noProfileTier/name"),
        (
            {"tiers": [{"name": "t", "memoryCutGib": 1, "nodeMemoryGib": 2, "cpu": 1, "capacityTypes": ["cheap"]}]},
            "/tiers/0/capacityTypes/0",
        ),
        ({"kubelet": {"caFile": "/ca.crt", "insecureSkipTLSVerify": True}}, "/kubelet"),
        # L38: what CatchupResource would refuse at load is refused at install.
        ({"tipSource": "ftp://archive/x"}, "/tipSource"),
        ({"tipSource": "http://user:secret@archive/"}, "/tipSource"),
        ({"tipSource": "http://archive/?at=1"}, "/tipSource"),
        ({"tipSource": "latest"}, "/tipSource"),
        ({"tipSource": "0"}, "/tipSource"),
        ({"tipSource": 0}, "/tipSource"),
        ({"tipSource": 2**32}, "/tipSource"),
        ({"tipTimeoutSeconds": 0}, "/tipTimeoutSeconds"),
        ({"tipTimeoutSeconds": "10"}, "/tipTimeoutSeconds"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_schema_refuses_bad_values_at_render(chart, bad, where):
    with pytest.raises(helm.HelmValuesError) as e:
        render(chart, bad)
    assert where in str(e.value)


def test_schema_requires_the_image_repository_and_tag(chart):
    with pytest.raises(helm.HelmValuesError, match="/image/repository"):
        chart.render(values={}, name="cu", namespace=NS, is_install=True)
    # No default tag: the chart's own would be `latest` in all but name.
    with pytest.raises(helm.HelmValuesError, match="/image/tag"):
        chart.render(values={"image": {"repository": "r/x"}}, name="cu", namespace=NS, is_install=True)


@pytest.mark.parametrize(
    "tag, reference",
    [
        ("1.2.3", "ghcr.io/stellar/catchup-assets:1.2.3"),
        ("sha256:" + "0a" * 32, "ghcr.io/stellar/catchup-assets@sha256:" + "0a" * 32),
        ("@sha256:" + "0a" * 32, "ghcr.io/stellar/catchup-assets@sha256:" + "0a" * 32),
    ],
    ids=["tag", "digest", "@digest"],
)
def test_image_is_a_tag_or_a_digest(chart, tag, reference):
    docs = render(chart, {"image": {"tag": tag, "pullPolicy": "Always"}})
    (c,) = decode(one(docs, "Deployment"), "V1Deployment").spec.template.spec.containers
    assert c.image == reference and c.image_pull_policy == "Always"
    # The run pods the K8sRunLauncher starts take the code server's image (DAGSTER_CURRENT_IMAGE).
    env = {e.name: e.value for e in c.env}
    assert env["DAGSTER_CURRENT_IMAGE"] == reference
    assert json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])["k8s"]["image_pull_policy"] == "Always"


def test_schema_is_draft07_and_accepts_the_defaults():
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = merge(yaml.safe_load((CHART / "values.yaml").read_text()), BASE)
    jsonschema.Draft7Validator(schema).validate(defaults)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(merge(defaults, {"storageMode": "tape"}))


def test_chart_metadata_and_lint():
    with helm.Chart.load(CHART) as c:
        assert c.metadata["apiVersion"] == "v2" and c.name == "catchup-assets"
    report = helm.lint(CHART, BASE, strict=True, namespace=NS, kube_version="v1.30.0")
    assert not report.get("errors"), report


def test_dagster_values_point_at_this_code_location(chart):
    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    svc = one(render(chart), "Service")
    (server,) = values["dagsterWebserver"]["workspace"]["servers"]
    assert (server["host"], server["port"]) == (svc["metadata"]["name"], svc["spec"]["ports"][0]["port"])
    assert values["dagster-user-deployments"]["enabled"] is False
    assert values["postgresql"]["enabled"] is True
    # The driver dagster-postgres installs; tests/defs/test_postgres.py runs on these values when it can.
    assert values["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s = launcher["config"]["k8sRunLauncher"]
    assert k8s["jobNamespace"] == NS
    pod = k8s["runK8sConfig"]["podSpecConfig"]
    assert pod["nodeSelector"] and pod["tolerations"]
    # Run pods are small: a dispatcher, not a range.
    res = k8s["runK8sConfig"]["containerConfig"]["resources"]
    assert res["limits"]["memory"] == "1Gi" and res["requests"]["cpu"] == "250m"
    # The tolerations decode as real Kubernetes tolerations.
    for t in pod["tolerations"]:
        decode(t, "V1Toleration")


def test_issue26_the_processes_that_create_runs_plan_them_as_one_subset():
    """The webserver (the UI's launches) and the daemon (backfills, retries, sensors' runs) set Dagster's
    switch; the demo's and the tests' runs are created the same way (cli/demo/run.py, tests/conftest.py)."""
    from catchup_assets.defs.location import ui_command
    from catchup_assets.defs.mission.range_events import SUBSET_ENV

    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    for part in ("dagsterWebserver", "dagsterDaemon"):
        env = {e["name"]: e["value"] for e in values[part]["env"]}
        assert env[SUBSET_ENV] == "true", part
        for e in values[part]["env"]:
            decode(e, "V1EnvVar")
    assert f"{SUBSET_ENV}=true " in ui_command(Path("/h"), Path("/w.yaml"))


def test_dagster_values_match_the_local_instance_policy():
    from catchup_assets.defs.location import INSTANCE_YAML

    local = yaml.safe_load(INSTANCE_YAML)
    daemon = yaml.safe_load(DAGSTER_VALUES.read_text())["dagsterDaemon"]
    rc = daemon["runCoordinator"]
    custom = rc["config"]["customRunCoordinator"]
    assert rc["type"] == "CustomRunCoordinator"
    ours = local["run_coordinator"]
    assert (custom["module"], custom["class"]) == (ours["module"], ours["class"])
    assert custom["config"]["max_concurrent_runs"] == local["concurrency"]["runs"]["max_concurrent_runs"]
    # The processes that load the instance import that class: they run the project's image.
    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    assert values["dagsterWebserver"]["image"]["repository"] == daemon["image"]["repository"] == "catchup-assets"
    rr, lrr = daemon["runRetries"], local["run_retries"]
    assert (
        (rr["enabled"], rr["maxRetries"], rr["retryOnAssetOrOpFailure"])
        == (lrr["enabled"], lrr["max_retries"], lrr["retry_on_asset_or_op_failure"])
        == (True, 2, False)
    )
    rm, lrm = daemon["runMonitoring"], local["run_monitoring"]
    assert rm == {
        "enabled": lrm["enabled"],
        "startTimeoutSeconds": lrm["start_timeout_seconds"],
        "cancelTimeoutSeconds": lrm["cancel_timeout_seconds"],
        "pollIntervalSeconds": lrm["poll_interval_seconds"],
        "maxResumeRunAttempts": lrm["max_resume_run_attempts"],
    }


def test_the_code_location_loads_this_releases_settings(chart, tmp_path):
    """The chart's catchup_location.py is the demo's fixed text, and its catchup.json is a valid resource."""
    import json

    from catchup_assets.defs.location import _LOCATION_SOURCE
    from catchup_assets.defs.resources import CatchupResource

    assert (CHART / "files" / "catchup_location.py").read_text() == _LOCATION_SOURCE
    docs = render(chart)
    cm = one(docs, "ConfigMap", LOCATION_CM)
    assert cm["data"]["catchup_location.py"] == _LOCATION_SOURCE
    settings = json.loads(cm["data"]["catchup.json"])
    resource = CatchupResource(**settings)
    assert resource.backend == "kubernetes" and resource.kubernetes.configmap == WORKER_CM
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "location")["configMap"]["name"] == LOCATION_CM
    deploy = one(docs, "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["-f", "/etc/catchup/catchup_location.py"]
    # Mounted as the Deployment mounts it, the file loads the project's definitions with these settings.
    from catchup_assets.defs.location import load_location

    for key in ("catchup_location.py", "catchup.json"):
        (tmp_path / key).write_text(cm["data"][key])
    defs = load_location(tmp_path)
    loaded = deployment_catchup(defs)
    assert loaded.backend == "kubernetes" and loaded.kubernetes.namespace == resource.kubernetes.namespace
    assert {a.key.path[-1] for a in defs.assets} == {
        "mission_plan",
        "range_catchup",
        "range_profile",
        "tier_map",
        "profile_diff",
        "tier_ladder",
    }


def test_the_slack_token_reaches_the_code_server_from_its_secret_and_never_a_configmap(chart):
    """notify_sensor runs in the code server: its bot token is that container's $SLACK_BOT_TOKEN,
    a secretKeyRef to the operator's Secret, and no rendered ConfigMap holds it."""
    docs = render(chart, {"slackChannel": "#catchup", "slackTokenSecret": {"name": "slack-bot", "key": "bot-token"}})
    (c,) = decode(one(docs, "Deployment"), "V1Deployment").spec.template.spec.containers
    (token,) = [e for e in c.env if e.name == "SLACK_BOT_TOKEN"]
    assert token.value is None and (token.value_from.secret_key_ref.name, token.value_from.secret_key_ref.key) == (
        "slack-bot",
        "bot-token",
    )
    assert catchup_json(docs)["slack_channel"] == "#catchup"
    (c,) = decode(one(render(chart), "Deployment"), "V1Deployment").spec.template.spec.containers
    assert "SLACK_BOT_TOKEN" not in {e.name for e in c.env}  # no Secret named: none asked for
