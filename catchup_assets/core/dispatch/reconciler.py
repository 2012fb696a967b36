"""The dispatcher: a reconciler from planned ranges, a backend and a policy to outcomes.

Each pass asks the backend what exists (never a counter of its own: L10, L11), finishes what ended (collect, record,
done mark, then release: L2, L32), decides each range from its own records (L5, L6), and submits into the free slots
in dispatch order. A condemned range never stops dispatch (L9). Every in-memory map here is rebuilt from the records
on start, so a restarted or second dispatcher sees the same picture.

This module holds the pass and the loop, which only orchestrate the Dispatcher's parts. Each part owns its
state and takes what it needs in its constructor: range_book.py (what it knows, rebuilt from the records, and the
decisions taken from them), claims.py (claims between dispatchers), fill.py (the pass's submits, in waves),
attempt_spec.py (each attempt sized), finish.py (recording and releasing attempts), health.py (stragglers, stalls
and the circuit breaker), obey.py (the operator's control), stopping.py (an operator's stop), gauges.py (the
snapshot its metrics read), live.py (each attempt's start, told); results.py holds what it reports.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.attempt_spec import attempt_spec
from catchup_assets.core.dispatch.claims import ClaimBook
from catchup_assets.core.dispatch.dispatch_config import Clock, DispatchConfig, SystemClock
from catchup_assets.core.dispatch.fill import Submitter
from catchup_assets.core.dispatch.finish import Finisher
from catchup_assets.core.dispatch.gauges import Gauges, Snapshot
from catchup_assets.core.dispatch.health import FailingPasses, Watchdog
from catchup_assets.core.dispatch.live import AttemptEvent, AttemptEvents
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.obey import DRAINED, ControlReader
from catchup_assets.core.dispatch.ports import (
    AttemptSpec,
    AttemptState,
    Backend,
    Phase,
    Records,
    TransientBackendError,
    deferred,
)
from catchup_assets.core.dispatch.progress import Progress
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.results import MissionResult, RangeResult, RangeStatus, Status, with_the_rest
from catchup_assets.core.dispatch.stopping import OPERATOR, StopState, stop_attempts
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)


class Dispatcher:
    """The reconciler: each pass orchestrates its parts, each the owner of its own state: the range book
    (records, done marks, verdicts), claims, submits, finishing, the health watchdog, the operator's
    control, the stop, and the gauges."""

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
        self.cfg, self.backend, self.records = config, backend, records
        self.clock = clock or SystemClock()
        self.mission = mission = config.mission
        self.name = mission.mission
        self.on_status = on_status or (lambda s: log.info("mission %s: %s", self.name, s.line()))
        self.on_result = on_result or (lambda r, already: None)
        self.on_pass = on_pass  # each pass, for the metrics: a callable taking its snapshot (gauges.py)
        self.by_key = {r.key: r for r in config.ranges}
        self.passes = 0
        self._last_status: Status | None = None
        self._transient_passes = 0  # consecutive passes the backend could not answer
        holder = config.holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # The mission's health as it changes: (HEALTH_STALL or HEALTH_DISPATCH, passed, why).
        self.watchdog = Watchdog(mission, self.by_key, config.profile, self.clock, on_health or (lambda c, p, w: None))
        self.book = RangeBook(
            self.by_key,
            records,
            holder,
            mission.retry,
            mission.placement.ladder.cap_bytes,
            self._told,
            config.reset_condemned,
        )
        self.claims = ClaimBook(
            self.book, records, self.clock, config.claim_grace_seconds, config.claim_recheck_seconds
        )
        # An operator's control record (obey.py), read once a pass; None: run as planned.
        told = on_control or (lambda ctl, what: None)
        self.control = ControlReader(self.name, mission.parallelism, config.cap, read_control, told, self.watchdog)
        self.stopping = StopState(self.clock)
        self.attempt_events = AttemptEvents(on_attempt)  # each attempt's submit and its first pass running
        self.submitter = Submitter(
            backend, self.book, self.claims, self._spec, self.attempt_events, self.stopping, self.watchdog
        )
        self.finisher = Finisher(
            self.name,
            backend,
            records,
            self.book,
            self.clock,
            self._judge_finished,
            config.peak_flush_seconds,
            config.collect_tries,
            config.segment_every,
        )
        self.failing = FailingPasses(self.name, config.failing_passes_limit, self.finisher.snapshot)
        self.progress = Progress(self.by_key, config.profile, self.book, self.clock)
        self.gauges = Gauges(
            mission, self.by_key, config.profile, self.book, self.clock, self.control, self.watchdog, self.progress
        )

    # -- what the parts tell ------------------------------------------------------
    def _told(self, result: RangeResult, already: bool) -> None:
        """A range's verdict, from the book: progress unless condemned, then the caller's on_result."""
        if result.status is not RangeStatus.CONDEMNED:
            self.watchdog.completed()
        self.on_result(result, already)

    def _judge_finished(self, st: AttemptState, outcome: Outcome, rec: AttemptRecord) -> None:
        """A finished attempt, recorded: its range is judged unless the breaker holds it undecided."""
        verdict = self.watchdog.finished(st.range_key, st.attempt, outcome, rec)
        for key in verdict.release:
            self.book.judge(key)
        for key, attempt in verdict.spare:
            self.book.spare(key, attempt)
        if not verdict.hold:
            self.book.judge(st.range_key)

    def _spec(self, key: str, attempt: int, n_oom: int, n_evicted: int, n_disrupted: int) -> AttemptSpec:
        cfg = self.cfg
        return attempt_spec(
            cfg.mission, cfg.profile, cfg.trusted, self.by_key[key], attempt, n_oom, n_evicted, n_disrupted
        )

    # -- one reconcile pass -----------------------------------------------------
    def pass_once(self) -> Status:
        for key in self.book.recover():
            self.finisher.release_range(key)  # a crash may have come between done and release (L3)
        self.passes += 1
        self.control.read()
        try:
            states = self.backend.observe()
        except TransientBackendError as exc:
            # Nothing is known this pass: decide nothing, submit nothing, charge nothing.
            self._transient_passes += 1
            deferred(self.name, "observe", exc)
            if self._transient_passes == self.cfg.transient_alert_passes:
                log.error(
                    "mission %s: the backend has not answered for %d consecutive passes: %s",
                    self.name,
                    self._transient_passes,
                    exc,
                )
            return self._last_status or self._status(0, 0, 0, [])
        self._transient_passes = 0
        for key in sorted(self.finisher.release_owed):
            self.finisher.release_range(key)
        book, breaker = self.book, self.watchdog.breaker
        mine = [s for s in states if s.range_key in self.by_key]
        live_total = sum(1 for s in states if s.live)
        live_keys: set[str] = set()
        max_attempt: dict[str, int] = {}
        for st in mine:
            max_attempt[st.range_key] = max(max_attempt.get(st.range_key, 0), st.attempt)
            if st.live:
                live_keys.add(st.range_key)
                if st.phase is Phase.RUNNING and not st.node_lost:
                    self.finisher.seen_running(st)
                    self.attempt_events.seen(st)
                self.finisher.flush_live(st)
            elif st.attempt in book.done[st.range_key]:
                self.finisher.release(st)  # died (or was refused) between done mark and release last time
            elif not self.finisher.finish(st):
                live_keys.add(st.range_key)  # its final read is still owed (L31)
        held = breaker.held
        if held and not live_keys and all(book.decided(k) or k in held for k in self.by_key):
            for key in breaker.release_all():  # nothing else left to tell a systemic failure from
                book.judge(key)
        queue = []
        for key in self.by_key:
            if book.decided(key) or key in live_keys or key in breaker.held:
                continue
            done = book.done[key]
            pending = self.claims.pending_elsewhere(key)
            if pending is None:
                continue  # another dispatcher's submit of this range is in flight
            attempt = max([0, max_attempt.get(key, 0), *done, pending]) + 1
            queue.append((key, attempt, book.count(key, Outcome.OOM), book.count(key, Outcome.EVICTED)))
        free = self.control.live_cap() - live_total
        submitted = 0
        if self.watchdog.blocked is None and not self.control.control.holding:
            submitted = self.submitter.fill(queue[: max(free, 0)])  # fill.py: in order, in waves
        status = self._status(len(live_keys) + submitted, len(queue) - submitted, live_total, mine, submitted)
        self._last_status = status
        if self.on_pass is not None:
            self.on_pass(self.gauges.take(mine))
        if self.passes % self.mission.status_every == 0:
            self.on_status(status)
        return status

    def _status(
        self, in_flight: int, queued: int, live_total: int, mine: list[AttemptState], submitted: int = 0
    ) -> Status:
        # Pending: a live attempt not yet running (no node, no worker started), or one submitted this pass.
        pending = len({s.range_key for s in mine if s.phase is Phase.PENDING}) + submitted
        running = [s for s in mine if s.live and s.started_at]
        watch = self.watchdog.watch(running, in_flight, queued, self.control.live_cap())
        to_go = self.progress.estimate(mine, self.control.live_cap()) if mine or in_flight or queued else None
        return Status(
            self.passes,
            self.book.tally(RangeStatus.DONE),
            in_flight,
            queued,
            self.book.tally(RangeStatus.CONDEMNED),
            len(self.by_key),
            live_total - in_flight if live_total > in_flight else 0,
            watch.stragglers,
            watch.stalled_seconds,
            self.control.state(),
            pending,
            to_go,
        )

    # -- the loop -----------------------------------------------------------------
    @property
    def blocked(self) -> str | None:
        return self.watchdog.blocked

    @property
    def draining(self) -> bool:
        return self.control.draining

    def stop(self, why: str = OPERATOR) -> None:
        """Stop the run (stopping.py): no new dispatch, in-flight attempts stopped and recorded `stopped`."""
        self.stopping.stop(why)

    @property
    def stopped(self) -> str | None:
        """Why the run was stopped, or None."""
        return self.stopping.why

    def run(self) -> MissionResult:
        owed_passes = 0
        stop, results, finisher = self.stopping, self.book.results, self.finisher
        while not stop.requested:
            try:
                status = self.pass_once()
            except Exception as exc:  # noqa: BLE001 - counted, and fatal only when it repeats
                self.failing.failed(exc, self.passes)
                self.clock.sleep(self.mission.poll_seconds)
                continue
            self.failing.ok()
            if len(results) == len(self.by_key):
                owed_passes = owed_passes + 1 if finisher.release_owed else 0
                if not finisher.release_owed:
                    break
                if owed_passes > self.cfg.transient_alert_passes:
                    kept = sorted(finisher.release_owed)
                    log.warning(
                        "mission %s: data of %s kept: refused to free it; the next run frees it", self.name, kept
                    )
                    break
            if (self.blocked is not None or self.draining) and status.in_flight == 0:
                break
            if not stop.requested:
                self.clock.sleep(self.mission.poll_seconds)
        self.submitter.close()
        if stop.requested:
            grace = self.cfg.stop_grace_seconds
            stop_attempts(self.name, stop.why or OPERATOR, grace, self.backend, self.records, self.by_key, finisher)
        if self.on_pass is not None:
            self.on_pass(self.gauges.at_end(self.backend.observe))
        finisher.snapshot()
        # The run's last word in its log, however few passes it took: what is done and what is left.
        self.on_status(self._status(0, len(self.by_key) - len(results), 0, []))
        return self._result()

    def _result(self) -> MissionResult:
        stopped = self.stopping.requested
        why = f"not dispatched: {self.blocked}" if self.blocked else "not dispatched: dispatcher stopped"
        why = DRAINED if self.draining and not self.blocked and not stopped else why
        if stopped:
            why = f"not run to the end: {self.stopping.why}; a later run resumes it"
        attempts = {k: len(done) for k, done in self.book.done.items()}
        results = with_the_rest(self.book.results, self.by_key, attempts, why)
        drained = self.draining and not stopped and len(self.book.results) < len(self.by_key)
        return MissionResult(results, self.passes, drained=drained, stopped=self.stopped)
