"""The ranges one target length makes of the uniform grid: cut, merged or kept (issue 25 item 3).

Pure; the search over targets is cut.py's. A grid range predicted above the
target T is cut into the fewest equal pieces (on the checkpoint grid) that each
predict at most T, every piece paying its setup again (`LedgerCost.seconds`);
a run of consecutive uncut grid ranges is merged, oldest first, while the
merged range predicts at most the merge limit, saving a setup, a Job and a
volume each. Where pieces above T/2 outnumber the slots, the cheapest grid
ranges are cut finer, to pieces of at most T/2 (`_fewer_long_pieces`): two
long pieces in one slot overrun T, and the list schedule (longest first)
stacks them once every slot holds one.

Cuts and merges fall only on the uniform grid's boundaries or on checkpoint
starts inside a grid range, so a range neither cut nor merged keeps its grid
key exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from catchup_assets.core.forecast.forecast import list_schedule
from catchup_assets.core.forecast.ledger_cost import LedgerCost
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS
from catchup_assets.core.values.ledger_range import LedgerRange


def makespan(seconds: Sequence[float], slots: int) -> float:
    """The forecast's list schedule with the longest first, as `longest-first` dispatches."""
    return list_schedule(sorted(seconds, reverse=True), slots)


def split(r: LedgerRange, pieces: int) -> list[LedgerRange]:
    """`r` cut into `pieces` of near-equal length, each starting on a checkpoint (first ledger 1 + 64k)."""
    checkpoints = -(-r.length // CHECKPOINT_LEDGERS)
    pieces = max(1, min(pieces, checkpoints))
    starts = [r.first + CHECKPOINT_LEDGERS * (i * checkpoints // pieces) for i in range(pieces)]
    return [LedgerRange(a, b - 1) for a, b in zip(starts, starts[1:], strict=False)] + [LedgerRange(starts[-1], r.last)]


def pieces_for(cost: LedgerCost, r: LedgerRange, target: float) -> list[LedgerRange]:
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
            groups.append(pieces_for(cost, r, target))
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
        finer = pieces_for(cost, r, half)
        if (gain := now - long(finer)) > 0:
            groups[i] = finer
            excess -= gain


def uncuttable_seconds(cost: LedgerCost, grid: Sequence[LedgerRange]) -> float:
    """The longest piece no cut can shorten: a grid range's setup and its costliest checkpoint."""

    def ends(r: LedgerRange) -> tuple[LedgerRange, LedgerRange]:
        tail = r.first + CHECKPOINT_LEDGERS * ((r.length - 1) // CHECKPOINT_LEDGERS)
        return LedgerRange(r.first, min(r.first + CHECKPOINT_LEDGERS - 1, r.last)), LedgerRange(tail, r.last)

    return max(cost.seconds(p.first, p.last) for r in grid for p in ends(r))
