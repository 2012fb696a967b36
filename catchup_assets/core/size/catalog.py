"""The node shapes a mission can run on and what an hour of each costs.

Pure data. A shape is an instance type: its memory and CPUs, what the kubelet
leaves pods of them (allocatable), and its on-demand and spot price per hour.
Tiers name a shape (sizing.Tier.shape); the cost model (forecast/cost.py) prices a
range by the share of its tier's node it requests.

The default catalog (docs/cost.md says where each figure comes from):

- on-demand: AWS EC2 Linux, us-east-1, as Karpenter's AWS provider ships them
  (`pkg/providers/pricing/zz_generated.pricing_aws.go`, "generated at
  2026-01-19T13:23:24Z for us-east-1"), for the c6i, m6i and r6i families
  (2, 4 and 8 GiB per vCPU), large to 8xlarge;
- spot: an assumption, not a quote: 40% of on-demand (a 60% saving, typical of
  what AWS's Spot Instance Advisor shows for these families). Spot prices move
  by zone and by the hour and could not be checked here; set your own;
- allocatable: Karpenter's own estimate (below).
"""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.units import GiB, MiB

SPOT, ON_DEMAND = "spot", "on-demand"
CAPACITY_TYPES = (SPOT, ON_DEMAND)

PRICE_SOURCE = (
    "on-demand: AWS EC2 Linux us-east-1 as in Karpenter's zz_generated.pricing_aws.go (generated 2026-01-19); "
    "spot: assumed 40% of on-demand, not a quote"
)
SPOT_SHARE = 0.40
# Karpenter's default vmMemoryOverheadPercent: the share of an instance's memory it assumes
# the kubelet will not report as capacity (firmware, kernel).
VM_MEMORY_OVERHEAD = 0.075
EVICTION_HARD_BYTES = 100 * MiB  # the kubelet's default memory.available<100Mi
KUBE_RESERVED_MIB, KUBE_RESERVED_MIB_PER_POD = 255, 11  # EKS's kube-reserved memory
# EKS's kube-reserved CPU: this share of each of the first cores, then CPU_RESERVED_REST of each other.
CPU_RESERVED_FIRST, CPU_RESERVED_REST = (0.06, 0.01, 0.005, 0.005), 0.0025


def eks_allocatable(memory_bytes: int, cpu: float, max_pods: int) -> tuple[int, float]:
    """Memory and CPU left to pods on an EKS-style node, the way Karpenter estimates them.

    Memory: capacity (memory less the VM overhead) less kube-reserved (255 MiB
    + 11 MiB per pod the instance may hold) and the hard-eviction threshold.
    CPU: less kube-reserved, 6% of the first core, 1% of the second, 0.5% of
    the next two and 0.25% of the rest. DaemonSets' own requests come on top.
    """
    capacity = int(memory_bytes * (1 - VM_MEMORY_OVERHEAD))
    memory = capacity - (KUBE_RESERVED_MIB + KUBE_RESERVED_MIB_PER_POD * max_pods) * MiB - EVICTION_HARD_BYTES
    reserved = 0.0
    for i in range(int(cpu)):
        reserved += CPU_RESERVED_FIRST[i] if i < len(CPU_RESERVED_FIRST) else CPU_RESERVED_REST
    return memory, round(cpu - reserved, 4)


@dataclass(frozen=True)
class NodeShape:
    """One instance type; `allocatable_*` is what pods may request of it."""

    name: str
    memory_bytes: int
    cpu: float
    on_demand_hourly: float
    spot_hourly: float
    allocatable_memory_bytes: int
    allocatable_cpu: float

    def __post_init__(self) -> None:
        where = f"catalog shape {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"{where}: a shape needs a name (its instance type)")
        if not 0 < self.allocatable_memory_bytes <= self.memory_bytes:
            raise ConfigError(f"{where}: need 0 < allocatable memory <= memory")
        if not 0 < self.allocatable_cpu <= self.cpu:
            raise ConfigError(f"{where}: need 0 < allocatable cpu <= cpu")
        if not (self.on_demand_hourly > 0 and self.spot_hourly > 0):
            raise ConfigError(f"{where}: prices must be > 0")

    def hourly(self, capacity_type: str) -> float:
        if capacity_type == SPOT:
            return self.spot_hourly
        if capacity_type == ON_DEMAND:
            return self.on_demand_hourly
        raise ConfigError(f"capacity type {capacity_type!r}: one of {CAPACITY_TYPES}")

    def scaled(self, factor: float) -> NodeShape:
        """Memory times `factor`, prices kept: a scaled-down demo's pods take the same share of a node."""
        return NodeShape(
            self.name,
            int(self.memory_bytes * factor),
            self.cpu,
            self.on_demand_hourly,
            self.spot_hourly,
            int(self.allocatable_memory_bytes * factor),
            self.allocatable_cpu,
        )


def shape(name: str, memory_gib: float, cpu: float, on_demand: float, max_pods: int) -> NodeShape:
    """A default-catalog shape: spot at SPOT_SHARE of on-demand, allocatable estimated."""
    memory = int(memory_gib * GiB)
    alloc_memory, alloc_cpu = eks_allocatable(memory, cpu, max_pods)
    return NodeShape(name, memory, cpu, on_demand, round(on_demand * SPOT_SHARE, 6), alloc_memory, alloc_cpu)


# (size, vCPUs, EKS max pods per its ENIs): the same for c6i, m6i and r6i.
_SIZES = (("large", 2, 29), ("xlarge", 4, 58), ("2xlarge", 8, 58), ("4xlarge", 16, 234), ("8xlarge", 32, 234))
_FAMILIES = {  # GiB per vCPU, on-demand $/h of the large size (each size up doubles both)
    "c6i": (2, 0.085),
    "m6i": (4, 0.096),
    "r6i": (8, 0.126),
}


@dataclass(frozen=True)
class Catalog:
    shapes: tuple[NodeShape, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if not self.shapes:
            raise ConfigError("catalog: needs at least one shape")
        names = [s.name for s in self.shapes]
        if len(set(names)) != len(names):
            raise ConfigError(f"catalog: duplicate shape names in {names}")

    def by_name(self, name: str) -> NodeShape:
        for s in self.shapes:
            if s.name == name:
                return s
        raise ConfigError(f"unknown shape {name!r}: the catalog has {[s.name for s in self.shapes]}")

    def with_memory(self, memory_bytes: int) -> NodeShape | None:
        """The cheapest shape of exactly this memory (a tier that names a node size, not a shape)."""
        found = [s for s in self.shapes if s.memory_bytes == memory_bytes]
        return min(found, key=lambda s: s.on_demand_hourly, default=None)

    def scaled(self, factor: float) -> Catalog:
        return self if factor == 1.0 else Catalog(tuple(s.scaled(factor) for s in self.shapes), self.source)


DEFAULT_CATALOG = Catalog(
    tuple(
        shape(f"{family}.{size}", per_cpu * cpu, cpu, round(large * cpu / 2, 6), pods)
        for family, (per_cpu, large) in _FAMILIES.items()
        for size, cpu, pods in _SIZES
    ),
    PRICE_SOURCE,
)
