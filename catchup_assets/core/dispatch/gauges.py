"""What the dispatcher's metrics read: a pure snapshot of its state and records, taken once a pass.

Every count is computed from the attempt records the dispatcher holds (its
range book's records and done marks, rebuilt from storage on every start, L10), never kept as a
counter of its own: a restarted dispatcher reads the same records, so the
attempts by outcome and by capacity type continue from them rather than from
zero. Attempts count once finished (done-marked), as the profile and the demo's
summary count them. Only the age of a pending attempt is the dispatcher's own
memory (a pod's creation is in no record): after a restart it counts from the
first pass that sees it pending. `mission/metrics.py` serves the snapshot.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from catchup_assets.core.aggregate.kpis import SizingKpis, sizing_kpis
from catchup_assets.core.classify.outcomes import BudgetGroup, PastAttempt, RetryPolicy, decide
from catchup_assets.core.dispatch.health import Watchdog
from catchup_assets.core.dispatch.obey import ControlReader
from catchup_assets.core.dispatch.ports import AttemptState, Phase, TransientBackendError, deferred
from catchup_assets.core.dispatch.progress import Progress
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.forecast.time_to_go import TimeToGo
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.catalog import CAPACITY_TYPES
from catchup_assets.core.size.measures import ProfileIndex
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.attempt_record import AttemptRecord

QUEUED, PENDING, RUNNING = "queued", "pending", "running"
DONE, CONDEMNED, SUPERSEDED = "done", "condemned", "superseded"
RANGE_STATES = (QUEUED, PENDING, RUNNING, DONE, CONDEMNED, SUPERSEDED)
PHASES = (Phase.PENDING.value, Phase.RUNNING.value)
GiB = 1024**3
# Peak anon bytes of finished attempts: powers of 2 from 0.5 to 32 GiB (the tiers' span), then +Inf.
PEAK_BUCKETS = tuple(GiB * 2.0**e for e in range(-1, 6))


@dataclass(frozen=True)
class Snapshot:
    mission: str
    ranges: Mapping[str, int]  # RANGE_STATES -> ranges
    attempts: Mapping[str, int]  # outcome class -> finished attempts
    retries_left: Mapping[str, int]  # budget group -> retries left, summed over undecided ranges
    live: Mapping[str, int]  # PHASES -> live attempts
    oldest_pending_seconds: float
    peak_buckets: tuple[tuple[float, int], ...]  # (upper bound in bytes, cumulative count), +Inf last
    peak_sum: float
    seconds_since_progress: float
    profile_median_seconds: float  # 0: unprofiled
    breaker_tripped: bool
    paused: bool
    draining: bool
    stalled: bool
    by_capacity: Mapping[str, int]  # spot, on-demand -> finished attempts
    dollars: float
    kpis: SizingKpis | None = None  # the KPIs of sizing over the finished attempts (core/aggregate/kpis.py)
    live_cap: int = 0  # the live parallelism cap: the plan's, or an operator's (obey.py)
    planned: int = 0  # the ranges this dispatcher was given
    # The time to go, its p10 and p90 (progress.py); None before the first estimate.
    time_to_go: tuple[float, float, float] | None = None


def finished(recs: Mapping[str, Mapping[int, AttemptRecord]], done: Mapping[str, set[int]]) -> list[AttemptRecord]:
    """Every done-marked attempt with an outcome: what the profile and the summary count."""
    return [r for k, by_a in recs.items() for a, r in by_a.items() if a in done.get(k, ()) and r.outcome is not None]


def range_states(
    keys: Iterable[str],
    results: Mapping[str, str],
    states: Iterable[AttemptState],
    done: Mapping[str, set[int]],
    superseded: int = 0,
) -> dict[str, int]:
    """Each range in one state: decided (done, condemned); else running if an attempt runs or
    its final read is owed; else pending if one waits for a node; else queued. `superseded`:
    ranges a later plan took over, which no dispatcher is given (the Dagster side counts them)."""
    phase: dict[str, str] = {}
    for st in states:
        if st.phase is Phase.FINISHED and st.attempt in done.get(st.range_key, ()):
            continue  # recorded, its release owed: nothing runs
        seen = RUNNING if st.phase is not Phase.PENDING else PENDING
        if phase.get(st.range_key) != RUNNING:
            phase[st.range_key] = seen
    out = dict.fromkeys(RANGE_STATES, 0)
    for key in keys:
        out[results.get(key) or phase.get(key, QUEUED)] += 1
    out[SUPERSEDED] = superseded
    return out


def retries_left(histories: Iterable[Sequence[PastAttempt]], policy: RetryPolicy) -> dict[str, int]:
    """Per budget group, the outcomes of that group the undecided ranges may still have and be retried."""
    left = dict.fromkeys((g.value for g in BudgetGroup), 0)
    for history in histories:
        counts = decide(history, policy).counts
        for g in BudgetGroup:
            left[g.value] += max(0, policy.allowed(g) - counts.get(g.value, 0))
    return left


def peak_histogram(peaks: Iterable[int]) -> tuple[tuple[tuple[float, int], ...], float]:
    """Cumulative bucket counts over PEAK_BUCKETS and +Inf, and the sum."""
    values = list(peaks)
    buckets = tuple((b, sum(1 for v in values if v <= b)) for b in PEAK_BUCKETS)
    return (*buckets, (float("inf"), len(values))), float(sum(values))


def capacity_counts(records: Iterable[AttemptRecord], placement: Placement) -> dict[str, int]:
    """Finished attempts by what they bought; a record older than the field, or with none: its tier's."""
    known = {t.name: t.capacity_type for t in placement.tiers.all()}
    out = dict.fromkeys(CAPACITY_TYPES, 0)
    for r in records:
        capacity = r.capacity_type if r.capacity_type in out else known.get(r.tier or "")
        if capacity in out:
            out[capacity] += 1
    return out


