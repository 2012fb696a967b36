"""Where and how range Jobs run (backend: kubernetes): K8sSettings and KubeletAccess as resource config."""

import typing
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Literal

import pydantic
from pydantic import Field

from catchup_assets.backends.kubernetes.backoff import WaitPolicy
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.plan.config import MAX_DURATION_SECONDS
from catchup_assets.defs.resources.policies import Strict, bounds_schema

# Every K8sSettings and KubeletAccess default, declared there once; the config below takes them from here.
_K8S = {f.name: f.default for f in dataclass_fields(K8sSettings) if f.default is not MISSING}
_KUBELET = {f.name: f.default for f in dataclass_fields(KubeletAccess)}
_WAITS = {f.name: f for f in dataclass_fields(WaitPolicy)}


def _wait_field(name: str):
    """A WaitPolicy field as a config field: its default, description and bounds, declared there once."""
    f = _WAITS[name]
    return Field(
        default=f.default, description=f.metadata["description"], json_schema_extra=bounds_schema(WaitPolicy, name)
    )


def _optional(name: str) -> bool:
    """A K8sSettings field that may be None: the launchpad's empty string means None there."""
    return "None" in str(next(f.type for f in dataclass_fields(K8sSettings) if f.name == name))


class TolerationConfig(Strict):
    """One toleration every range pod gets, e.g. for a spot pool's taint."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = Field(default=None, ge=0, le=MAX_DURATION_SECONDS)

    def spec(self) -> dict:
        return {k: v for k, v in self.model_dump().items() if v not in ("", None)}


class _DeclaredKubernetesConfig(Strict):
    """Where and how range Jobs run (backend: kubernetes); see docs/deploy.md, "Kubernetes backend".

    Every field of K8sSettings is a field here with the same name and default
    (those not declared below are added from the dataclass, `_with_every_setting`);
    the rest configure the backend's polling and the client.
    """

    namespace: str
    image: str = Field(description="stellar-core image with /bin/sh (the worker script is mounted)")
    image_pull_policy: str = _K8S["image_pull_policy"]
    worker_service_account: str = Field(
        default="", description="the range pods' ServiceAccount (no Role, no token); empty: the namespace's default"
    )
    storage_mode: Literal["pvc", "ephemeral"] = _K8S["storage_mode"]
    storage_class: str = Field(default="", description="pvc mode; empty: the cluster's default class")
    pvc_size: str = _K8S["pvc_size"]
    ephemeral_request: str = _K8S["ephemeral_request"]
    ephemeral_limit: str = _K8S["ephemeral_limit"]
    cpu_limit: str = Field(default="", description="empty: no CPU limit (L7)")
    ttl_seconds_after_finished: int = Field(
        default=_K8S["ttl_seconds_after_finished"],
        json_schema_extra=bounds_schema(K8sSettings, "ttl_seconds_after_finished"),
    )
    configmap: str = Field(
        default="",
        description="a ConfigMap holding entrypoint.sh and the core config (the chart's); "
        "empty: the backend creates one per mission",
    )
    core_config_key: str = Field(default=_K8S["core_config_key"], description="the core config's key in the ConfigMap")
    tier_node_label: str = _K8S["tier_node_label"]
    tier_taint_key: str = Field(default=_K8S["tier_taint_key"], description="empty: the pools are not tainted")
    extra_tolerations: list[TolerationConfig] = Field(
        default_factory=list, description="added to every range pod, e.g. the spot pools' taints"
    )
    extra_node_selector: dict[str, str] = Field(
        default_factory=dict, description="labels every range pod's node must carry besides its tier's"
    )
    pooled: bool = Field(default=_K8S["pooled"], description="tiers are dedicated node pools (L15)")
    run_as_non_root: bool = _K8S["run_as_non_root"]
    run_as_user: int | None = Field(
        default=_K8S["run_as_user"],
        description="None: the image's own user",
        json_schema_extra=bounds_schema(K8sSettings, "run_as_user"),
    )
    cluster_version: str = Field(
        default=_K8S["cluster_version"], description="the API schema manifests are checked against"
    )
    core_config_file: str = Field(
        default="", description="stellar-core config for the worker; empty: a minimal pubnet one"
    )
    kubeconfig: str = Field(default="", description="empty: in-cluster config")
    context: str = ""
    # Upper bounds (issue 45 item 5): sanity lines past which a value is a typo, not a choice.
    stats_interval_seconds: float = Field(default=10.0, gt=0, le=3600)
    unschedulable_seconds: float = Field(default=900.0, gt=0, le=MAX_DURATION_SECONDS)
    # The client's request rate (throttle.py), as client-go's rest.Config QPS/Burst. 200/400: a
    # first pass of 2000 submits (4000 creates) in ~18 s, near the Job controller's own design
    # rate (5000 pods a minute, ~170 requests a second); lower it on a small control plane.
    api_qps: float = Field(
        default=200.0, gt=0, le=10_000, description="API requests per second, the client's steady rate"
    )
    api_burst: int = Field(default=400, ge=1, le=20_000, description="API requests sent at once before api_qps applies")
    submit_concurrency: int = Field(
        default=8, ge=1, le=64, description="attempts submitted at once (each: its record, then its PVC and Job)"
    )
    # When the API server asks to slow down (a 429 or 503 with Retry-After): backoff.py, issue 36 item 8.
    api_wait_cap_seconds: float = _wait_field("api_wait_cap_seconds")
    api_wait_budget_seconds: float = _wait_field("api_wait_budget_seconds")
    # How peaks are read: from each node's kubelet, as metrics-server reads them (L19, stats.py).
    # Each KubeletAccess field, prefixed `kubelet_`.
    kubelet_preferred_address_types: list[str] = Field(
        default_factory=lambda: list(_KUBELET["preferred_address_types"]),
        description="which of a Node's status.addresses to reach its kubelet at, first found wins",
    )
    kubelet_ca_file: str = Field(
        default="", description="CA of the kubelets' serving certificates; empty: the cluster CA"
    )
    kubelet_insecure_skip_tls_verify: bool = Field(
        default=_KUBELET["insecure_skip_tls_verify"],
        description="INSECURE: do not verify kubelets' certificates; whoever intercepts gets the token",
    )
    kubelet_token_file: str = Field(
        default=_KUBELET["token_file"], description="the bearer token kubelets see; default: the pod's ServiceAccount's"
    )
    kubelet_connect_timeout: float = Field(default=_KUBELET["connect_timeout"], gt=0, le=300)
    kubelet_read_timeout: float = Field(default=_KUBELET["read_timeout"], gt=0, le=300)
    kubelet_concurrency: int = Field(
        default=_KUBELET["concurrency"], ge=1, le=1024, description="summaries read at once"
    )

    def kubelet_access(self) -> KubeletAccess:
        """The KubeletAccess these `kubelet_*` fields make, every field taken by name; it checks them."""
        values = {f.name: getattr(self, f"kubelet_{f.name}") for f in dataclass_fields(KubeletAccess)}
        values["preferred_address_types"] = tuple(values["preferred_address_types"])
        values["ca_file"] = values["ca_file"] or None
        return KubeletAccess(**values)

    def api_waits(self) -> WaitPolicy:
        """The WaitPolicy these `api_wait_*` fields make; it checks them, naming the field."""
        return WaitPolicy(**{name: getattr(self, name) for name in _WAITS})

    def settings(self) -> K8sSettings:
        """The K8sSettings these fields make, every field taken by name (one place, no copying by hand)."""
        values = {}
        for f in dataclass_fields(K8sSettings):
            value = getattr(self, f.name)
            if f.name == "extra_tolerations":
                value = tuple(t.spec() for t in value)
            elif f.name == "extra_node_selector":
                value = tuple(sorted(value.items()))
            elif value == "" and _optional(f.name):
                value = None
            values[f.name] = value
        return K8sSettings(**values)


def _with_every_setting(declared: type[Strict]) -> type[Strict]:
    """`declared` and each K8sSettings field it does not declare, by the dataclass's type, default,
    `metadata["description"]` and declared bounds: a new Job or pod setting is one dataclass field (and
    the manifest line that uses it); the launchpad, the chart's values and its schema follow (chart_schema.py)."""
    hints = typing.get_type_hints(K8sSettings)
    spec = {
        f.name: (
            hints[f.name],
            Field(
                default=f.default,
                description=f.metadata.get("description"),
                json_schema_extra=bounds_schema(K8sSettings, f.name) or None,
            ),
        )
        for f in dataclass_fields(K8sSettings)
        if f.name not in declared.model_fields
    }
    return pydantic.create_model("KubernetesConfig", __base__=declared, __doc__=declared.__doc__, **spec)


KubernetesConfig = _with_every_setting(_DeclaredKubernetesConfig)
