"""Pod logs by polling, never following (L29-L31).

Each poll asks for what came since the last line's second (`sinceTime` has
second granularity, so the overlap is read again and dropped line by line),
reads the body in chunks split on CR and LF with a bounded line, and appends
to a spool file per attempt. Polls run with bounded concurrency; only pods in
Running, Succeeded or Failed are polled (Pending answers 400, Unknown has no
node). A terminal or vanished pod gets its final read at once (L31).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from catchup_assets.backends.shipping import SplitLog, lines, split_log
from catchup_assets.core.dispatch.ports import TransientBackendError
from catchup_assets.core.measure.logparse import iter_lines

log = logging.getLogger(__name__)

POLLABLE = frozenset({"Running", "Succeeded", "Failed"})
CHUNK = 64 * 1024


@dataclass
class Cursor:
    """Where a pod's log was last read: the timestamp of the last line and the lines at it."""

    since: str | None = None  # RFC3339 with fractional seconds, as the kubelet prints it
    at_since: set[str] = field(default_factory=set)
    failures: int = 0
    failed: Exception | None = None  # why the last read failed


_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z ", re.ASCII)


def split_timestamped(line: str) -> tuple[str | None, str]:
    """The kubelet's RFC3339Nano prefix, made comparable as text, and the line.

    A piece split off at a carriage return carries no prefix of its own: None.
    """
    m = _TS.match(line)
    if not m:
        return None, line
    # Go trims trailing zeros of the fraction: pad it so later sorts after earlier.
    return f"{m.group(1)}.{(m.group(2) or ''):0<9}Z", line[m.end() :]


def new_lines(lines: Iterable[str], cur: Cursor) -> Iterator[str]:
    """Lines not seen before; advances the cursor."""
    for line in lines:
        ts, text = split_timestamped(line)
        ts = ts or cur.since  # a CR-split piece belongs to the line it came with
        if ts is None:
            yield text
            continue
        if cur.since is not None and ts < cur.since:
            continue
        seen = f"{ts} {text}"
        if ts == cur.since:
            if seen in cur.at_since:
                continue  # the overlap a since-time read repeats
            cur.at_since.add(seen)
        else:
            cur.since, cur.at_since = ts, {seen}
        yield text


def since_param(cur: Cursor) -> str | None:
    # sinceTime takes whole seconds: ask from the start of the last line's second.
    return cur.since[:19] + "Z" if cur.since else None


class LogSpool:
    """Per-attempt spool files under a local directory; gzip to the storage root at the end."""

    def __init__(self, directory: str | os.PathLike, read: Callable[..., object], concurrency: int = 16):
        self.dir = Path(directory)  # made by the first poll: constructing does no I/O
        self._read = read  # (pod_name, since_time) -> urllib3 response with .stream()
        self._cursors: dict[str, Cursor] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="logs")

    def path(self, attempt_id: str) -> Path:
        return self.dir / f"{attempt_id}.log"

    def poll(self, attempt_id: str, pod_name: str) -> bool:
        """One read of what the pod printed since last time; False if the read failed."""
        with self._lock:
            cur = self._cursors.setdefault(attempt_id, Cursor())
        try:
            resp = self._read(pod_name, since_param(cur))
            self.dir.mkdir(parents=True, exist_ok=True)
            chunks = resp.stream(CHUNK, decode_content=True) if hasattr(resp, "stream") else [resp]
            with open(self.path(attempt_id), "a", encoding="utf-8") as out:
                for text in new_lines(iter_lines(chunks), cur):
                    out.write(text + "\n")
            cur.failures, cur.failed = 0, None
            return True
        except Exception as exc:  # noqa: BLE001 - a bad read costs this poll only
            cur.failures, cur.failed = cur.failures + 1, exc
            log.info("log poll of %s failed (%d): %s", pod_name, cur.failures, exc)
            return False

    def poll_many(self, targets: list[tuple[str, str]]) -> None:
        """Poll pods concurrently, at most `concurrency` at once."""
        list(self._pool.map(lambda t: self.poll(*t), targets))

    def final_read(self, attempt_id: str, pod_name: str | None, tries: int = 3) -> None:
        """The last read of a terminal pod, bounded (L31); a vanished pod has nothing left. Raises
        TransientBackendError when the API server could not answer now (throttled past the pass's wait
        budget, issue 36): the attempt is collected on a later pass, never recorded without its log."""
        if pod_name is None:
            return
        for _ in range(tries):
            if self.poll(attempt_id, pod_name):
                return
        failed = self._cursors[attempt_id].failed
        if isinstance(failed, TransientBackendError):
            raise failed

    def split(self, attempt_id: str) -> SplitLog:
        """The attempt's own lines and the earlier logs its worker shipped, as files here (L31)."""
        return split_log(self.path(attempt_id), self.dir / f"{attempt_id}.own.log")

    def lines(self, attempt_id: str) -> Iterator[str]:
        return lines(self.path(attempt_id))

    def forget(self, attempt_id: str) -> None:
        with self._lock:
            self._cursors.pop(attempt_id, None)
        for path in (self.path(attempt_id), *self.dir.glob(f"{attempt_id}.own.log*")):
            path.unlink(missing_ok=True)
