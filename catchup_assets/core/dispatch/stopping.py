"""An operator's stop: new dispatches end at once, the attempts in flight are shut down
within a grace (L37) and recorded `stopped`, charged to no budget, so a later run resumes them.

`stop()` only sets flags: a signal handler calls it (mission/stop_signals.py), between any
two bytecodes of a pass, so it takes no lock and logs nothing. The pass in progress
submits nothing more, the loop ends instead of sleeping, and `_stop_attempts` does the
stopping deliberately: the backend's `shutdown`, then one record per attempt it ended.
An attempt that ended on its own meanwhile keeps its own verdict; one the stop ended is
`stopped` (the local supervisor says so itself; a deleted Job is recorded so here).
"""

from __future__ import annotations

import logging

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.ports import AttemptState, TransientBackendError
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)
STOP_ROUNDS = 3  # shutdowns per stop: the first, and two for attempts that raced it


class Stopping:
    """The Dispatcher's stop, a part of `reconciler.Dispatcher` (its constructor sets up
    the state: _stop, _stop_why)."""

    def stop(self, why: str = "stopped by the operator") -> None:
        """Stop the run: no new dispatch, in-flight attempts stopped and recorded `stopped`."""
        if not self._stop:
            self._stop_why = why
        self._stop = True
        if hasattr(self.clock, "woken"):
            self.clock.woken = True  # a real clock's sleep ends now, not after the poll

    @property
    def stopped(self) -> str | None:
        """Why the run was stopped, or None."""
        return self._stop_why if self._stop else None

    def _mine_live(self, when: str) -> dict[tuple[str, int], AttemptState] | None:
        try:
            states = self.backend.observe()
        except TransientBackendError as exc:
            self._transient(f"observe {when} the stop", exc)
            return None
        return {(s.range_key, s.attempt): s for s in states if s.range_key in self.by_key}

    def _finish_now(self, st: AttemptState) -> bool:
        """Finish an attempt the stop ended, its final read retried now (bounded by collect_tries)
        rather than on a later pass: the run ends after this, and an attempt left unrecorded
        would wait for the next run to say what became of it."""
        return any(self._finish(st) for _ in range(self.cfg.collect_tries))

    def _stop_attempts(self) -> int:
        """Shut the live attempts down (L37) and record each one the shutdown ended.

        Owed a record: every attempt of this run not done-marked, live or already ended
        (one that ended on its own since the last pass keeps its own verdict). A shutdown
        can return while one of them still runs (a local supervisor that started as it was
        fenced, a pod created as its Job was deleted): it is shut down again, up to
        STOP_ROUNDS times, so nothing the stop saw is left unrecorded without saying so.
        """
        why = self._stop_why or "stopped by the operator"
        grace = self.cfg.stop_grace_seconds
        before = self._mine_live("before") or {}
        owed = {i: s for i, s in before.items() if not self.records.is_done(*i)}
        log.warning(
            "mission %s: %s: new dispatches stopped; stopping %d attempts in flight within %g s (L37)",
            self.name,
            why,
            sum(1 for s in owed.values() if s.live),
            grace,
        )
        recorded = 0
        for _ in range(STOP_ROUNDS):
            if not owed:
                break
            left = set(self.backend.shutdown(grace)) if any(s.live for s in owed.values()) else set()
            after = self._mine_live("after")
            if after is None:
                break  # the backend cannot tell now: the next run reads what the attempts left
            owed.update({i: s for i, s in after.items() if s.live and i not in owed and not self.records.is_done(*i)})
            for ident, st in sorted(owed.items()):
                if st.attempt_id in left:
                    log.error("attempt %s still runs after the %g s grace: a later run adopts it", st.attempt_id, grace)
                    del owed[ident]
                elif (now := after.get(ident)) is None:
                    self._record_stopped(st, why)
                    recorded += 1
                    del owed[ident]
                elif not now.live:
                    if self._finish_now(now):
                        recorded += 1
                    del owed[ident]  # recorded, or its final read gave up and the next run reads it
                else:
                    owed[ident] = now  # still running after the shutdown returned: shut down again
        for ident in sorted(owed):
            log.error("attempt %s a%d not recorded by the stop: a later run reads what it left", *ident)
        log.warning(
            "mission %s: %s: %d attempts stopped and recorded, charged to no budget; a later run resumes them",
            self.name,
            why,
            recorded,
        )
        return recorded

    def _record_stopped(self, st: AttemptState, why: str) -> None:
        """An attempt the backend removed outright (its Job deleted): `stopped`, done mark last."""
        ident = (st.range_key, st.attempt)
        if self.records.is_done(*ident):
            return
        prior = self._recs[st.range_key].get(st.attempt)
        seconds, estimated = self._seconds(st, prior)
        rec = AttemptRecord(
            mission=self.name,
            range_key=st.range_key,
            attempt=st.attempt,
            outcome=Outcome.STOPPED.value,
            reason=f"{why}: removed by the shutdown (L37)",
            started_at=st.started_at,
            last_seen_at=self._last_seen.pop(ident, None),
            seconds=seconds,
            seconds_estimated=estimated,
            peak_anon_bytes=st.peaks.anon_bytes,
            peak_working_set_bytes=st.peaks.working_set_bytes,
            peak_ephemeral_bytes=st.peaks.ephemeral_bytes,
            memory_limit_bytes=None if prior and prior.memory_limit_bytes else st.memory_limit_bytes,
            tier=None if prior and prior.tier else st.tier,
            node=st.node,
        )
        self._recs[st.range_key][st.attempt] = self._write(rec, prior)
        self.records.mark_done(*ident)  # last (L32)
        self._done[st.range_key].add(st.attempt)
