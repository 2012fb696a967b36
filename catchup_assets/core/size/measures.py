"""A profile as sizing reads it: one measure per range, checked where it enters, looked up by range end.

Pure. `measures_from_rows` turns profile rows (range_profile.parquet, aggregate/profile.py)
into `RangeMeasure`s, range-checking every value; `ProfileIndex` finds the measure that
sizes a range: its own, else the nearest measured end above (L25).
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RangeMeasure:
    """What sizing reads of one profiled range (L26)."""

    last_ledger: int
    peak_anon_bytes: int
    peak_working_set_bytes: int | None = None
    seconds: float | None = None
    peak_ephemeral_bytes: int | None = None  # sizes its disk in ephemeral mode (disk.py)


class ProfileIndex:
    """Lookup by range end: exact, else the nearest measured end above (L25)."""

    def __init__(self, measures: Iterable[RangeMeasure]):
        by_end: dict[int, RangeMeasure] = {}
        for m in measures:
            if m.peak_anon_bytes is None:
                continue  # measurement-free entries would capture ranges below them
            prev = by_end.get(m.last_ledger)
            by_end[m.last_ledger] = m if prev is None or m.peak_anon_bytes > prev.peak_anon_bytes else prev
        self._ends = sorted(by_end)
        self._by_end = by_end

    def __len__(self) -> int:
        return len(self._ends)

    def lookup(self, last_ledger: int) -> RangeMeasure | None:
        i = bisect.bisect_left(self._ends, last_ledger)
        if i == len(self._ends):
            return None  # past the top of the profile: unprofiled
        return self._by_end[self._ends[i]]

    def measures(self) -> list[RangeMeasure]:
        """One measure per measured range end, lowest end first."""
        return [self._by_end[e] for e in self._ends]

    def top(self) -> RangeMeasure | None:
        """The measured range highest in history (the newest ledgers it covers)."""
        return self._by_end[self._ends[-1]] if self._ends else None


MAX_LEDGER = 2**32 - 1
MAX_BYTES = 2**50  # a PiB: no range's peak comes near it


def _checked(row: dict[str, Any], field: str, kind: type, low: float, high: float):
    """The row's `field` as `kind` if present, finite and in (low, high]; else None with a warning."""
    value = row.get(field)
    if value is None:
        return None
    try:
        number = kind(value)
        ok = math.isfinite(number) and low < number <= high
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        log.warning("profile row %s: %s %r out of range, not used", row.get("range_key"), field, value)
        return None
    return number


def measures_from_rows(rows: Iterable[dict[str, Any]]) -> list[RangeMeasure]:
    """What sizing reads of each profile row, every value range-checked where it enters.

    A row without a usable `last_ledger` is skipped; a bad peak or seconds is
    left out of that row alone (a negative peak would size a negative request).
    """
    out = []
    for r in rows:
        last = _checked(r, "last_ledger", int, 0, MAX_LEDGER)
        if last is None:
            log.warning("profile row %s skipped: no usable last_ledger", r.get("range_key"))
            continue
        if r.get("completed") is False:
            # A profile written before incomplete chains were left out may carry an early
            # failure's peak: only the OOM floor of such a row may size a range (L21).
            floor = _checked(r, "oom_floor_bytes", int, 0, MAX_BYTES)
            if floor is None:
                log.warning("profile row %s skipped: it never completed and never OOMed", r.get("range_key"))
                continue
            out.append(RangeMeasure(last, floor))
            continue
        out.append(
            RangeMeasure(
                last,
                _checked(r, "peak_anon_bytes", int, 0, MAX_BYTES),
                _checked(r, "peak_working_set_bytes", int, 0, MAX_BYTES),
                _checked(r, "seconds", float, 0, 1e9),
                _checked(r, "peak_ephemeral_bytes", int, 0, MAX_BYTES),
            )
        )
    return out
