"""What a range costs, by ledger: a setup paid once per range, and a replay rate per ledger (issue 25 item 2).

Pure. Built from a profile's measured ranges. A range pays, before its first
ledger replays, a setup (the history archive state, the ledger chain, the
bucket list at its first checkpoint) that grows toward the tip; then each
ledger replays at the rate of the history it sits in.

Both are step functions of the ledger, constant across each profiled range,
not piecewise-linear: a profile row measures one setup (at its first
checkpoint) and one mean rate over its ledgers, nothing in between, and a
step rate integrates back to exactly the row's replay seconds, so cutting or
merging ranges moves no work from one ledger to another (a line through the
rows' midpoints would add or lose work wherever the rate bends). Ledgers no
row covers take the rate and setup of the nearest row above, as sizing does
(L25); below the lowest row, the lowest's; above the top, the top's (recent
ledgers are the heaviest).

A row without `setup_seconds` (profiles written before the column) gets an
assumed setup: `tip_setup_seconds` at the profile's top ledger, falling
linearly to 0 at genesis (the bucket list, which setup downloads and applies,
grows with history), never more than half the row's seconds. An assumed 0
would make every cut look free, and the planner would cut to the checkpoint
grid; a setup assumed too high only cuts less. The default, 30 minutes, is
the middle of the issue's 10/30/60-minute cases: nothing measures it yet.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.measures import MAX_LEDGER, RangeMeasure

DEFAULT_TIP_SETUP_SECONDS = 1800.0
MAX_ASSUMED_SETUP_SHARE = 0.5  # an assumed setup never takes more than this share of a row's seconds


@dataclass(frozen=True)
class Segment:
    """Ledgers `first..last` at one setup and one replay rate."""

    first: int
    last: int
    setup_seconds: float
    replay_per_ledger: float


def _assumed_setup(m: RangeMeasure, top: int, tip_setup_seconds: float) -> float:
    return min(tip_setup_seconds * m.first_ledger / top, MAX_ASSUMED_SETUP_SHARE * m.seconds)


def segments_from_measures(
    measures: Iterable[RangeMeasure], tip_setup_seconds: float = DEFAULT_TIP_SETUP_SECONDS
) -> list[Segment]:
    """One segment per measured row with seconds and a first ledger, lowest first; gaps filled from above."""
    if not (tip_setup_seconds >= 0):  # NaN fails this too
        raise ConfigError(f"tip_setup_seconds must be >= 0, got {tip_setup_seconds!r}")
    rows = sorted(
        (m for m in measures if m.seconds is not None and m.first_ledger is not None), key=lambda m: m.last_ledger
    )
    if not rows:
        return []
    top = rows[-1].last_ledger
    out: list[Segment] = []
    floor = 1
    for m in rows:
        if m.first_ledger < floor:
            continue  # overlapping rows: vet_rows keeps the lower; so does this
        setup = m.setup_seconds if m.setup_seconds is not None else _assumed_setup(m, top, tip_setup_seconds)
        setup = min(setup, m.seconds)
        rate = (m.seconds - setup) / (m.last_ledger - m.first_ledger + 1)
        out.append(Segment(floor, m.last_ledger, setup, rate))  # ledgers below the row, unmeasured: its own
        floor = m.last_ledger + 1
    last = out[-1]
    out[-1] = Segment(last.first, MAX_LEDGER, last.setup_seconds, last.replay_per_ledger)  # above the top: the top's
    return out


class LedgerCost:
    """`setup(L)`, `rate(L)` and a range's predicted seconds, from segments covering ledgers 1..MAX_LEDGER."""

    def __init__(self, segments: list[Segment]):
        if not segments:
            raise ConfigError("a ledger cost model needs at least one profiled range with seconds and a first ledger")
        self._segments = segments
        self._lasts = [s.last for s in segments]
        # Replay seconds of every ledger up to each segment's end: a range's replay is two lookups.
        self._replay_to = list(accumulate(s.replay_per_ledger * (s.last - s.first + 1) for s in segments))

    @classmethod
    def from_measures(
        cls, measures: Iterable[RangeMeasure], tip_setup_seconds: float = DEFAULT_TIP_SETUP_SECONDS
    ) -> LedgerCost:
        return cls(segments_from_measures(measures, tip_setup_seconds))

    def _at(self, ledger: int) -> int:
        if not 1 <= ledger <= MAX_LEDGER:
            raise ConfigError(f"ledger {ledger} is not a ledger number (1..{MAX_LEDGER})")
        return bisect.bisect_left(self._lasts, ledger)

    def setup(self, ledger: int) -> float:
        """Seconds before the first ledger of a range starting at `ledger` replays."""
        return self._segments[self._at(ledger)].setup_seconds

    def rate(self, ledger: int) -> float:
        """Seconds to replay ledger `ledger`."""
        return self._segments[self._at(ledger)].replay_per_ledger

    def _replay_through(self, ledger: int) -> float:
        """Replay seconds of ledgers 1..ledger."""
        if ledger < 1:
            return 0.0
        i = self._at(ledger)
        s = self._segments[i]
        before = self._replay_to[i - 1] if i else 0.0
        return before + s.replay_per_ledger * (ledger - s.first + 1)

    def replay(self, first: int, last: int) -> float:
        """Replay seconds of ledgers `first..last`."""
        return self._replay_through(last) - self._replay_through(first - 1)

    def seconds(self, first: int, last: int) -> float:
        """Predicted seconds of a range `first..last`: its setup, then its ledgers."""
        return self.setup(first) + self.replay(first, last)
