"""Deployment configuration, declared once as Dagster resources and validated at load.

`CatchupResource` says where records live, which backend runs attempts and the
policies every mission shares; the mission itself (span, order, parallelism,
previous profile) is the run config of `mission_plan`.
"""

import hashlib
import os
import shutil
import typing
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Literal

import dagster as dg
import pydantic
from pydantic import Field, model_validator

from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.plan.config import DEFAULT_PARALLELISM, MissionConfig
from catchup_assets.core.plan.ranges import DEFAULT_LEDGERS_PER_RANGE, DEFAULT_OVERLAP, MissionSpan
from catchup_assets.core.size.catalog import DEFAULT_CATALOG, Catalog, NodeShape, eks_allocatable
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.sizing import MemoryLadder, Placement, SizingPolicy, Tier, Tiers
from catchup_assets.core.units import GiB
from catchup_assets.mission.tip import TIP_TIMEOUT_SECONDS, TipSource, parse_tip_source


def mission_seed(seed: int, mission: str) -> int:
    """Each mission draws its own spot reclaims, the same ones on every run of it."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{mission}".encode()).digest()[:4], "big")


class TierConfig(dg.Config):
    name: str
    memory_cut_gib: float = Field(gt=0)
    node_memory_gib: float | None = Field(default=None, gt=0, description="empty: the shape's")
    cpu: float = Field(gt=0, description="each range pod's CPU request")
    shape: str = Field(default="", description="the catalog shape (instance type); empty: by node_memory_gib")
    capacity_type: Literal["spot", "on-demand"] = "spot"
    exclusive: bool = Field(default=False, description="one range per node; else ranges pack by their requests")
    pods_per_node: int | None = Field(default=None, ge=1, description="a fixed number of ranges per node")

    def tier(self, catalog: Catalog) -> Tier:
        where = f"tier {self.name!r}"
        if self.exclusive and self.pods_per_node not in (None, 1):
            raise ValueError(f"{where}: exclusive means one range per node, not pods_per_node {self.pods_per_node}")
        memory = self.node_memory_gib
        if memory is None:
            if not self.shape:
                raise ValueError(f"{where}: give a shape or node_memory_gib")
            try:
                memory_bytes = catalog.by_name(self.shape).memory_bytes
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        else:
            memory_bytes = int(memory * GiB)
        return Tier(
            self.name,
            int(self.memory_cut_gib * GiB),
            memory_bytes,
            self.cpu,
            1 if self.exclusive else self.pods_per_node,
            self.shape,
            self.capacity_type,
        )


# Every K8sSettings and KubeletAccess default, declared there once; the config below takes them from here.
_K8S = {f.name: f.default for f in dataclass_fields(K8sSettings) if f.default is not MISSING}
_KUBELET = {f.name: f.default for f in dataclass_fields(KubeletAccess)}


def _optional(name: str) -> bool:
    """A K8sSettings field that may be None: the launchpad's empty string means None there."""
    return "None" in str(next(f.type for f in dataclass_fields(K8sSettings) if f.name == name))


class _Strict(dg.Config):
    # A misspelt knob is refused at load, not silently left at its default (L34).
    model_config = pydantic.ConfigDict(extra="forbid")


def _config_of(policy: type, name: str, doc: str) -> type[dg.Config]:
    """A Dagster config with the fields of the frozen dataclass `policy`, by name and default.

    A `*_bytes` field is set in GiB, as `*_gib`: what an operator reads in the
    launchpad. Adding a field to the policy adds it here, to the launchpad and to
    the chart's pass-through values, with nothing else to write.
    """
    hints = typing.get_type_hints(policy)
    spec = {}
    for f in dataclass_fields(policy):
        if f.name.endswith("_bytes"):
            optional = type(None) in typing.get_args(hints[f.name])
            spec[f.name[: -len("_bytes")] + "_gib"] = (
                float | None if optional else float,
                None if f.default is None else f.default / GiB,
            )
        else:
            spec[f.name] = (hints[f.name], f.default)
    return pydantic.create_model(name, __base__=_Strict, __doc__=doc, **spec)


def _policy_of(policy: type, config: dg.Config):
    """The dataclass value a `_config_of` config holds; the dataclass validates it, naming the field."""
    values = {}
    for f in dataclass_fields(policy):
        if f.name.endswith("_bytes"):
            gib = getattr(config, f.name[: -len("_bytes")] + "_gib")
            values[f.name] = None if gib is None else int(gib * GiB)
        else:
            values[f.name] = getattr(config, f.name)
    return policy(**values)


