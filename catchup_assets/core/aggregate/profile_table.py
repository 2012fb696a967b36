"""Attempt records -> one measured row per range -> the profile table.

Pure: rows of PROFILE_COLUMNS (store/tables.py makes them a Parquet table). The chain rules are L21-L22:
peaks are the max over the contiguous chain of resumed attempts that ends in
the range's final attempt; a fresh start (`new-db`) opens the chain and
supersedes what came before, except an OOM's limit, which stays a lower bound
on demand. `seconds` and `tx_apply_*` are summed over the chain: a resume
re-applies at most one 64-ledger checkpoint, so the tx sum may over-count by
that much. `seconds` is compute; `wall_seconds` also covers the gaps. A final leg that found
the range already complete replayed nothing: the legs before it are the chain (issue 36 item 9).

Profile columns (one row per range; sizes in bytes, times in seconds):
    range_key, first_ledger, last_ledger      the range
    peak_anon_bytes          sizing input: max anon over the chain, >= oom_floor_bytes
    peak_working_set_bytes   max working set over the chain (cache pressure)
    peak_ephemeral_bytes     max bytes under the data directory
    oom_floor_bytes          largest memory limit the range OOMed at (0 if none)
                             A range that never completed has a row only if it OOMed, with
                             peak_anon_bytes = oom_floor_bytes and no other measurement.
    seconds                  compute seconds summed over the chain
    seconds_estimated        a leg's seconds were estimated (its pod vanished with its node:
                             start to last seen running) or unknown, so `seconds` is a lower bound
    wall_seconds             first chain attempt's start to the final attempt's end
    tx_apply_count           transactions applied, summed over the chain
    tx_apply_seconds         seconds in ledger.transaction.apply, summed over the chain
    setup_seconds            the chain's fresh leg's start to its first replayed checkpoint (its
                             archive state, ledger chain and bucket apply); None if unread
    replay_seconds           seconds minus setup_seconds of each leg with a reading, summed over
                             the chain: a resumed leg's own short setup counts in it; None if no leg
                             has a reading. Profiles older than these two columns still size.
    attempts, oom_count      all attempts of the range, and how many OOMed
    chain_attempts           attempts in the final chain
    outcomes                 the outcome of every attempt, in order
    completed                whether the final attempt was ok
    mission                  the mission that measured it
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.values.ledger_range import parse_key

log = logging.getLogger(__name__)

# The profile's columns, in order, by name and kind (store/tables.py: the Parquet schema).
PROFILE_COLUMNS = (
    ("range_key", "string"),
    ("first_ledger", "int64"),
    ("last_ledger", "int64"),
    ("peak_anon_bytes", "int64"),
    ("peak_working_set_bytes", "int64"),
    ("peak_ephemeral_bytes", "int64"),
    ("oom_floor_bytes", "int64"),
    ("seconds", "float64"),
    ("seconds_estimated", "bool"),
    ("wall_seconds", "float64"),
    ("tx_apply_count", "int64"),
    ("tx_apply_seconds", "float64"),
    ("setup_seconds", "float64"),
    ("replay_seconds", "float64"),
    ("attempts", "int32"),
    ("oom_count", "int32"),
    ("chain_attempts", "int32"),
    ("outcomes", "string"),
    ("completed", "bool"),
    ("mission", "string"),
)
# What the sizer and the dispatch order read: a profile without them is refused (L26).
REQUIRED_COLUMNS = ("range_key", "last_ledger", "peak_anon_bytes", "peak_working_set_bytes", "seconds")


def _max(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _sum(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def chain_of(finished: Sequence[Any]) -> list[Any]:
    """The final attempt and the resumed attempts before it, back to the fresh start."""
    final_idx = max((i for i, a in enumerate(finished) if a.outcome == Outcome.OK), default=len(finished) - 1)
    start = final_idx
    # An attempt that did not run new-db continued the data directory before it.
    while start > 0 and finished[start].fresh_start is not True:
        start -= 1
    return list(finished[start : final_idx + 1])


def found_complete(leg: Any, last_ledger: int) -> bool:
    """The leg resumed on a volume already at the range's end (the worker's `RESUME: ... already
    complete`): it replayed nothing, so its seconds and transactions are no measure of the range."""
    resumed = getattr(leg, "resumed_from_ledger", None)
    return leg.fresh_start is False and resumed is not None and resumed >= last_ledger


def _fresh_setup(chain: Sequence[Any]) -> float | None:
    """The setup of the chain's fresh leg (its first, when it ran new-db); None otherwise."""
    first = chain[0]
    return getattr(first, "setup_seconds", None) if first.fresh_start is True else None


