"""The dispatcher obeying an operator's control record (mission_control.py), read once a pass.

Paused or draining, it submits nothing new; the live parallelism caps new submits, and
never exceeds the mission's cap (the deployment's max_parallelism its mission.json keeps)
whatever the record says: a record above it is clamped, and that is said once.
Each change is logged once, as this dispatcher first sees it, and reported through
`on_control`; while paused the `dispatching` health check reads "paused". A record
that cannot be read (torn, or a value out of range) costs itself, not the pass: the
last good one stays in force, why is said once in the log, and the state line says it until
the record reads again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, Watchdog
from catchup_assets.core.dispatch.mission_control import Cap, MissionControl

log = logging.getLogger(__name__)

PAUSED = "paused"  # how the dispatching check's reason begins while an operator holds dispatch
DRAINED = "drained: left unstarted for a later run"  # a drained run's unstarted ranges
MAX_CAUSE_CHARS = 300  # of why a record could not be read, as logged and on the state line


class ControlReader:
    """The operator's control as this dispatcher last read it, and what it allows.

    `parallelism` is the plan's, `cap` the most the mission may run (and where that is set);
    `read_control` returns the record (None: none, run as planned); `on_control(control, what)`
    hears each change, the control as obeyed (clamped to the cap); a pause and a resume are told
    on the `dispatching` check, through the watchdog's `on_health`, which also says whether
    dispatch is blocked by the mission itself."""

    def __init__(
        self,
        name: str,
        parallelism: int,
        cap: Cap,
        read_control: Callable[[], MissionControl | None] | None,
        on_control: Callable[[MissionControl, str], None],
        watchdog: Watchdog,
    ) -> None:
        self.name, self.cap = name, cap
        self.parallelism = min(parallelism, cap.limit)  # a plan above a lowered deployment cap runs at the cap
        self._read, self._on_control, self._watchdog = read_control, on_control, watchdog
        self._control: MissionControl | None = None  # as obeyed: clamped to the cap
        self._raw: MissionControl | None = None  # as last read, to tell a change
        self._error: str | None = None

    def read(self) -> None:
        """Read the record once; tell and obey what changed since the last good read."""
        if self._read is None:
            return
        try:
            new = self._read()
        # Torn, hostile or unreachable: the last good control stays. The store says why as a ValueError;
        # RecursionError too, should a reader ever hand one on (a record nested 100 000 deep).
        except (ValueError, OSError, RecursionError) as exc:
            # Bounded: a hand-edited value of 4000 digits is quoted back in the message, and the state line
            # carries it every pass, onto the mission page.
            cause = " ".join(str(exc).split())[:MAX_CAUSE_CHARS]
            if cause != self._error:
                self._error = cause
                log.warning("mission %s: control record unreadable, keeping the last good one: %s", self.name, cause)
            return
        self._error = None
        old = self._raw
        if new == old:
            return
        self._raw = new
        clamped = new is not None and new.parallelism is not None and new.parallelism > self.cap.limit
        now_ctl = replace(new, parallelism=self.cap.limit) if clamped else (new or MissionControl())
        self._control = now_ctl if new is not None else None
        # A dispatcher that just started reads the record as it stands: its last change, not all 100.
        changes = now_ctl.since(old) if old is not None else list(now_ctl.history[-1:])
        state = now_ctl.state(self.parallelism)
        what = "; ".join(c.line() for c in changes) or (
            "control record removed" if new is None else "control record changed with no change in its history"
        )
        if clamped:
            what += f"; its parallelism {new.parallelism} is above {self.cap.line()}: clamped to {self.cap.limit}"
        log.warning("mission %s: control: %s: now %s", self.name, what, state)
        self._on_control(now_ctl, what)
        on_health = self._watchdog.on_health
        was_holding = bool(old and old.paused)
        if now_ctl.paused and not was_holding:
            on_health(HEALTH_DISPATCH, False, f"{PAUSED} by an operator: {what}")
        elif was_holding and not now_ctl.paused:
            if self._watchdog.blocked is None:
                on_health(HEALTH_DISPATCH, True, f"resumed: {what}")
            else:
                on_health(HEALTH_DISPATCH, False, self._watchdog.blocked)

    @property
    def control(self) -> MissionControl:
        return self._control or MissionControl()

    @property
    def draining(self) -> bool:
        return self.control.drain

    def live_cap(self) -> int:
        return min(self.control.live_parallelism(self.parallelism), self.cap.limit)

    def state(self) -> str:
        """The control's state for the status line (and so the mission page's `control`); empty while no record
        was ever read. While the record cannot be read, that too: an operator whose change did not take sees why
        where they look, not only in the run's log."""
        said = self.control.state(self.parallelism) if self._control else ""
        if self._error is None:
            return said
        kept = "the last good one kept" if self._control else "running as planned"
        unreadable = f"control record unreadable ({kept}): {self._error}"
        return f"{said}; {unreadable}" if said else unreadable
