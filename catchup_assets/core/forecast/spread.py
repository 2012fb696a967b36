"""The forecast under noise: an expected makespan with a p10-p90 band, and the OOM retries to expect (issue 26 item 5).

Pure. The forecast (forecast.py) takes each range's profiled seconds as exact, but
a mission's runtimes wander from the last one's, and a mission of hundreds of 5-6 h
ranges ends with the slowest draw: the expected makespan is above the makespan of
the expected seconds. Here each draw multiplies every range's seconds by
exp(N(0, sigma)) (a lognormal, as runtime ratios between missions are), and its
peak by exp(N(0, memory_sigma)); a drawn peak above the range's memory request
OOMs once, costing `OOM_AT` of its run before the retry at the next rung runs it
whole. The ranges start in the dispatcher's order (fixed before the draws, from
the predicted seconds), and the list schedule gives the draw's makespan. Draws are
seeded: the same inputs give the same band.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError, check_number
from catchup_assets.core.forecast.forecast import list_schedule

# How far a range's seconds wander from one mission to the next when the profile's history
# cannot say: the seed's missions drifted ~5% (sim/workload.py mission_jitter); twice that, so
# a band from one mission is wide rather than falsely narrow.
DEFAULT_SIGMA = 0.10
# The same for peaks: an assumption (half the runtime default; peaks repeat more closely than runtimes,
# which share their node), until two missions' profiles of the same ranges measure it.
DEFAULT_MEMORY_SIGMA = 0.05
DRAWS = 200
# Share of a fresh run after which an OOM kills it: download and bucket apply, where memory
# peaks (kubesim/virtual.py oom_at, L6).
OOM_AT = 0.1


@dataclass(frozen=True)
class Band:
    slots: int
    expected_seconds: float  # the mean of the draws' makespans
    p10_seconds: float
    p90_seconds: float
    sigma: float  # the runtime spread drawn (the largest, if per range)
    memory_sigma: float
    draws: int
    expected_oom_retries: float  # per mission, the mean over the draws

    def line(self) -> str:
        oom = f"; ~{self.expected_oom_retries:.1f} OOM retries" if self.memory_sigma else ""
        return (
            f"expected makespan {self.expected_seconds / 3600:.2f} h at {self.slots} slots "
            f"(p10 {self.p10_seconds / 3600:.2f}, p90 {self.p90_seconds / 3600:.2f}; "
            f"runtime spread sigma {self.sigma:g}, {self.draws} seeded draws{oom})"
        )


def makespan_band(
    seconds: Sequence[float],
    slots: int,
    sigma: float | Sequence[float] = DEFAULT_SIGMA,
    *,
    peaks: Sequence[float] | None = None,
    requests: Sequence[float] | None = None,
    memory_sigma: float = 0.0,
    draws: int = DRAWS,
    seed: int = 0,
) -> Band:
    """The makespan's mean and p10-p90 over `draws` missions; `seconds` (and `peaks`, `requests`) in dispatch order."""
    n = len(seconds)
    sigmas = [float(sigma)] * n if isinstance(sigma, int | float) else [float(s) for s in sigma]
    if len(sigmas) != n:
        raise ConfigError(f"sigma: one per range, got {len(sigmas)} for {n} ranges")
    for s in sigmas:
        check_number("sigma", s, 0.0)
    check_number("memory_sigma", memory_sigma, 0.0)
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 2:
        raise ConfigError(f"draws must be an integer >= 2, got {draws!r}")
    sized = memory_sigma > 0 and peaks is not None and requests is not None
    if sized and not len(peaks) == len(requests) == n:
        raise ConfigError("peaks and requests: one per range")
    makespans, ooms = [], []
    for d in range(draws):
        rng = random.Random(f"makespan-band:{seed}:{d}")
        drawn, oomed = [], 0
        for i, s in enumerate(seconds):
            t = s * math.exp(rng.gauss(0.0, sigmas[i])) if sigmas[i] else s
            if sized and peaks[i] * math.exp(rng.gauss(0.0, memory_sigma)) > requests[i]:
                oomed += 1
                t *= 1.0 + OOM_AT
            drawn.append(t)
        makespans.append(list_schedule(drawn, slots))
        ooms.append(oomed)
    deciles = statistics.quantiles(makespans, n=10, method="inclusive")
    return Band(
        slots,
        statistics.fmean(makespans),
        deciles[0],
        deciles[-1],
        max(sigmas, default=0.0),
        memory_sigma if sized else 0.0,
        draws,
        statistics.fmean(ooms),
    )


def spread_from_history(predicted: Sequence[float | None], measured: Sequence[float | None]) -> float | None:
    """The runtime spread a mission showed against what its plan predicted: stdev of log(measured / predicted).

    None with fewer than 10 ranges having both (too few to say; the caller states its default)."""
    ratios = [math.log(m / p) for p, m in zip(predicted, measured, strict=True) if p and m and p > 0 and m > 0]
    return statistics.pstdev(ratios) if len(ratios) >= 10 else None
