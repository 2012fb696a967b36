"""Claims between dispatchers.

Whoever dispatches, a range has one live attempt and an attempt number is started
once: an attempt is claimed in the records before it is sized and submitted.
A young claim of another holder is its submit in flight, and its range waits.
"""

from __future__ import annotations

import logging

from catchup_assets.core.dispatch.ports import Records
from catchup_assets.core.dispatch.range_book import RangeBook

log = logging.getLogger(__name__)


class ClaimBook:
    """Claims this dispatcher takes, and how it reads the claims of others in its range book."""

    def __init__(self, book: RangeBook, records: Records, clock, grace_seconds: float, recheck_seconds: float) -> None:
        self.book, self.records, self.clock = book, records, clock
        self.holder = book.holder
        self.grace_seconds, self.recheck_seconds = grace_seconds, recheck_seconds
        self._checked: dict[str, float] = {}  # when a foreign-claimed range was last read

    def _open(self, key: str) -> dict[int, float]:
        return {a: at for a, at in self.book.claims[key].items() if a not in self.book.done[key]}

    def pending_elsewhere(self, key: str) -> int | None:
        """The highest attempt others claimed and left (0 if none), or None while one's submit is in flight."""
        now = self.clock.time()
        open_claims = self._open(key)
        young = any(now - at < self.grace_seconds for at in open_claims.values())
        if young:
            if now - self._checked.get(key, float("-inf")) < self.recheck_seconds:
                return None
            self._checked[key] = now
            self.book.refresh(key)  # finished and released unseen? its records say so
            if self.book.decided(key):
                return None
            open_claims = self._open(key)
            if any(now - at < self.grace_seconds for at in open_claims.values()):
                return None  # still in flight
        elif open_claims:
            # Past the grace and not seen: finished and released by its claimer, or never
            # started. Only the records can tell: read them before spending the number.
            self.book.refresh(key)
            if self.book.decided(key):
                return None
            open_claims = self._open(key)
        return max(open_claims, default=0)  # claimed, never started: that number is spent

    def claim(self, key: str, attempt: int) -> bool:
        """Claim the attempt for this dispatcher; False if another holder has it or it is finished.

        May run on a submit pool's thread (fill.py): it touches only this range's state."""
        if not self.records.claim(key, attempt, self.holder, self.clock.time()):
            # Whoever dispatches, a range has one live attempt: read what was done with it.
            self.book.refresh(key)
            if attempt in self.book.done[key] or self.book.decided(key):
                return False  # finished (by another dispatcher, or by this run before a restart)
            if self.records.claim_holder(key, attempt) != self.holder:
                log.warning("range %s attempt %d is claimed by another dispatcher: not started here", key, attempt)
                return False
            log.info("attempt %s a%d was claimed by this run before a restart: submitted again", key, attempt)
        self.book.mine.add((key, attempt))
        return True
