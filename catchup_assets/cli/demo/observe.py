"""What the durable state says about a demo mission's ranges: judged from the attempt records
through the dispatcher's own decision (`past_attempts`, then `decide`), in flight from the backend."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from catchup_assets.core.classify.outcomes import Action, RetryPolicy, decide
from catchup_assets.core.dispatch.ports import Backend
from catchup_assets.core.dispatch.range_book import past_attempts
from catchup_assets.core.dispatch.results import Status
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store


@dataclass
class RangeStates:
    """What the durable state says about a mission's ranges."""

    done: set[str]
    condemned: dict[str, str]
    in_flight: int

    def status(self, total: int) -> Status:
        queued = max(0, total - len(self.done) - len(self.condemned) - self.in_flight)
        return Status(0, len(self.done), self.in_flight, queued, len(self.condemned), total, 0)


def judge_from_records(
    records: RecordStore, keys: Iterable[str], retry: RetryPolicy, memory_cap_bytes: int | None = None
) -> tuple[set[str], dict[str, str]]:
    """Done and condemned ranges, decided from the attempt records as the dispatcher decides them."""
    keys = list(keys)
    recs, marked = records.load(keys)
    resets = records.load_resets(keys)
    by_key: dict[str, dict[int, Any]] = defaultdict(dict)
    done_by_key: dict[str, set[int]] = defaultdict(set)
    for (key, attempt), rec in recs.items():
        by_key[key][attempt] = rec
    for key, attempt in marked:
        done_by_key[key].add(attempt)
    history = {key: past_attempts(by_key[key], done_by_key[key], resets.get(key, 0)) for key in keys}
    done, condemned = set(), {}
    for key in keys:
        decision = decide(history[key], retry, memory_cap_bytes)
        if decision.action is Action.DONE:
            done.add(key)
        elif decision.action is Action.CONDEMNED:
            condemned[key] = decision.reason
    return done, condemned


def observe(catchup: CatchupResource, mission: str, keys: list[str], backend: Backend | None = None) -> RangeStates:
    """Done and condemned from the attempt records; in flight from the backend itself (L10)."""
    records = RecordStore(Store(catchup.root()), mission)
    done, condemned = judge_from_records(records, keys, catchup.retry_policy(), catchup.placement().ladder.cap_bytes)
    wanted = set(keys)
    backend = backend or catchup.backend_for(mission)  # an observer of its own, not the dispatcher's
    live = {s.range_key for s in backend.observe() if s.live and s.range_key in wanted}
    return RangeStates(done, condemned, len(live - done - set(condemned)))
