"""What the launchpad offers for mission_plan in this deployment, and the limits no plan passes."""

from typing import Literal

from pydantic import Field, model_validator

from catchup_assets.core.errors import ConfigError, declared_bounds
from catchup_assets.core.plan.config import DEFAULT_PARALLELISM, MissionConfig
from catchup_assets.core.plan.cut import DEFAULT_NODE_HOURS_CAP
from catchup_assets.core.plan.ranges import DEFAULT_LEDGERS_PER_RANGE, DEFAULT_OVERLAP, MAX_LEDGER, MissionSpan
from catchup_assets.defs.resources.policies import Strict


class MissionDefaultsConfig(Strict):
    """What the launchpad offers for mission_plan in this deployment, and the limits no plan passes."""

    # Ledger numbers are uint32 (MAX_LEDGER): the upper bound of each ledger setting (issue 45 item 5).
    first_ledger: int = Field(default=1, ge=1, le=MAX_LEDGER)
    last_ledger: int = Field(
        default=0, ge=0, le=MAX_LEDGER, description="the tip; 0: no default, the launchpad asks for it"
    )
    ledgers_per_range: int = Field(default=DEFAULT_LEDGERS_PER_RANGE, gt=0, le=MAX_LEDGER)
    overlap: int = Field(default=DEFAULT_OVERLAP, ge=0, le=MAX_LEDGER)
    order: Literal["tip-first", "oldest-first", "longest-first"] = "longest-first"
    # auto: the profile cut when it finishes sooner at a bounded cost, else the grid; uniform: the grid;
    # profile: cut to the previous profile for `parallelism` slots (docs/how-to.md, "Ranges cut to the profile").
    lengths: Literal["auto", "uniform", "profile"] = "auto"
    cut_node_hours_cap: float = Field(
        default=DEFAULT_NODE_HOURS_CAP,
        description="lengths auto takes a profile cut of at most this many times the uniform grid's node-hours",
        allow_inf_nan=False,
        **declared_bounds(MissionConfig, "cut_node_hours_cap"),
    )
    # Both within MissionConfig's own bounds for parallelism (at most a cluster's pods).
    parallelism: int = Field(
        default=DEFAULT_PARALLELISM,
        description="attempts in flight per mission",
        **declared_bounds(MissionConfig, "parallelism"),
    )
    max_parallelism: int = Field(
        default=2 * DEFAULT_PARALLELISM,
        description="a plan asking for more attempts in flight is refused",
        **declared_bounds(MissionConfig, "parallelism"),
    )
    max_retire_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="a plan that would retire more than this share of the existing partitions is refused",
    )
    deadline_seconds: int | None = Field(
        default=None,
        description="each attempt's deadline, activeDeadlineSeconds on its pod (L8); None: none",
        **declared_bounds(MissionConfig, "deadline_seconds"),
    )

    @model_validator(mode="after")
    def _check(self):
        if self.parallelism > self.max_parallelism:
            raise ConfigError(f"parallelism ({self.parallelism}) must be <= max_parallelism ({self.max_parallelism})")
        # Without a tip, the grid alone (one range's span): an overlap past the range length is refused either way.
        last = self.last_ledger or self.first_ledger
        MissionSpan(self.first_ledger, last, self.ledgers_per_range, self.overlap)
        return self
