"""A bounded background writer of per-range rows: the dispatcher hands a row over in O(1), never waits on the write.

range_catchup writes two kinds of rows to the event log while it runs (defs/mission/range_events.py): each
attempt's start (an observation) and each started range's mark (a planned row). One at a time,
each costs a database round trip on the dispatcher's thread: 2000 starts held a first pass ~50 s on
Postgres. Here one thread writes what has gathered, at most `batch` rows a write, every `linger`
seconds or sooner when a batch is full.

A mark is written once per range, and never once the range is done (a mark newer than the range's
materialization would show it in progress, then FAILED). A range's rows land before its
materialization: `done(key)` writes its pending rows, or waits for the batch holding them. A range
given up keeps its mark (the step's failure shows it FAILED), but its rows too land before the
observation saying why (`settle(key)`), so that observation stays the range's latest. A failed
write is logged and retried once with the next batch; these rows shade and annotate the UI and
decide nothing, so a writer that cannot write never stops a mission. Nor does it grow without end
behind a database that is down or slow: past `max_rows` unwritten rows, a new row is dropped and
counted (marks are not: one a range, at most a mission's ranges).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

log = logging.getLogger(__name__)

MARK = "mark"
ROW = "row"
Item = tuple[str, str, object]  # (MARK or ROW, range key, payload: None for a mark)


class RangeWriter:
    def __init__(
        self,
        write: Callable[[Sequence[Item]], None],
        *,
        batch: int = 500,
        linger: float = 1.0,
        max_rows: int = 20_000,  # ~40 MB of observations: hours of a stalled database at 2000 in flight
    ) -> None:
        self._write, self._batch, self._linger, self._max_rows = write, batch, linger, max_rows
        self._lock = threading.Lock()  # guards the state below, held for O(1) steps (a batch's copy aside)
        self._writing = threading.Lock()  # held while a batch is written
        self._pending: list[Item] = []
        self._retry: list[Item] = []
        self._marked: set[str] = set()  # every range ever marked here
        self._done: set[str] = set()  # ranges done: a mark of theirs still pending is not written
        self._rows: Counter[str] = Counter()  # rows not yet written, by range (pending, retry, in flight)
        self._in_flight: set[str] = set()  # ranges with a row or mark in the batch being written
        self._wake, self._closing = threading.Event(), threading.Event()
        self._unwritten = 0  # rows added, not yet written or dropped
        self.written = self.failed = self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="range-writer", daemon=True)
        self._thread.start()

    def mark(self, key: str) -> None:
        """Mark `key` soon, once."""
        with self._lock:
            if key in self._marked or key in self._done:
                return
            self._marked.add(key)
            self._pending.append((MARK, key, None))
            full = len(self._pending) >= self._batch
        if full:
            self._wake.set()

    def add(self, key: str, row: object) -> None:
        """Write `row` soon; before `key`'s `done` returns."""
        with self._lock:
            if self._unwritten >= self._max_rows:
                self.dropped += 1
                if self.dropped == 1:
                    log.warning(f"{self._max_rows} range rows unwritten: dropping new ones until the writes catch up")
                return
            self._unwritten += 1
            self._rows[key] += 1
            self._pending.append((ROW, key, row))
            full = len(self._pending) >= self._batch
        if full:
            self._wake.set()

    def done(self, key: str) -> None:
        """`key` finished: its mark, unless written, is dropped; its rows are written before this returns."""
        with self._lock:
            self._done.add(key)
        self.settle(key)

    def settle(self, key: str) -> None:
        """`key`'s rows are written before this returns; its mark is left as it is."""
        while True:
            with self._lock:
                if not self._rows[key] and key not in self._in_flight:
                    return
            self._flush(once=True)  # on this thread: the rows ahead of it and its own

    def close(self, also: Iterable[str] = ()) -> None:
        """Mark `also` (but ranges marked or done), write everything pending, stop the thread; blocks until written."""
        for key in also:
            self.mark(key)
        self._closing.set()
        self._wake.set()
        self._thread.join()
        self._flush()  # a batch that failed in the thread's last round gets its retry here

    def _run(self) -> None:
        while not self._closing.is_set():
            self._wake.wait(self._linger)
            self._wake.clear()
            self._flush()

    def _take(self) -> tuple[list[Item], int]:
        with self._lock:
            retry, self._retry = self._retry, []
            room = max(0, self._batch - len(retry))
            fresh, self._pending = self._pending[:room], self._pending[room:]
            retry, fresh = self._live(retry), self._live(fresh)
            self._in_flight = {k for _, k, _ in retry + fresh}
            return retry + fresh, len(retry)

    def _live(self, items: list[Item]) -> list[Item]:
        return [it for it in items if not (it[0] == MARK and it[1] in self._done)]

    def _flush(self, once: bool = False) -> None:
        while True:
            with self._writing:
                items, retried = self._take()
                if not items:
                    return
                ok = True
                try:
                    self._write(items)
                    self.written += len(items)
                    gone = items
                except Exception as exc:  # noqa: BLE001 - these rows never stop the mission
                    ok = False
                    self.failed += retried  # their second failure: dropped
                    gone = items[:retried]
                    log.warning(
                        f"could not write {len(items)} range rows ({exc}); retrying {len(items) - retried} once"
                    )
                    with self._lock:
                        self._retry = items[retried:]
                with self._lock:
                    for kind, key, _ in gone:
                        if kind == ROW:
                            self._rows[key] -= 1
                            self._unwritten -= 1
                    self._in_flight = set()
            if once or (not ok and not self._closing.is_set()):
                return  # the next round retries
