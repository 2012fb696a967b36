"""Seeded profiles the workload model does not make, for the cut's robustness (issue 37 item 3).

The workload model (catchup_assets/sim/workload.py) has one shape: its heavy band
at 41-45M ledgers, its setup tied to heaviness from 30 s to the tip's. A planner
tuned on it could fail elsewhere, so each seed here draws its own:

    band       a heavy band at a random place (10-90% of history), 2-12% of it
               wide, from 0.8 to 1.15 of the tip's heaviness (heavier than the tip too),
               with edges from sharp to a few ranges soft
    setup      a fresh start's setup from A to B minutes along heaviness, A and B
               drawn from 5-60 min (so the old ranges can pay more than the young)
    sigma      the runtime spread between missions the plan is forecast under, 0.05-0.3
    curve      genesis 120-480 s, tip 3.5-6.5 h, exponent 0.7-1.3; per-range noise +-15%

A range's setup never takes more than half its run (as in the workload model: a
profile of 4-minute ranges with 30-minute setups is not one a mission measures).
Pure and seeded: the same seed gives the same rows.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.units import GiB
from catchup_assets.store.tables import PROFILE_SCHEMA, Table, table

LEDGERS_PER_RANGE = 16_000
PEAK_BYTES = (0.55 * GiB, 10.2 * GiB)  # the workload model's: a piece's tier follows its parent's


@dataclass(frozen=True)
class GeneratedShape:
    seed: int
    band: tuple[float, float]  # first and last share of history
    band_height: float  # heaviness inside the band, the tip's being 1
    edge: float  # share of history over which the band rises and falls
    setup_minutes: tuple[float, float]  # at heaviness 0 .. 1
    sigma: float
    seconds: tuple[float, float]  # a range at genesis .. at the tip
    exponent: float

    def band_ledgers(self, ranges: int) -> str:
        tip = ranges * LEDGERS_PER_RANGE / 1e6
        return f"{self.band[0] * tip:.1f}-{self.band[1] * tip:.1f}M"


def generated_shape(seed: int) -> GeneratedShape:
    rng = random.Random(f"generated-profile:{seed}")
    width = rng.uniform(0.02, 0.12)
    start = rng.uniform(0.10, 0.90 - width)
    return GeneratedShape(
        seed=seed,
        band=(start, start + width),
        band_height=rng.uniform(0.8, 1.15),
        edge=rng.uniform(0.0005, 0.01),
        setup_minutes=(rng.uniform(5.0, 60.0), rng.uniform(5.0, 60.0)),
        sigma=rng.uniform(0.05, 0.3),
        seconds=(rng.uniform(120.0, 480.0), rng.uniform(3.5, 6.5) * 3600),
        exponent=rng.uniform(0.7, 1.3),
    )


def heaviness(shape: GeneratedShape, x: float) -> float:
    """0 at genesis, 1 at the tip, about `band_height` across the band (x: share of history)."""
    base = min(max(x, 0.0), 1.0) ** shape.exponent
    rise = 1.0 / (1.0 + math.exp(max(-60.0, min(60.0, -(x - shape.band[0]) / shape.edge))))
    fall = 1.0 / (1.0 + math.exp(max(-60.0, min(60.0, (x - shape.band[1]) / shape.edge))))
    return base + max(shape.band_height - base, 0.0) * rise * fall


def span(ranges: int) -> MissionSpan:
    return MissionSpan(1, ranges * LEDGERS_PER_RANGE, LEDGERS_PER_RANGE)


def profile_table(shape: GeneratedShape, ranges: int = 4000) -> Table:
    """The profile a clean mission over this shape would measure (range_profile.parquet)."""
    rng = random.Random(f"generated-ranges:{shape.seed}")
    tip = ranges * LEDGERS_PER_RANGE
    rows = []
    for r in plan_ranges(span(ranges)):
        h = heaviness(shape, (r.first + r.last) / 2 / tip)
        seconds = _lerp_log(*shape.seconds, h) * math.exp(rng.uniform(-0.15, 0.15))
        setup = min(60.0 * _lerp_log(*shape.setup_minutes, h), seconds / 2)
        peak = int(_lerp_log(*PEAK_BYTES, h))
        rows.append(
            {
                "range_key": r.key,
                "first_ledger": r.first,
                "last_ledger": r.last,
                "peak_anon_bytes": peak,
                "peak_working_set_bytes": int(1.5 * peak),
                "peak_ephemeral_bytes": int(_lerp_log(1.5 * GiB, 90 * GiB, h)),
                "oom_floor_bytes": 0,
                "seconds": seconds,
                "wall_seconds": seconds,
                "tx_apply_count": int(_lerp_log(2.0, 900.0, h) * r.length),
                "tx_apply_seconds": seconds * 0.8,
                "setup_seconds": setup,
                "replay_seconds": seconds - setup,
                "attempts": 1,
                "oom_count": 0,
                "chain_attempts": 1,
                "outcomes": "ok",
                "completed": True,
                "mission": f"generated-{shape.seed}",
            }
        )
    return table(rows, PROFILE_SCHEMA)


def _lerp_log(lo: float, hi: float, h: float) -> float:
    return lo * (hi / lo) ** h
