"""A mission's status from its storage root: counts, the time to go and the controls in force (issue 36 item 4).

What `catchup-assets status` prints, read as a restarted dispatcher reads it: the plan,
the attempt records and their done marks, the control record. Each undecided range is in
one state: running (an attempt started and not yet recorded ended), pending (sized and
submitted, not started), stopped (its last attempt ended by an operator's stop: a later
run resumes it) or not started. The time to go is core/forecast/time_to_go.py's over the
live parallelism, from the plan's predicted seconds at this mission's pace so far.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import Action, Outcome
from catchup_assets.core.forecast.time_to_go import Done, InFlight, TimeToGo, time_to_go
from catchup_assets.mission.control import MissionState, mission_state, range_verdicts
from catchup_assets.mission.plan import require_plan
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table

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

    def lines(self) -> list[str]:
        return [
            *self.state.lines(),
            f"in flight: {self.running} running, {self.pending} pending; stopped {self.stopped} (a later run "
            f"resumes them); not started {self.not_started}",
            f"time to go: {self.to_go.line()} at parallelism {self.live}",
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
    return MissionStatus(
        state,
        counts[RUNNING],
        counts[PENDING],
        counts[STOPPED],
        counts[NOT_STARTED],
        eta,
        states,
        min(starts) if starts else None,
    )
