"""The deployment's settings as Dagster resource config: `CatchupResource` and the configs it holds.

One module per concept: resource (CatchupResource), policies (the four generated
policy configs), placement (tiers and node shapes), mission_defaults (the
launchpad's defaults and caps), k8s (KubernetesConfig), backend (the backend
factory), deployment (the resource bound fixed, so a launch cannot change it).
"""

from catchup_assets.defs.resources.deployment import deployment_catchup, deployment_resource
from catchup_assets.defs.resources.k8s import KubernetesConfig, TolerationConfig
from catchup_assets.defs.resources.mission_defaults import MissionDefaultsConfig
from catchup_assets.defs.resources.placement import ShapeConfig, TierConfig
from catchup_assets.defs.resources.resource import CatchupResource

__all__ = [
    "CatchupResource",
    "KubernetesConfig",
    "MissionDefaultsConfig",
    "ShapeConfig",
    "TierConfig",
    "TolerationConfig",
    "deployment_catchup",
    "deployment_resource",
]
