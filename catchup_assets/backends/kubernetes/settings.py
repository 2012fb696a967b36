"""What a mission's Kubernetes objects may be set to: one frozen value, checked whole.

Pure and light: no `kubernetes` import until a quantity is parsed, so the
Dagster resource can take its defaults from here without loading the client.
Every field is settable from `KubernetesConfig` and the chart's values alike
(tests/deploy/test_k8s_settings.py walks the fields).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from catchup_assets.core.errors import ConfigError, bounded, check_bounds
from catchup_assets.core.size.disk import MAX_DISK_BYTES
from catchup_assets.core.size.sizing import MAX_NODE_CPU

# The API server's own formats, as k8s.io/apimachinery/pkg/util/validation/validation.go writes them, and
# their lengths; the checks below and the chart's values schema (defs/resources/chart_only.py) both use them.
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"  # dns1123LabelFmt, at most DNS1123LabelMaxLength (63)
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"  # dns1123SubdomainFmt, at most 253
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"  # qualifiedNameFmt, at most 63 (a label key's name)
CONFIGMAP_KEY_FMT = "[-._a-zA-Z0-9]+"  # configMapKeyFmt (IsConfigMapKey, a ConfigMap's or Secret's key), at most 253
ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"  # envVarNameFmt (IsEnvVarName)
MAX_NAME, MAX_SUBDOMAIN = 63, 253
DNS_LABEL_RE = re.compile(rf"^(?=.{{1,{MAX_NAME}}}$){DNS1123_LABEL_FMT}$")
DNS_SUBDOMAIN_RE = re.compile(rf"^(?=.{{1,{MAX_SUBDOMAIN}}}$){DNS1123_SUBDOMAIN_FMT}$")
LABEL_VALUE_RE = re.compile(rf"^(?=.{{0,{MAX_NAME}}}$)({QUALIFIED_NAME_FMT})?$")  # labelValueFmt
CONFIGMAP_KEY_RE = re.compile(rf"^(?=.{{1,{MAX_SUBDOMAIN}}}$){CONFIGMAP_KEY_FMT}$")
# The namespaces Kubernetes itself keeps: range Jobs never go there.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# Nor the cluster's `default`, where whatever nobody placed lands, with its own Secrets (issue 45 item 5).
DEFAULT_NAMESPACE = "default"
# The taints that keep pods off control-plane nodes (kubeadm's, and its older name): a range pod
# tolerating one may land beside the API server and etcd. And an empty key with Exists matches every taint.
CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
ENTRYPOINT_KEY = "entrypoint.sh"


def _quantity(field: str, value: Any, most: int) -> Any:
    """A quantity in (0, most]: `most`, a sanity line past which the value is a typo (issue 45 item 5)."""
    from kubernetes.utils.quantity import parse_quantity  # the client's own parser, loaded when needed

    try:
        q = parse_quantity(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"k8s setting {field!r}: {value!r} is not a Kubernetes quantity") from exc
    if q <= 0:
        raise ConfigError(f"k8s setting {field!r}: {value!r} must be > 0")
    if q > most:
        raise ConfigError(f"k8s setting {field!r}: {value!r} is past the most a node or volume holds ({most:g})")
    return q


@dataclass(frozen=True)
class K8sSettings:
    namespace: str
    image: str
    image_pull_policy: str = "IfNotPresent"
    # The range pods' own account: bound to no Role, its token never mounted (the worker calls no
    # API). None: the namespace's `default`.
    worker_service_account: str | None = None
    storage_mode: str = "pvc"  # "pvc" | "ephemeral"
    storage_class: str | None = None  # pvc mode; None = the cluster's default class
    pvc_size: str = "100Gi"
    ephemeral_request: str = "35Gi"  # ephemeral mode, for pods sharing a node
    ephemeral_limit: str = "40Gi"
    cpu_limit: str | None = None  # L7: a throttled retry records a profile nobody can reproduce
    ttl_seconds_after_finished: int = bounded(
        3600, ge=0, le=7 * 24 * 3600
    )  # L2: only a backstop, the backend deletes first
    configmap: str | None = None  # None: configmap_name(mission)
    core_config_key: str = "stellar-core.cfg"
    tier_node_label: str = "catchup.stellar.org/tier"
    tier_taint_key: str | None = "catchup.stellar.org/tier"  # taint value = tier name; None: untainted pools
    extra_tolerations: tuple[Mapping[str, Any], ...] = ()  # e.g. spot pools' taints
    # Labels every range pod's node must carry besides its tier's, e.g. a zone or an arch.
    extra_node_selector: tuple[tuple[str, str], ...] = ()
    pooled: bool = True  # tiers are dedicated node pools
    run_as_non_root: bool = True
    run_as_user: int | None = bounded(
        10001, ge=0, le=2**31 - 1
    )  # None: the image's own user (must not be root if run_as_non_root)
    cluster_version: str = "1.30"  # the schema the manifests are validated against
    allow_broad_tolerations: bool = dataclasses.field(
        default=False,
        metadata={"description": "opt-in: extra_tolerations may tolerate every taint (an empty key, operator "
                  "Exists) or the control-plane taints; off, such a toleration is refused"},
    )  # fmt: skip
    priority_class_name: str | None = dataclasses.field(
        default=None,
        metadata={"description": "the range pods' PriorityClass, e.g. one below the cluster's services; "
                  "None: the cluster's default priority"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> ValueError:
            return ValueError(f"k8s setting {field!r}: {getattr(self, field)!r} {why}")

        if not isinstance(self.namespace, str) or not DNS_LABEL_RE.fullmatch(self.namespace):
            raise bad("namespace", "is not a DNS-1123 label")
        if self.namespace in SYSTEM_NAMESPACES:
            raise bad("namespace", f"is a system namespace ({', '.join(SYSTEM_NAMESPACES)})")
        if self.namespace == DEFAULT_NAMESPACE:
            raise bad("namespace", "is the cluster's default namespace: give range Jobs a namespace of their own")
        check_bounds(self, "k8s setting")  # ttl_seconds_after_finished, run_as_user
        if not isinstance(self.image, str) or not self.image or any(c.isspace() for c in self.image):
            raise bad("image", "must be a non-empty image reference without spaces")
        if self.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise bad("image_pull_policy", "must be Always, IfNotPresent or Never")
        for field in ("worker_service_account", "storage_class", "configmap", "priority_class_name"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not DNS_SUBDOMAIN_RE.fullmatch(value)):
                raise bad(field, "is not a DNS-1123 subdomain")
        if self.configmap is not None and len(self.configmap) > MAX_NAME:
            raise bad("configmap", f"is longer than {MAX_NAME}")
        if self.storage_mode not in ("pvc", "ephemeral"):
            raise bad("storage_mode", "must be 'pvc' or 'ephemeral'")
        _quantity("pvc_size", self.pvc_size, MAX_DISK_BYTES)
        request = _quantity("ephemeral_request", self.ephemeral_request, MAX_DISK_BYTES)
        if request > _quantity("ephemeral_limit", self.ephemeral_limit, MAX_DISK_BYTES):
            raise bad("ephemeral_request", f"exceeds ephemeral_limit {self.ephemeral_limit!r}")
        if self.cpu_limit is not None:
            _quantity("cpu_limit", self.cpu_limit, MAX_NODE_CPU)
        if (
            not isinstance(self.core_config_key, str)
            or not CONFIGMAP_KEY_RE.fullmatch(self.core_config_key)
            or self.core_config_key == ENTRYPOINT_KEY
        ):
            raise bad("core_config_key", f"must be a ConfigMap key other than {ENTRYPOINT_KEY!r}")
        if not _qualified_name(self.tier_node_label):
            raise bad("tier_node_label", "is not a label key ([prefix/]name)")
        if self.tier_taint_key is not None and not _qualified_name(self.tier_taint_key):
            raise bad("tier_taint_key", "is not a taint key ([prefix/]name)")
        if not isinstance(self.extra_tolerations, tuple):
            raise bad("extra_tolerations", "must be a tuple of mappings")
        if not isinstance(self.allow_broad_tolerations, bool):
            raise bad("allow_broad_tolerations", "must be a bool")
        for t in self.extra_tolerations:
            check_toleration(t, self.allow_broad_tolerations)  # raises naming the field
        pairs = self.extra_node_selector
        if not isinstance(pairs, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
            raise bad("extra_node_selector", "must be a tuple of (label key, value) pairs")
        for key, value in pairs:
            if not _qualified_name(key) or key == self.tier_node_label:
                raise bad("extra_node_selector", f"key {key!r} is not a label key, or is the tier label")
            if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE_RE.fullmatch(value):
                raise bad("extra_node_selector", f"value {value!r} of {key!r} is not a label value")
        for field in ("pooled", "run_as_non_root"):
            if not isinstance(getattr(self, field), bool):
                raise bad(field, "must be a bool")
        if self.run_as_non_root and self.run_as_user == 0:
            raise bad("run_as_user", "is root while run_as_non_root is set")
        m = re.fullmatch(r"1\.([0-9]+)", self.cluster_version) if isinstance(self.cluster_version, str) else None
        if not m or int(m.group(1)) < 25:
            raise bad("cluster_version", "must be 'MAJOR.MINOR', 1.25 or later")


def _qualified_name(key: Any) -> bool:
    if not isinstance(key, str) or key.count("/") > 1:
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and not DNS_SUBDOMAIN_RE.fullmatch(prefix):
        return False
    return bool(name) and bool(LABEL_VALUE_RE.fullmatch(name))


_TOLERATION_FIELDS = {"key", "operator", "value", "effect", "toleration_seconds"}


def check_toleration(spec: Mapping[str, Any], allow_broad: bool = False) -> Mapping[str, Any]:
    """A toleration as `V1Toleration` takes it (snake_case fields), or a ValueError naming the setting.

    One that matches every taint (no key, operator Exists) or a control-plane taint is refused unless
    `allow_broad` (the `allow_broad_tolerations` opt-in); one with no key and operator Equal always, as the
    API server refuses it."""

    def bad(why: str) -> ValueError:
        return ValueError(f"k8s setting 'extra_tolerations': {spec!r} {why}")

    if not isinstance(spec, Mapping):
        raise bad("is not a mapping")
    unknown = set(spec) - _TOLERATION_FIELDS
    if unknown:
        raise bad(f"has unknown fields {sorted(unknown)}; known {sorted(_TOLERATION_FIELDS)}")
    if spec.get("operator", "Equal") not in ("Equal", "Exists"):
        raise bad("operator must be Equal or Exists")
    if spec.get("effect") not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise bad("effect must be NoSchedule, PreferNoSchedule or NoExecute")
    if spec.get("key") is not None and not _qualified_name(spec["key"]):
        raise bad("key is not a qualified name")
    key, exists = spec.get("key") or "", spec.get("operator", "Equal") == "Exists"
    if not key and not exists:
        raise bad("has no key: a toleration without one needs operator Exists (and then matches every taint)")
    if not allow_broad and not key:
        raise bad("matches every taint (no key, operator Exists): set allow_broad_tolerations to mean it")
    if not allow_broad and key in CONTROL_PLANE_TAINTS:
        raise bad(f"tolerates the control-plane taint {key}: set allow_broad_tolerations to mean it")
    return spec
