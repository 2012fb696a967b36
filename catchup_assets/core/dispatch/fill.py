"""Filling the free slots: the pass's submits, through a bounded pool when the backend allows (issue 26 item 3).

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
blocks the mission, and each start is told (`attempt_events`) from here only.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from catchup_assets.core.dispatch.ports import DispatchBlocked, TransientBackendError

log = logging.getLogger(__name__)

WAVE_PER_WORKER = 4  # a wave is this many submits per worker: few waits on the slowest, a stop heard soon


class Filling:
    """A part of `reconciler.Dispatcher`: needs `backend`, `_submit`, `_stop`, `_block`, `attempt_events`."""

    _submit_pool: ThreadPoolExecutor | None = None

    def _fill(self, queue: list[tuple[str, int, int, int]]) -> int:
        """Submit `queue` (key, attempt, OOMs, evictions) in order; how many started."""
        workers = max(1, int(getattr(self.backend, "submit_concurrency", 1) or 1))
        wave = 1 if workers == 1 else workers * WAVE_PER_WORKER
        started = 0
        for i in range(0, len(queue), wave):
            if self._stop:
                break  # an operator's stop: not one dispatch more
            batch = queue[i : i + wave]
            if workers == 1:
                outcomes = [self._try_submit(*item) for item in batch]
            else:
                if self._submit_pool is None:
                    self._submit_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="submit")
                outcomes = list(self._submit_pool.map(lambda item: self._try_submit(*item), batch))
            ended = False
            for (key, attempt, _, _), (ok, told, exc) in zip(batch, outcomes, strict=True):
                if told is not None:
                    self.attempt_events.submitted(told)
                started += ok
                if isinstance(exc, TransientBackendError):
                    log.warning("submit of %s a%d deferred: %s", key, attempt, exc)
                    ended = True
                elif isinstance(exc, DispatchBlocked):
                    if self._blocked is None:
                        self._block(f"new dispatches stopped: {exc}")
                    ended = True
            if ended:
                break
        return started

    def _try_submit(self, key: str, attempt: int, n_oom: int, n_evicted: int):
        """(started, spec to tell or None, the error that ends the pass's submits or None)."""
        try:
            ok, told = self._submit(key, attempt, n_oom, n_evicted)
            return ok, told, None
        except (TransientBackendError, DispatchBlocked) as exc:
            return False, None, exc

    def _close_submit_pool(self) -> None:
        if self._submit_pool is not None:
            self._submit_pool.shutdown(wait=True)
            self._submit_pool = None
