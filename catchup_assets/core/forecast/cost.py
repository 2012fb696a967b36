"""What a mission costs in dollars: predicted from a plan, or actual from its attempt records.

Pure. A range on a tier that packs by requests pays for the share of the
tier's node it requests, the larger of memory over the node's allocatable
memory and CPU over its allocatable CPU (Kubernetes and Karpenter pack pods by
their requests); on a tier holding `pods_per_node` ranges per node it pays
1 / pods_per_node. Times the node's price per hour for the capacity type it
bought (its tier's, or on-demand for an attempt its range's reclaims moved
there: size/capacity.py), times the seconds it ran. Flat sizing, the baseline, puts every range on
a node of its own that holds the largest request: the cheapest catalog shape
that does, at the capacity type of the tier the largest request went to.

Left out, and said wherever a cost is shown: node start-up and the idle tail
of a node, bin-packing fragments, DaemonSets, volumes (PVC storage is billed
apart), and the rework of a spot reclaim in a prediction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from catchup_assets.core.size.catalog import ON_DEMAND, SPOT, NodeShape
from catchup_assets.core.size.sizing import Placement, Tier
from catchup_assets.core.values.attempt_record import AttemptRecord

COST_NOTE = (
    "node start-up, idle node tails, packing fragments, DaemonSets, volumes and (in a prediction) "
    "spot reclaims' rework are not counted"
)


def node_share(tier: Tier, shape: NodeShape, memory_request_bytes: int, cpu_request: float) -> float:
    """The share of one node of `shape` a range on `tier` pays for."""
    if tier.pods_per_node is not None:
        return 1.0 / tier.pods_per_node
    memory = memory_request_bytes / shape.allocatable_memory_bytes
    return min(1.0, max(memory, cpu_request / shape.allocatable_cpu))


@dataclass(frozen=True)
class Use:
    """One range (or one attempt) on a tier: what it requested and for how long it ran."""

    tier: str
    memory_request_bytes: int
    seconds: float
    cpu_request: float | None = None  # None: the sizing's, else the tier's
    capacity_type: str | None = None  # what the attempt bought (a range moved to on-demand); None: the tier's


@dataclass
class TierCost:
    uses: int = 0
    dollars: float = 0.0
    node_hours: float = 0.0


@dataclass
class MissionCost:
    dollars: float = 0.0
    spot_dollars: float = 0.0
    on_demand_dollars: float = 0.0
    all_on_demand_dollars: float = 0.0  # the same nodes bought on-demand: what spot saves
    fallback_dollars: float = 0.0  # of on_demand_dollars, attempts moved off their spot tier by reclaims
    node_hours: float = 0.0  # node time paid for: seconds x node share
    flat_dollars: float = 0.0
    flat_shape: str = ""
    uses: int = 0
    unpriced: int = 0  # uses on a tier this placement does not know (a record from other settings)
    by_tier: dict[str, TierCost] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """Tiered over flat: what the ladder saves (below 1) or loses."""
        return self.dollars / self.flat_dollars if self.flat_dollars else None


def attempt_uses(records: Iterable[AttemptRecord], time_scale: float = 1.0) -> list[Use]:
    """Each finished attempt as the cost model prices it: its tier, its request, its compute seconds,
    the capacity type it bought (a record older than the field: its tier's)."""
    return [
        Use(r.tier or "", r.memory_request_bytes or 0, (r.seconds or 0.0) * time_scale, None, r.capacity_type)
        for r in records
        if r.outcome is not None
    ]


def cpu_of(placement: Placement, tier: Tier, use: Use) -> float:
    if use.cpu_request is not None:
        return use.cpu_request
    return placement.sizing.cpu_request if placement.sizing.cpu_request is not None else tier.cpu


def flat_shape(placement: Placement, memory_bytes: int, cpu: float) -> NodeShape | None:
    """The cheapest catalog shape whose allocatable holds one range of `memory_bytes` and `cpu`."""
    fits = [
        s for s in placement.catalog.shapes if s.allocatable_memory_bytes >= memory_bytes and s.allocatable_cpu >= cpu
    ]
    return min(fits, key=lambda s: (s.on_demand_hourly, s.memory_bytes), default=None)


def mission_cost(uses: Iterable[Use], placement: Placement) -> MissionCost:
    """Dollars of every use on its tier, split by capacity type and tier, against flat sizing."""
    out = MissionCost()
    seconds = 0.0
    largest: tuple[int, float, str] | None = None  # memory, cpu, capacity type of the largest request
    known = {t.name for t in placement.tiers.all()}
    for u in uses:
        if u.tier not in known:
            out.unpriced += 1
            continue
        tier = placement.tiers.by_name(u.tier)
        shape = placement.shape_of(u.tier)
        cpu = cpu_of(placement, tier, u)
        share = node_share(tier, shape, u.memory_request_bytes, cpu)
        hours = max(u.seconds, 0.0) / 3600
        capacity = u.capacity_type if u.capacity_type in (SPOT, ON_DEMAND) else tier.capacity_type
        dollars = share * shape.hourly(capacity) * hours
        out.dollars += dollars
        if capacity == SPOT:
            out.spot_dollars += dollars
        else:
            out.on_demand_dollars += dollars
            out.fallback_dollars += dollars if capacity != tier.capacity_type else 0.0
        out.all_on_demand_dollars += share * shape.on_demand_hourly * hours
        out.node_hours += share * hours
        out.uses += 1
        t = out.by_tier.setdefault(u.tier, TierCost())
        t.uses, t.dollars, t.node_hours = t.uses + 1, t.dollars + dollars, t.node_hours + share * hours
        seconds += max(u.seconds, 0.0)
        if largest is None or u.memory_request_bytes > largest[0]:
            largest = (u.memory_request_bytes, cpu, tier.capacity_type)
    if largest is not None:
        flat = flat_shape(placement, largest[0], largest[1])
        if flat is not None:
            out.flat_shape = f"{flat.name} {largest[2]}"
            out.flat_dollars = flat.hourly(largest[2]) * seconds / 3600
    return out


def cost_rows(c: MissionCost, placement: Placement) -> list[dict]:
    """The cost table, a row per tier then the total and flat sizing (for metadata and the command line)."""
    order = [t.name for t in placement.tiers.all()]
    rows = []
    for name in sorted(c.by_tier, key=order.index):
        t, tier = c.by_tier[name], placement.tiers.by_name(name)
        rows.append(
            {
                "tier": name,
                "node": f"{placement.shape_of(name).name} {tier.capacity_type}",
                "packing": "requests" if tier.pods_per_node is None else f"{tier.pods_per_node}/node",
                "ranges": t.uses,
                "node_hours": significant(t.node_hours),
                "cost_usd": significant(t.dollars),
            }
        )
    rows.append(
        {"tier": "total", "node": "", "packing": "", "ranges": c.uses}
        | {"node_hours": significant(c.node_hours), "cost_usd": significant(c.dollars)}
    )
    rows.append(
        {"tier": "flat", "node": c.flat_shape, "packing": "1/node", "ranges": c.uses}
        | {"node_hours": "", "cost_usd": significant(c.flat_dollars)}
    )
    return rows


def significant(x: float, digits: int = 4) -> float:
    """Rounded to significant digits: 5.86 h and 0.0087 h (a demo's scaled-down mission) both stay readable."""
    return float(f"{x:.{digits}g}")
