"""One attempt's log for an operator (`catchup-assets logs`): its backend's while it lives, else its archive.

The records say which attempts a range has (the dispatcher writes one before it submits) and
which ended (the done mark, L32): the newest is the default. An attempt not done-marked is read
from its backend (LiveLogs), following it if asked until it ends; one whose backend holds nothing
any more (released), or done-marked, from its gzipped archive on the storage root (L31).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from catchup_assets.core.dispatch.ports import LiveLogs, LogUnavailable
from catchup_assets.core.errors import ConfigError
from catchup_assets.mission.saved import mission_doc
from catchup_assets.store.log_archive import is_stored, stored_lines
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

LIVE = "live"


@dataclass(frozen=True)
class AttemptLog:
    attempt: int
    source: str  # LIVE: from its backend; else the archive's URL
    lines: Iterator[str]


def newest_attempt(storage_root: str, mission: str, range_key: str) -> tuple[dict, set[int]]:
    """The range's records (attempt -> record) and done marks; refused naming the flag at fault."""
    store = Store(storage_root)
    records, done, _ = RecordStore(store, mission).load_range(range_key)
    if not records and mission_doc(store, mission) is None and not store.find(mission):
        raise ConfigError(f"--mission: no mission {mission!r} is stored under {storage_root}")
    if not records:
        raise ConfigError(f"--range: mission {mission} has started no attempt of range {range_key}")
    return records, done


def attempt_log(
    storage_root: str,
    mission: str,
    range_key: str,
    backend: LiveLogs,
    attempt: int | None = None,
    follow: bool = False,
    tail_lines: int | None = None,
    limit_bytes: int | None = None,
) -> AttemptLog:
    records, done = newest_attempt(storage_root, mission, range_key)
    n = attempt if attempt is not None else max(records)
    if n not in records:
        raise ConfigError(f"--attempt: range {range_key} has attempts {sorted(records)}, not {n}")
    if n not in done:
        lines = backend.read_log(range_key, n, follow, tail_lines, limit_bytes)
        if lines is not None:
            return AttemptLog(n, LIVE, lines)
    url = records[n].log_path
    if url and is_stored(url):
        return AttemptLog(n, url, _bounded(stored_lines(url), tail_lines, limit_bytes))
    raise LogUnavailable(f"attempt {n} of range {range_key} has no log: not started, or ended and not yet archived")


def _bounded(lines: Iterator[str], tail_lines: int | None, limit_bytes: int | None) -> Iterator[str]:
    """The last lines within both bounds, as the live reads are bounded."""
    kept = deque(lines, maxlen=tail_lines) if tail_lines is not None else deque(lines)
    size = sum(len(s.encode()) + 1 for s in kept)
    while limit_bytes is not None and kept and size > limit_bytes:
        size -= len(kept.popleft().encode()) + 1
    return iter(kept)
