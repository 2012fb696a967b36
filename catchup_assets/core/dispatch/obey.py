"""The dispatcher obeying an operator's control record (control.py), read once a pass.

Paused or draining, it submits nothing new; the live parallelism caps new submits.
Each change is logged once, as this dispatcher first sees it, and reported through
`on_control`; while paused the `dispatching` health check reads "paused". A record
that cannot be read costs itself, not the pass: the last good one stays in force.
"""

from __future__ import annotations

import logging

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH
from catchup_assets.core.dispatch.mission_control import MissionControl

log = logging.getLogger(__name__)

PAUSED = "paused"  # how the dispatching check's reason begins while an operator holds dispatch
DRAINED = "drained: left unstarted for a later run"  # a drained run's unstarted ranges


class Obey:
    """The Dispatcher's obedience to the control record, a part of `reconciler.Dispatcher` (its
    constructor sets up the state: read_control, on_control, _control, _control_error)."""

    def _obey_control(self) -> None:
        if self.read_control is None:
            return
        try:
            new = self.read_control()
        except (ValueError, OSError) as exc:  # torn or unreachable: the last good control stays
            cause = str(exc)
            if cause != self._control_error:
                self._control_error = cause
                log.warning("mission %s: control record unreadable, keeping the last good one: %s", self.name, cause)
            return
        self._control_error = None
        old = self._control
        if new == old:
            return
        self._control = new
        now_ctl = new or MissionControl()
        # A dispatcher that just started reads the record as it stands: its last change, not all 100.
        changes = now_ctl.since(old) if old is not None else list(now_ctl.history[-1:])
        state = now_ctl.state(self.mission.parallelism)
        what = "; ".join(c.line() for c in changes) or "control record removed"
        log.warning("mission %s: control: %s: now %s", self.name, what, state)
        self.on_control(now_ctl, what)
        was_holding = bool(old and old.paused)
        if now_ctl.paused and not was_holding:
            self.on_health(HEALTH_DISPATCH, False, f"{PAUSED} by an operator: {what}")
        elif was_holding and not now_ctl.paused:
            if self._blocked is None:
                self.on_health(HEALTH_DISPATCH, True, f"resumed: {what}")
            else:
                self.on_health(HEALTH_DISPATCH, False, self._blocked)

    @property
    def control(self) -> MissionControl:
        return self._control or MissionControl()

    @property
    def draining(self) -> bool:
        return self.control.drain

    def _live_cap(self) -> int:
        return self.control.live_parallelism(self.mission.parallelism)
