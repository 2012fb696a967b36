"""Deployment configuration, declared once as a Dagster resource and validated at load.

`CatchupResource` says where records live, which backend runs attempts and the
policies every mission shares; the mission itself (span, order, parallelism,
previous profile) is the run config of `mission_plan`.
"""

import os
import shutil
from collections.abc import Callable
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Literal

import dagster as dg
import pydantic
from pydantic import Field, model_validator

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import DISPATCH_SETTINGS, MissionConfig, check_dispatch_settings
from catchup_assets.core.plan.ranges import MAX_RANGES
from catchup_assets.core.size.catalog import DEFAULT_CATALOG, Catalog
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.scale import Scale
from catchup_assets.core.size.sizing import MemoryLadder, Placement, SizingPolicy, Tiers
from catchup_assets.core.web_url import BASE_URL_PATTERN, check_base_url
from catchup_assets.defs.resources.backend import backend_for
from catchup_assets.defs.resources.k8s import KubernetesConfig
from catchup_assets.defs.resources.mission_defaults import MissionDefaultsConfig
from catchup_assets.defs.resources.placement import ShapeConfig, TierConfig
from catchup_assets.defs.resources.policies import (
    DiskConfig,
    LadderConfig,
    RetryConfig,
    SizingConfig,
    bounds_schema,
    policy_of,
)
from catchup_assets.defs.resources.slack import CHANNEL_PATTERN, check_slack_channel
from catchup_assets.mission.core_image import file_sha256, image_reference
from catchup_assets.mission.tip import TIP_TIMEOUT_SECONDS, TipSource, parse_tip_source

_MISSION = {f.name: f.default for f in dataclass_fields(MissionConfig) if f.default is not MISSING}


def _dispatch(name: str, description: str):
    """A dispatcher setting as MissionConfig declares it: its default, and its bounds in the schema
    (`check_dispatch_settings` checks them at load)."""
    return Field(default=_MISSION[name], description=description, json_schema_extra=bounds_schema(MissionConfig, name))


