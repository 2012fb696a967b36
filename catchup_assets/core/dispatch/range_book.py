"""What a dispatcher knows of its ranges, rebuilt from the records (L10), and the decisions it takes from them.

On start every record is read; later one range is read afresh when another dispatcher
may have run it. Each range is decided from its own finished attempts (L5, L6). The
book owns the attempt records, their done marks, the claims of other holders and the
ranges decided; every other part of the dispatcher reads them here and writes through it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from catchup_assets.core.aggregate.profile_table import range_row
from catchup_assets.core.classify.outcomes import Action, Decision, Outcome, PastAttempt, RetryPolicy, decide
from catchup_assets.core.dispatch.ports import Records
from catchup_assets.core.dispatch.results import RangeResult, RangeStatus
from catchup_assets.core.values.attempt_record import AttemptRecord, UnrecordableRecord, merge, unrecordable_fields

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


class RangeBook:
    """Each range's attempt records, done marks, resets and other holders' claims, and its verdict once final.

    `tell(result, already)` hears each verdict as it is reached (`already`: read from the
    records on start, not reached by this run)."""

    def __init__(
        self,
        keys: Iterable[str],
        records: Records,
        holder: str,
        retry: RetryPolicy,
        cap_bytes: int,
        tell: Callable[[RangeResult, bool], None],
        reset_condemned: bool = False,
    ) -> None:
        self.keys = list(keys)
        self.records = records
        self.holder = holder
        self._retry, self._cap_bytes, self._tell = retry, cap_bytes, tell
        self._reset_condemned = reset_condemned
        self.recs: dict[str, dict[int, AttemptRecord]] = {k: {} for k in self.keys}
        self.done: dict[str, set[int]] = {k: set() for k in self.keys}
        self.results: dict[str, RangeResult] = {}
        # Claims of other holders seen on the storage root, per range: attempt -> claimed at.
        self.claims: dict[str, dict[int, float]] = {k: {} for k in self.keys}
        # Attempts this dispatcher claimed and submitted: it alone writes them from memory.
        self.mine: set[tuple[str, int]] = set()
        self._reset_after: dict[str, int] = {}
        self._recovered = False

    def recover(self) -> list[str]:
        """Rebuild what is known from the records (L10), once; the ranges found complete, whose data
        a crash may have left unreleased between done and release (L3).

        Kept out of the constructor, which does no I/O: reading every record and
        granting an operator's run fresh budgets."""
        if self._recovered:
            return []
        # File times are the wall clock's, whatever clock drives the passes.
        self.records.sweep_tmp(time.time())
        recs, done = self.records.load(self.keys)
        for (k, a), rec in recs.items():
            self.recs[k][a] = rec
        for k, a in done:
            self.done[k].add(a)
        # Attempts this run claimed before it restarted (a retried step keeps its holder) are
        # its own: their records were just read, so flushes need no re-read to merge.
        for k, a in recs:
            if (k, a) not in done and k in self.recs and self.records.claim_holder(k, a) == self.holder:
                self.mine.add((k, a))
        self._reset_after = self.records.load_resets(self.keys) if self.keys else {}
        if self._reset_condemned:
            for key in self.keys:
                if self.decide(key).action is Action.CONDEMNED:
                    last = max(self.done[key])
                    self.records.mark_reset(key, last)
                    self._reset_after[key] = last
                    log.warning("range %s was condemned; this run grants it fresh budgets", key)
        self._recovered = True
        for key in self.keys:
            self.judge(key, already=True)
        return [k for k in self.keys if k in self.results and self.results[k].status is RangeStatus.DONE]

    def refresh(self, key: str) -> None:
        """Read one range afresh: another dispatcher may have run and recorded attempts of it."""
        recs, done, claims = self.records.load_range(key, other_than=self.holder)
        for attempt, rec in recs.items():
            self.recs[key][attempt] = rec
        self.done[key] |= done
        self.claims[key] = claims
        self.judge(key, already=True)

    def history(self, key: str) -> list[PastAttempt]:
        return past_attempts(self.recs[key], self.done[key], self._reset_after.get(key, 0))

    def decide(self, key: str) -> Decision:
        return decide(self.history(key), self._retry, self._cap_bytes)

    def judge(self, key: str, already: bool = False) -> None:
        """Decide the range from its finished attempts; a final verdict is kept and told once."""
        decision = self.decide(key)
        if not decision.final or key in self.results:
            return
        recs = list(self.recs[key].values())
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
        self.results[key] = result
        if decision.action is Action.CONDEMNED:
            # Loudly, on its own line, the moment it is seen (L36); dispatch goes on (L9).
            log.error("range %s condemned: %s", key, decision.reason)
        self._tell(result, already)

    def spare(self, key: str, attempt: int) -> None:
        """Not the range's fault: a later run grants it its budgets untouched."""
        self.records.mark_reset(key, attempt)
        self._reset_after[key] = max(self._reset_after.get(key, 0), attempt)

    def count(self, key: str, outcome: Outcome) -> int:
        """The range's finished attempts with this outcome (reclaims, OOMs, evictions size the next)."""
        recs = self.recs[key]
        return sum(1 for a in self.done[key] if a in recs and recs[a].outcome == outcome.value)

    def decided(self, key: str, status: RangeStatus | None = None) -> bool:
        result = self.results.get(key)
        return result is not None and (status is None or result.status is status)

    def tally(self, status: RangeStatus) -> int:
        return sum(1 for r in self.results.values() if r.status is status)

    def write(self, rec: AttemptRecord) -> AttemptRecord:
        """Write a record over what this book holds of the attempt; values it cannot hold are dropped
        with a warning naming them.

        A finished attempt whose evidence had such a value is recorded `unknown`, with
        the reason, once: a value that cannot be encoded must not fail the pass, and so
        every restart, forever.
        """
        ident = (rec.range_key, rec.attempt)
        prior = self.recs[rec.range_key].get(rec.attempt)
        if ident not in self.mine:
            # Another dispatcher may write this attempt too (its claimer, or a second run over
            # the same ranges): merge over what storage holds now, so neither blanks the other.
            stored = self.records.read_one(*ident)
            prior = merge(prior, stored) if stored is not None else prior
        try:
            written = self.records.write(rec, prior)
        except UnrecordableRecord as exc:
            log.error("range %s attempt %d: unrecordable values dropped: %s", rec.range_key, rec.attempt, exc)
            changes: dict = dict.fromkeys(unrecordable_fields(rec))
            if rec.outcome is not None:
                changes |= {"outcome": Outcome.UNKNOWN.value, "reason": f"evidence not recordable: {exc}"[:500]}
            written = self.records.write(replace(rec, **changes), prior)
        self.recs[rec.range_key][rec.attempt] = written
        return written

    def mark_done(self, key: str, attempt: int) -> None:
        """The attempt is finished for good: its done mark, always after its record (L32)."""
        self.records.mark_done(key, attempt)
        self.done[key].add(attempt)
