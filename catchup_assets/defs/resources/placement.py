"""The tier ladder and the node shapes as the resource takes them."""

from typing import Literal

import dagster as dg
from pydantic import Field

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.catalog import Catalog, NodeShape, eks_allocatable
from catchup_assets.core.size.sizing import MAX_NODE_CPU, MAX_NODE_MEMORY_BYTES, Tier
from catchup_assets.core.units import GiB
from catchup_assets.defs.resources.policies import Strict

MAX_NODE_MEMORY_GIB = MAX_NODE_MEMORY_BYTES // GiB
MAX_PODS_PER_NODE = 1000  # past Kubernetes' tested 110 and EKS's largest prefix-delegated 737
MAX_HOURLY_USD = 1000.0


class TierConfig(dg.Config):
    name: str
    # Upper bounds (issue 45 item 5): no node holds more (core/size/sizing.py).
    memory_cut_gib: float = Field(gt=0, le=MAX_NODE_MEMORY_GIB)
    node_memory_gib: float | None = Field(default=None, gt=0, le=MAX_NODE_MEMORY_GIB, description="empty: the shape's")
    cpu: float = Field(gt=0, le=MAX_NODE_CPU, description="each range pod's CPU request")
    shape: str = Field(default="", description="the catalog shape (instance type); empty: by node_memory_gib")
    capacity_type: Literal["spot", "on-demand"] = "spot"
    exclusive: bool = Field(default=False, description="one range per node; else ranges pack by their requests")
    pods_per_node: int | None = Field(
        default=None, ge=1, le=MAX_PODS_PER_NODE, description="a fixed number of ranges per node"
    )

    def tier(self, catalog: Catalog) -> Tier:
        where = f"tier {self.name!r}"
        if self.exclusive and self.pods_per_node not in (None, 1):
            raise ConfigError(f"{where}: exclusive means one range per node, not pods_per_node {self.pods_per_node}")
        memory = self.node_memory_gib
        if memory is None:
            if not self.shape:
                raise ConfigError(f"{where}: give a shape or node_memory_gib")
            try:
                memory_bytes = catalog.by_name(self.shape).memory_bytes
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        else:
            memory_bytes = int(memory * GiB)
        return Tier(
            self.name,
            int(self.memory_cut_gib * GiB),
            memory_bytes,
            self.cpu,
            1 if self.exclusive else self.pods_per_node,
            self.shape,
            self.capacity_type,
        )


class ShapeConfig(Strict):
    """A node shape of the price catalog (docs/cost.md); allocatable, when left out, estimated as Karpenter does."""

    name: str = Field(min_length=1, description="the instance type, e.g. r6i.xlarge")
    memory_gib: float = Field(gt=0, le=MAX_NODE_MEMORY_GIB)
    cpu: float = Field(gt=0, le=MAX_NODE_CPU)
    # The dearest instance lists at ~220 USD an hour.
    on_demand_hourly: float = Field(gt=0, le=MAX_HOURLY_USD, description="USD per hour")
    spot_hourly: float = Field(gt=0, le=MAX_HOURLY_USD, description="USD per hour")
    allocatable_memory_gib: float | None = Field(default=None, gt=0, le=MAX_NODE_MEMORY_GIB)
    allocatable_cpu: float | None = Field(default=None, gt=0, le=MAX_NODE_CPU)
    max_pods: int = Field(
        default=110, ge=1, le=MAX_PODS_PER_NODE, description="for the allocatable estimate (kube-reserved)"
    )

    def shape(self) -> NodeShape:
        memory = int(self.memory_gib * GiB)
        est_memory, est_cpu = eks_allocatable(memory, self.cpu, self.max_pods)
        alloc = est_memory if self.allocatable_memory_gib is None else int(self.allocatable_memory_gib * GiB)
        cpu = est_cpu if self.allocatable_cpu is None else self.allocatable_cpu
        return NodeShape(self.name, memory, self.cpu, self.on_demand_hourly, self.spot_hourly, alloc, cpu)
