"""A seed-shaped mission: ~4000 ranges whose costs follow the system we replace.

Data, not a cluster: each range's clean runtime, memory and disk, and for one
mission's draw which ranges a spot reclaim hits and how much the runtimes
wander from the last mission. The shape (`WorkloadShape`) is calibrated to the
seed's runs at 16000 ledgers per range:

    runtime   p25 ~770 s, p50 ~2300 s, max ~5.9 h; longest at the tip, and a
              band around 41-45M ledgers about as long as the tip
    anon peak from under 1 GiB (old ledgers) to ~14 GiB (tip)
    reclaims  ~7% of ranges once per mission; a handful of ranges peak above
              the unprofiled 12 GiB limit and OOM once in a mission without a profile

`tests/sim/test_workload.py` holds those figures. Everything is derived from
(seed, range) with sha256, so a benchmark, a test and a re-run see the same
mission. Pure: no dagster, no kubernetes.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.ranges import MAX_RANGES, MissionSpan, plan_ranges
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange, parse_key
from catchup_assets.sim.model import SETUP_SECONDS
from catchup_assets.store.tables import PROFILE_SCHEMA, Table, table


@dataclass(frozen=True)
class WorkloadShape:
    """The curve a range's cost follows along history; log-interpolated by heaviness."""

    seconds: tuple[float, float] = (240.0, 18_300.0)  # a range at genesis .. at the tip
    exponent: float = 0.95  # heaviness = position ** exponent, before the band
    band: tuple[int, int] = (41_000_000, 45_000_000)  # ledgers as heavy as the tip
    band_height: float = 0.98
    peak_anon_bytes: tuple[int, int] = (int(0.55 * GiB), int(10.2 * GiB))
    # A handful of heavy ranges peak well above the curve, up to ~14 GiB: above the
    # unprofiled limit (12 GiB), so a mission without a profile OOMs on each once.
    spikes: int = 6
    spike_bytes: tuple[int, int] = (int(12.6 * GiB), int(14.2 * GiB))
    replay_share: float = 0.45  # a resumed attempt skips bucket apply, where memory peaks
    ephemeral_bytes: tuple[int, int] = (int(1.5 * GiB), 90 * GiB)
    tx_per_ledger: tuple[float, float] = (2.0, 900.0)
    noise: float = 0.15  # per range, on runtime; a third of it on memory
    disruption_share: float = 0.07
    mission_jitter: float = 0.05  # how far one mission's runtimes wander from the last's
    memory_jitter: float = 0.0  # the same for its peaks (lognormal sigma); 0: peaks repeat exactly
    # A fresh start's setup (archive state, ledger chain, bucket apply) at genesis .. at the tip,
    # part of `seconds`; it grows with the bucket list. An assumption, not a measurement
    # (sim/model.py SETUP_SECONDS says why); issue 25's benchmark sets the tip to 600/1800/3600.
    setup_seconds: tuple[float, float] = SETUP_SECONDS


@dataclass(frozen=True)
class WorkloadRange:
    """One range's clean cost: a fresh start that runs to the end uninterrupted."""

    range: LedgerRange
    seconds: float
    peak_anon_bytes: int
    replay_anon_bytes: int
    peak_working_set_bytes: int
    peak_ephemeral_bytes: int
    tx_apply_count: int
    setup_seconds: float = 0.0  # of `seconds`, before the first replayed checkpoint

    @property
    def key(self) -> str:
        return self.range.key