def _replay(leg: Any) -> float | None:
    """A leg's seconds past its setup; None without both readings, never below zero."""
    setup = getattr(leg, "setup_seconds", None)
    if setup is None or leg.seconds is None:
        return None
    return max(0.0, leg.seconds - setup)


def _floor_row(final: Any, finished: Sequence[Any], ooms: Sequence[Any], oom_floor: int) -> dict[str, Any]:
    """The row of a range that never completed but OOMed: its OOM floor and nothing else measured."""
    rng = parse_key(final.range_key)
    return {
        **dict.fromkeys(name for name, _ in PROFILE_COLUMNS),
        "range_key": final.range_key,
        "first_ledger": rng.first,
        "last_ledger": rng.last,
        "peak_anon_bytes": oom_floor,
        "oom_floor_bytes": oom_floor,
        "seconds_estimated": True,
        "attempts": len(finished),
        "oom_count": len(ooms),
        "chain_attempts": 0,
        "outcomes": " ".join(a.outcome for a in finished),
        "completed": False,
        "mission": final.mission,
    }


def range_row(attempts: Sequence[Any]) -> dict[str, Any] | None:
    """One profile row for a range from its attempt records, or None if unmeasured (L25)."""
    finished = sorted((a for a in attempts if a.outcome is not None), key=lambda a: a.attempt)
    if not finished:
        return None
    chain = chain_of(finished)
    final = chain[-1]
    ooms = [a for a in finished if a.outcome == Outcome.OOM]
    oom_floor = _max(a.memory_limit_bytes for a in ooms) or 0
    if final.outcome != Outcome.OK:
        # Never completed: what its attempts measured stopped where they did (a corrupt
        # archive fails in half a second at a tenth of the range's memory), so it sizes
        # nothing. Only an OOM's limit is known to be below its demand (L21).
        return _floor_row(final, finished, ooms, oom_floor) if oom_floor else None
    rng = parse_key(final.range_key)
    if found_complete(final, rng.last):
        # Its measurements are the earlier legs' that did the work (issue 36 item 9): with their
        # records lost (an attempt deleted unrecorded), the range is unmeasured, never a 0.2 s range.
        chain = chain[:-1]
        if not chain:
            log.warning("range %s: found complete by attempt %d, the work's records lost", rng.key, final.attempt)
            return _floor_row(final, finished, ooms, oom_floor) if oom_floor else None
    anon = _max(a.peak_anon_bytes for a in chain)
    if anon is None and not oom_floor:
        return None  # measurement-free: it would capture every range below it (L25)
    first_start, last_end = chain[0].started_at, chain[-1].finished_at
    wall = last_end - first_start if last_end and first_start else None
    return {
        "range_key": final.range_key,
        "first_ledger": rng.first,
        "last_ledger": rng.last,
        "peak_anon_bytes": max(anon or 0, oom_floor),
        "peak_working_set_bytes": _max(a.peak_working_set_bytes for a in chain),
        "peak_ephemeral_bytes": _max(a.peak_ephemeral_bytes for a in chain),
        "oom_floor_bytes": oom_floor,
        "seconds": _sum(a.seconds for a in chain),
        "seconds_estimated": any(a.seconds is None or a.seconds_estimated for a in chain),
        "wall_seconds": wall,
        "tx_apply_count": _sum(a.tx_apply_count for a in chain),
        "tx_apply_seconds": _sum(a.tx_apply_seconds for a in chain),
        "setup_seconds": _fresh_setup(chain),
        "replay_seconds": _sum(_replay(a) for a in chain),
        "attempts": len(finished),
        "oom_count": len(ooms),
        "chain_attempts": len(chain),
        "outcomes": " ".join(a.outcome for a in finished),
        "completed": final.outcome == Outcome.OK,
        "mission": final.mission,
    }


def profile_rows(records: Iterable[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for every measured range, sorted by ledger, and the keys left out as unmeasured."""
    by_range: dict[str, list[Any]] = defaultdict(list)
    for rec in records:
        by_range[rec.range_key].append(rec)
    rows, unmeasured = [], []
    for key in sorted(by_range):
        row = range_row(by_range[key])
        if row is None:
            unmeasured.append(key)
        else:
            rows.append(row)
    if unmeasured:
        log.warning("profile leaves out %d unmeasured range(s): %s", len(unmeasured), unmeasured[:10])
    return rows, unmeasured


def check_profile_columns(names: Iterable[str], source: str) -> None:
    names = set(names)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ConfigError(f"profile {source} lacks column(s) {missing} that sizing reads (L26)")
