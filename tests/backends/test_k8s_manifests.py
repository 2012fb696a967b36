"""Manifests for the Kubernetes backend: schema-valid, and each lesson pinned by id."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import kubernetes_validate
import pytest

from catchup_assets.backends.kubernetes.manifests import (
    COMMAND,
    configmap_manifest,
    job_manifest,
    pvc_manifest,
    to_dict,
)
from catchup_assets.backends.kubernetes.names import (
    configmap_name,
    job_name,
    labels,
    mission_selector,
    pvc_name,
    range_selector,
)
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.core.dispatch.ports import AttemptSpec
from catchup_assets.core.size.sizing import DEFAULT_LADDER, NEBULA, PROTOSTAR, Tier
from catchup_assets.core.units import GiB
from pss import URL, violations

DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
KEY = "0059904001-0059920000"
GIANT = DEFAULT_LADDER[2]
NASTY = """50% "double" 'single' $(rm -rf /) `id` ${HOME} a\\b  two  spaces"""


def settings(**overrides) -> K8sSettings:
    base = dict(
        namespace="catchup",
        image="stellar/stellar-core:22.1",
        storage_class="fast-ssd",
        extra_tolerations=({"key": "cloud.example/spot", "operator": "Exists", "effect": "NoSchedule"},),
    )
    return K8sSettings(**{**base, **overrides})


def spec(tier: str = GIANT.name, **overrides) -> AttemptSpec:
    base = dict(
        mission="pubnet-backfill",
        range_key=KEY,
        attempt=3,
        target_ledger=59920000,
        ledger_count=16064,
        memory_request_bytes=20 * GiB,
        memory_limit_bytes=20 * GiB,
        tier=tier,
        cpu_request=2.0,
        deadline_seconds=7200,
    )
    return AttemptSpec(**{**base, **overrides})


def job(tier: Tier | None = GIANT, profiled: bool = True, **setting_overrides) -> dict:
    name = tier.name if tier is not None else "none"
    return to_dict(job_manifest(spec(name), tier, profiled, settings(**setting_overrides)))


def pod_of(job_dict: dict) -> dict:
    return job_dict["spec"]["template"]["spec"]


def container_of(job_dict: dict) -> dict:
    (container,) = pod_of(job_dict)["containers"]
    return container


def selects(selector: str, object_labels: dict) -> bool:
    return all(object_labels.get(k) == v for k, v in (term.split("=", 1) for term in selector.split(",")))


COMBINATIONS = [
    (mode, profiled, pooled) for mode in ("ephemeral", "pvc") for profiled in (True, False) for pooled in (True, False)
]


@pytest.mark.parametrize("mode,profiled,pooled", COMBINATIONS)
def test_job_validates_against_stated_cluster_schema(mode, profiled, pooled):
    """Every Job variant passes the official schema, strict (no unknown fields)."""
    s = settings(storage_mode=mode, pooled=pooled)
    tier = GIANT if profiled else PROTOSTAR
    manifest = to_dict(job_manifest(spec(tier.name), tier, profiled, s))
    assert kubernetes_validate.validate(manifest, s.cluster_version, strict=True) == s.cluster_version


@pytest.mark.parametrize(
    "build",
    [
        lambda s: pvc_manifest("pubnet-backfill", KEY, s),
        lambda s: configmap_manifest("pubnet-backfill", s, "#!/bin/sh\necho 100%\n", 'NETWORK_PASSPHRASE="x"\n'),
        lambda s: job_manifest(spec(), None, False, dataclasses.replace(s, pooled=False)),
    ],
)
def test_pvc_configmap_and_unplaced_job_validate(build):
    s = settings()
    assert kubernetes_validate.validate(to_dict(build(s)), s.cluster_version, strict=True)


def test_L1_one_job_per_attempt_no_kubernetes_retries():
    j = job()
    assert j["spec"]["backoffLimit"] == 0
    assert pod_of(j)["restartPolicy"] == "Never"


@pytest.mark.parametrize("ttl", [0, 3600, 86400])
def test_L2_ttl_after_finished_is_the_configured_backstop(ttl):
    assert job(ttl_seconds_after_finished=ttl)["spec"]["ttlSecondsAfterFinished"] == ttl


@pytest.mark.parametrize("deadline", [7200, None])
def test_L8_deadline_on_pod_spec_never_on_job(deadline):
    j = to_dict(job_manifest(spec(deadline_seconds=deadline), GIANT, True, settings()))
    assert "activeDeadlineSeconds" not in j["spec"]
    assert pod_of(j).get("activeDeadlineSeconds") == deadline


def test_L14_labels_on_job_and_pod_template():
    j = job()
    expected = labels("pubnet-backfill", KEY, 3)
    assert expected == {
        "app.kubernetes.io/name": "catchup-assets",
        "catchup.stellar.org/mission": "pubnet-backfill",
        "catchup.stellar.org/range-key": KEY,
        "catchup.stellar.org/range-end": "59920000",
        "catchup.stellar.org/attempt": "3",
    }
    for where in (j["metadata"]["labels"], j["spec"]["template"]["metadata"]["labels"]):
        assert expected.items() <= where.items()
        assert where["catchup.stellar.org/tier"] == GIANT.name


def test_L14_selectors_find_every_object_of_the_mission_and_no_other():
    s = settings()
    objects = [job(), pvc_manifest("pubnet-backfill", KEY, s), configmap_manifest("pubnet-backfill", s, "", "")]
    for obj in map(to_dict, objects):
        assert selects(mission_selector("pubnet-backfill"), obj["metadata"]["labels"])
        assert not selects(mission_selector("pubnet-backfil"), obj["metadata"]["labels"])
    pod_labels = job()["spec"]["template"]["metadata"]["labels"]
    assert selects(range_selector("pubnet-backfill", KEY), pod_labels)
    assert not selects(range_selector("pubnet-backfill", "0059920001-0059936000"), pod_labels)


@pytest.mark.parametrize("tier,profiled", [(GIANT, True), (PROTOSTAR, False), (NEBULA, False)])
def test_L15_pooled_tier_placement_by_selector_and_toleration(tier, profiled):
    """Ladder, unprofiled catch-all and no-profile catch-all tiers are all placed the same way."""
    p = pod_of(job(tier, profiled, pooled=True))
    assert p["nodeSelector"] == {"catchup.stellar.org/tier": tier.name}
    assert {"key": "catchup.stellar.org/tier", "operator": "Equal", "value": tier.name} in p["tolerations"]
    assert {"key": "cloud.example/spot", "operator": "Exists", "effect": "NoSchedule"} in p["tolerations"]


@pytest.mark.parametrize(
    "tier_capacity, attempt_capacity, pooled, extra, selector",
    [
        ("spot", "", True, (), {"catchup.stellar.org/tier": "giant"}),  # an old spec: the tier's
        ("spot", "spot", True, (), {"catchup.stellar.org/tier": "giant"}),  # Karpenter prefers spot
        ("spot", "on-demand", True, (),
         {"catchup.stellar.org/tier": "giant", "karpenter.sh/capacity-type": "on-demand"}),
        # An operator who pins spot for every range pod: the fallback overrides it for its own pods.
        ("spot", "on-demand", True, (("karpenter.sh/capacity-type", "spot"),),
         {"karpenter.sh/capacity-type": "on-demand", "catchup.stellar.org/tier": "giant"}),
        ("on-demand", "on-demand", True, (), {"catchup.stellar.org/tier": "giant"}),  # its pool buys only that
        ("spot", "on-demand", False, (), {"karpenter.sh/capacity-type": "on-demand"}),  # unpooled: still on-demand
    ],
)  # fmt: skip
def test_a_range_moved_to_on_demand_selects_on_demand_capacity_of_its_tier(
    tier_capacity, attempt_capacity, pooled, extra, selector
):
    """Issue 21: the same tier label selects the node shape; the capacity-type label gets on-demand."""
    tier = dataclasses.replace(GIANT, capacity_type=tier_capacity)
    s = settings(pooled=pooled, extra_node_selector=extra)
    p = pod_of(to_dict(job_manifest(spec(capacity_type=attempt_capacity), tier, True, s)))
    assert p["nodeSelector"] == selector


def test_an_attempt_s_unknown_capacity_type_is_refused_naming_it():
    with pytest.raises(ValueError, match="capacity_type"):
        job_manifest(spec(capacity_type="preemptible"), GIANT, True, settings())


def test_L15_unpooled_tiers_place_nothing_but_keep_extra_tolerations():
    p = pod_of(job(GIANT, True, pooled=False))
    assert "nodeSelector" not in p
    assert p["tolerations"] == [{"key": "cloud.example/spot", "operator": "Exists", "effect": "NoSchedule"}]


def test_L15_untainted_pools_get_a_selector_without_tier_toleration():
    p = pod_of(job(GIANT, True, tier_taint_key=None, extra_tolerations=()))
    assert p["nodeSelector"] == {"catchup.stellar.org/tier": GIANT.name} and "tolerations" not in p


def test_L15_pooled_attempt_without_tier_refused():
    with pytest.raises(ValueError, match="tier"):
        job_manifest(spec(), None, True, settings(pooled=True))


EPHEMERAL = {"requests": "35Gi", "limits": "40Gi"}


@pytest.mark.parametrize(
    "mode,pooled,profiled,tier,expected",
    [
        ("ephemeral", True, True, dataclasses.replace(GIANT, pods_per_node=1), None),  # exclusive: its node to itself
        ("ephemeral", True, True, GIANT, EPHEMERAL),  # the default ladder packs ranges by their requests
        ("ephemeral", True, False, PROTOSTAR, EPHEMERAL),  # catch-all: packed
        ("ephemeral", False, True, GIANT, EPHEMERAL),  # shared nodes
        ("ephemeral", False, False, NEBULA, EPHEMERAL),
        ("ephemeral", True, True, Tier("packed", 14 * GiB, 32 * GiB, 4, pods_per_node=2), EPHEMERAL),
        *[("pvc", pooled, profiled, GIANT, None) for pooled in (True, False) for profiled in (True, False)],
    ],
)
def test_L15_ephemeral_storage_rules(mode, pooled, profiled, tier, expected):
    resources = container_of(job(tier, profiled, storage_mode=mode, pooled=pooled))["resources"]
    got = {side: resources[side].get("ephemeral-storage") for side in ("requests", "limits")}
    assert got == (expected or {"requests": None, "limits": None})
    volumes = {v["name"]: v for v in pod_of(job(tier, profiled, storage_mode=mode, pooled=pooled))["volumes"]}
    if mode == "pvc":
        assert volumes["data"]["persistentVolumeClaim"] == {"claimName": pvc_name("pubnet-backfill", KEY)}
    else:
        assert volumes["data"] == {"name": "data", "emptyDir": {}}


@pytest.mark.parametrize(
    "mode, tier, ephemeral, expected",
    [
        ("ephemeral", GIANT, 12 * GiB, {"requests": str(12 * GiB), "limits": str(12 * GiB)}),  # sized: request = limit
        ("ephemeral", GIANT, None, EPHEMERAL),  # unsized: the flat figures
        ("ephemeral", dataclasses.replace(GIANT, pods_per_node=1), 12 * GiB, None),  # its own node: no limit (L15)
        ("pvc", GIANT, 12 * GiB, None),  # a PVC holds the data: no pod ever gets one
    ],
)
def test_a_range_s_sized_disk_is_its_ephemeral_request_and_limit(mode, tier, ephemeral, expected):
    """Issue 15: in ephemeral mode a range's disk comes from its profile and its evictions (disk.py)."""
    manifest = job_manifest(spec(ephemeral_bytes=ephemeral), tier, True, settings(storage_mode=mode))
    resources = container_of(to_dict(manifest))["resources"]
    got = {side: resources[side].get("ephemeral-storage") for side in ("requests", "limits")}
    assert got == (expected or {"requests": None, "limits": None})


