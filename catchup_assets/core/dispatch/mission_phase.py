"""One word for where a mission stands, from its records, its control record and its last run's end (issue 46).

`catchup-assets status` and the console read it; neither has a backend to ask, so the word comes from
what the storage root holds: the ranges' verdicts (done, condemned, an attempt still open), the
operator's control (paused, draining) and the record a run writes as it ends (store/run_end.py). A run
end counts only if no attempt started after it: a later run of the mission is its own standing.
"""

from __future__ import annotations

from dataclasses import dataclass

PLANNED, RUNNING, PAUSED, DRAINING = "planned", "running", "paused", "draining"
DRAINED, STOPPED, COMPLETED, CONDEMNED = "drained", "stopped", "completed", "condemned"
PHASES = (PLANNED, RUNNING, PAUSED, DRAINING, DRAINED, STOPPED, COMPLETED, CONDEMNED)
# No run is dispatching the mission: what is left waits for an operator's next run.
ENDED = frozenset({DRAINED, STOPPED, COMPLETED, CONDEMNED})
# How a run ended (defs/mission/mission_end.py's words; `blocked`: a circuit breaker or a budget stopped it).
RUN_ENDINGS = ("completed", "drained", "stopped", "condemned", "blocked")


@dataclass(frozen=True)
class Standing:
    """What the phase is read from: counts as the records say, the control, the last run's end if any."""

    ranges: int
    done: int
    condemned: int
    open_attempts: int  # ranges with an attempt not yet recorded as ended (running or pending)
    stopped_ranges: int  # ranges whose last attempt an operator's stop ended
    last_start: float | None  # the newest attempt's start (epoch seconds); None: none ever started
    paused: bool = False
    draining: bool = False
    run_ended: str | None = None  # how the last run ended (RUN_ENDINGS), None: no end recorded
    run_ended_at: float | None = None


def mission_phase(s: Standing) -> str:
    """The mission's phase: one of PHASES."""
    if s.done + s.condemned == s.ranges:
        return CONDEMNED if s.condemned else COMPLETED
    ended = s.run_ended is not None and s.run_ended_at is not None and (s.last_start or 0.0) <= s.run_ended_at
    if ended and not s.open_attempts:
        if s.run_ended == "drained":
            return DRAINED
        return CONDEMNED if s.condemned and s.run_ended in ("condemned", "blocked") else STOPPED
    if s.last_start is None and not s.open_attempts and not s.stopped_ranges:
        return PLANNED
    if not s.open_attempts:
        # Nothing in flight and no end recorded (a run before run_end.json, or one that died): a draining
        # dispatcher ends as its last attempt ends, and a stop leaves its ranges `stopped`.
        if s.draining:
            return DRAINED
        if s.stopped_ranges:
            return STOPPED
    return DRAINING if s.draining else PAUSED if s.paused else RUNNING
