"""A local attempt's log while it lives: its supervisor's `worker.log`, read as `tail -f` reads it.

The `LiveLogs` port of the local backend (core/dispatch/ports.py), for `catchup-assets logs`: the
last lines within a byte bound, then, following, each line its worker writes, until the attempt
ends: its supervisor wrote its verdict (`status.json`, the last file it writes: L32) or is gone.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from catchup_assets.backends.local.registry import START_TIMEOUT
from catchup_assets.backends.local.state import read_json
from catchup_assets.backends.local.supervisor import pid_alive
from catchup_assets.core.dispatch.ports import attempt_id
from catchup_assets.core.measure.logparse import iter_lines

CHUNK = 64 * 1024
POLL_SECONDS = 0.2  # as often as a supervisor samples its worker


def ended(d: Path) -> bool:
    """The attempt in `d` can write no more: judged, its supervisor gone, or it never started."""
    if (d / "status.json").exists():
        return True
    try:
        sup = read_json(d / "supervisor.json")
    except ValueError:
        return False  # torn mid-write: its supervisor is writing it now
    if sup is None:
        try:
            return time.time() - d.stat().st_mtime >= START_TIMEOUT  # what the registry judges lost
        except FileNotFoundError:
            return True
    return not pid_alive(sup["pid"], sup.get("create_time"))


def _tail(path: Path, tail_lines: int | None, limit_bytes: int | None) -> tuple[list[str], int]:
    """The last complete lines within the bounds, and the offset just past them to follow from."""
    size = path.stat().st_size
    begin = max(0, size - limit_bytes) if limit_bytes is not None else 0
    with open(path, "rb") as f:
        f.seek(begin)
        data = f.read(size - begin)
    end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1  # a line still being written is followed, not cut
    lines = list(iter_lines([data[:end]]))
    if begin > 0 and lines:
        lines = lines[1:]  # began mid-line
    return list(deque(lines, maxlen=tail_lines)) if tail_lines is not None else lines, begin + end


def follow_file(
    path: Path,
    done: Callable[[], bool],
    follow: bool = False,
    tail_lines: int | None = None,
    limit_bytes: int | None = None,
    poll: float = POLL_SECONDS,
) -> Iterator[str]:
    """`path`'s last lines; following, each new one as it is written until `done()`, then the rest."""
    while not path.exists():  # pending: its worker has not started
        if not follow or done():
            return
        time.sleep(poll)
    first, offset = _tail(path, tail_lines, limit_bytes)
    yield from first
    if not follow:
        return

    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            f.seek(offset)
            while True:
                if data := f.read(CHUNK):
                    yield data
                    continue
                if done():  # nothing more can come: what was written before it ended, then stop
                    yield f.read()
                    return
                time.sleep(poll)

    yield from iter_lines(chunks())


class LocalLiveLog:
    """`read_log` of the LiveLogs port, a part of `backend.LocalBackend` (its `attempt_dir`)."""

    def read_log(
        self,
        range_key: str,
        attempt: int,
        follow: bool = False,
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
    ) -> Iterator[str] | None:
        d = self.attempt_dir(attempt_id(range_key, attempt))
        if not os.path.isdir(d):
            return None  # released (its archive is the log) or never submitted here
        return follow_file(d / "worker.log", lambda: ended(d), follow, tail_lines, limit_bytes)
