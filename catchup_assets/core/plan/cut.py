"""Range lengths cut to the profile: split the slow ranges, merge the fast ones (issue 25 item 3).

Pure. The uniform grid (ranges.py) makes the tip's range the mission's
makespan past ~1100 slots. Here each grid range is kept, cut into pieces, or
merged with its neighbours, so the forecast's list schedule (longest first)
comes close to max(total work with the added setups / slots, the longest
piece that cannot be cut further).

One target length T is tried at a time: a grid range predicted above T is
cut into the fewest equal pieces (on the checkpoint grid) that each predict
at most T, every piece paying its setup again (`LedgerCost.seconds`); a run of
consecutive uncut grid ranges is merged, oldest first, while the merged range
predicts at most a share of T (`MERGE_SHARES`, each tried), saving a setup, a Job and a volume each.
Where pieces above T/2 outnumber the slots, the cheapest grid ranges are cut
finer, to pieces of at most T/2 (`_fewer_long_pieces`): two long pieces in one
slot overrun T, and the list schedule stacks them once every slot holds one.
Of the targets (a geometric ladder down from the longest grid range to a
quarter of the work per slot) whose node-hours stay within `node_hours_cap` x
the uniform grid's, the one that holds both ways wins: short at the profile's
own seconds and under the runtime spread (`_robust`, issue 37 item 3; ties:
fewer ranges). Node-hours are each range's seconds times its node share
(`node_shares`, as `lengths: auto` prices them: a piece lands on its parent's
tier, a merged run on its heaviest member's); without a placement, work seconds.

Cuts and merges fall only on the uniform grid's boundaries or on checkpoint
starts inside a grid range, so a range neither cut nor merged keeps its grid
key exactly, and the same profile, span and slots give the same keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError, check_number
from catchup_assets.core.forecast.cost import node_share
from catchup_assets.core.forecast.forecast import list_schedule
from catchup_assets.core.forecast.ledger_cost import LedgerCost, segments_from_measures
from catchup_assets.core.forecast.spread import makespan_band
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS, MissionSpan, plan_ranges
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.ledger_range import LedgerRange

DEFAULT_NODE_HOURS_CAP = 1.10  # at most 10% more node-hours than the uniform grid
# Merge limits tried, as shares of the target: on the workload model no one share wins at every setup.
MERGE_SHARES = (0.25, 0.5, 1.0)
TARGET_STEP = 0.96  # each target length this share of the one before
# A target below a quarter of the work per slot only adds setups: the search stops there.
LOWEST_TARGET_SHARE = 0.25
SCORE_DRAWS = 16  # per candidate plan under noise: enough to rank them, ~0.05 s each at 4000 ranges


@dataclass(frozen=True)
class CutPlan:
    ranges: tuple[LedgerRange, ...]  # ascending
    seconds: tuple[float, ...]  # predicted, one per range
    slots: int
    makespan_seconds: float  # list schedule, longest first
    bound_seconds: float  # max(work / slots, the longest piece that cannot be cut further)
    uniform_makespan_seconds: float
    uniform_work_seconds: float
    cut: int  # grid ranges cut into pieces
    merged: int  # grid ranges merged into a neighbour
    sigma: float = 0.0  # the runtime spread the plans were compared under (0: exact seconds)

    @property
    def work_seconds(self) -> float:
        return sum(self.seconds)

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.ranges]


def makespan(seconds: Sequence[float], slots: int) -> float:
    """The forecast's list schedule with the longest first, as `longest-first` dispatches."""
    return list_schedule(sorted(seconds, reverse=True), slots)


