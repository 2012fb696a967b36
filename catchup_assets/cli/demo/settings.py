"""The demo's settings: its directory, scale and speed, the mission grid it cuts and the resource it runs with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS, MissionSpan, plan_ranges
from catchup_assets.core.values.ledger_range import LedgerRange
from catchup_assets.sim.model import HISTORY_LEDGERS

# The demo's missions run on the grid, not `auto` (issue 37: production's default): each runs its plan as
# one contiguous span of partition keys (mission.py), and its second mission is compared with its first
# by key, so a cut's new keys would split the one run and share few keys.
DEMO_LENGTHS = "uniform"


@dataclass(frozen=True)
class DemoSettings:
    directory: Path
    ranges: int = 48
    parallelism: int = 8
    speed: float = 300_000.0  # simulated seconds per real second
    memory_scale: float = 1 / 200
    disruption_rate: float = 0.07
    seed: int = 0
    poll_seconds: float = 0.25
    fail_ranges: int = 0  # ranges whose simulated history archive is corrupt: stellar-core fails them
    metrics_port: int = 0  # each mission's dispatcher serves /metrics here while it runs; 0: off
    console_port: int = 0  # the mission console's port while the demo runs; 0: a free one

    def __post_init__(self) -> None:
        if self.ranges < 1:
            raise ConfigError(f"ranges must be >= 1, got {self.ranges}")
        if self.parallelism < 1:
            raise ConfigError(f"parallelism must be >= 1, got {self.parallelism}")
        if self.speed <= 0 or not 0 < self.memory_scale <= 1:
            raise ConfigError("speed must be > 0 and memory_scale in (0, 1]")
        if not 0 <= self.disruption_rate < 1:
            raise ConfigError(f"disruption_rate must be in [0, 1), got {self.disruption_rate}")
        if not 0 <= self.fail_ranges <= self.ranges:
            raise ConfigError(f"--fail-ranges must be between 0 and --ranges ({self.ranges}), got {self.fail_ranges}")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port must be a port (0: off), got {self.metrics_port}")
        if not 0 <= self.console_port <= 65535:
            raise ConfigError(f"--console-port must be a port (0: a free one), got {self.console_port}")

    @property
    def home(self) -> Path:
        return self.directory / "dagster_home"

    @property
    def storage_root(self) -> str:
        return str(self.directory / "storage")

    def span(self) -> MissionSpan:
        # The whole simulated history cut into `ranges` grid-aligned pieces.
        per = math.ceil(HISTORY_LEDGERS / self.ranges / CHECKPOINT_LEDGERS) * CHECKPOINT_LEDGERS
        return MissionSpan(1, per * self.ranges, ledgers_per_range=per, overlap=0)

    def failing(self) -> list[LedgerRange]:
        """The `fail_ranges` ranges at the middle of as many equal stretches of the history:
        apart, so each is a backfill group of its own, and among ranges that succeed (a run of
        identical failures would trip the circuit breaker instead of condemning them)."""
        ranges = plan_ranges(self.span())
        n = self.fail_ranges
        return [ranges[(2 * i + 1) * len(ranges) // (2 * n)] for i in range(n)]

    def catchup(self) -> dict[str, Any]:
        """The `CatchupResource` fields of the demo: what its runs and its UI both use."""
        # stellar-core fails a range whose catchup target the archive cannot serve (sim/stellar_core.py).
        failing = {"sim_fail_targets": [r.last for r in self.failing()]} if self.fail_ranges else {}
        return dict(
            **failing,
            storage_root=self.storage_root,
            memory_scale=self.memory_scale,
            sim_speed=self.speed,
            sim_seed=self.seed,
            disruption_rate=self.disruption_rate,
            poll_seconds=self.poll_seconds,
            metrics_port=self.metrics_port,
            status_every=max(1, round(5 / self.poll_seconds)),  # a status line in the run's log every ~5 s
            # What the UI's launchpad offers for mission_plan: this demo's grid, not production's.
            mission_defaults=dict(
                first_ledger=self.span().first_ledger,
                last_ledger=self.span().last_ledger,
                ledgers_per_range=self.span().ledgers_per_range,
                overlap=self.span().overlap,
                parallelism=self.parallelism,
                max_parallelism=self.parallelism,
                lengths=DEMO_LENGTHS,
            ),
        )

    def plan_config(self, mission: str, previous_profile: str | None, order: str) -> dict[str, Any]:
        """`mission_plan`'s run config: the fields an operator fills in the launchpad."""
        span = self.span()
        return {
            "mission": mission,
            "first_ledger": span.first_ledger,
            "last_ledger": span.last_ledger,
            "ledgers_per_range": span.ledgers_per_range,
            "overlap": span.overlap,
            "order": order,
            "lengths": DEMO_LENGTHS,
            "parallelism": self.parallelism,
            "previous_profile": previous_profile or "",
        }
