"""Size each range from the previous profile and place it on a node tier.

Pure. `memory = peak_anon * margin + cache_headroom` (L27), the tier is the
smallest whose memory cut holds it, a big working set moves it one tier up,
each OOM moves it one more (L6) while the request climbs by the ladder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from catchup_assets.core.errors import ConfigError, bounded, check_bounds
from catchup_assets.core.size.capacity import capacity_for
from catchup_assets.core.size.catalog import CAPACITY_TYPES, DEFAULT_CATALOG, SPOT, Catalog, NodeShape
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure, measure_for
from catchup_assets.core.units import GiB

# The most memory and CPUs any one node has (the largest cloud instances hold 24 TiB and 448 vCPUs): the
# upper bound of every memory and CPU setting, a sanity line against a typo (`cap_gib: 1e9`), issue 45 item 5.
MAX_NODE_MEMORY_BYTES = 32 * 1024 * GiB
MAX_NODE_CPU = 1024
TIER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Tier:
    """A node pool: the most memory one range may get there, and the node it runs on.

    `cpu` is each range pod's CPU request. `shape` names the node's instance
    type in the catalog (empty: the cheapest shape of `node_memory_bytes` that
    holds `cpu`); `capacity_type` is what the pool buys, spot or on-demand.
    `pods_per_node` None packs ranges by their requests, as Kubernetes and
    Karpenter do; a number holds each node to that many ranges whatever they
    request (1: exclusive, a node per range, as the seed's cuts were).
    """

    name: str
    memory_cut_bytes: int
    node_memory_bytes: int
    cpu: float
    pods_per_node: int | None = None
    shape: str = ""
    capacity_type: str = SPOT

    @property
    def exclusive(self) -> bool:
        return self.pods_per_node == 1


# The seed's cuts, each what its node can give one pod after system reservations
# (catalog.eks_allocatable), now packed by requests: a range pays for the share of
# a node it requests, not for a node. The two largest cuts sit at their nodes'
# allocatable (the seed's 120 and 248 GiB would not schedule); the memory ladder's
# 48 GiB cap never reaches them.
DEFAULT_LADDER: tuple[Tier, ...] = (
    Tier("dwarf", int(6.5 * GiB), 8 * GiB, 1, shape="m6i.large"),
    Tier("subgiant", int(13.5 * GiB), 16 * GiB, 1, shape="r6i.large"),
    Tier("giant", 28 * GiB, 32 * GiB, 2, shape="r6i.xlarge"),
    Tier("supergiant", 58 * GiB, 64 * GiB, 2, shape="r6i.2xlarge"),
    Tier("hypergiant", 115 * GiB, 128 * GiB, 2, shape="r6i.4xlarge"),
    Tier("supernova", 233 * GiB, 256 * GiB, 2, shape="r6i.8xlarge"),
)
# Catch-alls: an unsized pod requests the unprofiled 12 GiB and 2 CPUs, two to a node.
PROTOSTAR = Tier("protostar", 14 * GiB, 32 * GiB, 2, shape="r6i.xlarge")
NEBULA = Tier("nebula", 14 * GiB, 32 * GiB, 2, shape="r6i.xlarge")


def exclusive_ladder(ladder: tuple[Tier, ...]) -> tuple[Tier, ...]:
    """The same tiers, one range per node: the seed's way, for comparison."""
    return tuple(replace(t, pods_per_node=1) for t in ladder)


@dataclass(frozen=True)
class Tiers:
    ladder: tuple[Tier, ...] = DEFAULT_LADDER
    unprofiled: Tier = PROTOSTAR  # an unmeasured range in a profiled mission
    no_profile: Tier = NEBULA  # every range of a mission with no profile

    def __post_init__(self) -> None:
        if not self.ladder:
            raise ConfigError("tiers: the ladder needs at least one tier")
        cuts = [t.memory_cut_bytes for t in self.ladder]
        if cuts != sorted(cuts) or len(set(cuts)) != len(cuts):
            raise ConfigError("tiers: ladder memory cuts must strictly increase")
        names = [t.name for t in self.all()]
        if len(set(names)) != len(names):
            raise ConfigError(f"tiers: duplicate tier names in {names}")
        for name in names:
            # A tier name becomes a node-selector label value, a taint value and a NodePool's
            # name: refused here, at load, not at the first submit after Jobs were created.
            if not isinstance(name, str) or not TIER_NAME.fullmatch(name):
                raise ConfigError(f"tier {name!r}: a name must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
        for t in self.all():
            if t.memory_cut_bytes <= 0 or t.memory_cut_bytes > t.node_memory_bytes:
                raise ConfigError(f"tier {t.name!r}: need 0 < memory_cut <= node_memory")
            if t.capacity_type not in CAPACITY_TYPES:
                raise ConfigError(f"tier {t.name!r}: capacity_type {t.capacity_type!r} is not one of {CAPACITY_TYPES}")
            if t.pods_per_node is not None and (isinstance(t.pods_per_node, bool) or t.pods_per_node < 1):
                raise ConfigError(f"tier {t.name!r}: pods_per_node must be >= 1, or None to pack by requests")

    def all(self) -> tuple[Tier, ...]:
        return (*self.ladder, self.unprofiled, self.no_profile)

    def by_name(self, name: str) -> Tier:
        for t in self.all():
            if t.name == name:
                return t
        raise ConfigError(f"unknown tier {name!r}: known tiers {[t.name for t in self.all()]}")

    def index_for(self, memory_bytes: int) -> int:
        """Smallest ladder tier whose cut holds `memory_bytes` (the top one if none does)."""
        for i, t in enumerate(self.ladder):
            if memory_bytes <= t.memory_cut_bytes:
                return i
        return len(self.ladder) - 1


@dataclass(frozen=True)
class SizingPolicy:
    # Upper bounds (issue 45 item 5): no node holds more than MAX_NODE_MEMORY_BYTES; a margin past 10x is a typo.
    margin: float = bounded(1.25, ge=1, le=10)
    cache_headroom_bytes: int = bounded(1 * GiB, ge=0, le=MAX_NODE_MEMORY_BYTES)
    # A working set above this share of the tier's cut means the page cache is
    # starved there: one tier up.
    cache_bump_ratio: float = bounded(1.0, gt=0, le=10)
    unprofiled_memory_bytes: int = bounded(12 * GiB, gt=0, le=MAX_NODE_MEMORY_BYTES)
    cpu_request: float | None = bounded(None, gt=0, le=MAX_NODE_CPU)  # None: the tier's cpu
    # After this many `disrupted` attempts of a range its next ones run on-demand (capacity.py); 0: never.
    reclaims_before_on_demand: int = bounded(3, ge=0, le=1000)

    def __post_init__(self) -> None:
        check_bounds(self, "sizing")


@dataclass(frozen=True)
class Sizing:
    tier: str
    memory_request_bytes: int
    memory_limit_bytes: int
    cpu_request: float
    profiled: bool
    base_memory_bytes: int
    predicted_seconds: float | None = None
    ephemeral_bytes: int | None = None  # None: the deployment's flat ephemeral request and limit
    capacity_type: str = SPOT  # the tier's, or on-demand after the range's reclaims (capacity.py)


def base_memory(measure: RangeMeasure, policy: SizingPolicy) -> int:
    return int(measure.peak_anon_bytes * policy.margin + policy.cache_headroom_bytes)


@dataclass(frozen=True)
class MemoryLadder:
    """How an OOMed range's memory climbs: by its OOM count, never its attempt number (L6)."""

    factor: float = bounded(1.5, gt=1, le=10)  # 1.0 would retry an OOM at the very limit that OOMed (L6)
    cap_bytes: int = bounded(48 * GiB, gt=0, le=MAX_NODE_MEMORY_BYTES)

    def __post_init__(self) -> None:
        check_bounds(self, "memory ladder")

    def memory_for(self, base_bytes: int, n_oom: int) -> int:
        """Memory for the next attempt after `n_oom` OOMs, at most the cap."""
        return min(int(base_bytes * self.factor**n_oom), self.cap_bytes)


@dataclass(frozen=True)
class Placement:
    """Where an attempt runs and how much memory it gets: the tier ladder, the sizing
    rule and the memory ladder, one value that plan, tier map, forecast and dispatcher share."""

    tiers: Tiers = Tiers()
    sizing: SizingPolicy = SizingPolicy()
    ladder: MemoryLadder = MemoryLadder()
    catalog: Catalog = DEFAULT_CATALOG
    disk: DiskPolicy = DiskPolicy()

    def __post_init__(self) -> None:
        # Every tier's node resolved once, at load: a shape the catalog lacks, or a cut or
        # CPU request its node cannot hold, is refused naming the tier (L34).
        shapes = {t.name: resolve_shape(t, self.catalog) for t in self.tiers.all()}
        object.__setattr__(self, "_shapes", shapes)

    def shape_of(self, tier: str) -> NodeShape:
        """The node shape tier `tier` runs on."""
        try:
            return self._shapes[tier]
        except KeyError:
            raise ConfigError(f"unknown tier {tier!r}: known tiers {sorted(self._shapes)}") from None

    def size(  # noqa: PLR0913 (the outcomes so far, then the range's first ledger)
        self, last_ledger: int, profile: ProfileIndex | None, n_oom=0, n_evicted=0, n_disrupted=0, first_ledger=None
    ) -> Sizing:
        """Resources, tier and capacity type for the next attempt of the range ending at `last_ledger`.

        `n_oom`, `n_evicted`, `n_disrupted`: the range's OOM, (own-disk) eviction and reclaim outcomes so far.
        With `first_ledger` a range whose key the profile lacks is sized by the rows it overlaps
        (`ProfileIndex.lookup_span`, issue 25 item 3); without it, by its end alone (L25)."""
        tiers, policy = self.tiers, self.sizing
        measure = measure_for(profile, first_ledger, last_ledger)
        if measure is None:
            catch_all = tiers.no_profile if profile is None or not len(profile) else tiers.unprofiled
            base = min(policy.unprofiled_memory_bytes, catch_all.memory_cut_bytes)
            memory = self.ladder.memory_for(base, n_oom)
            tier = catch_all if memory <= catch_all.memory_cut_bytes else tiers.ladder[tiers.index_for(memory)]
            disk = self.disk.ephemeral_for(None, n_evicted)
            return _sizing(tier, memory, policy, False, base, None, disk, n_disrupted)
        base = base_memory(measure, policy)
        memory = self.ladder.memory_for(base, n_oom)
        idx = tiers.index_for(base)
        ws = measure.peak_working_set_bytes
        if ws is not None and ws > tiers.ladder[idx].memory_cut_bytes * policy.cache_bump_ratio:
            idx += 1
        idx = max(idx + n_oom, tiers.index_for(memory))
        tier = tiers.ladder[min(idx, len(tiers.ladder) - 1)]
        disk = self.disk.ephemeral_for(measure.peak_ephemeral_bytes, n_evicted)
        return _sizing(tier, memory, policy, True, base, measure.seconds, disk, n_disrupted)

    def scaled(self, factor: float) -> Placement:
        """Every memory figure times `factor` (the demo runs in MiB what production runs in GiB)."""
        if factor == 1.0:
            return self
        ladder = MemoryLadder(self.ladder.factor, int(self.ladder.cap_bytes * factor))
        return Placement(
            scaled_tiers(self.tiers, factor),
            scaled_policy(self.sizing, factor),
            ladder,
            self.catalog.scaled(factor),
            self.disk.scaled(factor),
        )


def _sizing(tier: Tier, memory: int, policy: SizingPolicy, profiled: bool, base: int, seconds, disk, n_disrupted):
    cpu = policy.cpu_request if policy.cpu_request is not None else tier.cpu
    capacity = capacity_for(tier.capacity_type, n_disrupted, policy.reclaims_before_on_demand)
    return Sizing(tier.name, memory, memory, cpu, profiled, base, seconds, disk, capacity)


def scaled_tiers(tiers: Tiers, factor: float) -> Tiers:
    """The same ladder with every memory figure times `factor` (demo missions run in MiB)."""

    def s(t: Tier) -> Tier:
        return replace(
            t, memory_cut_bytes=int(t.memory_cut_bytes * factor), node_memory_bytes=int(t.node_memory_bytes * factor)
        )

    return Tiers(tuple(s(t) for t in tiers.ladder), s(tiers.unprofiled), s(tiers.no_profile))


def scaled_policy(policy: SizingPolicy, factor: float) -> SizingPolicy:
    return replace(
        policy,
        cache_headroom_bytes=int(policy.cache_headroom_bytes * factor),
        unprofiled_memory_bytes=int(policy.unprofiled_memory_bytes * factor),
    )


def resolve_shape(tier: Tier, catalog: Catalog) -> NodeShape:
    """The catalog shape `tier` runs on, checked to hold the tier's cut and CPU request."""
    if tier.shape:
        try:
            found = catalog.by_name(tier.shape)
        except ValueError as exc:
            raise ConfigError(f"tier {tier.name!r}: {exc}") from None
        if found.memory_bytes != tier.node_memory_bytes:
            raise ConfigError(
                f"tier {tier.name!r}: node_memory {tier.node_memory_bytes / GiB:g} GiB is not "
                f"shape {found.name}'s {found.memory_bytes / GiB:g} GiB"
            )
    else:
        fits = [s for s in catalog.shapes if s.memory_bytes == tier.node_memory_bytes and s.allocatable_cpu >= tier.cpu]
        found = min(fits, key=lambda s: s.on_demand_hourly, default=None)
        if found is None:
            raise ConfigError(
                f"tier {tier.name!r}: no catalog shape has {tier.node_memory_bytes / GiB:g} GiB and "
                f"{tier.cpu:g} allocatable CPUs; name one with `shape`, or add it to the catalog"
            )
    slots = tier.pods_per_node or 1
    if tier.memory_cut_bytes * slots > found.allocatable_memory_bytes:
        raise ConfigError(
            f"tier {tier.name!r}: {slots} x memory_cut {tier.memory_cut_bytes / GiB:.4g} GiB exceeds what "
            f"{found.name} can give pods ({found.allocatable_memory_bytes / GiB:.4g} GiB allocatable)"
        )
    if tier.cpu * slots > found.allocatable_cpu:
        raise ConfigError(
            f"tier {tier.name!r}: {slots} x cpu {tier.cpu:g} exceeds {found.name}'s "
            f"{found.allocatable_cpu:g} allocatable"
        )
    return found
