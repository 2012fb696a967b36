"""Which capacity an attempt buys: its tier's, or on-demand once spot has reclaimed the range enough.

Pure. A range whose attempts spot keeps reclaiming pays each time with the tail
of the mission (Flyte's `interruptible-failure-threshold`, Kueue's flavor
fallback): after `reclaims` `disrupted` attempts of one range, counted from
its own past attempts as the retry budgets are, its next attempts run on the
on-demand variant of its tier. The node shape stays the tier's; only the
capacity type changes. `reclaims` 0 turns the fallback off.
"""

from __future__ import annotations

from catchup_assets.core.size.catalog import ON_DEMAND


def capacity_for(tier_capacity: str, n_disrupted: int, reclaims: int) -> str:
    """The capacity type of a range's next attempt after `n_disrupted` reclaims of it."""
    if tier_capacity == ON_DEMAND or reclaims == 0:
        return tier_capacity
    return ON_DEMAND if n_disrupted >= reclaims else tier_capacity


def fell_back(tier_capacity: str, capacity: str) -> bool:
    """True when an attempt runs on on-demand capacity its tier does not buy: the fallback."""
    return capacity == ON_DEMAND and tier_capacity != ON_DEMAND
