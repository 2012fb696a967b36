"""Finishing an attempt: collect, record, done mark, then release (L2, L31, L32).

Also the records written while it runs (its peaks, start and last sighting, L20, L22),
the record of an attempt a stop removed, the release of a completed range's data (L3),
and the snapshot log of finished records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from catchup_assets.core.classify.outcomes import Outcome, classify
from catchup_assets.core.dispatch.breaker import LAST_ERROR
from catchup_assets.core.dispatch.ports import (
    AttemptState,
    Backend,
    Collected,
    Records,
    TransientBackendError,
    deferred,
)
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.results import RangeStatus
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)


def _reason(obs, collected: Collected, outcome: Outcome) -> str:
    """The record's reason: the observation, what the log's exit report left out or which of
    several was taken (issue 45), and for a failure stellar-core's own last error (its
    verification failure first: the last line after it only says an archive may be bad). The
    log's notes go before the last error, which the breaker's signature reads alone."""
    text = obs.summary() if obs is not None else "no observation"
    if collected.log_notes:
        text += "; log: " + "; ".join(collected.log_notes)
    error = collected.verification_failed or collected.last_error
    if outcome is not Outcome.OK and error:
        text += f"{LAST_ERROR}{error}"
    return text


def _outcome(obs, collected: Collected) -> Outcome:
    """classify's verdict, but a catchup that failed verification is the range's own failure:
    stellar-core exits 3 for it as for a drain (ApplicationUtils.cpp), and a retry replays the
    same material against the same hashes, so it is `failed` (condemned at once), not `interrupted`."""
    outcome = classify(obs) if obs is not None else Outcome.UNKNOWN
    return Outcome.FAILED if outcome is Outcome.INTERRUPTED and collected.verification_failed else outcome


class Finisher:
    """Records attempts as they run and end, and releases what they held.

    `judge(state, outcome, record)` hears each attempt this finisher recorded as finished,
    after its done mark and release: the dispatcher decides its range from it."""

    def __init__(
        self,
        name: str,
        backend: Backend,
        records: Records,
        book: RangeBook,
        clock,
        judge: Callable[[AttemptState, Outcome, AttemptRecord], None],
        peak_flush_seconds: float,
        collect_tries: int,
        segment_every: int,
    ) -> None:
        self.name, self.backend, self.records, self.book, self.clock = name, backend, records, book, clock
        self._judge = judge
        self.peak_flush_seconds, self.collect_tries, self.segment_every = (
            peak_flush_seconds,
            collect_tries,
            segment_every,
        )
        self._collect_failures: dict[tuple[str, int], int] = {}
        self._flushed_at: dict[tuple[str, int], float] = {}
        # When each attempt was last seen running: the end of a leg that vanishes with its node.
        # Flushed with the peaks, so a restart loses at most peak_flush_seconds of it.
        self._last_seen: dict[tuple[str, int], float] = {}
        self.release_owed: set[str] = set()  # completed ranges whose data a transient error kept
        self._unsegmented: list[tuple[str, int]] = []  # finished by this run, in no segment yet

    def seen_running(self, st: AttemptState) -> None:
        self._last_seen[(st.range_key, st.attempt)] = self.clock.time()

    def flush_live(self, st: AttemptState) -> None:
        """Make a live attempt's peaks, start and last sighting durable, at most every peak_flush_seconds."""
        ident = (st.range_key, st.attempt)
        now = self.clock.time()
        prior = self.book.recs[st.range_key].get(st.attempt)
        start_owed = st.started_at is not None and (prior is None or prior.started_at is None)
        due = now - self._flushed_at.get(ident, -1e18) >= self.peak_flush_seconds
        if not start_owed and not (due and st.peaks.anon_bytes is not None):
            return
        self._flushed_at[ident] = now
        self.book.write(
            AttemptRecord(
                mission=self.name,
                range_key=st.range_key,
                attempt=st.attempt,
                started_at=st.started_at,
                last_seen_at=self._last_seen.get(ident),
                peak_anon_bytes=st.peaks.anon_bytes,
                peak_working_set_bytes=st.peaks.working_set_bytes,
                peak_ephemeral_bytes=st.peaks.ephemeral_bytes,
                node=st.node,
            )
        )

    def _recorded_elsewhere(self, st: AttemptState) -> bool:
        """Another dispatcher recorded it: a finished record is written once, so a second finisher's
        (possibly emptier) reading never replaces the first; it marks done before release."""
        if not self.records.is_done(st.range_key, st.attempt):
            return False
        self.book.refresh(st.range_key)
        self.release(st)
        return True

    def finish(self, st: AttemptState) -> bool:
        """Record a finished attempt and release it. False if its final read must wait."""
        ident = (st.range_key, st.attempt)
        if self._recorded_elsewhere(st):
            return True
        try:
            collected = self.backend.collect(st, partial(self.records.log_url, st.range_key))
        except TransientBackendError as exc:
            deferred(self.name, f"final read of {ident[0]} a{ident[1]}", exc)
            return False  # not a try: the backend could not answer at all
        except Exception as exc:  # noqa: BLE001 - any failed read is retried, bounded (L31)
            n = self._collect_failures.get(ident, 0) + 1
            self._collect_failures[ident] = n
            if n < self.collect_tries:
                log.warning("final read of %s a%d failed (%d/%d): %s", *ident, n, self.collect_tries, exc)
                return False
            log.error("final read of %s a%d gave up: recording without it: %s", *ident, exc)
            collected = Collected()
        if self._recorded_elsewhere(st):  # while this one read: its release may have emptied what was read
            return True
        obs = st.observation
        outcome = _outcome(obs, collected)
        if collected.already_complete and outcome is Outcome.OK:
            log.info("range %s found already complete by attempt %d", *ident)
        prior = self.book.recs[st.range_key].get(st.attempt)
        seconds, estimated = self.seconds(st, prior)
        peaks = st.peaks.merge(collected.peaks)
        rec = self.book.write(
            AttemptRecord(
                mission=self.name,
                range_key=st.range_key,
                attempt=st.attempt,
                outcome=outcome.value,
                exit_code=obs.exit_code if obs else None,
                reason=_reason(obs, collected, outcome),
                started_at=st.started_at,
                finished_at=st.finished_at,
                last_seen_at=self._last_seen.pop(ident, None),
                seconds=seconds,
                seconds_estimated=estimated,
                peak_anon_bytes=peaks.anon_bytes,
                peak_working_set_bytes=peaks.working_set_bytes,
                peak_ephemeral_bytes=peaks.ephemeral_bytes,
                tx_apply_count=collected.tx_apply_count,
                tx_apply_seconds=collected.tx_apply_seconds,
                resumed_from_ledger=collected.resumed_from_ledger,
                fresh_start=collected.fresh_start,
                setup_seconds=collected.setup_seconds,
                memory_limit_bytes=None if prior and prior.memory_limit_bytes else st.memory_limit_bytes,
                tier=None if prior and prior.tier else st.tier,
                node=st.node,
                log_path=collected.log_path,
            )
        )
        self.book.mark_done(*ident)  # last, after the metrics (L32)
        self._unsegmented.append(ident)
        if len(self._unsegmented) >= self.segment_every:
            self.append_segment()
        self.release(st)  # only now: releasing deletes the last copy of logs and peaks
        if outcome is not Outcome.OK:
            log.warning("range %s attempt %d: %s (%s)", st.range_key, st.attempt, outcome.value, rec.reason)
        self._judge(st, outcome, rec)
        if self.book.decided(st.range_key, RangeStatus.DONE):
            self.release_range(st.range_key)  # free the PVC at once (L3)
        return True

    def finish_now(self, st: AttemptState) -> bool:
        """Finish an attempt a stop ended, its final read retried now (bounded by collect_tries)
        rather than on a later pass: the run ends after this, and an attempt left unrecorded
        would wait for the next run to say what became of it."""
        return any(self.finish(st) for _ in range(self.collect_tries))

    def record_stopped(self, st: AttemptState, why: str) -> None:
        """An attempt the backend removed outright (its Job deleted): `stopped`, done mark last."""
        ident = (st.range_key, st.attempt)
        if self.records.is_done(*ident):
            return
        prior = self.book.recs[st.range_key].get(st.attempt)
        seconds, estimated = self.seconds(st, prior)
        self.book.write(
            AttemptRecord(
                mission=self.name,
                range_key=st.range_key,
                attempt=st.attempt,
                outcome=Outcome.STOPPED.value,
                reason=f"{why}: removed by the shutdown (L37)",
                started_at=st.started_at,
                last_seen_at=self._last_seen.pop(ident, None),
                seconds=seconds,
                seconds_estimated=estimated,
                peak_anon_bytes=st.peaks.anon_bytes,
                peak_working_set_bytes=st.peaks.working_set_bytes,
                peak_ephemeral_bytes=st.peaks.ephemeral_bytes,
                memory_limit_bytes=None if prior and prior.memory_limit_bytes else st.memory_limit_bytes,
                tier=None if prior and prior.tier else st.tier,
                node=st.node,
            )
        )
        self.book.mark_done(*ident)  # last (L32)

    def seconds(self, st: AttemptState, prior: AttemptRecord | None) -> tuple[float | None, bool | None]:
        """The attempt's compute seconds from its own clock (L23), or, for a leg whose pod
        vanished with its node, from its start to when it was last seen running (L22)."""
        if st.started_at and st.finished_at:
            return st.finished_at - st.started_at, False
        started = st.started_at or (prior.started_at if prior else None)
        seen = [
            t for t in (self._last_seen.get((st.range_key, st.attempt)), prior.last_seen_at if prior else None) if t
        ]
        if started and seen and max(seen) > started:
            return max(seen) - started, True
        return None, None  # never seen running: no duration rather than a guess (L23)

    def release(self, st: AttemptState) -> None:
        try:
            self.backend.release(st)
        except TransientBackendError as exc:
            # The record and its done mark are durable: a later pass sees it and releases again.
            deferred(self.name, f"release of {st.attempt_id}", exc)

    def release_range(self, key: str) -> None:
        try:
            self.backend.release_range(key)
            self.release_owed.discard(key)
        except TransientBackendError as exc:
            self.release_owed.add(key)
            deferred(self.name, f"release_range {key}", exc)

    def append_segment(self) -> None:
        """Append the records finished since the last segment to the snapshot log, so a run
        killed now leaves them for the next reader in one file, not one file each."""
        finished = [r for k, a in self._unsegmented if (r := self.book.recs[k].get(a)) is not None]
        self._unsegmented = []
        try:
            self.records.append_segment(finished)
        except Exception as exc:  # noqa: BLE001 - the snapshot log is an optimisation, never a failure
            log.warning("mission %s: snapshot segment not written: %s", self.name, exc)

    def snapshot(self) -> None:
        """Leave this run's finished records in one file for the profile and the next start."""
        self._unsegmented = []
        recs = {(k, a): r for k, by_a in self.book.recs.items() for a, r in by_a.items()}
        done = {(k, a) for k, attempts in self.book.done.items() for a in attempts}
        try:
            self.records.write_snapshot(recs, done)
        except Exception as exc:  # noqa: BLE001 - the snapshot is an optimisation, never a failure
            log.warning("mission %s: attempt snapshot not written: %s", self.name, exc)
