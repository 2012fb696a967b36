"""One read of the storage root per figure at a time, shared by every request that asks for it meanwhile.

A mission's figures are a scan of its records (seconds at 4000 ranges), and every open page polls
them every 1.5 s: read per request, ten tabs would be ten scans at once, each slower for the
others. Here a figure (`key`: the mission's page, a range's, the list) is read by one worker thread;
requests that ask while it runs wait for that same read, and one that asks within `fresh_seconds`
of its end takes its answer. A request that gives up waiting (`wait_seconds`) leaves the read
running, so the next poll gets its answer rather than starting over. Failures are not kept: the
next request reads again. A change (a control write) forgets its mission's figures.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

import anyio


class SharedReads:
    def __init__(
        self,
        readers: int,
        fresh_seconds: float,
        wait_seconds: float,
        kept: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limiter = anyio.CapacityLimiter(readers)
        self._fresh, self._wait, self._kept, self._clock = fresh_seconds, wait_seconds, kept, clock
        self._done: OrderedDict[Hashable, tuple[float, object]] = OrderedDict()  # key -> (read at, answer)
        self._running: dict[Hashable, asyncio.Future] = {}

    async def get(self, key: Hashable, read: Callable[[], object]):
        """`read()`'s answer for `key`: a fresh one kept, the one running, or a new read. TimeoutError
        past `wait_seconds` (the read runs on); whatever `read` raised, to every request that waited."""
        kept = self._done.get(key)
        if kept is not None and self._clock() - kept[0] < self._fresh:
            return kept[1]
        task = self._running.get(key)
        if task is None:
            task = asyncio.ensure_future(self._read(key, read))
            self._running[key] = task
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a failure nobody awaited: no warning
        return await asyncio.wait_for(asyncio.shield(task), self._wait)

    async def run(self, call: Callable[[], object]):
        """`call()` on a worker thread under the same bound on readers, not shared (a write)."""
        with anyio.fail_after(self._wait):
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True, limiter=self._limiter)

    def forget(self, match: Callable[[Hashable], bool]) -> None:
        """Drop what is kept for the matching keys, and let a read begun before now serve only its own
        waiters: the next request reads afresh."""
        for key in [k for k in self._done if match(k)]:
            del self._done[key]
        for key in [k for k in self._running if match(k)]:
            del self._running[key]

    async def _read(self, key: Hashable, read: Callable[[], object]):
        me = asyncio.current_task()
        try:
            answer = await anyio.to_thread.run_sync(read, limiter=self._limiter)
            if self._running.get(key) is me:  # not forgotten meanwhile: its answer is still the newest
                self._done[key] = (self._clock(), answer)
                self._done.move_to_end(key)
                while len(self._done) > self._kept:
                    self._done.popitem(last=False)
            return answer
        finally:
            if self._running.get(key) is me:
                del self._running[key]
