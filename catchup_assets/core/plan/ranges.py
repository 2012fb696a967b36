"""Ledger ranges of a mission: the grid, and contiguous key groups.

Pure. Ranges sit on a fixed grid anchored at ledger 1, so a range's key is the
same in every mission while the tip grows; only the tip range is partial, and
its key changes as the tip moves. The range, its key and the dispatch order are
core/values/ledger_range.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.values.ledger_range import LedgerRange

CHECKPOINT_LEDGERS = 64
DEFAULT_LEDGERS_PER_RANGE = 16000
DEFAULT_OVERLAP = 320
MAX_RANGES = 20_000  # per mission; the seed's full history was ~4800 at its finest grid
MAX_LEDGER = 2**32 - 1  # ledger sequence numbers are uint32 in stellar-core
# auto: whichever of the two below finishes sooner at a bounded cost (core/plan/choose_lengths.py);
# uniform: the fixed grid; profile: the grid cut and merged to the previous profile (core/plan/cut.py).
LENGTHS = ("auto", "uniform", "profile")


@dataclass(frozen=True)
class MissionSpan:
    """What ledgers a mission covers and how they are cut."""

    first_ledger: int
    last_ledger: int
    ledgers_per_range: int = DEFAULT_LEDGERS_PER_RANGE
    overlap: int = DEFAULT_OVERLAP
    # A few times the seed's ~4800: a typo in one field must not plan millions of ranges.
    max_ranges: int = MAX_RANGES

    def __post_init__(self) -> None:
        problems = []
        for name in ("first_ledger", "last_ledger", "ledgers_per_range", "overlap", "max_ranges"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if self.first_ledger < 1:
            problems.append(f"first_ledger must be >= 1, got {self.first_ledger}")
        if self.last_ledger > MAX_LEDGER:
            problems.append(f"last_ledger must be a ledger number (<= {MAX_LEDGER}), got {self.last_ledger}")
        if self.last_ledger < self.first_ledger:
            problems.append(f"last_ledger ({self.last_ledger}) must be >= first_ledger ({self.first_ledger})")
        if self.ledgers_per_range <= 0 or self.ledgers_per_range % CHECKPOINT_LEDGERS:
            problems.append(
                f"ledgers_per_range must be a positive multiple of {CHECKPOINT_LEDGERS}, got {self.ledgers_per_range}"
            )
        if self.overlap < 0:
            problems.append(f"overlap must be >= 0, got {self.overlap}")
        if problems:
            raise ConfigError("; ".join(problems))
        # Counted before anything is built.
        n = (self.last_ledger - 1) // self.ledgers_per_range - (self.first_ledger - 1) // self.ledgers_per_range + 1
        if n > self.max_ranges:
            raise ConfigError(
                f"ledgers_per_range {self.ledgers_per_range} cuts ledgers {self.first_ledger}..{self.last_ledger} "
                f"into {n} ranges, more than max_ranges {self.max_ranges}"
            )
        if self.overlap >= self.ledgers_per_range:
            # An overlap of a range or more replays whole neighbours; 10^12 replayed every range from ledger 1.
            raise ConfigError(
                f"overlap ({self.overlap}) must be below ledgers_per_range ({self.ledgers_per_range}): "
                f"the ledgers each range replays before its own, {DEFAULT_OVERLAP} by default"
            )


def plan_ranges(span: MissionSpan) -> list[LedgerRange]:
    """Grid-aligned ranges covering the span, ascending; only the tip is partial."""
    size = span.ledgers_per_range
    lo = (span.first_ledger - 1) // size
    hi = (span.last_ledger - 1) // size
    return [LedgerRange(k * size + 1, min((k + 1) * size, span.last_ledger)) for k in range(lo, hi + 1)]


def contiguous_groups(keys: list[str], insertion_order: list[str]) -> tuple[list[list[str]], list[str]]:
    """Keys split into runs of consecutive positions in insertion order; and the keys not present.

    A Dagster run covers one contiguous span of the partition set's insertion order, so the
    sensor launches one run per group and the demo requires exactly one.
    """
    position = {k: i for i, k in enumerate(insertion_order)}
    missing = sorted(k for k in keys if k not in position)
    groups: list[list[str]] = []
    for k in sorted((k for k in set(keys) if k in position), key=position.__getitem__):
        if groups and position[groups[-1][-1]] + 1 == position[k]:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups, missing
