"""Kubernetes objects for one mission: a Job per attempt, a PVC per range, one ConfigMap.

Plain data in, `kubernetes.client` models out, no API calls; the objects'
names and labels are `names.py`'s. Every rule here is a lesson that cost a
production run; the ids say which.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from kubernetes import client as k
from kubernetes.utils.quantity import parse_quantity

from catchup_assets.backends.kubernetes.hardening import container_security, pod_security, tmp_mount, tmp_volume
from catchup_assets.backends.kubernetes.identity import MissionIdentity
from catchup_assets.backends.kubernetes.names import (
    CAPACITY_TYPE_LABEL,
    CONTAINER,
    LABEL_TIER,
    configmap_name,
    job_name,
    labels,
    mission_labels,
    pvc_name,
    range_labels,
)
from catchup_assets.backends.kubernetes.settings import ENTRYPOINT_KEY, LABEL_VALUE_RE, K8sSettings, check_toleration
from catchup_assets.core.dispatch.ports import AttemptSpec
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.capacity import fell_back
from catchup_assets.core.size.catalog import CAPACITY_TYPES, ON_DEMAND, SPOT
from catchup_assets.core.size.sizing import Tier

WORKER_MOUNT = "/catchup"
DATA_MOUNT = "/data"
COMMAND = ("/bin/sh", f"{WORKER_MOUNT}/{ENTRYPOINT_KEY}")
RESERVED_ENV = frozenset(
    {
        "RANGE_KEY",
        "CATCHUP_TARGET",
        "CATCHUP_COUNT",
        "DATA_DIR",
        "STELLAR_CORE_CONFIG",
        "CATCHUP_MISSION",
        "CATCHUP_ATTEMPT",
    }
)

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONFIGMAP_MAX_BYTES = 1024 * 1024


def _toleration(spec: Mapping[str, Any], allow_broad: bool) -> k.V1Toleration:
    return k.V1Toleration(**check_toleration(spec, allow_broad))


def _meta(name: str, settings: K8sSettings, labels_: Mapping[str, str]) -> k.V1ObjectMeta:
    return k.V1ObjectMeta(name=name, namespace=settings.namespace, labels=dict(labels_))


def _cpu(cores: float) -> str:
    if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not cores > 0:
        raise ConfigError(f"cpu_request {cores!r} must be a number > 0")
    return f"{max(1, round(cores * 1000))}m"


def _env(spec: AttemptSpec, settings: K8sSettings) -> list[k.V1EnvVar]:
    """Every value the worker needs, as environment only: nothing formats a script (L17)."""
    fixed = {
        "RANGE_KEY": spec.range_key,
        "CATCHUP_TARGET": str(spec.target_ledger),
        "CATCHUP_COUNT": str(spec.ledger_count),
        "DATA_DIR": DATA_MOUNT,
        "STELLAR_CORE_CONFIG": f"{WORKER_MOUNT}/{settings.core_config_key}",
        "CATCHUP_MISSION": spec.mission,
        "CATCHUP_ATTEMPT": str(spec.attempt),
    }
    for name, value in spec.env.items():
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            raise ConfigError(f"env name {name!r} must match {ENV_NAME_RE.pattern}")
        if name in RESERVED_ENV:
            raise ConfigError(f"env {name!r} is set by the backend from the attempt itself")
        if not isinstance(value, str):
            raise ConfigError(f"env {name!r}: value {value!r} must be a string")
    return [k.V1EnvVar(name=n, value=v) for n, v in {**fixed, **spec.env}.items()]


def _placement(tier: Tier | None, settings: K8sSettings) -> tuple[dict[str, str] | None, list[k.V1Toleration]]:
    """L15: in pooled clusters every tier, catch-alls included, is a labelled, tainted pool."""
    extra = [_toleration(t, settings.allow_broad_tolerations) for t in settings.extra_tolerations]
    chosen = dict(settings.extra_node_selector)
    if not settings.pooled:
        return chosen or None, extra
    if tier is None:
        raise ConfigError("pooled k8s settings need a tier for every attempt")
    if not LABEL_VALUE_RE.fullmatch(tier.name) or len(tier.name) > 63:
        raise ConfigError(f"tier name {tier.name!r} is not a valid label value")
    tolerations = list(extra)
    if settings.tier_taint_key is not None:
        # No effect given: tolerate the pool's taint whether it is NoSchedule or NoExecute.
        tolerations.insert(0, k.V1Toleration(key=settings.tier_taint_key, operator="Equal", value=tier.name))
    return {**chosen, settings.tier_node_label: tier.name}, tolerations


def _owns_node(tier: Tier | None, profiled: bool, settings: K8sSettings) -> bool:
    # A catch-all tier packs unsized pods; a ladder tier packing more than one
    # pod per node does not give a profiled range its node either.
    return settings.pooled and profiled and tier is not None and tier.pods_per_node == 1


def _resources(spec: AttemptSpec, tier: Tier | None, profiled: bool, settings: K8sSettings) -> k.V1ResourceRequirements:
    memory = spec.memory_limit_bytes
    if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:
        raise ConfigError(f"memory_limit_bytes {memory!r} must be an integer > 0")
    # Request = limit: the sizing decision is the pod's whole budget, and a pod
    # using more than it requested is the first evicted under node pressure.
    requests: dict[str, str] = {"memory": str(memory), "cpu": _cpu(spec.cpu_request)}
    limits: dict[str, str] = {"memory": str(memory)}
    if settings.cpu_limit is not None:
        if parse_quantity(settings.cpu_limit) < parse_quantity(requests["cpu"]):
            raise ConfigError(f"cpu_limit {settings.cpu_limit!r} is below the attempt's cpu request {requests['cpu']}")
        limits["cpu"] = str(settings.cpu_limit)
    if settings.storage_mode == "ephemeral" and not _owns_node(tier, profiled, settings):
        if spec.ephemeral_bytes is not None:
            # Sized from the profile and the range's evictions (disk.py): request = limit, as for memory.
            requests["ephemeral-storage"] = limits["ephemeral-storage"] = str(spec.ephemeral_bytes)
        else:
            requests["ephemeral-storage"] = settings.ephemeral_request
            limits["ephemeral-storage"] = settings.ephemeral_limit
    return k.V1ResourceRequirements(requests=requests, limits=limits)


def _volumes(spec: AttemptSpec, settings: K8sSettings) -> list[k.V1Volume]:
    worker = k.V1Volume(
        name="worker",
        config_map=k.V1ConfigMapVolumeSource(
            name=settings.configmap or configmap_name(spec.mission),
            default_mode=0o555,
            # Listed keys: a ConfigMap missing one fails the pod at once, not mid-catchup.
            items=[
                k.V1KeyToPath(key=ENTRYPOINT_KEY, path=ENTRYPOINT_KEY),
                k.V1KeyToPath(key=settings.core_config_key, path=settings.core_config_key, mode=0o444),
            ],
        ),
    )
    if settings.storage_mode == "pvc":
        data = k.V1Volume(
            name="data",
            persistent_volume_claim=k.V1PersistentVolumeClaimVolumeSource(
                claim_name=pvc_name(spec.mission, spec.range_key)
            ),
        )
    else:
        data = k.V1Volume(name="data", empty_dir=k.V1EmptyDirVolumeSource())
    return [worker, data, tmp_volume()]


def job_manifest(spec: AttemptSpec, tier: Tier | None, profiled: bool, settings: K8sSettings) -> k.V1Job:
    """The one Job of one attempt (L1): the orchestrator, not Kubernetes, retries."""
    if tier is not None and tier.name != spec.tier:
        raise ConfigError(f"attempt {spec.attempt_id} was sized for tier {spec.tier!r}, given tier {tier.name!r}")
    if spec.deadline_seconds is not None and (isinstance(spec.deadline_seconds, bool) or spec.deadline_seconds <= 0):
        raise ConfigError(f"deadline_seconds {spec.deadline_seconds!r} must be > 0")
    attempt_labels = labels(spec.mission, spec.range_key, spec.attempt)
    if tier is not None:
        attempt_labels[LABEL_TIER] = tier.name
    node_selector, tolerations = _placement(tier, settings)
    if spec.capacity_type not in ("", *CAPACITY_TYPES):
        raise ConfigError(
            f"attempt {spec.attempt_id}: capacity_type {spec.capacity_type!r} is not one of {CAPACITY_TYPES}"
        )
    if fell_back(tier.capacity_type if tier is not None else SPOT, spec.capacity_type):
        # Reclaimed too often on spot: the same tier's node shape, bought on-demand (its NodePool admits both).
        node_selector = {**(node_selector or {}), CAPACITY_TYPE_LABEL: ON_DEMAND}
    container = k.V1Container(
        name=CONTAINER,
        image=settings.image,
        image_pull_policy=settings.image_pull_policy,
        command=list(COMMAND),
        env=_env(spec, settings),
        resources=_resources(spec, tier, profiled, settings),
        volume_mounts=[
            k.V1VolumeMount(name="worker", mount_path=WORKER_MOUNT, read_only=True),
            k.V1VolumeMount(name="data", mount_path=DATA_MOUNT),
            tmp_mount(),
        ],
        security_context=container_security(),  # read-only root: writes go to /data and /tmp
    )
    pod = k.V1PodSpec(
        restart_policy="Never",  # L1: an in-place restart never advances the attempt
        active_deadline_seconds=spec.deadline_seconds,  # L8: the pod's, never the Job's
        containers=[container],
        volumes=_volumes(spec, settings),
        node_selector=node_selector,
        tolerations=tolerations or None,
        service_account_name=settings.worker_service_account,
        priority_class_name=settings.priority_class_name,
        automount_service_account_token=False,  # the worker never calls the API
        enable_service_links=False,  # no env var per Service in the namespace
        security_context=pod_security(settings),
    )
    return k.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=_meta(job_name(spec.mission, spec.range_key, spec.attempt), settings, attempt_labels),
        spec=k.V1JobSpec(
            backoff_limit=0,  # L1
            # The Job's Failed condition then names the evidence (the DisruptionTarget
            # condition, or the exit code) after a spot reclaim has taken the pod with
            # its node: a BackoffLimitExceeded says neither (L4).
            pod_failure_policy=k.V1PodFailurePolicy(
                rules=[
                    k.V1PodFailurePolicyRule(
                        action="FailJob",
                        on_pod_conditions=[
                            k.V1PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget", status="True")
                        ],
                    ),
                    k.V1PodFailurePolicyRule(
                        action="FailJob",
                        on_exit_codes=k.V1PodFailurePolicyOnExitCodesRequirement(
                            container_name=CONTAINER, operator="NotIn", values=[0]
                        ),
                    ),
                ]
            ),
            ttl_seconds_after_finished=settings.ttl_seconds_after_finished,  # L2 backstop
            template=k.V1PodTemplateSpec(metadata=k.V1ObjectMeta(labels=dict(attempt_labels)), spec=pod),  # L14
        ),
    )


def pvc_manifest(mission: str, range_key: str, settings: K8sSettings) -> k.V1PersistentVolumeClaim:
    """The range's `/data`, shared by its attempts so one resumes another (L10), freed at completion (L3)."""
    if settings.storage_mode != "pvc":
        raise ConfigError(f"storage_mode {settings.storage_mode!r} keeps /data in the pod: no PVC to create")
    return k.V1PersistentVolumeClaim(
        api_version="v1",
        kind="PersistentVolumeClaim",
        metadata=_meta(pvc_name(mission, range_key), settings, range_labels(mission, range_key)),
        spec=k.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            storage_class_name=settings.storage_class,
            resources=k.V1VolumeResourceRequirements(requests={"storage": settings.pvc_size}),
        ),
    )