def test_L7_cpu_request_without_limit_memory_request_equals_limit():
    r = container_of(job())["resources"]
    assert r["requests"]["cpu"] == "2000m" and "cpu" not in r["limits"]
    assert r["requests"]["memory"] == r["limits"]["memory"] == str(20 * GiB)


def test_L7_cpu_limit_only_when_configured_and_never_below_request():
    assert container_of(job(cpu_limit="4"))["resources"]["limits"]["cpu"] == "4"
    with pytest.raises(ValueError, match="cpu_limit"):
        job(cpu_limit="500m")


def test_L17_hostile_value_reaches_container_only_as_env():
    j = to_dict(job_manifest(spec(env={"EXTRA_NOTE": NASTY}), GIANT, True, settings()))
    c = container_of(j)
    assert c["command"] == list(COMMAND) == ["/bin/sh", "/catchup/entrypoint.sh"]
    assert "args" not in c
    assert {"name": "EXTRA_NOTE", "value": NASTY} in c["env"]
    assert json.dumps(j).count(json.dumps(NASTY)[1:-1]) == 1  # nowhere but that env entry
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env == {
        "RANGE_KEY": KEY,
        "CATCHUP_TARGET": "59920000",
        "CATCHUP_COUNT": "16064",
        "DATA_DIR": "/data",
        "STELLAR_CORE_CONFIG": "/catchup/stellar-core.cfg",
        "CATCHUP_MISSION": "pubnet-backfill",
        "CATCHUP_ATTEMPT": "3",
        "EXTRA_NOTE": NASTY,
    }