class ShapeConfig(_Strict):
    """A node shape of the price catalog (docs/cost.md); allocatable, when left out, estimated as Karpenter does."""

    name: str = Field(min_length=1, description="the instance type, e.g. r6i.xlarge")
    memory_gib: float = Field(gt=0)
    cpu: float = Field(gt=0)
    on_demand_hourly: float = Field(gt=0, description="USD per hour")
    spot_hourly: float = Field(gt=0, description="USD per hour")
    allocatable_memory_gib: float | None = Field(default=None, gt=0)
    allocatable_cpu: float | None = Field(default=None, gt=0)
    max_pods: int = Field(default=110, ge=1, description="for the allocatable estimate (kube-reserved)")

    def shape(self) -> NodeShape:
        memory = int(self.memory_gib * GiB)
        est_memory, est_cpu = eks_allocatable(memory, self.cpu, self.max_pods)
        alloc = est_memory if self.allocatable_memory_gib is None else int(self.allocatable_memory_gib * GiB)
        cpu = est_cpu if self.allocatable_cpu is None else self.allocatable_cpu
        return NodeShape(self.name, memory, self.cpu, self.on_demand_hourly, self.spot_hourly, alloc, cpu)


_SHAPE_KEYS = {"memoryGib": "memory_gib", "onDemandHourly": "on_demand_hourly", "spotHourly": "spot_hourly",
               "allocatableMemoryGib": "allocatable_memory_gib", "allocatableCpu": "allocatable_cpu",
               "maxPods": "max_pods"}  # fmt: skip


def catalog_from_values(doc, where: str = "catalog") -> Catalog:
    """A catalog as the chart's values spell it: a list of shapes, or a mapping with `catalog` (and `catalogSource`).

    Each shape is checked as ShapeConfig checks it; a bad one is refused naming its place (L34)."""
    source = ""
    if isinstance(doc, dict):
        source, doc = str(doc.get("catalogSource") or ""), doc.get("catalog")
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"{where}: expected a list of shapes, or a mapping with a non-empty 'catalog' list")
    shapes = []
    for i, entry in enumerate(doc):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}[{i}]: a shape is a mapping, got {entry!r}")
        try:
            shapes.append(ShapeConfig(**{_SHAPE_KEYS.get(k, k): v for k, v in entry.items()}).shape())
        except (pydantic.ValidationError, ValueError) as exc:
            raise ValueError(f"{where}[{i}]: {exc}") from None
    return Catalog(tuple(shapes), source or where)


SizingConfig = _config_of(SizingPolicy, "SizingConfig", "How a profiled range is sized (L27).")
LadderConfig = _config_of(MemoryLadder, "LadderConfig", "How an OOMed range's memory climbs (L6).")
DiskConfig = _config_of(DiskPolicy, "DiskConfig", "Ephemeral storage from the profile, climbing after evictions.")
RetryConfig = _config_of(RetryPolicy, "RetryConfig", "Retries each outcome class may spend (L5).")
_MISSION = {f.name: f.default for f in dataclass_fields(MissionConfig) if f.default is not MISSING}


