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
from dataclasses import dataclass

from catchup_assets.core.classify.outcomes import Action, Outcome
from catchup_assets.core.forecast.time_to_go import Done, InFlight, TimeToGo, time_to_go
from catchup_assets.mission.control import MissionState, mission_state, range_verdicts
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table


@dataclass(frozen=True)
class MissionStatus:
    state: MissionState
    running: int
    pending: int
    stopped: int
    not_started: int
    to_go: TimeToGo

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
    state = mission_state(store, mission)  # refuses an unknown mission, naming where its plan should be
    now = time.time() if now is None else now
    plan = read_table(store, layout.plan(mission))
    keys, seconds = plan.column("range_key").to_pylist(), plan.column("predicted_seconds").to_pylist()
    predicted = dict(zip(keys, seconds, strict=True))
    v = range_verdicts(store, mission)
    flight, waiting, done = [], [], []
    running = pending = stopped = 0
    for key in v.keys:
        recs, marked, action = v.records[key], v.done[key], v.actions[key]
        if action is Action.DONE:
            seconds = sum(recs[a].seconds or 0.0 for a in marked if a in recs)
            done.append(Done(predicted.get(key), seconds))
            continue
        if action is Action.CONDEMNED:
            continue
        open_ = [recs[a] for a in sorted(set(recs) - marked)]
        started = [r.started_at for r in open_ if r.started_at]
        if started:
            running += 1
            flight.append(InFlight(predicted.get(key), max(0.0, now - max(started))))
        elif open_:
            pending += 1
            flight.append(InFlight(predicted.get(key), 0.0))
        else:
            last = recs[max(marked)] if marked else None
            stopped += last is not None and last.outcome == Outcome.STOPPED.value
            waiting.append(predicted.get(key))
    not_started = len(waiting) - stopped
    eta = time_to_go(flight, waiting, done, max(1, state.control.live_parallelism(state.planned_parallelism)))
    return MissionStatus(state, running, pending, stopped, not_started, eta)
