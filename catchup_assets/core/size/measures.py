"""A profile as sizing reads it: one measure per range, checked where it enters, looked up by range end.

Pure. `measures_from_rows` turns profile rows (range_profile.parquet, aggregate/profile_table.py)
into `RangeMeasure`s, range-checking every value; `ProfileIndex` finds the measure that
sizes a range: its own, else the nearest measured end above (L25).
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from catchup_assets.core.values.ledger_range import LedgerRange, RangeKeyError, parse_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RangeMeasure:
    """What sizing reads of one profiled range (L26)."""

    last_ledger: int
    peak_anon_bytes: int
    peak_working_set_bytes: int | None = None
    seconds: float | None = None
    peak_ephemeral_bytes: int | None = None  # sizes its disk in ephemeral mode (disk.py)
    first_ledger: int | None = None  # None: a profile without it is looked up by end alone
    setup_seconds: float | None = None  # before the first ledger replayed (issue 25 item 1); None: not measured


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

    def lookup_span(self, first_ledger: int, last_ledger: int) -> RangeMeasure | None:
        """The measure that sizes ledgers `first..last` by what it overlaps (issue 25 item 3).

        The range's own row when its key matches (or the row has no first ledger: `lookup`);
        else a measure combined from every row it overlaps: each peak the largest of theirs,
        seconds the setup of the row holding `first` plus each row's replay pro rata to the
        ledgers shared (a row without `setup_seconds` counts as all replay). So a grid range
        reads a cut profile (its pieces, or the merged row holding it) and a cut range a grid
        profile alike: by the ledgers it covers. Ledgers inside the span no row measured (a
        range of the profile that never completed) are sized as L25 sizes an unmeasured range:
        at the replay rate of the nearest measured row above, whose peak counts too. Nothing
        overlapped: `lookup` (the nearest measured end above, L25).
        """
        own = self.lookup(last_ledger)
        exact = own is not None and own.last_ledger == last_ledger and own.first_ledger == first_ledger
        if own is None or own.first_ledger is None or exact:
            return own
        lo = bisect.bisect_left(self._ends, first_ledger)
        parts = []
        for end in self._ends[lo:]:  # rows do not overlap (vet_rows), so their firsts ascend too
            m = self._by_end[end]
            if m.first_ledger is not None and m.first_ledger > last_ledger:
                break
            if m.first_ledger is not None:
                parts.append(m)
        if not parts:
            return own
        return _combined(parts, first_ledger, last_ledger, own)

    def measures(self) -> list[RangeMeasure]:
        """One measure per measured range end, lowest end first."""
        return [self._by_end[e] for e in self._ends]

    def top(self) -> RangeMeasure | None:
        """The measured range highest in history (the newest ledgers it covers)."""
        return self._by_end[self._ends[-1]] if self._ends else None


def measure_for(profile: ProfileIndex | None, first_ledger: int | None, last_ledger: int) -> RangeMeasure | None:
    """The measure that sizes a range: by ledger overlap when its first ledger is known."""
    if profile is None or not len(profile):
        return None
    return profile.lookup(last_ledger) if first_ledger is None else profile.lookup_span(first_ledger, last_ledger)


def profiled_seconds(profile: ProfileIndex | None, ranges: Mapping[str, LedgerRange]) -> dict[str, float | None]:
    """Each range's profiled seconds by what it overlaps (a cut or merged range too); None: unprofiled."""
    found = {k: measure_for(profile, r.first, r.last) for k, r in ranges.items()}
    return {k: m.seconds if m and m.seconds else None for k, m in found.items()}


def _largest(values) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _combined(parts: list[RangeMeasure], first: int, last: int, above: RangeMeasure) -> RangeMeasure:
    """One measure for `first..last` from the rows it overlaps, lowest first; `above`, the nearest
    measured row ending at or above `last`, sizes the ledgers above the last of them."""
    if parts[-1].last_ledger < last and above.first_ledger is not None and above.first_ledger > last:
        parts = [*parts, above]  # the span's top ledgers are unmeasured: sized as the row above them
    seconds: float | None = 0.0
    cursor = first  # the lowest ledger of the span not yet counted
    for i, m in enumerate(parts):
        if m.seconds is None:
            seconds = None  # one unmeasured part: the span's time is unknown, never a partial sum
            break
        setup = min(m.setup_seconds or 0.0, m.seconds)
        top = min(last, m.last_ledger)
        # The ledgers shared with this row, and any below them no row measured (L25: the row above).
        seconds += (m.seconds - setup) / (m.last_ledger - m.first_ledger + 1) * (top - cursor + 1)
        cursor = top + 1
        if i == 0:
            seconds += setup  # the span starts once, in the lowest row it overlaps
    return RangeMeasure(
        last,
        max(m.peak_anon_bytes for m in parts),
        _largest(m.peak_working_set_bytes for m in parts),
        seconds,
        _largest(m.peak_ephemeral_bytes for m in parts),
        first,
        parts[0].setup_seconds,
    )


