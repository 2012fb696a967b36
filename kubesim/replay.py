"""Replay a whole mission over a `Workload` with the real dispatcher in simulated time.

The mission goes through the same `prepare` and `run_mission` as a real one
(plan, previous profile, dispatch order, sizing, records on a storage root);
only the backend and the clock are virtual. What it reports is what an
operator asks of a finished mission: how long it took against the physical
lower bound `max(longest range, total work / slots)`, how busy the slots were
while work was queued, which retries it paid for, and the node-hours.
"""

from __future__ import annotations

import io
import itertools
import time
import uuid
from collections import Counter
from dataclasses import dataclass

import pyarrow.parquet as pq

from catchup_assets.core.forecast.cost import MissionCost, Use, mission_cost
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.size.sizing import Placement, Tiers
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.sim.workload import Workload
from catchup_assets.store.root import Store
from kubesim.virtual import VirtualBackend, VirtualClock

_runs = itertools.count()


def _forget(store: Store) -> None:
    """Drop a replay's in-memory root (MemoryFileSystem.rm is quadratic in the files it holds)."""
    prefix = store.path("").rstrip("/")
    for k in [k for k in store.fs.store if k == prefix or k.startswith(prefix + "/")]:
        del store.fs.store[k]
    store.fs.pseudo_dirs[:] = [d for d in store.fs.pseudo_dirs if not d.startswith(prefix)]


@dataclass(frozen=True)
class ReplayReport:
    mission: str
    order: str
    slots: int
    ranges: int
    makespan_seconds: float
    lower_bound_seconds: float
    longest_seconds: float
    work_hours: float  # this mission's clean range seconds, summed
    utilisation_while_queued: float | None  # None if every range started at once
    retries: dict[str, int]  # finished attempts by outcome, other than ok
    attempts: int
    node_hours: float
    cost: MissionCost  # every attempt, retries included, at the cost model's prices
    condemned: int
    passes: int
    wall_seconds: float

    @property
    def ratio(self) -> float:
        return self.makespan_seconds / self.lower_bound_seconds


def replay(
    workload: Workload,
    *,
    order: str = "longest-first",
    slots: int = 1092,
    profiled: bool = True,
    mission_seed: int = 1,
    poll_seconds: float = 10.0,
    start_delay_seconds: float = 0.0,
    storage_root: str | None = None,
    tiers: Tiers | None = None,
    placement: Placement | None = None,
    reclaims_per_spot_hour: float = 0.0,
    lengths: str = "uniform",
) -> ReplayReport:
    """Run one mission over `workload` and report on it; `profiled` uses the model's own profile.

    `placement` (or just its `tiers`) sizes and prices the ranges; default: the project's.
    `reclaims_per_spot_hour`: spot reclaims besides the workload's draw, per hour on spot (virtual.py).
    `lengths`: profile cuts the span to the model's profile for `slots` (issue 25); the bound and the
    work are then this mission's ranges', each piece's setup included (`Workload.cost_of`)."""
    root = storage_root or f"memory://replay-{uuid.uuid4().hex}"
    store = Store(root)
    previous = None
    if profiled:
        buf = io.BytesIO()
        pq.write_table(workload.profile_table(), buf)
        store.write_bytes("previous/range_profile.parquet", buf.getvalue())
        previous = store.url("previous/range_profile.parquet")
    placement = placement or Placement(tiers=tiers or Tiers())
    cfg = MissionConfig(
        mission=f"replay-{next(_runs)}",
        span=workload.span,
        storage_root=root,
        parallelism=slots,
        order=order,
        previous_profile=previous,
        placement=placement,
        poll_seconds=poll_seconds,
        status_every=10**9,
        lengths=lengths,
    )
    clock = VirtualClock()
    t0 = clock.time()
    backend = VirtualBackend(
        workload,
        clock,
        placement=placement,
        mission_seed=mission_seed,
        start_delay_seconds=start_delay_seconds,
        reclaims_per_spot_hour=reclaims_per_spot_hour,
    )
    wall = time.perf_counter()
    prepared = prepare(cfg)
    result = run_mission(prepared, backend, clock=clock, write_plan=False)
    wall = time.perf_counter() - wall
    if storage_root is None:
        _forget(store)

    keys = [r.key for r in prepared.ordered]
    clean = [workload.cost_of(k).seconds * workload.draw(k, mission_seed).seconds_factor for k in keys]
    longest = max(clean)
    intervals = backend.finished
    end = max((i.end for i in intervals), default=t0)
    firsts: dict[str, float] = {}
    for i in intervals:
        firsts[i.range_key] = min(firsts.get(i.range_key, i.start), i.start)
    queued_until = max(firsts.values(), default=t0) - start_delay_seconds
    util = None
    if queued_until > t0:
        held = sum(max(0.0, min(i.end, queued_until) - max(i.start - start_delay_seconds, t0)) for i in intervals)
        util = held / (slots * (queued_until - t0))
    outcomes = Counter(i.outcome for i in intervals)
    return ReplayReport(
        mission=cfg.mission,
        order=order,
        slots=slots,
        ranges=len(clean),
        makespan_seconds=end - t0,
        lower_bound_seconds=max(longest, sum(clean) / slots),
        longest_seconds=longest,
        work_hours=sum(clean) / 3600,
        utilisation_while_queued=util,
        retries={k: v for k, v in sorted(outcomes.items()) if k != "ok"},
        attempts=len(intervals),
        node_hours=sum((i.end - i.start) * i.node_share for i in intervals) / 3600,
        cost=mission_cost(
            (Use(i.tier, i.memory_request_bytes, i.end - i.start, i.cpu_request, i.capacity_type) for i in intervals),
            placement,
        ),
        condemned=len(result.condemned),
        passes=result.passes,
        wall_seconds=wall,
    )
