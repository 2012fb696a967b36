"""`<mission>/run_end.json`: how a run of the mission ended, and when (issue 46 item 4).

A run's end is in Dagster's run storage, which `catchup-assets status` and the console do not
read: without it, a drained mission read "draining, ~14 min to go" after its run had ended. So the
run writes this as `run_mission` returns (mission/run.py); each later run's end replaces it. It is
read as every record is (store/safe_read.py, store/strict_json.py): a file that is not one of these
is a StateError naming it and the field, never a crash or a wrong word.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from catchup_assets.core.dispatch.mission_phase import RUN_ENDINGS
from catchup_assets.core.errors import StateError
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.safe_read import CLAIM_MAX_BYTES, UnreadableFile
from catchup_assets.store.strict_json import loads

RUN_END_MAX_BYTES = CLAIM_MAX_BYTES  # a word, a time and two counts: ~100 bytes


@dataclass(frozen=True)
class RunEnd:
    how: str  # one of RUN_ENDINGS
    at: float  # epoch seconds, the dispatcher's clock
    ranges: int  # the run's ranges
    done: int  # of them, done


def write_run_end(store: Store, mission: str, end: RunEnd) -> None:
    store.write_bytes(layout.run_end(mission), json.dumps(asdict(end), sort_keys=True).encode())


def read_run_end(store: Store, mission: str) -> RunEnd | None:
    """The last run's end, None if no run has ended; StateError naming the file for one that is not a record."""
    rel = layout.run_end(mission)
    shown = store.url(rel)
    try:
        data = store.read_bytes(rel, RUN_END_MAX_BYTES)
    except FileNotFoundError:
        return None
    except UnreadableFile as exc:
        raise StateError(f"{shown} is not a run end record: {exc}") from None
    raw = loads(data, shown)
    if not isinstance(raw, dict):
        raise StateError(f"{shown} is not a run end record: not an object")
    how, at, ranges, done = (raw.get(k) for k in ("how", "at", "ranges", "done"))
    if how not in RUN_ENDINGS:
        raise StateError(f"{shown}: how: {how!r} is not one of {', '.join(RUN_ENDINGS)}")
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at) or at < 0:
        raise StateError(f"{shown}: at: {at!r} is not a time (epoch seconds)")
    for name, n in (("ranges", ranges), ("done", done)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise StateError(f"{shown}: {name}: {n!r} is not a count")
    return RunEnd(how, float(at), ranges, done)
