"""How a scaled-down deployment (the demo) stands for production: memory and time factors, and their label.

Pure. The demo runs memory x `memory` (MiB for GiB) and a simulated stellar-core
`time` times faster than the real one, so a range measured at 0.8 s stands for
0.8 x `time` production seconds. Every figure an operator compares across the
CLI and the UI (hours, node-hours, dollars, GiB) is the measured one put through
this value once, where it is read: the costing and forecasting functions then
see production seconds and need no scale of their own. Dollars need no memory
factor (a scaled pod takes the same share of a node scaled alike).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from catchup_assets.core.units import GiB

# Fields of the profile, the tier map and the plan that grow with measured (deployment) time.
TIME_FIELDS = ("seconds", "wall_seconds", "predicted_seconds", "node_hours")


@dataclass(frozen=True)
class Scale:
    memory: float = 1.0  # deployment bytes per production byte
    time: float = 1.0  # production seconds per measured second

    @property
    def full(self) -> bool:
        return self.memory == 1 and self.time == 1

    def seconds(self, measured: float | None) -> float | None:
        return None if measured is None else measured * self.time

    def gib(self, deployment_bytes: float | None) -> float | None:
        """Deployment bytes as production GiB."""
        return None if deployment_bytes is None else deployment_bytes / self.memory / GiB

    def rows(self, rows: Iterable[Mapping[str, Any]], fields: Sequence[str] = TIME_FIELDS) -> list[dict[str, Any]]:
        """Rows with each field of `fields` at production time (the others as they are)."""
        out = []
        for r in rows:
            row = dict(r)
            for f in fields:
                if f in row:
                    row[f] = self.seconds(row[f])  # any figure proportional to time scales alike
            out.append(row)
        return out

    def label(self) -> str | None:
        """What the factors are, for beside the figures they scaled; None at full scale."""
        parts = []
        if self.time != 1:
            parts.append(f"measured seconds x {self.time:,.0f} (a simulated stellar-core)")
        if self.memory != 1:
            parts.append(
                f"memory x{self.memory:.3g} (each MiB requested here stands for "
                f"{1 / self.memory:.4g} MiB in production)"
            )
        if not parts:
            return None
        return (
            "production scale: "
            + " and ".join(parts)
            + "; hours, node-hours, GiB and dollars are production's, as the demo's summary prints them"
        )


FULL = Scale()  # production itself: every figure as measured