MAX_LEDGER = 2**32 - 1
MAX_BYTES = 2**50  # a PiB: no range's peak comes near it
SKIPS_NAMED = 20  # skipped rows warned one by one; a file of bad rows must not bury the run's log


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
                _checked(r, "first_ledger", int, 0, MAX_LEDGER),
                _checked(r, "setup_seconds", float, -1e-9, 1e9),
            )
        )
    return out


def _ledger(row: dict[str, Any], name: str) -> int | None:
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _row_problem(row: dict[str, Any]) -> tuple[str, tuple[int, int] | None]:
    """What makes a row unusable ("" if nothing), and its ledgers first..last when usable."""
    key, first, last = row.get("range_key"), _ledger(row, "first_ledger"), _ledger(row, "last_ledger")
    if row.get("last_ledger") is None:
        return "no last_ledger", None
    if last is None or not 1 <= last <= MAX_LEDGER:
        return f"last_ledger {row.get('last_ledger')!r} is not a ledger number (1..{MAX_LEDGER})", None
    if row.get("first_ledger") is not None and (first is None or not 1 <= first <= MAX_LEDGER):
        return f"first_ledger {row.get('first_ledger')!r} is not a ledger number (1..{MAX_LEDGER})", None
    if first is not None and first > last:
        return f"inverted range: first_ledger {first} > last_ledger {last}", None
    try:
        rng = parse_key(key)
    except RangeKeyError as exc:
        return str(exc), None
    if rng.last != last or (first is not None and rng.first != first):
        return f"range_key {key} disagrees with first_ledger {first}, last_ledger {last}", None
    return "", (rng.first, rng.last)


def vet_rows(rows: Sequence[dict[str, Any]], source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of the profile at `source` that can size a range, and the warnings (logged too) naming
    each row left out, the repeats and the mix.

    Rows count from 1, in file order. A row with a bad range (no or an out-of-range
    ledger, first > last, a key its ledgers disagree with) is skipped. Of rows with
    one key, the last in the file is kept: a profile has one row per range, so a
    repeat comes of appending a newer measurement (or concatenating profiles, older
    first), and the later row is the newer one. Of ranges that overlap (profiles of
    two grids mixed), the one starting lower is kept: each ledger is sized once.
    Rows of several missions are kept, warned with counts per mission.
    """
    notes: list[str] = []

    unnamed: list[int] = []  # skipped rows past the first SKIPS_NAMED: a count, not a line each

    def warn(message: str) -> None:
        notes.append(message)
        log.warning("%s", message)

    named = 0

    def skip(n: int, key: Any, why: str) -> None:
        nonlocal named
        if named == SKIPS_NAMED:
            unnamed.append(n)
            return
        named += 1
        warn(f"previous profile {source}: row {n} ({key}) skipped: {why}")

    usable: dict[str, tuple[int, tuple[int, int], dict[str, Any]]] = {}
    repeats: dict[str, list[int]] = {}
    for n, row in enumerate(rows, start=1):
        problem, ledgers = _row_problem(row)
        if problem:
            skip(n, row.get("range_key"), problem)
            continue
        key = row["range_key"]
        if key in usable:
            repeats.setdefault(key, [usable[key][0]]).append(n)
        usable[key] = (n, ledgers, row)
    if repeats:
        shown = "; ".join(f"{k} rows {', '.join(map(str, ns))}" for k, ns in list(repeats.items())[:10])
        more = "; ..." if len(repeats) > 10 else ""
        warn(
            f"previous profile {source}: {len(repeats)} range key(s) repeated, the last row of each is kept "
            f"(the newer measurement): {shown}{more}"
        )
    kept: list[tuple[int, dict[str, Any]]] = []
    top: tuple[int, str] | None = None  # the highest last ledger kept so far, and its row
    for n, (first, last), row in sorted(usable.values(), key=lambda v: v[1]):
        if top is not None and first <= top[0]:
            skip(n, row["range_key"], f"it overlaps row {top[1]}, which starts lower")
            continue
        top = (last, f"{n} ({row['range_key']})")
        kept.append((n, row))
    if unnamed:
        shown = ", ".join(map(str, sorted(unnamed)[:20])) + (", ..." if len(unnamed) > 20 else "")
        warn(f"previous profile {source}: {len(unnamed)} more rows skipped as the above: rows {shown}")
    missions = Counter(row.get("mission") for _, row in kept)
    if len(missions) > 1:
        counts = ", ".join(f"{m} {c}" for m, c in sorted(missions.items(), key=lambda mc: (-mc[1], str(mc[0]))))
        warn(
            f"previous profile {source} mixes rows of {len(missions)} missions ({counts}): "
            "each range is sized from its own row"
        )
    return [row for _, row in sorted(kept, key=lambda nr: nr[0])], notes
