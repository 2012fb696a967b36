"""The mission's health as the dispatcher watches it: stragglers (Z1), a stall (Z4), and
the circuit breaker's verdicts (breaker.py), whose trip stops new dispatches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.breaker import Breaker, Verdict, failure_signature
from catchup_assets.core.dispatch.ports import AttemptState
from catchup_assets.core.dispatch.results import DispatcherStuck
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.measures import ProfileIndex, profiled_seconds
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import LedgerRange

log = logging.getLogger(__name__)


# The checks on the mission's health the dispatcher reports as they change (see Dispatcher.on_health).
HEALTH_STALL = "not_stalled"
HEALTH_DISPATCH = "dispatching"


@dataclass(frozen=True)
class Watch:
    """What one pass's watch found: the slow attempts to name, and how long since a range completed."""

    stragglers: tuple[str, ...]
    stalled_seconds: float


class Watchdog:
    """Stall and straggler watch, the circuit breaker, and whether new dispatches are blocked.

    `on_health(check, passed, why)` hears each change of HEALTH_STALL and HEALTH_DISPATCH."""

    def __init__(
        self,
        mission: MissionConfig,
        ranges: Mapping[str, LedgerRange],
        profile: ProfileIndex | None,
        clock,
        on_health: Callable[[str, bool, str], None],
    ) -> None:
        self.name = mission.mission
        # Looked up once: an overdue check runs for every attempt in flight on every pass.
        self._predicted = profiled_seconds(profile, ranges)
        self._stall_seconds, self._stall_factor = mission.stall_seconds, mission.stall_factor
        self.clock, self.on_health = clock, on_health
        self.breaker = Breaker(mission.breaker_attempts)
        self.blocked: str | None = None  # why new dispatches stopped for the rest of the run
        self.last_completion = clock.time()
        self.stalled = False  # a stall was told and has not ended
        self._overdue_warned: set[str] = set()

    def completed(self) -> None:
        """A range reached a verdict other than condemned: progress."""
        self.last_completion = self.clock.time()

    def finished(self, key: str, attempt: int, outcome: Outcome, rec: AttemptRecord) -> Verdict:
        """The breaker's verdict on a finished attempt; a trip blocks new dispatches."""
        verdict = self.breaker.finished(
            key, attempt, outcome, failure_signature(rec.outcome, rec.exit_code, rec.reason)
        )
        if verdict.trip:
            self.block(verdict.trip)
        return verdict

    def block(self, cause: str) -> None:
        """Stop new dispatches for the rest of this run; live attempts run on."""
        log.error("mission %s: %s", self.name, cause)
        if self.blocked is None:
            self.blocked = cause
            self.on_health(HEALTH_DISPATCH, False, cause)

    def watch(self, running: list[AttemptState], in_flight: int, queued: int, live_cap: int) -> Watch:
        """Warn of each attempt past its due time once, name the stragglers when most slots idle (Z1),
        and tell a stall as it begins and ends (Z4)."""
        now = self.clock.time()
        overdue = {s.attempt_id: over for s in running if (over := self.overrun(s, now)) is not None}
        for s in running:
            if s.attempt_id in overdue and s.attempt_id not in self._overdue_warned:
                self._overdue_warned.add(s.attempt_id)
                log.warning("range %s: overdue: %s", s.range_key, self.straggler(s, now))
        stragglers: tuple[str, ...] = ()
        if in_flight and queued == 0 and in_flight <= live_cap // 2:
            # Work in flight, nothing queued, most slots idle: name the slow ones (Z1), the
            # most overdue against their profile first, else the longest running.
            slow = sorted(running, key=lambda s: (-overdue.get(s.attempt_id, 0.0), s.started_at))[:5]
            stragglers = tuple(self.straggler(s, now) for s in slow)
        stalled = now - self.last_completion
        # A stall (Z4): nothing completed for stall_seconds, and nothing in flight is on time:
        # hours without a completion are normal while every range running is a long one.
        is_stall = bool(running) and stalled > self._stall_seconds and len(overdue) == len(running)
        if is_stall and not self.stalled:
            why = f"stalled: no range completed for {stalled:.0f} s and all {len(running)} in flight are overdue (Z4)"
            log.error("mission %s: %s", self.name, why)
            self.stalled = True
            self.on_health(HEALTH_STALL, False, why)
        elif not is_stall and self.stalled:
            self.stalled = False
            self.on_health(HEALTH_STALL, True, "a range completed, or attempts in flight are on time again")
        return Watch(stragglers, stalled)

    def _profiled_seconds(self, key: str) -> float:
        return self._predicted[key] or 0.0

    def overrun(self, st: AttemptState, now: float) -> float | None:
        """How far past its due time an attempt runs (running / due), or None while it is on time.

        Due: stall_factor x its profiled seconds, and never before stall_seconds."""
        due = max(self._stall_seconds, self._stall_factor * self._profiled_seconds(st.range_key))
        running = now - (st.started_at or now)
        return running / due if running > due else None

    def straggler(self, st: AttemptState, now: float) -> str:
        running = now - (st.started_at or now)
        profiled = self._profiled_seconds(st.range_key)
        expected = f" (profiled {profiled:.0f}s)" if profiled else ""
        return f"{st.range_key} a{st.attempt} running {running:.0f}s{expected}"


class FailingPasses:
    """Passes that raised, counted: a pass that raises is retried after a poll, but the same failure
    `limit` passes in a row stops the dispatcher with it as the cause, rather than looping on it for
    hours. `before_stuck` runs first (the records' snapshot, for the next start)."""

    def __init__(self, name: str, limit: int, before_stuck: Callable[[], None]) -> None:
        self.name, self.limit, self._before_stuck = name, limit, before_stuck
        self.cause, self.streak = "", 0

    def ok(self) -> None:
        self.cause, self.streak = "", 0

    def failed(self, exc: Exception, passes: int) -> None:
        """Count a pass that raised; raise DispatcherStuck once the same failure repeats `limit` times."""
        cause = f"{type(exc).__name__}: {exc}"
        self.streak = self.streak + 1 if self.cause == cause else 1
        self.cause = cause
        n = self.streak
        log.error("mission %s: pass %d failed (%d in a row): %s", self.name, passes, n, cause, exc_info=(n == 1))
        if n >= self.limit:
            self._before_stuck()
            raise DispatcherStuck(f"mission {self.name}: the same failure on {n} consecutive passes: {cause}") from exc
