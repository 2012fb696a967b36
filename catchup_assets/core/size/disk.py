"""How much node disk (ephemeral storage) a range's attempt asks for, in ephemeral storage mode.

Pure. A measured range asks for its profile's `peak_ephemeral_bytes` times a
margin; each `evicted` outcome of the range (over its own disk: L4) multiplies
that by `factor`, up to `cap_bytes`, as each OOM climbs the memory ladder (L6).
A range the profile has no disk peak for keeps the deployment's flat request
and limit (the chart's ephemeralRequest/ephemeralLimit) until it is evicted;
then it climbs from `unprofiled_bytes`. The seed sized disk the same way
(issue 15); a flat 35/40 Gi either wastes a node's disk on old ranges or gets
the tip's evicted.
"""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError, check_number
from catchup_assets.core.units import GiB


@dataclass(frozen=True)
class DiskPolicy:
    margin: float = 1.25
    factor: float = 1.5  # per eviction of the range's own disk
    cap_bytes: int = 200 * GiB  # what a node's disk can give one range
    # Where an unmeasured range climbs from after an eviction: the chart's flat ephemeralLimit.
    unprofiled_bytes: int = 40 * GiB

    def __post_init__(self) -> None:
        check_number("disk 'margin'", self.margin, 1.0)
        # 1.0 would retry an evicted range at the very limit it was evicted at (as L6 for memory).
        check_number("disk 'factor'", self.factor, 1.0, above=True)
        if self.cap_bytes <= 0 or self.unprofiled_bytes <= 0:
            raise ConfigError("disk 'cap_bytes' and 'unprofiled_bytes' must be > 0")

    def ephemeral_for(self, peak_bytes: int | None, n_evicted: int) -> int | None:
        """Bytes of ephemeral storage for the next attempt; None: the deployment's flat request and limit."""
        if peak_bytes is None or peak_bytes <= 0:
            if n_evicted == 0:
                return None
            base = self.unprofiled_bytes
        else:
            base = int(peak_bytes * self.margin)
        return min(int(base * self.factor**n_evicted), self.cap_bytes)

    def scaled(self, factor: float) -> DiskPolicy:
        return DiskPolicy(self.margin, self.factor, int(self.cap_bytes * factor), int(self.unprofiled_bytes * factor))