def split(r: LedgerRange, pieces: int) -> list[LedgerRange]:
    """`r` cut into `pieces` of near-equal length, each starting on a checkpoint (first ledger 1 + 64k)."""
    checkpoints = -(-r.length // CHECKPOINT_LEDGERS)
    pieces = max(1, min(pieces, checkpoints))
    starts = [r.first + CHECKPOINT_LEDGERS * (i * checkpoints // pieces) for i in range(pieces)]
    return [LedgerRange(a, b - 1) for a, b in zip(starts, starts[1:], strict=False)] + [LedgerRange(starts[-1], r.last)]


def _pieces_for(cost: LedgerCost, r: LedgerRange, target: float) -> list[LedgerRange]:
    """The fewest pieces of `r` that each predict at most `target`; all checkpoints if none does."""
    setup = cost.setup(r.first)
    if target <= setup:
        return [r]  # no cut reaches the target: cutting would only add setups
    # In float seconds (a profile at test scale times ranges in seconds) and never past one piece a checkpoint.
    checkpoints = -(-r.length // CHECKPOINT_LEDGERS)
    k = min(max(1, math.ceil(cost.replay(r.first, r.last) / (target - setup))), checkpoints)
    while True:
        pieces = split(r, k)
        if len(pieces) < k or max(cost.seconds(p.first, p.last) for p in pieces) <= target:
            return pieces
        k += max(1, k // 16)  # rows of different rates inside r: a few steps, not one per piece


def cut_for(cost: LedgerCost, grid: Sequence[LedgerRange], target: float, merge_limit: float, slots: int | None = None):
    """The ranges for one target: grid ranges cut, merged or kept; and the counts cut and merged.

    With `slots`, grid ranges are cut finer where pieces above half the target outnumber the slots
    (`_fewer_long_pieces`)."""
    groups: list[list[LedgerRange]] = []  # the pieces of one grid range, or one merged run
    parents: dict[int, LedgerRange] = {}  # a group of one grid range (cut or kept): that range
    run: list[LedgerRange] = []  # consecutive uncut grid ranges waiting to be merged
    merged = 0

    def flush() -> None:
        nonlocal merged
        if run:
            if len(run) == 1:
                parents[len(groups)] = run[0]
            groups.append([LedgerRange(run[0].first, run[-1].last)])
            merged += len(run) - 1
            run.clear()

    for r in grid:
        seconds = cost.seconds(r.first, r.last)
        if seconds > target:
            flush()
            parents[len(groups)] = r
            groups.append(_pieces_for(cost, r, target))
        elif run and cost.seconds(run[0].first, r.last) <= merge_limit:
            run.append(r)
        else:
            flush()
            run.append(r)
    flush()
    if slots is not None:
        _fewer_long_pieces(cost, groups, parents, target, slots)
    cut = sum(1 for i in parents if len(groups[i]) > 1)
    return [p for g in groups for p in g], cut, merged


def _fewer_long_pieces(
    cost: LedgerCost, groups: list[list[LedgerRange]], parents: dict[int, LedgerRange], target: float, slots: int
) -> None:
    """Re-cut grid ranges into pieces of at most half the target while pieces above half outnumber the slots.

    Two such pieces overrun the target in one slot, and the list schedule (longest first) stacks
    them once every slot holds one: on the workload model at 2096 slots that alone kept the makespan
    ~15% above work / slots. The grid ranges whose finer cut adds the fewest setup seconds per long
    piece removed go first (the oldest: their setup is the smallest). A range is passed over only when
    no piece of it can be that short (its setup alone is half the target): with 50-min setups, skipping
    those whose pieces would be mostly setup left 127 long pieces stacked, 1.18 of the bound (issue 37
    item 3); whether the setups they add are worth it is the node-hours cap's to say.
    """
    half = target / 2

    def long(pieces: list[LedgerRange]) -> int:
        return sum(1 for p in pieces if cost.seconds(p.first, p.last) > half)

    excess = sum(long(g) for g in groups) - slots
    if excess <= 0:
        return
    offers = []
    for i, r in parents.items():
        setup = cost.setup(r.first)
        if not (now := long(groups[i])) or half <= setup:
            continue  # no long piece, or no piece of it can be that short
        # Its pieces at one setup and one rate (exact when it is one profile row): only to rank it; the cut is exact.
        pieces = -(-cost.replay(r.first, r.last) // (half - setup))
        offers.append(((pieces - len(groups[i])) * setup / now, r, i, now))
    for _, r, i, now in sorted(offers, key=lambda o: o[:2]):
        if excess <= 0:
            break
        finer = _pieces_for(cost, r, half)
        if (gain := now - long(finer)) > 0:
            groups[i] = finer
            excess -= gain


def uncuttable_seconds(cost: LedgerCost, grid: Sequence[LedgerRange]) -> float:
    """The longest piece no cut can shorten: a grid range's setup and its costliest checkpoint."""

    def ends(r: LedgerRange) -> tuple[LedgerRange, LedgerRange]:
        tail = r.first + CHECKPOINT_LEDGERS * ((r.length - 1) // CHECKPOINT_LEDGERS)
        return LedgerRange(r.first, min(r.first + CHECKPOINT_LEDGERS - 1, r.last)), LedgerRange(tail, r.last)

    return max(cost.seconds(p.first, p.last) for r in grid for p in ends(r))


def plan_cut(  # noqa: PLR0913 (the search's settings, then the node share that prices its cap)
    cost: LedgerCost,
    span: MissionSpan,
    slots: int,
    node_hours_cap: float = DEFAULT_NODE_HOURS_CAP,
    merge_shares: Sequence[float] = MERGE_SHARES,
    sigma: float = 0.0,
    share: Callable[[LedgerRange], float] | None = None,
) -> CutPlan:
    """Range boundaries for `slots` slots whose predicted makespan comes close to the bound.

    `sigma` > 0: plans are also compared by their expected makespan when each range's seconds wander by
    exp(N(0, sigma)) (core/forecast/spread.py, `SCORE_DRAWS` seeded draws): a mission of ~2000 pieces near
    the target ends with the slowest draw of them, ~3 sigma above (on the workload model at sigma 0.05,
    1.17 of the bound replayed against 1.04 predicted exactly). But ranked on that alone, the search spends
    the whole cap on finer targets and leaves the pieces that fill the slots' gaps too coarse: on a heavy
    band mid-history with 10-50 min setups, 1.13-1.26 of the bound at the profile's own seconds, the
    cheaper plan only ~2% behind in the draws (issue 37 item 3). So the winner is the plan whose worse
    shortfall, against the best expected makespan and against the best exact one, is least: a plan
    that holds whether runtimes wander by sigma or repeat (`_robust`). `share`: each range's node share
    (`node_shares`), so the cap is on node-hours as `lengths: auto` counts them; None: on work seconds."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise ConfigError(f"slots must be an integer >= 1, got {slots!r}")
    check_number("node_hours_cap", node_hours_cap, 1.0)
    check_number("sigma", sigma, 0.0)
    for merge in merge_shares:
        check_number("merge_shares", merge, 0.0)

    def expected(secs: list[float]) -> float:
        return makespan_band(sorted(secs, reverse=True), slots, sigma, draws=SCORE_DRAWS).expected_seconds

    def priced(ranges: Sequence[LedgerRange], secs: Sequence[float]) -> float:
        return sum(secs) if share is None else sum(s * share(r) for r, s in zip(ranges, secs, strict=True))

    grid = plan_ranges(span)
    uniform = [cost.seconds(r.first, r.last) for r in grid]
    uniform_work, uniform_make = sum(uniform), makespan(uniform, slots)
    cap = node_hours_cap * priced(grid, uniform)
    # (exact makespan, expected under sigma, ranges, merge share, target); None, None: the grid itself.
    found = [(uniform_make, expected(uniform) if sigma else uniform_make, len(grid), None, None)]
    for merge in merge_shares:
        target = max(uniform)
        while target > LOWEST_TARGET_SHARE * uniform_work / slots:
            target *= TARGET_STEP
            ranges, _, _ = cut_for(cost, grid, target, merge * target, slots)
            if len(ranges) > span.max_ranges:
                break  # finer targets only cut more
            secs = [cost.seconds(r.first, r.last) for r in ranges]
            if priced(ranges, secs) > cap:
                continue
            exact = makespan(secs, slots)
            found.append((exact, expected(secs) if sigma else exact, len(ranges), merge, target))
    _, _, _, merge, target = _robust(found)
    ranges, cut, merged = (grid, 0, 0) if target is None else cut_for(cost, grid, target, merge * target, slots)
    secs = [cost.seconds(r.first, r.last) for r in ranges]
    make = makespan(secs, slots)
    bound = max(sum(secs) / slots, uncuttable_seconds(cost, grid))
    return CutPlan(tuple(ranges), tuple(secs), slots, make, bound, uniform_make, uniform_work, cut, merged, sigma)


def _robust(found: Sequence[tuple]) -> tuple:
    """The candidate whose larger shortfall (its exact makespan over the best exact, its expected over the best
    expected) is least; ties: the fewer ranges. With no spread both are the exact makespan: the shortest wins."""
    best_exact, best_expected = min(f[0] for f in found), min(f[1] for f in found)

    def behind(got: float, best: float) -> float:
        return got / best if best > 0 else 1.0  # a profile of zero seconds: every plan takes none

    return min(found, key=lambda f: (max(behind(f[0], best_exact), behind(f[1], best_expected)), f[2]))


def node_shares(measures: Sequence[RangeMeasure], placement: Placement) -> Callable[[LedgerRange], float]:
    """Each range's share of its node as the plan prices it (`estimates`: sized by the rows it overlaps).

    A merged run is sized by the largest peak it holds, so it may land on a larger tier than its lighter
    members, and node-hours outgrow work seconds: by 1.1% on a generated profile, enough that `auto`
    refused cuts searched within 1.10x the grid's work. A piece of one grid range is sized as that range."""
    index, memo = ProfileIndex(measures), {}

    def share(r: LedgerRange) -> float:
        if r not in memo:
            s = placement.size(r.last, index, first_ledger=r.first)
            tier = placement.tiers.by_name(s.tier)
            memo[r] = node_share(tier, placement.shape_of(s.tier), s.memory_request_bytes, s.cpu_request)
        return memo[r]

    return share


def profile_cut(  # noqa: PLR0913 (as plan_cut)
    measures: Sequence[RangeMeasure],
    span: MissionSpan,
    slots: int,
    sigma: float = 0.0,
    node_hours_cap: float = DEFAULT_NODE_HOURS_CAP,
    placement: Placement | None = None,
) -> CutPlan | None:
    """`plan_cut` over the cost model of a profile's rows; None when no row has seconds and a first ledger.
    With `placement`, the cap is on node-hours (`node_shares`), as `lengths: auto` checks it."""
    segments = segments_from_measures(measures)
    if not segments:
        return None
    share = None if placement is None else node_shares(measures, placement)
    return plan_cut(LedgerCost(segments), span, slots, node_hours_cap, sigma=sigma, share=share)
