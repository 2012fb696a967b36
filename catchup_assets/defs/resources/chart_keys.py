"""Which resource config fields are the chart's values, and their names there: read off the models.

A values key is its field's name in camelCase (pydantic's `to_camel`), so the
chart's `_helpers.tpl` renames nothing by hand: it reads the generated
`files/keys.json` (chart_schema.py writes it) and passes each values key it
finds to its field. A field added to one of these models is a chart value with
no edit here; only a field the chart must not offer is named below.
"""

from __future__ import annotations

import pydantic
from pydantic.alias_generators import to_camel

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.catalog import Catalog
from catchup_assets.defs.resources.k8s import KubernetesConfig, TolerationConfig
from catchup_assets.defs.resources.mission_defaults import MissionDefaultsConfig
from catchup_assets.defs.resources.placement import ShapeConfig, TierConfig
from catchup_assets.defs.resources.resource import CatchupResource

# CatchupResource fields the chart does not offer: it always runs the kubernetes backend, and
# the simulated core, its disruptions and the demo's memory scale are the local backend's.
LOCAL_ONLY = ("backend", "stellar_core", "sim_speed", "sim_seed", "sim_fail_targets", "disruption_rate", "memory_scale")
# CatchupResource fields the chart writes from blocks of their own (the keys below).
BLOCKS = ("kubernetes", "mission_defaults", "tiers", "unprofiled_tier", "no_profile_tier", "catalog")
# The four policy configs, passed through as they are (snake_case keys: their fields are the policies').
PASS_THROUGH = ("retry", "sizing", "ladder", "disk")
# KubernetesConfig fields the release decides (its namespace, images, accounts and ConfigMap), and
# the client's own: a run pod reaches the API with its in-cluster account.
DERIVED = ("namespace", "image", "image_pull_policy", "worker_service_account", "configmap")
CLIENT_ONLY = ("kubeconfig", "context", "core_config_file")
LISTS = ("extra_tolerations",)  # a list of TolerationConfig: the template renames it item by item
KUBELET = "kubelet_"  # KubernetesConfig's `kubelet_*` fields are the values' `kubelet:` block
SPELLED = {"kubelet_insecure_skip_tls_verify": "insecureSkipTLSVerify"}  # as metrics-server spells it


def values_name(field: str) -> str:
    return SPELLED.get(field) or to_camel(field.removeprefix(KUBELET))


def _names(fields) -> dict[str, str]:
    out = {values_name(f): f for f in fields}
    assert len(out) == len(fields), f"two fields share a values name: {sorted(fields)}"
    return out


def keys() -> dict[str, dict[str, str]]:
    """values key -> resource field, per block of the rendered `catchup` resource config."""
    skip = {*LOCAL_ONLY, *BLOCKS, *PASS_THROUGH}
    k8s = [f for f in KubernetesConfig.model_fields if f not in {*DERIVED, *CLIENT_ONLY, *LISTS}]
    out = {
        "catchup": _names([f for f in CatchupResource.model_fields if f not in skip]),
        "passThrough": {f: f for f in PASS_THROUGH},
        "missionDefaults": _names(list(MissionDefaultsConfig.model_fields)),
        "kubernetes": _names([f for f in k8s if not f.startswith(KUBELET)]),
        "kubelet": _names([f for f in k8s if f.startswith(KUBELET)]),
        "tier": _names(list(TierConfig.model_fields)),
        "shape": _names(list(ShapeConfig.model_fields)),
        "toleration": _names(list(TolerationConfig.model_fields)),
    }
    top = [k for block in ("catchup", "passThrough", "missionDefaults", "kubernetes") for k in out[block]]
    assert len(top) == len(set(top)), f"a values key names two fields: {sorted(top)}"
    return out


def catalog_from_values(doc, where: str = "catalog") -> Catalog:
    """A catalog as the chart's values spell it: a list of shapes, or a mapping with `catalog` (and `catalogSource`).

    Each shape is checked as ShapeConfig checks it; a bad one is refused naming its place (L34)."""
    source = ""
    if isinstance(doc, dict):
        source, doc = str(doc.get("catalogSource") or ""), doc.get("catalog")
    if not isinstance(doc, list) or not doc:
        raise ConfigError(f"{where}: expected a list of shapes, or a mapping with a non-empty 'catalog' list")
    shapes, shape_keys = [], _names(list(ShapeConfig.model_fields))
    for i, entry in enumerate(doc):
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}[{i}]: a shape is a mapping, got {entry!r}")
        try:
            shapes.append(ShapeConfig(**{shape_keys.get(k, k): v for k, v in entry.items()}).shape())
        except (pydantic.ValidationError, ValueError) as exc:
            raise ConfigError(f"{where}[{i}]: {exc}") from None
    return Catalog(tuple(shapes), source or where)
