"""Set a mission's control (pause, resume, drain, parallelism N): what the CLI and mission_control_job call.

Everything is checked before the record is written: the mission must be planned,
the value allowed (core/dispatch/mission_control.py) and within the mission's cap
(mission/saved.py's mission_cap: the deployment's max_parallelism its mission.json
keeps), and a finished mission is not resumed. The change is a compare-and-swap on
the record (store/control_record.py): another operator's change at the same moment
is kept, never overwritten. The answer is the mission's state after the change.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass

from catchup_assets.core.classify.outcomes import Action, RetryPolicy, decide
from catchup_assets.core.dispatch.mission_control import (
    ABSOLUTE,
    DEPLOYMENT,
    Cap,
    MissionControl,
    check_action,
    check_who,
)
from catchup_assets.core.dispatch.range_book import past_attempts
from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.mission.plan import require_plan
from catchup_assets.mission.saved import mission_cap, mission_doc
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MissionState:
    """A mission's control and its ranges as the records say."""

    mission: str
    control: MissionControl
    planned_parallelism: int
    ranges: int
    done: int
    condemned: int
    in_flight: int  # ranges with an attempt started and not yet recorded as ended
    replaced: str | None = None  # why the record this change wrote over could not be read

    @property
    def finished(self) -> bool:
        return self.done + self.condemned == self.ranges

    def lines(self) -> list[str]:
        c = self.control
        live = c.live_parallelism(self.planned_parallelism)
        out = [
            f"mission {self.mission}: {'draining' if c.drain else 'paused' if c.paused else 'running as planned'}",
            f"parallelism: live {live}, planned {self.planned_parallelism}",
            f"ranges: {self.ranges}, done {self.done}, condemned {self.condemned}, in flight {self.in_flight}, "
            f"not started or waiting {self.ranges - self.done - self.condemned - self.in_flight}",
        ]
        if self.replaced:
            out.append(f"replaced an unreadable control record ({self.replaced}) with a fresh one")
        if c.history:
            last = c.history[-1]
            out.append(f"last change: {last.line()} at {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(last.at))}Z")
        return out


@dataclass(frozen=True)
class RangeVerdicts:
    """Each planned range's records, done marks and verdict, judged as the dispatcher judges them."""

    keys: list[str]  # in dispatch order
    records: dict[str, dict[int, AttemptRecord]]
    done: dict[str, set[int]]
    actions: dict[str, Action]


def range_verdicts(store: Store, mission: str, retry: RetryPolicy | None = None, cap_bytes: int | None = None):
    plan = read_table(store, layout.plan(mission)).sort_by("dispatch_rank")
    keys = plan.column("range_key").to_pylist()
    records = RecordStore(store, mission)
    recs, marked = records.load(keys)
    resets = records.load_resets(keys)
    by_key: dict[str, dict[int, AttemptRecord]] = defaultdict(dict)
    done_by_key: dict[str, set[int]] = defaultdict(set)
    for (key, attempt), rec in recs.items():
        by_key[key][attempt] = rec
    for key, attempt in marked:
        done_by_key[key].add(attempt)
    actions = {
        key: decide(
            past_attempts(by_key[key], done_by_key[key], resets.get(key, 0)), retry or RetryPolicy(), cap_bytes
        ).action
        for key in keys
    }
    return RangeVerdicts(keys, by_key, done_by_key, actions)


def mission_state(
    store: Store,
    mission: str,
    retry: RetryPolicy | None = None,
    cap_bytes: int | None = None,
    verdicts: RangeVerdicts | None = None,
) -> MissionState:
    """The mission's control and range counts, judged from the records as the dispatcher judges them.
    `verdicts`: the records already read and judged (mission_status's), so they are not read twice."""
    require_plan(store, mission)  # an unknown mission is refused, naming where its plan should be
    doc = mission_doc(store, mission) or {}
    planned = doc.get("parallelism")
    if isinstance(planned, bool) or not isinstance(planned, int) or planned < 1:
        raise ConfigError(f"mission: {mission!r} has no parallelism in its {layout.MISSION_FILE}: plan it first")
    v = verdicts if verdicts is not None else range_verdicts(store, mission, retry, cap_bytes)
    decided = {k for k, a in v.actions.items() if a in (Action.DONE, Action.CONDEMNED)}
    done = sum(a is Action.DONE for a in v.actions.values())
    condemned = sum(a is Action.CONDEMNED for a in v.actions.values())
    in_flight = sum(1 for k in v.keys if k not in decided and set(v.records[k]) - v.done[k])
    try:
        control = ControlStore(store, mission).read() or MissionControl()
    except StateError as exc:  # torn or edited: the dispatchers keep their last good one; a change replaces it
        log.warning("%s; the next change starts from no control", exc)
        control = MissionControl()
    return MissionState(mission, control, planned, len(v.keys), done, condemned, in_flight)


def set_control(
    root: str,
    mission: str,
    action: str,
    value: int | None,
    *,
    who: str,
    max_parallelism: int | None = None,
    lower: Cap | None = None,
    retry: RetryPolicy | None = None,
    cap_bytes: int | None = None,
    now: float | None = None,
) -> MissionState:
    """Apply one change to the mission's control record; its state after it. Refused (ConfigError,
    naming the field) with nothing written: an unknown mission, a bad value or one above the mission's
    cap, resume when finished. `max_parallelism`: the deployment's cap where the caller runs (the job's);
    `lower`: an operator's own lower cap (the CLI's flag), which can never raise it. ControlConflict
    (an OSError) if others changed the record under every try: nothing written, retry."""
    check_action(action, value, ABSOLUTE)  # a bad value is refused before anything is read
    check_who(who)
    store = Store(root)
    before = mission_state(store, mission, retry, cap_bytes)
    cap = mission_cap(store, mission, Cap(max_parallelism, DEPLOYMENT) if max_parallelism else None)
    if lower is not None and lower.limit < cap.limit:
        cap = lower
    at = time.time() if now is None else now
    check_action(action, value, cap)
    records = ControlStore(store, mission, cap)
    control = records.change(
        lambda current: current.apply(action, value, who=who, at=at, max_parallelism=cap, finished=before.finished)
    )
    return MissionState(**{**before.__dict__, "control": control, "replaced": records.replaced})