@pytest.mark.parametrize("env", [{"RANGE_KEY": "other"}, {"BAD-NAME": "x"}, {"X": 1}])
def test_L17_env_that_would_override_or_break_the_worker_refused(env):
    with pytest.raises(ValueError):
        job_manifest(spec(env=env), GIANT, True, settings())


def test_worker_pod_has_no_api_access_and_runs_unprivileged():
    p = pod_of(job())
    assert p["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in p  # unset: the namespace's default account, still without its token
    p = pod_of(job(worker_service_account="cu-worker"))
    assert (p["serviceAccountName"], p["automountServiceAccountToken"]) == ("cu-worker", False)
    assert p["securityContext"]["runAsNonRoot"] is True and p["securityContext"]["runAsUser"] == 10001
    assert "runAsNonRoot" not in pod_of(job(run_as_non_root=False, run_as_user=None)).get("securityContext", {})
    worker = next(v for v in p["volumes"] if v["name"] == "worker")["configMap"]
    assert worker["name"] == configmap_name("pubnet-backfill") and worker["defaultMode"] == 0o555


@pytest.mark.parametrize("mode,profiled,pooled", COMBINATIONS)
def test_the_worker_s_root_is_read_only_and_it_writes_only_to_data_and_tmp(mode, profiled, pooled):
    """Issue 24: stellar-core's buckets, database and logs go to /data (the worker cds there), temporary
    files to /tmp; the rest of the image cannot be written, in every storage mode."""
    tier = GIANT if profiled else PROTOSTAR
    manifest = to_dict(job_manifest(spec(tier.name), tier, profiled, settings(storage_mode=mode, pooled=pooled)))
    container = container_of(manifest)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    volumes = {v["name"]: v for v in pod_of(manifest)["volumes"]}
    assert len(volumes) == len(pod_of(manifest)["volumes"])  # names unique, as the API requires
    writable = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert set(writable) == {"/data", "/tmp"}
    assert ("persistentVolumeClaim" if mode == "pvc" else "emptyDir") in writable["/data"]
    assert writable["/tmp"] == {"name": "tmp", "emptyDir": {}}  # the pod's own, on the node's disk
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["DATA_DIR"] == "/data"


def _every_range_pod():
    """Each variant of the range pod this file builds: storage mode x profiled x pooled, every tier the
    sizing can choose, the on-demand fallback, a sized disk, a CPU limit, a node of its own, no deadline."""
    for mode, profiled, pooled in COMBINATIONS:
        for tier in (*DEFAULT_LADDER, PROTOSTAR, NEBULA):
            s = settings(storage_mode=mode, pooled=pooled)
            name = f"{mode}/{tier.name}/profiled={profiled}/pooled={pooled}"
            yield name, job_manifest(spec(tier.name), tier, profiled, s)
    yield "unplaced", job_manifest(spec(), None, False, settings(pooled=False))
    yield "on-demand", job_manifest(spec(capacity_type="on-demand"), GIANT, True, settings())
    yield "sized disk", job_manifest(spec(ephemeral_bytes=12 * GiB), GIANT, True, settings(storage_mode="ephemeral"))
    own = dataclasses.replace(GIANT, pods_per_node=1)
    yield "own node", job_manifest(spec(), own, True, settings(storage_mode="ephemeral"))
    yield "cpu limit", job_manifest(spec(), GIANT, True, settings(cpu_limit="4"))
    yield "no deadline", job_manifest(spec(deadline_seconds=None), GIANT, True, settings(worker_service_account="w"))


def test_every_range_pod_meets_the_restricted_pod_security_standard():
    """Issue 24: the mission namespace enforces `restricted` (tests/pss.py has its rules, from URL)."""
    assert URL.startswith("https://kubernetes.io/")
    pods = {name: to_dict(manifest)["spec"]["template"] for name, manifest in _every_range_pod()}
    assert len(pods) > 8 * 8
    assert {name: violations(pod) for name, pod in pods.items() if violations(pod)} == {}
    # The check sees the settings that would break it: the operator's root uid is caught.
    rooted = to_dict(job_manifest(spec(), GIANT, True, settings(run_as_non_root=False, run_as_user=0)))
    assert violations(rooted["spec"]["template"]) == ["Running as Non-root", "Running as Non-root user"]


def test_tier_disagreeing_with_sizing_refused():
    with pytest.raises(ValueError, match="sized for tier"):
        job_manifest(spec("dwarf"), GIANT, True, settings())


def test_L3_pvc_per_range_without_attempt_label():
    p = to_dict(pvc_manifest("pubnet-backfill", KEY, settings(pvc_size="250Gi")))
    assert p["metadata"]["name"] == pvc_name("pubnet-backfill", KEY)
    assert "catchup.stellar.org/attempt" not in p["metadata"]["labels"]
    assert p["metadata"]["labels"]["catchup.stellar.org/range-end"] == "59920000"
    assert p["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "fast-ssd",
        "resources": {"requests": {"storage": "250Gi"}},
    }
    with pytest.raises(ValueError, match="no PVC"):
        pvc_manifest("pubnet-backfill", KEY, settings(storage_mode="ephemeral"))


def test_configmap_carries_script_and_config_and_refuses_oversize():
    c = to_dict(configmap_manifest("m", settings(core_config_key="core.cfg"), "SCRIPT", "CFG"))
    assert c["data"] == {"entrypoint.sh": "SCRIPT", "core.cfg": "CFG"}
    with pytest.raises(ValueError, match="bytes"):
        configmap_manifest("m", settings(), "x" * (1 << 20), "")


LONGEST_MISSION = "m" + "x" * 38 + "9"
EXTREMES = [
    (LONGEST_MISSION, "9999999999-9999999999", 999),
    (LONGEST_MISSION, "0000000001-0000016000", 0),
    ("a", "9999999999-9999999999", 99999),
    ("a-" * 19 + "zz", "0000000000-0000000000", 1),
]


@pytest.mark.parametrize("mission,key,attempt", EXTREMES)
def test_names_are_dns_1123_labels_at_the_extremes(mission, key, attempt):
    for name in (job_name(mission, key, attempt), pvc_name(mission, key), configmap_name(mission)):
        assert len(name) <= 63 and DNS_1123_LABEL.match(name), name


def test_names_readable_when_short_and_deterministic():
    assert job_name("pubnet", KEY, 3) == f"catchup-pubnet-{KEY}-a003"
    assert pvc_name("pubnet", KEY) == f"catchup-pubnet-{KEY}-data"
    assert configmap_name("pubnet") == "catchup-pubnet-worker"
    assert job_name(LONGEST_MISSION, KEY, 3) == job_name(LONGEST_MISSION, KEY, 3)
    assert job_name(LONGEST_MISSION, KEY, 3).endswith(f"-{KEY}-a003")


def test_names_distinct_for_distinct_inputs():
    """Property: no two inputs share a name, including long missions cut to one prefix."""
    rng = random.Random(20240607)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
    missions = {"a" * 40, "a" * 39 + "b", "a" * 30, "a" * 29 + "-b"}
    while len(missions) < 400:
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 38)))
        prefix = rng.choice(["", "x" * 25])  # half of them collide on the truncated prefix
        missions.add((prefix + "m" + body)[:39] + rng.choice("09az"))
    keys = {f"{f:010d}-{f + rng.randint(0, 10**6):010d}" for f in (rng.randrange(10**9) for _ in range(60))}
    inputs = {(m, rng.choice(sorted(keys)), rng.randint(0, 999)) for m in missions for _ in range(10)}
    assert len({job_name(*i) for i in inputs}) == len(inputs)
    range_inputs = {(m, k) for m, k, _ in inputs}
    assert len({pvc_name(*i) for i in range_inputs}) == len(range_inputs)
    assert len({configmap_name(m) for m in missions}) == len(missions)