class CatchupResource(dg.ConfigurableResource):
    """Where a mission keeps its records and how its attempts run."""

    # A misspelt setting is refused at load (L34), and a NaN or infinity, as in every Strict config.
    model_config = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)

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
    poll_seconds: float = _dispatch("poll_seconds", "seconds between dispatcher passes")
    status_every: int = _dispatch("status_every", "passes between status lines (L36)")
    stall_seconds: float = _dispatch(
        "stall_seconds", "an attempt is never overdue before this; Z4's no-completion time"
    )
    stall_factor: float = _dispatch("stall_factor", "overdue past this x its profiled seconds")
    breaker_attempts: int = _dispatch(
        "breaker_attempts", "identical failures in a row that pause dispatch, budgets unspent; 0: off"
    )
    # Off by default: two local runs on one laptop would want the same port; the chart sets one for run pods.
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="the dispatcher serves Prometheus /metrics on this port of its run pod, or of the machine "
        "running it locally (docs/reference.md, Metrics); 0: off",
    )
    retry: RetryConfig = Field(default_factory=RetryConfig, description="retry budgets per outcome class (L5)")
    mission_defaults: MissionDefaultsConfig = Field(
        default_factory=MissionDefaultsConfig, description="the launchpad's mission_plan defaults and their caps"
    )
    profile_timeout_seconds: float = _dispatch(
        "profile_timeout_seconds", "connect and total, previous profile over http(s)"
    )
    profile_max_bytes: int = _dispatch(
        "profile_max_bytes", "a previous profile larger than this is refused, read no further (local, http(s), S3)"
    )
    profile_max_rows: int = _dispatch(
        "profile_max_rows", "a previous profile of more rows than this is refused, from its footer (real: ~4000-6000)"
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
        le=3600,
        description="connect and each read of the archive's root HAS; the whole read ends within about twice this",
    )
    allow_after_failure: bool = Field(
        default=False,
        description="next_mission_sensor plans the next mission even after one that condemned ranges, "
        "was stopped (circuit breaker) or was drained; off: it skips, saying why",
    )
    # Notifications (issue 23): notify_sensor posts with the `slack` resource's token ($SLACK_BOT_TOKEN).
    slack_channel: str = Field(
        default="",
        description="the Slack channel mission notifications go to (#name or an id); empty: off",
        json_schema_extra={"pattern": CHANNEL_PATTERN},  # for the chart; at load check_slack_channel says more
    )
    slack_condemned_ranges: int = Field(
        default=5,
        ge=1,
        le=MAX_RANGES,
        description="a mission with this many ranges condemned is notified as condemned-heavy",
    )
    # The mission console (issue 46): the mission page's entries and each range_catchup run link to it.
    console_url: str = Field(
        default="",
        description="the mission console's URL as operators reach it (http(s)://host[:port][/path]); the mission "
        "page's entries link to the mission there, each range_catchup run carries a catchup/console tag; empty: none",
        json_schema_extra={"pattern": f"^$|{BASE_URL_PATTERN}"},
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
        self.retry_policy()  # a budget of -1 too: the policy dataclass holds the bounds
        # The dispatcher's settings, with MissionConfig's own bounds: at load, not at the first mission_plan.
        check_dispatch_settings({name: getattr(self, name) for name in DISPATCH_SETTINGS})
        if not self.sim_speed < float("inf"):
            raise ConfigError(f"sim_speed: must be finite, got {self.sim_speed}")
        self.tip_source_spec()
        check_slack_channel(self.slack_channel)
        self.console_mission_url("m")
        if not self.tip_timeout_seconds < float("inf"):
            raise ConfigError(f"tip_timeout_seconds: must be finite, got {self.tip_timeout_seconds}")
        if self.backend == "kubernetes":
            if self.kubernetes is None:
                raise ConfigError("kubernetes: required when backend is 'kubernetes'")
            self.kubernetes.settings()  # a bad namespace, image or quantity fails at load
            self.kubernetes.kubelet_access()
            self.kubernetes.api_waits()  # the API waits' cap and budget (backoff.py), in bounds
        return self

    def root(self) -> str:
        """Resolved when a run needs it, never at import (the instance's home may differ)."""
        if self.storage_root:
            return self.storage_root
        if os.environ.get("CATCHUP_STORAGE_ROOT"):
            return os.environ["CATCHUP_STORAGE_ROOT"]
        home = os.environ.get("DAGSTER_HOME")
        if not home:
            raise ConfigError("storage_root: not set, and neither CATCHUP_STORAGE_ROOT nor DAGSTER_HOME is")
        return os.path.join(home, "catchup", "storage")

    def console_mission_url(self, mission: str) -> str | None:
        """The console's page of `mission` (a checked name), or None when no console_url is set."""
        if not self.console_url:
            return None
        return f"{check_base_url(self.console_url, 'console_url')}/missions/{mission}"

    def work(self) -> str:
        if self.work_dir:
            return self.work_dir
        root = self.root()
        if "://" in root:
            raise ConfigError("work_dir: must be set when storage_root is a URL")
        return os.path.join(os.path.dirname(os.path.abspath(root)), "work")

    def tip_source_spec(self) -> TipSource | None:
        """Where the tip is read (None: the next mission keeps the previous one's span); refused naming tip_source."""
        return parse_tip_source(self.tip_source)

    def retry_policy(self) -> RetryPolicy:
        return policy_of(RetryPolicy, self.retry)

    def placement(self) -> Placement:
        """Tiers, sizing and memory ladder as one value, in the demo's memory scale when it has one."""
        defaults = Tiers()
        catalog = self.price_catalog()
        tiers = Tiers(
            tuple(t.tier(catalog) for t in self.tiers) or defaults.ladder,
            self.unprofiled_tier.tier(catalog) if self.unprofiled_tier else defaults.unprofiled,
            self.no_profile_tier.tier(catalog) if self.no_profile_tier else defaults.no_profile,
        )
        sizing = policy_of(SizingPolicy, self.sizing)
        ladder = policy_of(MemoryLadder, self.ladder)
        disk = policy_of(DiskPolicy, self.disk)
        return Placement(tiers, sizing, ladder, catalog, disk).scaled(self.memory_scale)

    def price_catalog(self) -> Catalog:
        """The node shapes and prices, at production scale; the default catalog if none is configured."""
        if not self.catalog:
            return DEFAULT_CATALOG
        return Catalog(tuple(c.shape() for c in self.catalog), self.catalog_source or "configured catalog")

    def scale(self) -> Scale:
        """How this deployment's measurements stand for production: the demo's memory_scale and, with the
        simulated stellar-core, its sim_speed (the factor the demo's summary multiplies seconds by)."""
        simulated = self.backend == "local" and not self.stellar_core
        return Scale(memory=self.memory_scale, time=self.sim_speed if simulated else 1.0)

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

    def backend_for(
        self, mission: str, disruption_seed: int | None = None, sleeper: Callable[[float], None] | None = None
    ) -> Backend:
        """`sleeper`: what the backend waits on (the dispatcher's clock's, so a stop ends its waits)."""
        return backend_for(self, mission, disruption_seed, sleeper)
