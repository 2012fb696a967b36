"""What the dispatcher's metrics read: a pure snapshot of its state and records, taken once a pass.

Every count is computed from the attempt records the dispatcher holds (its
`_recs` and `_done`, rebuilt from storage on every start, L10), never kept as a
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
from catchup_assets.core.dispatch.ports import AttemptState, Phase, TransientBackendError
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


class Gauging:
    """The Dispatcher's snapshot for its metrics, a part of `reconciler.Dispatcher`: `_gauge_pass`
    runs each pass (when someone listens) and hands over a callable that takes the snapshot.
    Its own state (_mine_seen, _pending_since) is set on first use: only a listened-to dispatcher has it."""

    def _gauge_pass(self, mine: list[AttemptState]) -> Callable[[], Snapshot]:
        now = self.clock.time()
        # Submitted this pass, after the backend was asked: pending until a pass sees them.
        new, self._mine_seen = self._mine - getattr(self, "_mine_seen", set()), set(self._mine)
        seen = {(s.range_key, s.attempt) for s in mine}
        mine = mine + [AttemptState(k, a, Phase.PENDING) for k, a in sorted(new - seen) if a not in self._done[k]]
        since = getattr(self, "_pending_since", {})
        pending = {(s.range_key, s.attempt) for s in mine if s.phase is Phase.PENDING}
        self._pending_since = {ident: since.get(ident, now) for ident in pending}
        self._last_mine = mine
        return lambda: self._gauges(mine, now)

    def _gauge_end(self) -> None:
        """The run's last snapshot, from what the backend says now: a stop ends and records attempts
        after the last pass, and a snapshot of that pass's attempts beside the records read later
        would count an attempt live that its record says ended. Unanswered, the last pass's attempts
        stand, less those recorded since (`_gauges` drops every recorded attempt)."""
        if self.on_pass is None:
            return
        try:
            states = self.backend.observe()
        except TransientBackendError as exc:
            self._transient("observe at the end", exc)
            states = getattr(self, "_last_mine", [])
        self.on_pass(self._gauge_pass([s for s in states if s.range_key in self.by_key]))

    def _gauges(self, mine: list[AttemptState], now: float) -> Snapshot:
        # Taken when the metrics ask, maybe after records were written: a recorded attempt is not live.
        mine = [s for s in mine if s.attempt not in self._done[s.range_key]]
        results = {k: r.status.value for k, r in self._results.items()}
        recs = finished(self._recs, self._done)
        buckets, peak_sum = peak_histogram(r.peak_anon_bytes for r in recs if r.peak_anon_bytes is not None)
        placement = self.mission.placement
        kpis = sizing_kpis(recs, placement)  # its dollars are the mission's cost so far, priced once
        return Snapshot(
            mission=self.name,
            ranges=range_states(self.by_key, results, mine, self._done),
            attempts=dict(Counter(r.outcome for r in recs)),
            retries_left=retries_left((self._history(k) for k in self.by_key if k not in results), self.mission.retry),
            live={p: sum(1 for s in mine if s.phase.value == p) for p in PHASES},
            oldest_pending_seconds=oldest_pending(self._pending_since, now),
            peak_buckets=buckets,
            peak_sum=peak_sum,
            seconds_since_progress=max(0.0, now - self._last_completion),
            profile_median_seconds=median_seconds(self.cfg.profile),
            # New dispatches stopped by the mission itself: its breaker, or a fault every attempt hits.
            breaker_tripped=self._blocked is not None,
            paused=self.control.paused,
            draining=self.control.drain,
            stalled=self._stall_warned,
            by_capacity=capacity_counts(recs, placement),
            dollars=kpis.dollars,
            kpis=kpis,
        )
