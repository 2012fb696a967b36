"""Filling the free slots: each submit behind its claim and durable sizing, through a bounded pool
when the backend allows (issue 26 item 3).

A first pass at 2000 slots submits 2000 attempts; one at a time, each behind its
claim, its durable record and two API requests, that took ~11 s. A backend that
says `submit_concurrency > 1` (the Kubernetes one: its calls wait on the API
server and its record writes on the disk's sync) gets that many submits at once,
in waves. Each attempt keeps its own order (claim, record durable, then the
Job: L11, L32), so a restart or a second dispatcher sees exactly what one at a
time would leave. Backends that hold state of their own (local, virtual) say
nothing and stay serial, and replays stay deterministic.

What a wave met is handled on the dispatcher's thread, as the serial loop did:
a transient error ends this pass's submits after its wave, a blocked dispatch
blocks the mission, and each start is told (`events`) from here only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.claims import ClaimBook
from catchup_assets.core.dispatch.health import Watchdog
from catchup_assets.core.dispatch.live import AttemptEvents
from catchup_assets.core.dispatch.ports import (
    AlreadyExists,
    AttemptSpec,
    Backend,
    DispatchBlocked,
    ForeignObject,
    TransientBackendError,
)
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.stopping import StopState
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)

# Foreign objects met under our attempts' names before new dispatch stops (issue 45): a few on one range
# is someone racing its names, many across the mission a namespace shared with another deployment.
FOREIGN_PER_RANGE = 3
FOREIGN_PER_MISSION = 10
WAVE_PER_WORKER = 4  # a wave is this many submits per worker: few waits on the slowest, a stop heard soon

# (range key, attempt, its range's OOMs, its range's evictions): one attempt to start
Queued = tuple[str, int, int, int]


class Submitter:
    """Starts attempts in dispatch order: claim, sizing made durable, then the backend's submit.

    `spec(key, attempt, n_oom, n_evicted, n_disrupted)` sizes an attempt (attempt_spec.py)."""

    def __init__(
        self,
        backend: Backend,
        book: RangeBook,
        claims: ClaimBook,
        spec: Callable[[str, int, int, int, int], AttemptSpec],
        events: AttemptEvents,
        stop: StopState,
        watchdog: Watchdog,
    ) -> None:
        self.backend, self.book, self.claims, self._spec = backend, book, claims, spec
        self.events, self.stop, self.watchdog = events, stop, watchdog
        self._pool: ThreadPoolExecutor | None = None

    def fill(self, queue: list[Queued]) -> int:
        """Submit `queue` in order; how many started."""
        workers = max(1, int(getattr(self.backend, "submit_concurrency", 1) or 1))
        wave = 1 if workers == 1 else workers * WAVE_PER_WORKER
        started = 0
        for i in range(0, len(queue), wave):
            if self.stop.requested:
                break  # an operator's stop: not one dispatch more
            batch = queue[i : i + wave]
            if workers == 1:
                outcomes = [self._try_submit(*item) for item in batch]
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="submit")
                outcomes = list(self._pool.map(lambda item: self._try_submit(*item), batch))
            ended = False
            for (key, attempt, _, _), (ok, told, exc) in zip(batch, outcomes, strict=True):
                if told is not None:
                    self.events.submitted(told)
                started += ok
                if isinstance(exc, TransientBackendError):
                    log.warning("submit of %s a%d deferred: %s", key, attempt, exc)
                    ended = True
                elif isinstance(exc, DispatchBlocked):
                    if self.watchdog.blocked is None:
                        self.watchdog.block(f"new dispatches stopped: {exc}")
                    ended = True
                elif isinstance(exc, ForeignObject):
                    ended = self._foreign(key, exc) or ended
            if ended:
                break
        return started

    def _try_submit(self, key: str, attempt: int, n_oom: int, n_evicted: int):
        """(started, spec to tell or None, the error that ends the pass's submits or None)."""
        try:
            ok, told = self.submit(key, attempt, n_oom, n_evicted)
            return ok, told, None
        except (TransientBackendError, DispatchBlocked, ForeignObject) as exc:
            return False, None, exc

    def submit(self, key: str, attempt: int, n_oom: int, n_evicted: int = 0) -> tuple[bool, AttemptSpec | None]:
        """Claim the attempt, make its sizing durable, start it: (started, its spec to tell, or None).

        Not started (False) if another holder has it. May run on a submit pool's thread:
        it touches only this range's state, and tells nothing itself."""
        if not self.claims.claim(key, attempt):
            return False, None
        # Reclaims counted from the range's own finished attempts, as the budgets count outcomes.
        spec = self._spec(key, attempt, n_oom, n_evicted, self.book.count(key, Outcome.DISRUPTED))
        # The sizing is durable before the attempt exists, so a restart knows it.
        self.book.write(
            AttemptRecord(
                mission=spec.mission,
                range_key=key,
                attempt=attempt,
                memory_request_bytes=spec.memory_request_bytes,
                memory_limit_bytes=spec.memory_limit_bytes,
                tier=spec.tier,
                capacity_type=spec.capacity_type,
                log_path=self.book.records.log_url(key, attempt),
            )
        )
        try:
            self.backend.submit(spec)
        except AlreadyExists:
            # Created before a restart, its start told then: adopted, not told twice.
            log.info("attempt %s exists already: adopted (still holds its slot)", spec.attempt_id)
            return True, None
        except ForeignObject as exc:
            # Not ours: never run or read. Its number is spent, durably (record, then done mark),
            # charged to no budget (Outcome.FOREIGN), and the range goes on under the next one.
            self.book.write(
                AttemptRecord(
                    mission=spec.mission,
                    range_key=key,
                    attempt=attempt,
                    outcome=Outcome.FOREIGN.value,
                    reason=f"foreign object: {exc}"[:500],
                    memory_request_bytes=spec.memory_request_bytes,
                    memory_limit_bytes=spec.memory_limit_bytes,
                    tier=spec.tier,
                    capacity_type=spec.capacity_type,
                )
            )
            self.book.mark_done(key, attempt)
            raise
        return True, spec

    def _foreign(self, key: str, exc: ForeignObject) -> bool:
        """Told once, loudly, naming the object; True (the pass's submits end) once dispatch is blocked:
        the name can never be freed (a PVC), or collisions passed their bounds (a tenant racing our
        names, or another deployment of this mission in the namespace)."""
        # Once per object: an error, unless the backend's observe already named it as one.
        log.log(
            logging.INFO if exc.told else logging.ERROR,
            "mission %s: range %s: %s; not adopted, left alone%s",
            self.watchdog.name,
            key,
            exc,
            "; the range goes on under its next attempt" if exc.retry else "",
        )
        on_range = self.book.count(key, Outcome.FOREIGN)
        in_all = sum(self.book.count(k, Outcome.FOREIGN) for k in self.book.keys)
        if not exc.retry:
            why = f"range {key} cannot run: {exc}; remove it and run again"
        elif on_range >= FOREIGN_PER_RANGE:
            why = f"range {key} met {on_range} objects under its attempts' names that it did not make, the last {exc}"
        elif in_all >= FOREIGN_PER_MISSION:
            why = f"{in_all} attempts' names were held by objects the mission did not make, the last {exc}"
        else:
            return False
        if self.watchdog.blocked is None:
            self.watchdog.block(
                f"new dispatches stopped: {why}; see who creates Jobs in the mission namespace (docs/deploy.md)"
            )
        return True

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