def median_seconds(profile: ProfileIndex | None) -> float:
    seconds = [m.seconds for m in profile.measures() if m.seconds] if profile else []
    return float(statistics.median(seconds)) if seconds else 0.0


def oldest_pending(pending_since: Mapping[tuple[str, int], float], now: float) -> float:
    return max(0.0, now - min(pending_since.values())) if pending_since else 0.0


class Gauges:
    """The snapshot for the dispatcher's metrics: `take` runs each pass (when someone listens) and
    hands over a callable that takes the snapshot. Its only memory of its own is when each attempt
    was first seen pending (a pod's creation is in no record)."""

    def __init__(
        self,
        mission: MissionConfig,
        keys: Iterable[str],
        profile: ProfileIndex | None,
        book: RangeBook,
        clock,
        control: ControlReader,
        watchdog: Watchdog,
        progress: Progress,
    ) -> None:
        self.name, self.placement, self.retry = mission.mission, mission.placement, mission.retry
        self.keys, self.profile = list(keys), profile
        self.book, self.clock, self.control, self.watchdog = book, clock, control, watchdog
        self.progress = progress
        self._mine_seen: set[tuple[str, int]] = set()
        self._pending_since: dict[tuple[str, int], float] = {}
        self.last_mine: list[AttemptState] = []

    def take(self, mine: list[AttemptState]) -> Callable[[], Snapshot]:
        """This pass's attempts as the backend told them, and those this run submitted since."""
        now = self.clock.time()
        # Submitted this pass, after the backend was asked: pending until a pass sees them.
        new, self._mine_seen = self.book.mine - self._mine_seen, set(self.book.mine)
        seen = {(s.range_key, s.attempt) for s in mine}
        done = self.book.done
        mine = mine + [AttemptState(k, a, Phase.PENDING) for k, a in sorted(new - seen) if a not in done[k]]
        since = self._pending_since
        pending = {(s.range_key, s.attempt) for s in mine if s.phase is Phase.PENDING}
        self._pending_since = {ident: since.get(ident, now) for ident in pending}
        self.last_mine = mine
        return lambda: self._snapshot(mine, now)

    def at_end(self, observe: Callable[[], list[AttemptState]]) -> Callable[[], Snapshot]:
        """The run's last snapshot, from what the backend says now: a stop ends and records attempts
        after the last pass, and a snapshot of that pass's attempts beside the records read later
        would count an attempt live that its record says ended. Unanswered, the last pass's attempts
        stand, less those recorded since (the snapshot drops every recorded attempt)."""
        try:
            states = observe()
        except TransientBackendError as exc:
            deferred(self.name, "observe at the end", exc)
            states = self.last_mine
        keys = set(self.keys)
        return self.take([s for s in states if s.range_key in keys])

    def _snapshot(self, mine: list[AttemptState], now: float) -> Snapshot:
        # Taken when the metrics ask, maybe after records were written: a recorded attempt is not live.
        book = self.book
        mine = [s for s in mine if s.attempt not in book.done[s.range_key]]
        results = {k: r.status.value for k, r in book.results.items()}
        recs = finished(book.recs, book.done)
        buckets, peak_sum = peak_histogram(r.peak_anon_bytes for r in recs if r.peak_anon_bytes is not None)
        # Its dollars are the mission's cost so far, priced once; its shares per range over those decided.
        kpis = sizing_kpis(recs, self.placement, decided=book.results.keys())
        return Snapshot(
            mission=self.name,
            ranges=range_states(self.keys, results, mine, book.done),
            attempts=dict(Counter(r.outcome for r in recs)),
            retries_left=retries_left((book.history(k) for k in self.keys if k not in results), self.retry),
            live={p: sum(1 for s in mine if s.phase.value == p) for p in PHASES},
            oldest_pending_seconds=oldest_pending(self._pending_since, now),
            peak_buckets=buckets,
            peak_sum=peak_sum,
            seconds_since_progress=max(0.0, now - self.watchdog.last_completion),
            profile_median_seconds=median_seconds(self.profile),
            # New dispatches stopped by the mission itself: its breaker, or a fault every attempt hits.
            breaker_tripped=self.watchdog.blocked is not None,
            paused=self.control.control.paused,
            draining=self.control.draining,
            stalled=self.watchdog.stalled,
            by_capacity=capacity_counts(recs, self.placement),
            dollars=kpis.dollars,
            kpis=kpis,
            live_cap=self.control.live_cap(),
            planned=len(self.keys),
            time_to_go=_band(self.progress.latest),
        )


def _band(eta: TimeToGo | None) -> tuple[float, float, float] | None:
    return None if eta is None or not eta.known else (eta.expected_seconds, eta.p10_seconds, eta.p90_seconds)