@pytest.mark.parametrize(
    "mission,key,attempt",
    [
        ("Upper", KEY, 1),
        ("-lead", KEY, 1),
        ("m" * 41, KEY, 1),
        ("m", "59904001-59920000", 1),
        ("m", KEY, -1),
        ("pubnet\n", KEY, 1),
        ("m", KEY + "\n", 1),
        ("m", KEY, True),
    ],
)
def test_bad_name_inputs_refused(mission, key, attempt):
    with pytest.raises(ValueError):
        job_name(mission, key, attempt)


@pytest.mark.parametrize(
    "field,value",
    [
        ("namespace", "Catchup"),
        ("namespace", "catchup\n"),
        ("image", "bad image"),
        ("image_pull_policy", "Sometimes"),
        ("worker_service_account", "Not_OK"),
        ("storage_mode", "s3"),
        ("storage_class", "UPPER"),
        ("pvc_size", "lots"),
        ("ephemeral_request", "50Gi"),
        ("ephemeral_limit", "-1Gi"),
        ("cpu_limit", "0"),
        ("ttl_seconds_after_finished", -1),
        ("configmap", "x" * 64),
        ("core_config_key", "entrypoint.sh"),
        ("tier_node_label", "a/b/c"),
        ("tier_taint_key", "bad key"),
        ("extra_tolerations", ({"key": "k", "operator": "Maybe"},)),
        ("pooled", "yes"),
        ("run_as_user", 0),
        ("cluster_version", "v1.30"),
        ("cluster_version", "1.20"),
        ("cluster_version", "1.30\n"),
    ],
)
def test_bad_setting_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"'{field}'"):
        settings(**{field: value})


def test_L4_pod_failure_policy_names_the_evidence_a_lost_pod_cannot():
    from catchup_assets.backends.kubernetes.manifests import job_manifest, to_dict
    from catchup_assets.backends.kubernetes.settings import K8sSettings
    from catchup_assets.core.dispatch.ports import AttemptSpec
    from catchup_assets.core.size.sizing import Tiers

    tier = Tiers().by_name("giant")
    spec = AttemptSpec("m1", "0000016001-0000032000", 1, 32000, 16320, 1 << 30, 1 << 30, "giant")
    job = to_dict(job_manifest(spec, tier, True, K8sSettings(namespace="catchup", image="stellar/core:1")))
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["onExitCodes"] == {"containerName": "catchup", "operator": "NotIn", "values": [0]}
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # a failure policy requires it
