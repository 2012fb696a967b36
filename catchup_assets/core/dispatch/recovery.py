"""What a dispatcher knows, rebuilt from the records (L10), and the decisions it takes from them.

On start every record is read; later one range is read afresh when another dispatcher
may have run it. Each range is decided from its own finished attempts (L5, L6).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from catchup_assets.core.aggregate.profile_table import range_row
from catchup_assets.core.classify.outcomes import Action, Outcome, PastAttempt, decide
from catchup_assets.core.dispatch.results import RangeResult, RangeStatus
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)


def past_attempts(
    recs: Mapping[int, AttemptRecord], done: set[int] | frozenset[int], reset_after: int = 0
) -> list[PastAttempt]:
    """A range's finished attempts as decisions read them: done-marked, after the last reset."""
    return [
        PastAttempt(a, Outcome(recs[a].outcome), recs[a].memory_limit_bytes, recs[a].reason or "")
        for a in sorted(done)
        if a in recs and recs[a].outcome is not None and a > reset_after
    ]


class Recovery:
    """The Dispatcher's recovery and decisions, a part of `reconciler.Dispatcher` (its
    constructor sets up the state: _recs, _done, _reset_after, _recovered, _results, _mine)."""

    def recover(self) -> None:
        """Rebuild what this dispatcher knows from the records (L10); the first pass calls it.

        Kept out of the constructor, which does no I/O: reading every record,
        granting an operator's run fresh budgets, and freeing the data of ranges
        a crash left completed but unreleased (L3).
        """
        if self._recovered:
            return
        # File times are the wall clock's, whatever clock drives the passes.
        self.records.sweep_tmp(time.time())
        recs, done = self.records.load(self.by_key)
        for (k, a), rec in recs.items():
            self._recs[k][a] = rec
        for k, a in done:
            self._done[k].add(a)
        # Attempts this run claimed before it restarted (a retried step keeps its holder) are
        # its own: their records were just read, so flushes need no re-read to merge.
        for k, a in recs:
            if (k, a) not in done and k in self.by_key and self.records.claim_holder(k, a) == self.holder:
                self._mine.add((k, a))
        self._reset_after = self.records.load_resets(self.by_key) if self.by_key else {}
        if self.cfg.reset_condemned:
            for key in self.by_key:
                if self._decide(key).action is Action.CONDEMNED:
                    last = max(self._done[key])
                    self.records.mark_reset(key, last)
                    self._reset_after[key] = last
                    log.warning("range %s was condemned; this run grants it fresh budgets", key)
        self._recovered = True
        for key in self.by_key:
            self._judge(key, already=True)
            if key in self._results and self._results[key].status is RangeStatus.DONE:
                self._release_range(key)  # a crash may have come between done and release (L3)

    def _refresh(self, key: str) -> None:
        """Read one range afresh: another dispatcher may have run and recorded attempts of it."""
        recs, done, claims = self.records.load_range(key, other_than=self.holder)
        for attempt, rec in recs.items():
            self._recs[key][attempt] = rec
        self._done[key] |= done
        self._claims[key] = claims
        self._judge(key, already=True)

    def _history(self, key: str) -> list[PastAttempt]:
        return past_attempts(self._recs[key], self._done[key], self._reset_after.get(key, 0))

    def _decide(self, key: str):
        return decide(self._history(key), self.mission.retry, self.mission.placement.ladder.cap_bytes)

    def _judge(self, key: str, already: bool = False) -> None:
        decision = self._decide(key)
        if not decision.final or key in self._results:
            return
        recs = list(self._recs[key].values())
        last = max(recs, key=lambda r: r.attempt)
        row = range_row(recs)
        result = RangeResult(
            key,
            RangeStatus(decision.action.value),
            decision.reason,
            row,
            len([r for r in recs if r.outcome is not None]),
            row["outcomes"] if row else " ".join(r.outcome or "?" for r in sorted(recs, key=lambda r: r.attempt)),
            last.tier,
            last.memory_limit_bytes,
            last.log_path,
        )
        self._results[key] = result
        if decision.action is Action.CONDEMNED:
            # Loudly, on its own line, the moment it is seen (L36); dispatch goes on (L9).
            log.error("range %s condemned: %s", key, decision.reason)
        else:
            self._last_completion = self.clock.time()
        self.on_result(result, already)