class TolerationConfig(_Strict):
    """One toleration every range pod gets, e.g. for a spot pool's taint."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None

    def spec(self) -> dict:
        return {k: v for k, v in self.model_dump().items() if v not in ("", None)}


class MissionDefaultsConfig(_Strict):
    """What the launchpad offers for mission_plan in this deployment, and the limits no plan passes."""

    first_ledger: int = Field(default=1, ge=1)
    last_ledger: int = Field(default=0, ge=0, description="the tip; 0: no default, the launchpad asks for it")
    ledgers_per_range: int = Field(default=DEFAULT_LEDGERS_PER_RANGE, gt=0)
    overlap: int = Field(default=DEFAULT_OVERLAP, ge=0)
    order: Literal["tip-first", "oldest-first", "longest-first"] = "tip-first"
    parallelism: int = Field(default=DEFAULT_PARALLELISM, ge=1, description="attempts in flight per mission")
    max_parallelism: int = Field(
        default=2 * DEFAULT_PARALLELISM, ge=1, description="a plan asking for more attempts in flight is refused"
    )
    max_retire_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="a plan that would retire more than this share of the existing partitions is refused",
    )

    @model_validator(mode="after")
    def _check(self):
        if self.parallelism > self.max_parallelism:
            raise ValueError(f"parallelism ({self.parallelism}) must be <= max_parallelism ({self.max_parallelism})")
        if self.last_ledger:
            MissionSpan(self.first_ledger, self.last_ledger, self.ledgers_per_range, self.overlap)
        return self


class KubernetesConfig(_Strict):
    """Where and how range Jobs run (backend: kubernetes); see docs/deploy.md, "Kubernetes backend".

    Every field of K8sSettings is a field here with the same name and default;
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
    ttl_seconds_after_finished: int = _K8S["ttl_seconds_after_finished"]
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
    run_as_user: int | None = Field(default=_K8S["run_as_user"], description="None: the image's own user")
    cluster_version: str = Field(
        default=_K8S["cluster_version"], description="the API schema manifests are checked against"
    )
    core_config_file: str = Field(
        default="", description="stellar-core config for the worker; empty: a minimal pubnet one"
    )
    kubeconfig: str = Field(default="", description="empty: in-cluster config")
    context: str = ""
    stats_interval_seconds: float = Field(default=10.0, gt=0)
    unschedulable_seconds: float = Field(default=900.0, gt=0)
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
    kubelet_connect_timeout: float = Field(default=_KUBELET["connect_timeout"], gt=0)
    kubelet_read_timeout: float = Field(default=_KUBELET["read_timeout"], gt=0)
    kubelet_concurrency: int = Field(default=_KUBELET["concurrency"], ge=1, description="summaries read at once")

    def kubelet_access(self) -> KubeletAccess:
        """The KubeletAccess these `kubelet_*` fields make, every field taken by name; it checks them."""
        values = {f.name: getattr(self, f"kubelet_{f.name}") for f in dataclass_fields(KubeletAccess)}
        values["preferred_address_types"] = tuple(values["preferred_address_types"])
        values["ca_file"] = values["ca_file"] or None
        return KubeletAccess(**values)

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


