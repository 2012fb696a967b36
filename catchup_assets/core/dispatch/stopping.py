"""An operator's stop: new dispatches end at once, the attempts in flight are shut down
within a grace (L37) and recorded `stopped`, charged to no budget, so a later run resumes them.

`StopState.stop()` only sets flags: a signal handler calls it (mission/stop_signals.py), between
any two bytecodes of a pass, so it takes no lock and logs nothing. The pass in progress
submits nothing more, the loop ends instead of sleeping, and `stop_attempts` does the
stopping deliberately: the backend's `shutdown`, then one record per attempt it ended.
An attempt that ended on its own meanwhile keeps its own verdict; one the stop ended is
`stopped` (the local supervisor says so itself; a deleted Job is recorded so here).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Container

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.finish import Finisher
from catchup_assets.core.dispatch.ports import AttemptState, Backend, Records, TransientBackendError, deferred

log = logging.getLogger(__name__)

STOP_ROUNDS = 3  # shutdowns per stop: the first, and two for attempts that raced it
OPERATOR = "stopped by the operator"
STOPPED = Outcome.STOPPED.value


class StopState:
    """Whether, and why, an operator stopped the run; a stop wakes a sleeping clock."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.requested = False
        self._why: str | None = None

    def stop(self, why: str = OPERATOR) -> None:
        """Stop the run: no new dispatch, in-flight attempts stopped and recorded `stopped`."""
        if not self.requested:
            self._why = why
        self.requested = True
        if hasattr(self.clock, "woken"):
            self.clock.woken = True  # a real clock's sleep ends now, not after the poll

    @property
    def why(self) -> str | None:
        """Why the run was stopped, or None."""
        return self._why if self.requested else None


def _mine_live(
    name: str, backend: Backend, keys: Container[str], when: str
) -> dict[tuple[str, int], AttemptState] | None:
    try:
        states = backend.observe()
    except TransientBackendError as exc:
        deferred(name, f"observe {when} the stop", exc)
        return None
    return {(s.range_key, s.attempt): s for s in states if s.range_key in keys}


def stop_attempts(
    name: str, why: str, grace: float, backend: Backend, records: Records, keys: Container[str], finisher: Finisher
) -> int:
    """Shut the live attempts of `keys` down (L37) and record each one the shutdown ended; how many the records
    hold `stopped` (one that ended on its own first is recorded with its own verdict, and said apart).

    Owed a record: every attempt of this run not done-marked, live or already ended
    (one that ended on its own since the last pass keeps its own verdict). A shutdown
    can return while one of them still runs (a local supervisor that started as it was
    fenced, a pod created as its Job was deleted): it is shut down again, up to
    STOP_ROUNDS times, so nothing the stop saw is left unrecorded without saying so.
    """
    before = _mine_live(name, backend, keys, "before") or {}
    owed = {i: s for i, s in before.items() if not records.is_done(*i)}
    live = sum(1 for s in owed.values() if s.live)
    log.warning(
        "mission %s: %s: new dispatches stopped; stopping %d attempts in flight within %g s (L37)%s",
        name,
        why,
        live,
        grace,
        f"; {len(owed) - live} more ended on their own, recorded as they ended" if len(owed) > live else "",
    )
    recorded: list[tuple[str, int]] = []
    for _ in range(STOP_ROUNDS):
        if not owed:
            break
        try:
            left = set(backend.shutdown(grace)) if any(s.live for s in owed.values()) else set()
        except TransientBackendError as exc:  # e.g. an API server throttling past the pass's budget
            deferred(name, "the shutdown at the stop", exc)
            break  # the backend cannot tell now: the next run reads what the attempts left
        after = _mine_live(name, backend, keys, "after")
        if after is None:
            break  # the backend cannot tell now: the next run reads what the attempts left
        owed.update({i: s for i, s in after.items() if s.live and i not in owed and not records.is_done(*i)})
        for ident, st in sorted(owed.items()):
            if st.attempt_id in left:
                log.error("attempt %s still runs after the %g s grace: a later run adopts it", st.attempt_id, grace)
                del owed[ident]
            elif (now := after.get(ident)) is None:
                finisher.record_stopped(st, why)
                recorded.append(ident)
                del owed[ident]
            elif not now.live:
                if finisher.finish_now(now):
                    recorded.append(ident)
                del owed[ident]  # recorded, or its final read gave up and the next run reads it
            else:
                owed[ident] = now  # still running after the shutdown returned: shut down again
    for ident in sorted(owed):
        log.error("attempt %s a%d not recorded by the stop: a later run reads what it left", *ident)
    outcomes = _outcomes(records, recorded)
    stopped = outcomes.pop(STOPPED, 0)
    ended = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    log.warning(
        "mission %s: %s: %d attempts stopped, recorded `stopped`, charged to no budget; a later run resumes them%s",
        name,
        why,
        stopped,
        f"; {sum(outcomes.values())} ended on their own first, recorded {ended}" if outcomes else "",
    )
    return stopped


def _outcomes(records: Records, idents: list[tuple[str, int]]) -> dict[str, int]:
    """What the records hold for the attempts the stop recorded, by outcome: the log says what a reader finds."""
    tally: Counter[str] = Counter()
    for key, attempt in idents:
        rec = records.read_one(key, attempt)
        tally[rec.outcome if rec is not None else "unreadable"] += 1
    return dict(tally)