@dataclass(frozen=True)
class RangeDraw:
    """What one mission does to a range: its runtime factor, and a reclaim (if any)."""

    seconds_factor: float
    disrupt_at: float | None  # fraction of the clean run after which a spot reclaim hits
    peak_factor: float = 1.0  # this mission's peaks against the profile's


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256(":".join(["catchup-workload", *map(str, parts)]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _lerp_log(lo: float, hi: float, h: float) -> float:
    return lo * (hi / lo) ** h


@dataclass(frozen=True)
class Workload:
    """The ranges of a seed-shaped mission and their costs."""

    ranges: int = 4000
    ledgers_per_range: int = 16_000
    seed: int = 0
    shape: WorkloadShape = WorkloadShape()

    def __post_init__(self) -> None:
        if not 1 <= self.ranges <= MAX_RANGES:
            raise ConfigError(f"workload 'ranges' must be 1..{MAX_RANGES} (a mission's max_ranges), got {self.ranges}")

    @property
    def span(self) -> MissionSpan:
        return MissionSpan(1, self.ranges * self.ledgers_per_range, self.ledgers_per_range)

    def heaviness(self, ledger: float) -> float:
        """0 at genesis, 1 at the tip, ~band_height across the band."""
        s = self.shape
        tip = self.ranges * self.ledgers_per_range
        base = min(max(ledger / tip, 0.0), 1.0) ** s.exponent
        rise = 1.0 / (1.0 + math.exp(-(ledger - s.band[0]) / 250_000))
        fall = 1.0 / (1.0 + math.exp((ledger - s.band[1]) / 250_000))
        return base + max(s.band_height - base, 0.0) * rise * fall

    def cost(self, r: LedgerRange, spike: bool = False) -> WorkloadRange:
        s = self.shape
        h = self.heaviness((r.first + r.last) / 2)
        rng = _rng(self.seed, r.key)
        scale = r.length / self.ledgers_per_range  # the tip range may be partial
        seconds = _lerp_log(*s.seconds, h) * scale * math.exp(rng.uniform(-s.noise, s.noise))
        peak = _lerp_log(*s.peak_anon_bytes, h) * (1 + rng.uniform(-s.noise / 3, s.noise / 3))
        if spike:
            peak = rng.uniform(*s.spike_bytes)
        ws = peak * (1.3 + 0.5 * rng.random())  # page cache on top of anon (L19)
        # Setup does not shrink with a partial range; it never takes more than half the run.
        setup = min(_lerp_log(s.setup_seconds[0], max(s.setup_seconds), h), seconds / 2)
        return WorkloadRange(
            range=r,
            seconds=seconds,
            peak_anon_bytes=int(peak),
            replay_anon_bytes=int(peak * s.replay_share),
            peak_working_set_bytes=int(ws),
            peak_ephemeral_bytes=int(_lerp_log(*s.ephemeral_bytes, h) * (0.9 + 0.2 * rng.random())),
            tx_apply_count=int(_lerp_log(*s.tx_per_ledger, h) * r.length),
            setup_seconds=setup,
        )

    @cached_property
    def costs(self) -> tuple[WorkloadRange, ...]:
        """Every range, ascending by ledger."""
        planned = plan_ranges(self.span)
        heavy = [r for r in planned if self.heaviness((r.first + r.last) / 2) >= 0.8]
        spikes = set(_rng(self.seed, "spikes").sample(heavy, min(self.shape.spikes, len(heavy))))
        return tuple(self.cost(r, r in spikes) for r in planned)

    @cached_property
    def by_key(self) -> dict[str, WorkloadRange]:
        return {c.key: c for c in self.costs}

    def cost_of(self, key: str) -> WorkloadRange:
        """The clean cost of any range of the span: a grid range's own, else built from the grid ranges
        it overlaps (issue 25: a cut piece or a merged run), as a real catchup of those ledgers pays it.

        It pays the setup of the grid range holding its first ledger (the bucket list there), then each
        overlapped range's replay pro rata to the ledgers it shares; memory and disk peak as the largest
        of theirs (every ledger of them is replayed, the heaviest last)."""
        if (own := self.by_key.get(key)) is not None:
            return own
        r = parse_key(key)
        size = self.ledgers_per_range
        grid = self.costs[(r.first - 1) // size : (r.last - 1) // size + 1]
        if not grid or grid[0].range.first > r.first or grid[-1].range.last < r.last:
            raise ConfigError(f"range {key} is outside the workload's span 1..{self.span.last_ledger}")
        shared = [(c, min(c.range.last, r.last) - max(c.range.first, r.first) + 1) for c in grid]
        replay = sum((c.seconds - c.setup_seconds) * n / c.range.length for c, n in shared)
        peak = max(c.peak_anon_bytes for c in grid)
        return WorkloadRange(
            range=r,
            seconds=grid[0].setup_seconds + replay,
            peak_anon_bytes=peak,
            replay_anon_bytes=int(peak * self.shape.replay_share),
            peak_working_set_bytes=max(c.peak_working_set_bytes for c in grid),
            peak_ephemeral_bytes=max(c.peak_ephemeral_bytes for c in grid),
            tx_apply_count=sum(c.tx_apply_count * n // c.range.length for c, n in shared),
            setup_seconds=grid[0].setup_seconds,
        )

    def __iter__(self) -> Iterator[WorkloadRange]:
        return iter(self.costs)

    def draw(self, key: str, mission_seed: int) -> RangeDraw:
        """What mission `mission_seed` does to range `key`: the same answer every time."""
        s = self.shape
        rng = _rng(self.seed, "mission", mission_seed, key)
        factor = math.exp(rng.gauss(0.0, s.mission_jitter)) if s.mission_jitter else 1.0
        disrupt = rng.uniform(0.05, 0.95) if rng.random() < s.disruption_share else None
        # Drawn last, and only when set: the draws before stay what every earlier benchmark saw.
        peak = math.exp(rng.gauss(0.0, s.memory_jitter)) if s.memory_jitter else 1.0
        return RangeDraw(factor, disrupt, peak)

    def profile_table(self, mission: str = "workload-model") -> Table:
        """The profile a clean mission over this workload would measure (range_profile.parquet)."""
        rows = [
            {
                "range_key": c.key,
                "first_ledger": c.range.first,
                "last_ledger": c.range.last,
                "peak_anon_bytes": c.peak_anon_bytes,
                "peak_working_set_bytes": c.peak_working_set_bytes,
                "peak_ephemeral_bytes": c.peak_ephemeral_bytes,
                "oom_floor_bytes": 0,
                "seconds": c.seconds,
                "wall_seconds": c.seconds,
                "tx_apply_count": c.tx_apply_count,
                "tx_apply_seconds": c.seconds * 0.8,
                "setup_seconds": c.setup_seconds,
                "replay_seconds": c.seconds - c.setup_seconds,
                "attempts": 1,
                "oom_count": 0,
                "chain_attempts": 1,
                "outcomes": "ok",
                "completed": True,
                "mission": mission,
            }
            for c in self.costs
        ]
        return table(rows, PROFILE_SCHEMA)
