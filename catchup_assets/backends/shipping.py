"""An attempt's log to the storage root, with the earlier attempts' logs it shipped split off (L31).

A worker prints the log files earlier attempts left on the range's volume into
its own log, each between marker lines (`core/measure/shipped.py`). A backend's
collect splits them off here: the attempt's own lines are archived as its log
and are all the log parser sees; each shipped section is stored as its own
attempt's log when what is stored there is missing or shorter, as after a pod
that vanished with its node left its final read nothing to read. Writing and
reading the stored logs is `store/log_archive.py`'s.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from catchup_assets.core.measure import shipped
from catchup_assets.core.measure.logparse import iter_lines
from catchup_assets.store.log_archive import archive, stored_size

log = logging.getLogger(__name__)

CHUNK = 1 << 20


@dataclass(frozen=True)
class SplitLog:
    own: Path  # the attempt's own lines, as it printed them
    shipped: dict[int, Path]  # earlier attempt -> the section it shipped


def split_log(src: Path, own: Path) -> SplitLog:
    """Split `src` into `own` and one file per shipped section beside it; again gives the same."""
    own.parent.mkdir(parents=True, exist_ok=True)
    paths: dict[int, Path] = {}
    with contextlib.ExitStack() as files:
        mine = files.enter_context(open(own, "wb"))
        outs = {}
        if src.exists():
            f = files.enter_context(open(src, "rb"))
            # readline with a bound: a carriage-return meter is one huge "line" (L29).
            for n, piece in shipped.split(iter(lambda: f.readline(CHUNK), b"")):
                if n is None:
                    mine.write(piece)
                    continue
                if n not in outs:
                    paths[n] = own.with_name(f"{own.name}.from-a{n:03d}")
                    outs[n] = files.enter_context(open(paths[n], "wb"))
                outs[n].write(piece)
    return SplitLog(own, paths)


def lines(path: Path) -> Iterator[str]:
    """The file's lines, split at CR and LF, each bounded (L29)."""
    if path.exists():
        with open(path, "rb") as f:
            yield from iter_lines(iter(lambda: f.read(CHUNK), b""))


def ship(parts: SplitLog, attempt: int, log_url: Callable[[int], str]) -> list[int]:
    """Store each earlier attempt's section whose stored log is missing or shorter; the attempts stored.

    Shorter, not different: the attempt's own final read, when its pod was still
    there, saw everything its file holds, so an equal copy is the same log.
    """
    stored = []
    for n, path in sorted(parts.shipped.items()):
        if n >= attempt:  # only an earlier attempt's file can be on the volume before this one starts
            log.warning("attempt %d shipped a log of attempt %d, not an earlier one: dropped", attempt, n)
            continue
        dest = log_url(n)
        have = stored_size(dest)
        if have is not None and have >= path.stat().st_size:
            continue
        archive(path, dest)
        stored.append(n)
    return stored