def entrypoint_text() -> str:
    """The worker script the ConfigMap carries (`backends/worker/entrypoint.sh`)."""
    return resources.files("catchup_assets.backends.worker").joinpath("entrypoint.sh").read_text()


def configmap_manifest(
    mission: str, settings: K8sSettings, entrypoint_text: str, core_config_text: str
) -> k.V1ConfigMap:
    data = {ENTRYPOINT_KEY: entrypoint_text, settings.core_config_key: core_config_text}
    size = sum(len(key.encode()) + len(value.encode()) for key, value in data.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise ConfigError(f"worker ConfigMap would hold {size} bytes; the API refuses more than {CONFIGMAP_MAX_BYTES}")
    return k.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=_meta(settings.configmap or configmap_name(mission), settings, mission_labels(mission)),
        data=data,
    )


def stamped(body, kind: str, identity: MissionIdentity):
    """`body` with the mission's identity annotations (identity.py), over what it builds, as sent."""
    body.metadata.annotations = {**(body.metadata.annotations or {}), **identity.annotations(kind, to_dict(body))}
    return body


_serializer: k.ApiClient | None = None


def to_dict(obj: Any) -> Any:
    """The JSON the API server receives: camelCase keys, no nulls."""
    global _serializer
    if _serializer is None:
        _serializer = k.ApiClient()
    return _serializer.sanitize_for_serialization(obj)
