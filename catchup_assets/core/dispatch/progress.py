"""The mission's time to go as the dispatcher sees it, a part of the `Dispatcher` (issue 36 item 2).

Each pass hands it what the backend says is in flight; it answers from the last estimate and
makes a new one at most every `every_seconds`: the band's draws schedule every range left
(~0.3 s at 4000), which a pass a second must not pay each time. What is left, what each
range costs and what this mission has shown of its pace are read from the range book and
the profile; the arithmetic is core/forecast/time_to_go.py's.
"""

from __future__ import annotations

from collections.abc import Mapping

from catchup_assets.core.dispatch.ports import AttemptState, Phase
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.results import RangeStatus
from catchup_assets.core.forecast.time_to_go import Done, InFlight, TimeToGo, time_to_go
from catchup_assets.core.size.measures import ProfileIndex, profiled_seconds
from catchup_assets.core.values.ledger_range import LedgerRange


class Progress:
    """The latest time to go of the ranges this dispatcher was given (in dispatch order)."""

    def __init__(
        self,
        ranges: Mapping[str, LedgerRange],
        profile: ProfileIndex | None,
        book: RangeBook,
        clock,
        sigma: float = 0.1,
        every_seconds: float = 30.0,
    ) -> None:
        self._ranges, self._book, self.clock = ranges, book, clock
        self._sigma, self.every_seconds = sigma, every_seconds
        self._predicted = profiled_seconds(profile, ranges)
        self.latest: TimeToGo | None = None
        self._at = float("-inf")

    def estimate(self, mine: list[AttemptState], slots: int) -> TimeToGo:
        """The time to go, new if the last is `every_seconds` old (or nothing was estimated yet)."""
        now = self.clock.time()
        if self.latest is not None and now - self._at < self.every_seconds:
            return self.latest
        book = self._book
        live = {s.range_key: s for s in mine if s.live}
        flight = [
            InFlight(self._predicted[k], now - s.started_at if s.phase is Phase.RUNNING and s.started_at else 0.0)
            for k, s in live.items()
            if not book.decided(k)
        ]
        waiting = [self._predicted[k] for k in self._ranges if k not in live and not book.decided(k)]
        done = [
            Done(self._predicted[k], float(r.row["seconds"]))
            for k, r in book.results.items()
            if r.status is RangeStatus.DONE and r.row and r.row.get("seconds") and k in self._predicted
        ]
        self.latest = time_to_go(flight, waiting, done, max(1, slots), self._sigma)
        self._at = now
        return self.latest