class CatchupResource(dg.ConfigurableResource):
    """Where a mission keeps its records and how its attempts run."""

    model_config = pydantic.ConfigDict(extra="forbid")  # a misspelt setting is refused at load (L34)

    storage_root: str = Field(
        default="",
        description="local path or fsspec URL (s3://...); "
        "empty: $CATCHUP_STORAGE_ROOT, else $DAGSTER_HOME/catchup/storage",
    )
    backend: Literal["local", "kubernetes"] = Field(default="local", description="what runs attempts")
    kubernetes: KubernetesConfig | None = Field(default=None, description="backend: kubernetes")
    work_dir: str = Field(
        default="", description="local backend: data dirs and attempt registry; empty: beside the storage"
    )
    # The local backend runs the simulated stellar-core unless a binary is named.
    stellar_core: str = Field(default="", description="stellar-core binary for the local backend; empty: simulated")
    sim_speed: float = Field(default=300_000.0, gt=0)
    sim_seed: int = 0
    sim_fail_targets: list[int] = Field(
        default_factory=list, description="simulated: range ends whose archive is corrupt (they fail for real)"
    )
    disruption_rate: float = Field(default=0.0, ge=0, lt=1, description="local: share of attempts reclaimed")
    # Memory figures of the model, the ladder and the sizing are multiplied by
    # this: the embedded demo runs in MiB what production runs in GiB.
    memory_scale: float = Field(default=1.0, gt=0, le=1)
    poll_seconds: float = Field(default=_MISSION["poll_seconds"], description="seconds between dispatcher passes")
    status_every: int = Field(default=_MISSION["status_every"], description="passes between status lines (L36)")
    stall_seconds: float = Field(
        default=_MISSION["stall_seconds"],
        description="an attempt is never overdue before this; Z4's no-completion time",
    )
    stall_factor: float = Field(
        default=_MISSION["stall_factor"], description="overdue past this x its profiled seconds"
    )
    breaker_attempts: int = Field(
        default=_MISSION["breaker_attempts"],
        description="identical failures in a row that pause dispatch, budgets unspent; 0: off",
    )
    retry: RetryConfig = Field(default_factory=RetryConfig, description="retry budgets per outcome class (L5)")
    mission_defaults: MissionDefaultsConfig = Field(
        default_factory=MissionDefaultsConfig, description="the launchpad's mission_plan defaults and their caps"
    )
    profile_timeout_seconds: float = Field(
        default=_MISSION["profile_timeout_seconds"], description="connect and total, previous profile over http(s)"
    )
    ladder: LadderConfig = Field(default_factory=LadderConfig, description="the OOM memory ladder (L6)")
    disk: DiskConfig = Field(
        default_factory=DiskConfig, description="ephemeral storage mode: disk from the profile, up after evictions"
    )
    # Where next_mission_sensor's next mission ends (L38).
    tip_source: str = Field(
        default="",
        description="the next mission's last ledger: empty, the previous mission's; a ledger number; or a history "
        "archive's http(s) URL, whose .well-known/stellar-history.json currentLedger is read each time",
    )
    tip_timeout_seconds: float = Field(
        default=TIP_TIMEOUT_SECONDS,
        gt=0,
        description="connect and each read of the archive's root HAS; the whole read ends within about twice this",
    )
    # Sizing (L27).
    sizing: SizingConfig = Field(default_factory=SizingConfig, description="sizing from the profile (L27)")
    tiers: list[TierConfig] = Field(default_factory=list, description="the ladder, smallest first; empty: defaults")
    unprofiled_tier: TierConfig | None = None
    no_profile_tier: TierConfig | None = None
    # What nodes cost (issue 15).
    catalog: list[ShapeConfig] = Field(
        default_factory=list, description="node shapes and their prices; empty: the default (docs/cost.md)"
    )
    catalog_source: str = Field(default="", description="where the catalog's prices come from, and as of when")

    @model_validator(mode="after")
    def _check(self):
        self.placement()  # an invalid ladder or sizing fails at load, naming the field (L34)
        self.tip_source_spec()
        if not self.tip_timeout_seconds < float("inf"):
            raise ValueError(f"tip_timeout_seconds: must be finite, got {self.tip_timeout_seconds}")
        if self.backend == "kubernetes":
            if self.kubernetes is None:
                raise ValueError("kubernetes: required when backend is 'kubernetes'")
            self.kubernetes.settings()  # a bad namespace, image or quantity fails at load
            self.kubernetes.kubelet_access()
        return self

    def root(self) -> str:
        """Resolved when a run needs it, never at import (the instance's home may differ)."""
        if self.storage_root:
            return self.storage_root
        if os.environ.get("CATCHUP_STORAGE_ROOT"):
            return os.environ["CATCHUP_STORAGE_ROOT"]
        home = os.environ.get("DAGSTER_HOME")
        if not home:
            raise ValueError("storage_root: not set, and neither CATCHUP_STORAGE_ROOT nor DAGSTER_HOME is")
        return os.path.join(home, "catchup", "storage")

    def work(self) -> str:
        if self.work_dir:
            return self.work_dir
        root = self.root()
        if "://" in root:
            raise ValueError("work_dir: must be set when storage_root is a URL")
        return os.path.join(os.path.dirname(os.path.abspath(root)), "work")

    def tip_source_spec(self) -> TipSource | None:
        """Where the tip is read (None: the next mission keeps the previous one's span); refused naming tip_source."""
        return parse_tip_source(self.tip_source)

    def retry_policy(self) -> RetryPolicy:
        return _policy_of(RetryPolicy, self.retry)

    def placement(self) -> Placement:
        """Tiers, sizing and memory ladder as one value, in the demo's memory scale when it has one."""
        defaults = Tiers()
        catalog = self.price_catalog()
        tiers = Tiers(
            tuple(t.tier(catalog) for t in self.tiers) or defaults.ladder,
            self.unprofiled_tier.tier(catalog) if self.unprofiled_tier else defaults.unprofiled,
            self.no_profile_tier.tier(catalog) if self.no_profile_tier else defaults.no_profile,
        )
        sizing = _policy_of(SizingPolicy, self.sizing)
        ladder = _policy_of(MemoryLadder, self.ladder)
        disk = _policy_of(DiskPolicy, self.disk)
        return Placement(tiers, sizing, ladder, catalog, disk).scaled(self.memory_scale)

    def price_catalog(self) -> Catalog:
        """The node shapes and prices, at production scale; the default catalog if none is configured."""
        if not self.catalog:
            return DEFAULT_CATALOG
        return Catalog(tuple(c.shape() for c in self.catalog), self.catalog_source or "configured catalog")

    def scale_note(self) -> str | None:
        """What a scaled-down deployment (the demo) does to the numbers an operator reads; None at full scale."""
        parts = []
        if self.memory_scale != 1:
            parts.append(
                f"memory x{self.memory_scale:.3g}: each MiB requested here stands for "
                f"{1 / self.memory_scale:.4g} MiB in production"
            )
        if self.backend == "local" and not self.stellar_core:
            parts.append(f"a simulated stellar-core at {self.sim_speed:,.0f}x speed: seconds are simulated ledger time")
        return "; ".join(parts) or None

    def sim_env(self) -> dict[str, str]:
        return {
            "SIM_SPEED": repr(self.sim_speed),
            "SIM_MEMORY_SCALE": repr(self.memory_scale),
            # Scaled ranges would write their full-size disk churn: keep it measurable, not huge.
            "SIM_DISK_SCALE": repr(self.memory_scale / 100),
            "SIM_SEED": str(self.sim_seed),
            "SIM_FAIL_TARGETS": ",".join(str(t) for t in self.sim_fail_targets),
        }

    def attempt_env(self) -> dict[str, str]:
        env = self.sim_env() if not self.stellar_core else {}
        if self.stellar_core:
            env["STELLAR_CORE"] = self.stellar_core
        return env

    def core_image(self) -> dict[str, str | None]:
        """The stellar-core this deployment's attempts run, as a mission records it (mission.json).

        kubernetes: the image reference, its tag and, when the reference pins one
        (`...@sha256:...`), its digest. local: the binary's resolved path and the
        sha256 of its bytes (None if it cannot be read), or the simulated core.
        """
        if self.backend == "kubernetes" and self.kubernetes is not None:
            return image_reference(self.kubernetes.image)
        if not self.stellar_core:
            return {"image": "simulated (catchup-sim-core)", "tag": None, "digest": None}
        path = shutil.which(self.stellar_core) or self.stellar_core
        return {"image": os.path.abspath(path), "tag": None, "digest": file_sha256(path)}

    def backend_for(self, mission: str, disruption_seed: int | None = None) -> Backend:
        if self.backend == "kubernetes":
            return self._kubernetes_backend(mission)
        from catchup_assets.backends.local.backend import LocalBackend

        seed = disruption_seed if disruption_seed is not None else mission_seed(self.sim_seed, mission)
        return LocalBackend(
            self.work(),
            mission,
            disruption_rate=self.disruption_rate,
            disruption_seed=seed,
            disruption_window=(0.3, 2.0),
        )

    def _kubernetes_backend(self, mission: str) -> Backend:
        # Loaded when a run needs it, never at import: the code location must
        # load on a laptop with no cluster configured.
        import kubernetes

        from catchup_assets.backends.kubernetes.backend import DEFAULT_CORE_CONFIG, KubernetesBackend

        cfg = self.kubernetes
        api = kubernetes.client.ApiClient(configuration=_kube_configuration(cfg.kubeconfig, cfg.context))
        core_config = open(cfg.core_config_file).read() if cfg.core_config_file else DEFAULT_CORE_CONFIG
        return KubernetesBackend(
            mission,
            cfg.settings(),
            self.placement().tiers,
            batch_api=kubernetes.client.BatchV1Api(api),
            core_api=kubernetes.client.CoreV1Api(api),
            kubelet=cfg.kubelet_access(),
            spool_dir=os.path.join(self.work(), mission, "log-spool"),
            core_config_text=core_config,
            stats_interval=cfg.stats_interval_seconds,
            unschedulable_seconds=cfg.unschedulable_seconds,
        )


def image_reference(ref: str) -> dict[str, str | None]:
    """An image reference's tag and digest, as far as the reference itself says them."""
    name, _, digest = ref.partition("@")
    last = name.rsplit("/", 1)[-1]  # a registry's port is not a tag: registry:5000/core
    tag = last.partition(":")[2] or None
    return {"image": ref, "tag": tag, "digest": digest or None}


def file_sha256(path: str) -> str | None:
    """`sha256:<hex>` of a file's bytes, read in chunks; None (no failure) if it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return f"sha256:{digest.hexdigest()}"


def _kube_configuration(kubeconfig: str, context: str):
    import kubernetes

    configuration = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(
            config_file=kubeconfig, context=context or None, client_configuration=configuration
        )
    else:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    return configuration
