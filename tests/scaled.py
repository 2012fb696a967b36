"""The demo's scale for tests that run real local missions: memory x 1/200, for the tiers
and the node shapes alike, so the sizing rule and the memory ladder see MiB, not GiB."""

from catchup_assets.core.size.catalog import DEFAULT_CATALOG
from catchup_assets.core.size.sizing import MemoryLadder, Placement, SizingPolicy, Tiers, scaled_tiers
from catchup_assets.core.units import MiB

SCALE = 1 / 200
LADDER = MemoryLadder(cap_bytes=512 * MiB)


def scaled_placement(
    unprofiled_bytes: int, headroom_bytes: int | None = None, ladder: MemoryLadder = LADDER, **extra
) -> Placement:
    """Scaled tiers and catalog; an unprofiled range gets `unprofiled_bytes` (and `headroom_bytes` of cache)."""
    headroom = {} if headroom_bytes is None else {"cache_headroom_bytes": headroom_bytes}
    sizing = SizingPolicy(unprofiled_memory_bytes=unprofiled_bytes, **headroom)
    return Placement(scaled_tiers(Tiers(), SCALE), sizing, ladder, catalog=DEFAULT_CATALOG.scaled(SCALE), **extra)
