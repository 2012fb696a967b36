"""The mission's health as the dispatcher watches it: stragglers (Z1), a stall (Z4), and
the circuit breaker's verdicts (breaker.py), which stop new dispatches.
"""

from __future__ import annotations

import logging

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.breaker import failure_signature
from catchup_assets.core.dispatch.ports import AttemptState, Phase
from catchup_assets.core.dispatch.results import DispatcherStuck, RangeStatus, Status
from catchup_assets.core.size.measures import measure_for
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)


# The checks on the mission's health the dispatcher reports as they change (see Dispatcher.on_health).
HEALTH_STALL = "not_stalled"
HEALTH_DISPATCH = "dispatching"


class Health:
    """The Dispatcher's health checks, a part of `reconciler.Dispatcher` (its constructor
    sets up the state: breaker, _blocked, _last_completion, _stall_warned, _overdue_warned)."""

    def _breaker_holds(self, key: str, attempt: int, outcome: Outcome, rec: AttemptRecord) -> bool:
        """True if this finished attempt's range is held, undecided, in a run of identical failures."""
        verdict = self.breaker.finished(
            key, attempt, outcome, failure_signature(rec.outcome, rec.exit_code, rec.reason)
        )
        self._judge_all(verdict.release)
        for k, a in verdict.spare:
            self._spare(k, a)
        if verdict.trip:
            self._block(verdict.trip)
        return verdict.hold

    def _judge_all(self, keys) -> None:
        for k in keys:
            self._judge(k)

    def _spare(self, key: str, attempt: int) -> None:
        """Not the range's fault: a later run grants it its budgets untouched."""
        self.records.mark_reset(key, attempt)
        self._reset_after[key] = max(self._reset_after.get(key, 0), attempt)

    def _block(self, cause: str) -> None:
        """Stop new dispatches for the rest of this run; live attempts run on."""
        log.error("mission %s: %s", self.name, cause)
        if self._blocked is None:
            self._blocked = cause
            self.on_health(HEALTH_DISPATCH, False, cause)

    def _status(
        self, in_flight: int, queued: int, live_total: int, mine: list[AttemptState], submitted: int = 0
    ) -> Status:
        now = self.clock.time()
        # Pending: a live attempt not yet running (no node, no worker started), or one submitted this pass.
        pending = len({s.range_key for s in mine if s.phase is Phase.PENDING}) + submitted
        completed = sum(1 for r in self._results.values() if r.status is RangeStatus.DONE)
        condemned = sum(1 for r in self._results.values() if r.status is RangeStatus.CONDEMNED)
        running = [s for s in mine if s.live and s.started_at]
        overdue = {s.attempt_id: over for s in running if (over := self._overrun(s, now)) is not None}
        for s in running:
            if s.attempt_id in overdue and s.attempt_id not in self._overdue_warned:
                self._overdue_warned.add(s.attempt_id)
                log.warning("range %s: overdue: %s", s.range_key, self._straggler(s, now))
        stragglers: tuple[str, ...] = ()
        if in_flight and queued == 0 and in_flight <= self._live_cap() // 2:
            # Work in flight, nothing queued, most slots idle: name the slow ones (Z1), the
            # most overdue against their profile first, else the longest running.
            slow = sorted(running, key=lambda s: (-overdue.get(s.attempt_id, 0.0), s.started_at))[:5]
            stragglers = tuple(self._straggler(s, now) for s in slow)
        stalled = now - self._last_completion
        # A stall (Z4): nothing completed for stall_seconds, and nothing in flight is on time:
        # hours without a completion are normal while every range running is a long one.
        is_stall = bool(running) and stalled > self.mission.stall_seconds and len(overdue) == len(running)
        if is_stall and not self._stall_warned:
            why = f"stalled: no range completed for {stalled:.0f} s and all {len(running)} in flight are overdue (Z4)"
            log.error("mission %s: %s", self.name, why)
            self._stall_warned = True
            self.on_health(HEALTH_STALL, False, why)
        elif not is_stall and self._stall_warned:
            self._stall_warned = False
            self.on_health(HEALTH_STALL, True, "a range completed, or attempts in flight are on time again")
        return Status(
            self.passes,
            completed,
            in_flight,
            queued,
            condemned,
            len(self.by_key),
            live_total - in_flight if live_total > in_flight else 0,
            stragglers,
            stalled,
            self.control.state(self.mission.parallelism) if self._control else "",
            pending,
        )

    def _overrun(self, st: AttemptState, now: float) -> float | None:
        """How far past its due time an attempt runs (running / due), or None while it is on time.

        Due: stall_factor x its profiled seconds, and never before stall_seconds."""
        r = self.by_key[st.range_key]
        m = measure_for(self.cfg.profile, r.first, r.last)  # a cut or merged range: what it overlaps
        predicted = m.seconds if m and m.seconds else 0.0
        due = max(self.mission.stall_seconds, self.mission.stall_factor * predicted)
        running = now - (st.started_at or now)
        return running / due if running > due else None

    def _straggler(self, st: AttemptState, now: float) -> str:
        running = now - (st.started_at or now)
        r = self.by_key[st.range_key]
        m = measure_for(self.cfg.profile, r.first, r.last)  # a cut or merged range: what it overlaps
        expected = f" (profiled {m.seconds:.0f}s)" if m and m.seconds else ""
        return f"{st.range_key} a{st.attempt} running {running:.0f}s{expected}"

    def _failed_pass(self, exc: Exception, streak: tuple[str, int]) -> tuple[str, int]:
        """Count a pass that raised; raise DispatcherStuck once the same failure repeats enough."""
        cause = f"{type(exc).__name__}: {exc}"
        n = streak[1] + 1 if streak[0] == cause else 1
        log.error("mission %s: pass %d failed (%d in a row): %s", self.name, self.passes, n, cause, exc_info=(n == 1))
        if n >= self.cfg.failing_passes_limit:
            self._snapshot()
            raise DispatcherStuck(f"mission {self.name}: the same failure on {n} consecutive passes: {cause}") from exc
        return cause, n
