"""What mission_plan accepts: its config with the deployment's defaults, and the limits on a plan.

The launchpad pre-fills a config from the config class's defaults. A class-level
default of production's grid (16000/320, parallelism 1000) offered in the demo's
instance would plan 3751 ranges there and retire the demo's partitions. So the
class is made per deployment from `CatchupResource.mission_defaults`, and a
plan that would retire more than `max_retire_share` of the partitions, or ask
for more than `max_parallelism` attempts in flight, is refused naming the field.
"""

from __future__ import annotations

import time
from typing import Literal

import dagster as dg
import pydantic
from pydantic import Field

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import DEFAULT_PARALLELISM, MissionConfig
from catchup_assets.core.plan.ranges import DEFAULT_LEDGERS_PER_RANGE, DEFAULT_OVERLAP, MissionSpan, parse_key
from catchup_assets.defs.resources import CatchupResource, MissionDefaultsConfig

GRID_FIELDS = ("first_ledger", "ledgers_per_range", "overlap")


class MissionPlanConfig(dg.Config):
    """One mission. Everything is checked before a range is dispatched (L34)."""

    mission: str = Field(default="", description="name; empty: m-<UTC time>")
    first_ledger: int = Field(default=1, description="first ledger of the span")
    last_ledger: int = Field(description="last ledger of the span (the tip)")
    ledgers_per_range: int = DEFAULT_LEDGERS_PER_RANGE
    overlap: int = DEFAULT_OVERLAP
    order: Literal["tip-first", "oldest-first", "longest-first"] = "tip-first"
    parallelism: int = Field(
        default=DEFAULT_PARALLELISM, description="attempts in flight at once, across all runs of the mission"
    )
    previous_profile: str = Field(default="", description="range_profile.parquet of an earlier mission (path or URL)")
    deadline_seconds: int | None = Field(
        default=None, description="each attempt's deadline in seconds (activeDeadlineSeconds on its pod); null: none"
    )

    def to_mission(self, catchup: CatchupResource) -> MissionConfig:
        return MissionConfig(
            mission=self.mission or time.strftime("m-%Y%m%d-%H%M%S", time.gmtime()),
            span=MissionSpan(self.first_ledger, self.last_ledger, self.ledgers_per_range, self.overlap),
            storage_root=catchup.root(),
            parallelism=self.parallelism,
            order=self.order,
            previous_profile=self.previous_profile or None,
            deadline_seconds=self.deadline_seconds,
            **policies(catchup),
        )


def policies(catchup: CatchupResource) -> dict:
    return dict(
        retry=catchup.retry_policy(),
        placement=catchup.placement(),
        poll_seconds=catchup.poll_seconds,
        status_every=catchup.status_every,
        stall_seconds=catchup.stall_seconds,
        stall_factor=catchup.stall_factor,
        breaker_attempts=catchup.breaker_attempts,
        profile_timeout_seconds=catchup.profile_timeout_seconds,
        env=catchup.attempt_env(),
    )


def mission_plan_config(defaults: MissionDefaultsConfig) -> type[MissionPlanConfig]:
    """MissionPlanConfig whose defaults are this deployment's: what the launchpad pre-fills."""
    if defaults == MissionDefaultsConfig():
        return MissionPlanConfig
    fields = MissionPlanConfig.model_fields
    spec = {}
    for name in (
        "first_ledger",
        "ledgers_per_range",
        "overlap",
        "order",
        "parallelism",
        "last_ledger",
        "deadline_seconds",
    ):
        value = getattr(defaults, name)
        if name == "last_ledger" and not value:
            continue  # no default tip: the launchpad asks for it
        spec[name] = (fields[name].annotation, Field(default=value, description=fields[name].description))
    return pydantic.create_model("MissionPlanConfig", __base__=MissionPlanConfig, **spec)


def superseded(existing: list[str], keys: list[str]) -> list[str]:
    """The existing keys a plan of `keys` overlaps without containing them (e.g. a tip that grew)."""
    planned = set(keys)
    new = [parse_key(k) for k in keys]
    out = []
    for old in existing:
        if old in planned:
            continue
        r = parse_key(old)
        if any(n.first <= r.last and r.first <= n.last for n in new):
            out.append(old)
    return out


def check_limits(config: MissionPlanConfig, defaults: MissionDefaultsConfig, existing: int, retiring: int) -> None:
    """Refuse a plan past the deployment's caps, naming the field (L34)."""
    if config.parallelism > defaults.max_parallelism:
        raise ConfigError(
            f"parallelism {config.parallelism} is above this deployment's cap, "
            f"mission_defaults.max_parallelism = {defaults.max_parallelism}"
        )
    if existing and retiring > defaults.max_retire_share * existing:
        changed = [f for f in GRID_FIELDS if getattr(config, f) != getattr(defaults, f)]
        fields = ", ".join(f"{f} = {getattr(config, f)} (this deployment's: {getattr(defaults, f)})" for f in changed)
        raise ConfigError(
            f"this plan would retire {retiring} of the {existing} existing partitions, more than "
            f"mission_defaults.max_retire_share = {defaults.max_retire_share:.0%}"
            + (f": {fields}" if fields else "")
            + "; plan on the same grid, or raise max_retire_share in the deployment's settings"
        )
