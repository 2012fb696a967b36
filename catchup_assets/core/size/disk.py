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

from catchup_assets.core.errors import bounded, check_bounds
from catchup_assets.core.units import GiB

# The upper bound of a range's disk (issue 45 item 5): 64 TiB, the largest one volume (EBS io2/gp3) holds.
MAX_DISK_BYTES = 64 * 1024 * GiB


@dataclass(frozen=True)
class DiskPolicy:
    margin: float = bounded(1.25, ge=1, le=10)
    # Per eviction of the range's own disk; 1.0 would retry an evicted range at the very limit it was
    # evicted at (as L6 for memory).
    factor: float = bounded(1.5, gt=1, le=10)
    cap_bytes: int = bounded(200 * GiB, gt=0, le=MAX_DISK_BYTES)  # what a node's disk can give one range
    # Where an unmeasured range climbs from after an eviction: the chart's flat ephemeralLimit.
    unprofiled_bytes: int = bounded(40 * GiB, gt=0, le=MAX_DISK_BYTES)

    def __post_init__(self) -> None:
        check_bounds(self, "disk")

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
