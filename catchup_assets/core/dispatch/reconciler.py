"""The dispatcher: a reconciler from planned ranges, a backend and a policy to outcomes.

Each pass asks the backend what exists (never a counter of its own: L10, L11), finishes what ended (collect, record,
done mark, then release: L2, L32), decides each range from its own records (L5, L6), and submits into the free slots
in dispatch order. A condemned range never stops dispatch (L9). Every in-memory map here is rebuilt from the records
on start, so a restarted or second dispatcher sees the same picture.

This module holds the pass and the loop; the Dispatcher's other parts are one concept a module: recovery.py (what it
knows, rebuilt from the records, and the decisions taken from them), claims.py (claims between dispatchers, and
submits), fill.py (the pass's submits, in waves), finish.py (recording and releasing attempts), health.py
(stragglers, stalls and the circuit breaker), gauges.py (the snapshot its metrics read), live.py (each attempt's
start, told); results.py holds what it reports.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.breaker import Breaker
from catchup_assets.core.dispatch.claims import Claims
from catchup_assets.core.dispatch.fill import Filling
from catchup_assets.core.dispatch.finish import Finishing
from catchup_assets.core.dispatch.gauges import Gauging, Snapshot
from catchup_assets.core.dispatch.health import Health
from catchup_assets.core.dispatch.live import AttemptEvent, AttemptEvents
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.obey import DRAINED, Obey
from catchup_assets.core.dispatch.ports import (
    Backend,
    Phase,
    Records,
    TransientBackendError,
)
from catchup_assets.core.dispatch.recovery import Recovery
from catchup_assets.core.dispatch.results import MissionResult, RangeResult, RangeStatus, Status
from catchup_assets.core.dispatch.stopping import Stopping
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import LedgerRange

log = logging.getLogger(__name__)


class Clock(Protocol):
    def time(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def __init__(self) -> None:
        self.woken = False  # set by a stopping dispatcher (stopping.py): its sleeps end at once

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.woken and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))


@dataclass(frozen=True)
class DispatchConfig:
    """One dispatcher's work: the mission (its policies, declared there once), the ranges
    this run was given in dispatch order, the profile they are sized from, and the
    dispatcher's own watchfulness."""

    mission: MissionConfig
    ranges: Sequence[LedgerRange]  # in dispatch order
    profile: ProfileIndex | None = None
    peak_flush_seconds: float = 60.0  # in-flight peaks made durable at most this often
    collect_tries: int = 3  # final reads of a finished attempt before recording without (L31)
    transient_alert_passes: int = 10  # consecutive passes without an answer from the backend: alert
    # A pass that raises is retried after a poll; the same failure this many passes in a
    # row stops the dispatcher with it as the cause, rather than looping on it for hours.
    failing_passes_limit: int = 5
    # Every this many finished attempts go to the snapshot log as one segment (store/snapshot_log.py):
    # a run that dies leaves fewer than this many records for the next reader to open one by one.
    segment_every: int = 50
    # Who claims attempts: a restart with the same holder (a retried step of one Dagster
    # run) takes its own claims back; None: this dispatcher alone.
    holder: str | None = None
    # A claim this young whose attempt is neither seen nor recorded is another dispatcher's
    # submit in flight: its range waits; older, the claimer died before submitting.
    claim_grace_seconds: float = 120.0
    # Within the grace the other dispatcher may also have run, recorded and released the
    # attempt between two of this one's passes: its range's records are read this often.
    claim_recheck_seconds: float = 10.0
    # An operator's new run over a condemned range grants it fresh budgets; a
    # retry of a dead dispatcher must not, or a mission would loop on it.
    reset_condemned: bool = False
    # An operator's stop (SIGTERM, SIGINT) shuts the attempts in flight down within this (L37).
    stop_grace_seconds: float = 15.0
    # Each range's checkpoint end and its trusted hash, handed to its attempts (issue 24 item 3).
    trusted: Mapping[str, tuple[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        keys = [r.key for r in self.ranges]
        if len(set(keys)) != len(keys):
            raise ConfigError("ranges: duplicate range keys in the plan")


class Dispatcher(Recovery, Claims, Filling, Finishing, Health, Obey, Stopping, Gauging):
    def __init__(
        self,
        config: DispatchConfig,
        backend: Backend,
        records: Records,
        clock: Clock | None = None,
        on_status: Callable[[Status], None] | None = None,
        on_result: Callable[[RangeResult, bool], None] | None = None,
        on_health: Callable[[str, bool, str], None] | None = None,
        read_control: Callable[[], MissionControl | None] | None = None,
        on_control: Callable[[MissionControl, str], None] | None = None,
        on_pass: Callable[[Callable[[], Snapshot]], None] | None = None,
        on_attempt: Callable[[AttemptEvent], None] | None = None,
    ):
        self.cfg = config
        self.backend = backend
        self.records = records
        self.clock = clock or SystemClock()
        self.mission = config.mission
        self.name = config.mission.mission
        self.on_status = on_status or (lambda s: log.info("mission %s: %s", self.name, s.line()))
        self.on_result = on_result or (lambda r, already: None)
        # The mission's health as it changes: (HEALTH_STALL or HEALTH_DISPATCH, passed, why).
        self.on_health = on_health or (lambda check, passed, why: None)
        # An operator's control record (obey.py), read once a pass; None: run as planned.
        self.read_control, self.on_control = read_control, on_control or (lambda ctl, what: None)
        self._control: MissionControl | None = None
        self.on_pass = on_pass  # each pass, for the metrics: a callable taking its snapshot (gauges.py)
        self.attempt_events = AttemptEvents(on_attempt)  # each attempt's submit and its first pass running
        self._control_error: str | None = None
        self.by_key = {r.key: r for r in config.ranges}
        self.passes = 0
        self._stop = False
        self._stop_why: str | None = None
        self._blocked: str | None = None
        # Derived from durable records by recover(); rebuilt on every start.
        self._recs: dict[str, dict[int, AttemptRecord]] = {k: {} for k in self.by_key}
        self._done: dict[str, set[int]] = {k: set() for k in self.by_key}
        self._reset_after: dict[str, int] = {}
        self._recovered = False
        self._results: dict[str, RangeResult] = {}
        self._collect_failures: dict[tuple[str, int], int] = {}
        self._flushed_at: dict[tuple[str, int], float] = {}
        # When each attempt was last seen running: the end of a leg that vanishes with its node.
        # Flushed with the peaks, so a restart loses at most peak_flush_seconds of it.
        self._last_seen: dict[tuple[str, int], float] = {}
        self._release_owed: set[str] = set()  # completed ranges whose data a transient error kept
        self.holder = config.holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Claims of other holders seen on the storage root, per range: attempt -> claimed at.
        self._claims: dict[str, dict[int, float]] = {k: {} for k in self.by_key}
        self._transient_passes = 0  # consecutive passes the backend could not answer
        self._claims_checked: dict[str, float] = {}  # when a foreign-claimed range was last read
        # Attempts this dispatcher claimed and submitted: it alone writes them from memory.
        self._mine: set[tuple[str, int]] = set()
        self._unsegmented: list[tuple[str, int]] = []  # finished by this run, in no segment yet
        self.breaker = Breaker(config.mission.breaker_attempts)
        self._last_status: Status | None = None
        self._last_completion = self.clock.time()
        self._stall_warned = False
        self._overdue_warned: set[str] = set()

    def _transient(self, call: str, exc: Exception) -> None:
        """A call the backend could not answer now: no range is charged; a later pass retries it."""
        log.warning("mission %s: %s deferred to a later pass: %s", self.name, call, exc)

    # -- one reconcile pass -----------------------------------------------------
    def pass_once(self) -> Status:
        self.recover()
        self.passes += 1
        self._obey_control()
        try:
            states = self.backend.observe()
        except TransientBackendError as exc:
            # Nothing is known this pass: decide nothing, submit nothing, charge nothing.
            self._transient_passes += 1
            self._transient("observe", exc)
            if self._transient_passes == self.cfg.transient_alert_passes:
                log.error(
                    "mission %s: the backend has not answered for %d consecutive passes: %s",
                    self.name,
                    self._transient_passes,
                    exc,
                )
            return self._last_status or self._status(0, 0, 0, [])
        self._transient_passes = 0
        for key in sorted(self._release_owed):
            self._release_range(key)
        mine = [s for s in states if s.range_key in self.by_key]
        live_total = sum(1 for s in states if s.live)
        live_keys: set[str] = set()
        max_attempt: dict[str, int] = {}
        for st in mine:
            max_attempt[st.range_key] = max(max_attempt.get(st.range_key, 0), st.attempt)
            if st.live:
                live_keys.add(st.range_key)
                if st.phase is Phase.RUNNING and not st.node_lost:
                    self._last_seen[(st.range_key, st.attempt)] = self.clock.time()
                    self.attempt_events.seen(st)
                self._flush_live(st)
            elif st.attempt in self._done[st.range_key]:
                self._release(st)  # died (or was refused) between done mark and release last time
            elif not self._finish(st):
                live_keys.add(st.range_key)  # its final read is still owed (L31)
        held = self.breaker.held
        if held and not live_keys and all(k in self._results or k in held for k in self.by_key):
            self._judge_all(self.breaker.release_all())  # nothing else left to tell a systemic failure from
        queue = []
        for key in self.by_key:
            if key in self._results or key in live_keys or key in self.breaker.held:
                continue
            done = self._done[key]
            n_oom = sum(1 for a in done if self._recs[key][a].outcome == Outcome.OOM.value)
            n_evicted = sum(1 for a in done if self._recs[key][a].outcome == Outcome.EVICTED.value)
            pending = self._claimed_elsewhere(key, done)
            if pending is None:
                continue  # another dispatcher's submit of this range is in flight
            attempt = max([0, max_attempt.get(key, 0), *done, pending]) + 1
            queue.append((key, attempt, n_oom, n_evicted))
        free = self._live_cap() - live_total
        submitted = 0
        if self._blocked is None and not self.control.holding:
            submitted = self._fill(queue[: max(free, 0)])  # fill.py: in order, in waves
        status = self._status(len(live_keys) + submitted, len(queue) - submitted, live_total, mine, submitted)
        self._last_status = status
        if self.on_pass is not None:
            self.on_pass(self._gauge_pass(mine))
        if self.passes % self.mission.status_every == 0:
            self.on_status(status)
        return status

    # -- the loop -----------------------------------------------------------------
    @property
    def blocked(self) -> str | None:
        return self._blocked

    def run(self) -> MissionResult:
        owed_passes = 0
        streak = ("", 0)
        while not self._stop:
            try:
                status = self.pass_once()
            except Exception as exc:  # noqa: BLE001 - counted, and fatal only when it repeats
                streak = self._failed_pass(exc, streak)
                self.clock.sleep(self.mission.poll_seconds)
                continue
            streak = ("", 0)
            if len(self._results) == len(self.by_key):
                owed_passes = owed_passes + 1 if self._release_owed else 0
                if not self._release_owed:
                    break
                if owed_passes > self.cfg.transient_alert_passes:
                    log.warning(
                        "mission %s: data of %s kept: the backend refused to free it; the next run frees it",
                        self.name,
                        sorted(self._release_owed),
                    )
                    break
            if (self._blocked is not None or self.draining) and status.in_flight == 0:
                break
            if not self._stop:
                self.clock.sleep(self.mission.poll_seconds)
        self._close_submit_pool()
        if self._stop:
            self._stop_attempts()
        self._gauge_end()
        self._snapshot()
        results = dict(self._results)
        why = f"not dispatched: {self._blocked}" if self._blocked else "not dispatched: dispatcher stopped"
        why = DRAINED if self.draining and not self._blocked and not self._stop else why
        if self._stop:
            why = f"not run to the end: {self._stop_why}; a later run resumes it"
        for key in self.by_key:
            if key not in results:
                results[key] = RangeResult(
                    key, RangeStatus.NOT_RUN, why, None, len(self._done[key]), "", None, None, None
                )
        drained = self.draining and not self._stop and len(self._results) < len(self.by_key)
        return MissionResult(results, self.passes, drained=drained, stopped=self.stopped)
