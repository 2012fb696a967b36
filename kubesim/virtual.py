"""A backend whose attempts run in simulated time, for the real dispatcher.

`VirtualBackend` speaks the backend protocol (core/dispatch/ports.py) over a
`Workload`: an attempt OOMs if its limit is below the range's peak, a drawn
spot reclaim ends it early and leaves its progress on the range's "PVC" so the
next attempt resumes (L16), otherwise it runs its remaining seconds and ends
ok. `VirtualClock` is the dispatcher's clock: a sleep moves time on, and skips
the passes in which nothing could change (the next start or end is still
ahead), so a 6-hour mission of 4000 ranges replays in seconds while every
decision is still taken by `Dispatcher.pass_once` at a poll tick.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from catchup_assets.core.classify.outcomes import Observation
from catchup_assets.core.dispatch.ports import AlreadyExists, AttemptSpec, AttemptState, Collected, Peaks, Phase
from catchup_assets.core.forecast.cost import node_share
from catchup_assets.core.size.catalog import SPOT
from catchup_assets.core.size.sizing import Placement
from catchup_assets.sim.workload import Workload

# The termination reasons as containerd's CRI plugin reports them and the kubelet copies into
# ContainerStateTerminated.reason (internal/cri/server/helpers.go: completeExitReason,
# errorExitReason for any non-zero exit, oomExitReason).
OK = Observation(exit_code=0, termination_reason="Completed")
OOM = Observation(exit_code=137, termination_reason="OOMKilled")
DISRUPTED = Observation(exit_code=143, termination_reason="Error", conditions=frozenset({"DisruptionTarget"}))
FAILED = Observation(exit_code=1, termination_reason="Error")  # stellar-core on an exception (sim/stellar_core.py, L9)


@dataclass
class VirtualAttempt:
    spec: AttemptSpec
    start: float
    end: float
    observation: Observation
    peaks: Peaks
    fresh: bool
    resumed_from: int | None
    progress_after: float  # share of the range done when this attempt ends
    seen: AttemptState | None = None  # the last state observed, reused while its phase holds


@dataclass(frozen=True)
class Interval:
    """One finished attempt as the cluster saw it: for makespan, utilisation and cost."""

    range_key: str
    attempt: int
    start: float
    end: float
    outcome: str
    tier: str
    node_share: float  # the share of its tier's node the pod paid for (cost.node_share)
    memory_request_bytes: int = 0
    cpu_request: float = 0.0
    capacity_type: str = ""  # what the attempt bought ("": its tier's)


@dataclass
class VirtualBackend:
    workload: Workload
    clock: VirtualClock
    placement: Placement = field(default_factory=Placement)  # what the nodes are and cost
    mission_seed: int = 0
    start_delay_seconds: float = 0.0  # node provisioning and image pull before the pod runs
    resume_overhead_seconds: float = 60.0  # opening the kept database again
    oom_at: float = 0.1  # share of a fresh run at which download and bucket apply peak
    attempts: dict[str, VirtualAttempt] = field(default_factory=dict)
    progress: dict[str, float] = field(default_factory=dict)  # the "PVC": share of a range done
    reclaimed: set[str] = field(default_factory=set)  # a range is reclaimed at most once a mission
    # Besides the workload's draw: spot reclaims at this rate per hour an attempt runs on spot
    # (exponential, drawn per attempt); an attempt bought on-demand is never reclaimed. 0: none.
    reclaims_per_spot_hour: float = 0.0
    finished: list[Interval] = field(default_factory=list)
    submits: int = 0
    _events: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clock.backend = self

    def submit(self, spec: AttemptSpec) -> None:
        aid = spec.attempt_id
        if aid in self.attempts:
            raise AlreadyExists(aid)
        cost = self.workload.cost_of(spec.range_key)  # a cut or merged range too
        draw = self.workload.draw(spec.range_key, self.mission_seed)
        done = self.progress.get(spec.range_key, 0.0)
        fresh = done == 0.0
        full = cost.seconds * draw.seconds_factor
        remaining = full * (1.0 - done) + (0.0 if fresh else self.resume_overhead_seconds)
        start = self.clock.time() + self.start_delay_seconds
        peak = int((cost.peak_anon_bytes if fresh else cost.replay_anon_bytes) * draw.peak_factor)
        resumed_from = None if fresh else cost.range.first + int(done * cost.range.length)
        if spec.memory_limit_bytes < peak:
            at = self.oom_at if fresh else 0.5
            a = VirtualAttempt(
                spec,
                start,
                start + remaining * at,
                OOM,
                Peaks(spec.memory_limit_bytes, spec.memory_limit_bytes),
                fresh,
                resumed_from,
                done,
            )
        elif (
            draw.disrupt_at is not None
            and spec.range_key not in self.reclaimed
            and draw.disrupt_at > done
            and not self._on_demand(spec)
        ):
            self.reclaimed.add(spec.range_key)
            ran = full * (draw.disrupt_at - done)
            a = VirtualAttempt(
                spec, start, start + ran, DISRUPTED, self._peaks(cost, peak), fresh, resumed_from, draw.disrupt_at
            )
        elif (at := self._spot_reclaim(spec)) is not None and at < remaining:
            progress = done + (1.0 - done) * at / remaining
            a = VirtualAttempt(
                spec, start, start + at, DISRUPTED, self._peaks(cost, peak), fresh, resumed_from, progress
            )
        else:
            a = VirtualAttempt(spec, start, start + remaining, OK, self._peaks(cost, peak), fresh, resumed_from, 1.0)
        self.attempts[aid] = a
        self.submits += 1
        heapq.heappush(self._events, (a.start, aid))
        heapq.heappush(self._events, (a.end, aid))

    def _on_demand(self, spec: AttemptSpec) -> bool:
        """True for an attempt bought on-demand (its own capacity type, else its tier's): spot cannot reclaim it."""
        return (spec.capacity_type or self.placement.tiers.by_name(spec.tier).capacity_type) != SPOT

    def _spot_reclaim(self, spec: AttemptSpec) -> float | None:
        """Seconds into the attempt a spot reclaim ends it, or None (on-demand, or no reclaim rate)."""
        if self.reclaims_per_spot_hour <= 0 or self._on_demand(spec):
            return None
        rng = random.Random(f"spot-reclaim:{self.mission_seed}:{spec.attempt_id}")
        return rng.expovariate(self.reclaims_per_spot_hour / 3600)

    @staticmethod
    def _peaks(cost, anon: int) -> Peaks:
        return Peaks(anon, max(cost.peak_working_set_bytes, anon), cost.peak_ephemeral_bytes)

    def _state(self, a: VirtualAttempt, now: float) -> AttemptState:
        spec = a.spec
        if now >= a.end:
            return AttemptState(
                spec.range_key,
                spec.attempt,
                Phase.FINISHED,
                a.observation,
                a.start,
                a.end,
                "virtual",
                a.peaks,
                spec.memory_limit_bytes,
                spec.tier,
            )
        # Live peaks are not reported: the dispatcher records them at the end only.
        phase = Phase.RUNNING if now >= a.start else Phase.PENDING
        return AttemptState(
            spec.range_key,
            spec.attempt,
            phase,
            None,
            a.start if phase is Phase.RUNNING else None,
            None,
            "virtual",
            Peaks(),
            spec.memory_limit_bytes,
            spec.tier,
        )

    def observe(self) -> list[AttemptState]:
        now = self.clock.time()
        out = []
        for a in self.attempts.values():
            phase = Phase.FINISHED if now >= a.end else Phase.RUNNING if now >= a.start else Phase.PENDING
            if a.seen is None or a.seen.phase != phase:
                a.seen = self._state(a, now)
            out.append(a.seen)
        return out

    def collect(self, state: AttemptState, log_url: Callable[[int], str]) -> Collected:
        a = self.attempts[state.attempt_id]
        cost = self.workload.cost_of(state.range_key)
        share = a.progress_after - (0.0 if a.fresh else self.progress.get(state.range_key, 0.0))
        tx = int(cost.tx_apply_count * max(share, 0.0)) if a.observation is not OOM else None
        return Collected(
            peaks=a.peaks, log_path=None, tx_apply_count=tx, resumed_from_ledger=a.resumed_from, fresh_start=a.fresh
        )

    def release(self, state: AttemptState) -> None:
        a = self.attempts.pop(state.attempt_id, None)
        if a is None:
            return
        if a.observation is not OOM:
            self.progress[state.range_key] = a.progress_after
        spec = a.spec
        tier = self.placement.tiers.by_name(spec.tier)
        share = node_share(tier, self.placement.shape_of(tier.name), spec.memory_request_bytes, spec.cpu_request)
        self.finished.append(
            Interval(
                state.range_key,
                state.attempt,
                a.start,
                a.end,
                _outcome(a.observation),
                tier.name,
                share,
                spec.memory_request_bytes,
                spec.cpu_request,
                spec.capacity_type,
            )
        )

    def release_range(self, range_key: str) -> None:
        self.progress.pop(range_key, None)

    def shutdown(self, grace: float) -> list[str]:
        """Nothing runs outside the simulation: what is live stays live."""
        return sorted(aid for aid, a in self.attempts.items() if self.clock.time() < a.end)

    def next_event(self) -> float:
        """When the next attempt starts or ends (inf if nothing is held)."""
        now = self.clock.time()
        while self._events:
            t, aid = self._events[0]
            a = self.attempts.get(aid)
            if a is not None and t > now and t in (a.start, a.end):
                return t
            heapq.heappop(self._events)  # passed, or its attempt is gone
        return math.inf


def _outcome(obs: Observation) -> str:
    return "oom" if obs is OOM else "disrupted" if obs is DISRUPTED else "ok"


class VirtualClock:
    """The dispatcher's clock in simulated time; sleeping skips passes with nothing to see."""

    def __init__(self, start: float = 1_750_000_000.0):
        self.now = start
        self.backend: VirtualBackend | None = None

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        target = self.now + seconds
        nxt = self.backend.next_event() if self.backend is not None else math.inf
        if nxt > target and nxt != math.inf and seconds > 0:
            target += math.ceil((nxt - target) / seconds) * seconds  # the first tick that sees it
        self.now = target
