"""A mission's status from its storage root: counts, the time to go and the controls in force (issue 36 item 4).

What `catchup-assets status` prints, read as a restarted dispatcher reads it: the plan,
the attempt records and their done marks, the control record. Each undecided range is in
one state: running (an attempt started and not yet recorded ended), pending (sized and
submitted, not started), stopped (its last attempt ended by an operator's stop: a later
run resumes it) or not started. The time to go is core/forecast/time_to_go.py's over the
live parallelism, from the plan's predicted seconds at this mission's pace so far. The mission's
phase (planned, running, paused, draining, drained, stopped, completed, condemned) is
core/dispatch/mission_phase.py's, from these, the control record and the last run's end
(store/run_end.py): an ended run has no time to go, only what it left.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import Action, Outcome
from catchup_assets.core.dispatch.mission_phase import ENDED, PLANNED, Standing, mission_phase
from catchup_assets.core.errors import StateError
from catchup_assets.core.forecast.time_to_go import Done, InFlight, TimeToGo, time_to_go
from catchup_assets.mission.control import MissionState, mission_state, range_verdicts
from catchup_assets.mission.plan import require_plan
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.run_end import RunEnd, read_run_end
from catchup_assets.store.tables import read_table

log = logging.getLogger(__name__)

DONE, CONDEMNED, RUNNING, PENDING, STOPPED, NOT_STARTED = (
    "done",
    "condemned",
    "running",
    "pending",
    "stopped",
    "not started",
)
RANGE_STATES = (DONE, CONDEMNED, RUNNING, PENDING, STOPPED, NOT_STARTED)


@dataclass(frozen=True)
class MissionStatus:
    state: MissionState
    running: int
    pending: int
    stopped: int
    not_started: int
    to_go: TimeToGo
    # Each planned range's state, in dispatch order: one of RANGE_STATES (the console's grid).
    states: dict[str, str] = field(default_factory=dict)
    started_at: float | None = None  # the mission's first attempt's start (epoch seconds); None: none started
    phase: str = RUNNING  # one of mission_phase.PHASES
    run_end: RunEnd | None = None  # the last run's end, if it counts (no attempt started since)
    note: str | None = None  # a record that could not be read, and why

    def lines(self) -> list[str]:
        first, *rest = self.state.lines()
        said = f"mission {self.state.mission}: {self.phase}"
        if self.run_end is not None and self.phase in ENDED:
            said += f" (its run ended {_utc(self.run_end.at)}: {self.run_end.how})"
        left = self.state.ranges - self.state.done - self.state.condemned
        if self.phase in ENDED:
            to_go = f"time to go: none, no run dispatches it; {left} ranges left for a later run" if left else None
        elif self.phase == PLANNED:
            to_go = f"time to go: not started; {self.to_go.line()} once it runs at parallelism {self.live}"
        else:
            to_go = f"time to go: {self.to_go.line()} at parallelism {self.live}"
        return [
            said,
            *rest,
            f"in flight: {self.running} running, {self.pending} pending; stopped {self.stopped} (a later run "
            f"resumes them); not started {self.not_started}",
            *([to_go] if to_go else [f"time to go: {self.to_go.line()}"]),
            *([self.note] if self.note else []),
        ]

    @property
    def live(self) -> int:
        return self.state.control.live_parallelism(self.state.planned_parallelism)


def mission_status(root: str, mission: str, now: float | None = None) -> MissionStatus:
    """The mission's status now (`now`: epoch seconds, the records' clock)."""
    store = Store(root)
    require_plan(store, mission)  # an unknown mission is refused, naming where its plan should be
    v = range_verdicts(store, mission)  # the records read once, for the state and the counts both
    state = mission_state(store, mission, verdicts=v)
    now = time.time() if now is None else now
    plan = read_table(store, layout.plan(mission))
    keys, seconds = plan.column("range_key").to_pylist(), plan.column("predicted_seconds").to_pylist()
    predicted = dict(zip(keys, seconds, strict=True))
    flight, waiting, done = [], [], []
    states: dict[str, str] = {}
    for key in v.keys:
        recs, marked, action = v.records[key], v.done[key], v.actions[key]
        if action is Action.DONE:
            seconds = sum(recs[a].seconds or 0.0 for a in marked if a in recs)
            done.append(Done(predicted.get(key), seconds))
            states[key] = DONE
            continue
        if action is Action.CONDEMNED:
            states[key] = CONDEMNED
            continue
        open_ = [recs[a] for a in sorted(set(recs) - marked)]
        started = [r.started_at for r in open_ if r.started_at]
        if started:
            states[key] = RUNNING
            flight.append(InFlight(predicted.get(key), max(0.0, now - max(started))))
        elif open_:
            states[key] = PENDING
            flight.append(InFlight(predicted.get(key), 0.0))
        else:
            last = recs[max(marked)] if marked else None
            states[key] = STOPPED if last is not None and last.outcome == Outcome.STOPPED.value else NOT_STARTED
            waiting.append(predicted.get(key))
    counts = Counter(states.values())
    starts = [r.started_at for recs in v.records.values() for r in recs.values() if r.started_at]
    eta = time_to_go(flight, waiting, done, max(1, state.control.live_parallelism(state.planned_parallelism)))
    note = None
    try:
        end = read_run_end(store, mission)
    except (StateError, OSError) as exc:  # skipped, said once: the phase is read from the rest
        end, note = None, f"run end record skipped: {exc}"
        log.warning("mission %s: %s", mission, note)
    standing = Standing(
        ranges=state.ranges,
        done=state.done,
        condemned=state.condemned,
        open_attempts=counts[RUNNING] + counts[PENDING],
        stopped_ranges=counts[STOPPED],
        last_start=max(starts) if starts else None,
        paused=state.control.paused,
        draining=state.control.drain,
        run_ended=end.how if end else None,
        run_ended_at=end.at if end else None,
    )
    phase = mission_phase(standing)
    return MissionStatus(
        state,
        counts[RUNNING],
        counts[PENDING],
        counts[STOPPED],
        counts[NOT_STARTED],
        eta,
        states,
        min(starts) if starts else None,
        phase,
        end if end is not None and phase in ENDED else None,
        note,
    )


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + "Z"
