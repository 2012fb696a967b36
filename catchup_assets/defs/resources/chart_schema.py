"""The chart's values.schema.json and files/keys.json, generated from the resource's config models.

    uv run python -m catchup_assets.defs.resources.chart_schema          # write all three
    uv run python -m catchup_assets.defs.resources.chart_schema --check  # exit 1 if any is stale

As the official dagster chart generates its schema from pydantic models, every
value that becomes a resource field takes its type, bounds, enum and
description from that field (chart_keys.py says which fields, and their
camelCase names); a new field is a new value with no edit here. A field made
from a dataclass takes the bounds the dataclass declares (policies.py,
`bounds_schema`), so helm refuses what the code location would refuse at load.
`tests/deploy/test_chart_schema.py` fails when the committed files are not what this
writes. The third, files/rules.json, holds what the chart's cross-field checks
(templates/_validate.tpl: a JSON schema compares a value with a constant only) need
of the code: each compared value's default and the limits the code holds them to.
Written by hand, here and only here: the chart's own values (images,
accounts, the code location, Karpenter: no resource model holds them) and the
install-time checks a field's type cannot say (a quantity, a label key: chart_only.py,
with Kubernetes' own formats from chart_k8s.py). Every object is closed
(`additionalProperties: false`) but the maps Kubernetes keeps open (labels,
annotations, env), whose keys and values take Kubernetes' formats.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from catchup_assets.backends.kubernetes.settings import CONTROL_PLANE_TAINTS
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS, MAX_LEDGER, MAX_RANGES
from catchup_assets.core.size.catalog import (
    CPU_RESERVED_FIRST,
    CPU_RESERVED_REST,
    DEFAULT_CATALOG,
    EVICTION_HARD_BYTES,
    KUBE_RESERVED_MIB,
    KUBE_RESERVED_MIB_PER_POD,
    VM_MEMORY_OVERHEAD,
)
from catchup_assets.core.size.disk import MAX_DISK_BYTES
from catchup_assets.core.size.sizing import MAX_NODE_CPU
from catchup_assets.defs.resources import chart_keys
from catchup_assets.defs.resources.chart_only import (
    CHART_ONLY,
    CHART_REQUIRED,
    CONSTRAINTS,
    DEFINITIONS,
    OBJECT_EXTRAS,
    REPLACED,
)
from catchup_assets.defs.resources.k8s import KubernetesConfig, TolerationConfig
from catchup_assets.defs.resources.mission_defaults import MissionDefaultsConfig
from catchup_assets.defs.resources.placement import ShapeConfig, TierConfig
from catchup_assets.defs.resources.policies import DiskConfig, LadderConfig, RetryConfig, SizingConfig
from catchup_assets.defs.resources.resource import CatchupResource

CHART = Path(__file__).resolve().parents[3] / "charts" / "catchup-assets"
SCHEMA_PATH, KEYS_PATH = CHART / "values.schema.json", CHART / "files" / "keys.json"
RULES_PATH = CHART / "files" / "rules.json"
REQUIRED = ("storageRoot", "workDir", "storageMode", "pvcSize", "tierNodeLabel", "tierTaintKey", "tiers",
            "noProfileTier", "unprofiledTier", "kubelet")  # fmt: skip
PASS_THROUGH = {"retry": RetryConfig, "sizing": SizingConfig, "ladder": LadderConfig, "disk": DiskConfig}


def _clean(prop: dict) -> dict:
    """A pydantic property schema without its title and default; `X | None` as one `type` list."""
    prop = {k: v for k, v in prop.items() if k not in ("title", "default")}
    options = prop.get("anyOf", ())
    if len(options) == 2 and {"type": "null"} in options:
        (other,) = [o for o in options if o != {"type": "null"}]
        if isinstance(other.get("type"), str):
            prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **other, "type": [other["type"], "null"]}
    return prop


def _nullable(prop: dict) -> dict:
    """Unset (null), a value is left out of the resource config: the project's default applies."""
    if "const" in prop:
        prop = {**{k: v for k, v in prop.items() if k != "const"}, "enum": [prop["const"]]}
    if "enum" in prop and None not in prop["enum"]:
        prop = {**prop, "enum": [*prop["enum"], None]}
    kind = prop.get("type")
    if isinstance(kind, str):
        return {**prop, "type": [kind, "null"]}
    return prop if kind else {**prop, "anyOf": [*prop.pop("anyOf", [{}]), {"type": "null"}]}


def _property(model, field: str, where: str) -> dict:
    if where in REPLACED:
        return REPLACED[where]
    prop = _clean(model.model_json_schema()["properties"][field])
    return {**prop, **CONSTRAINTS.get(where, {})}


def _object(model, names: dict[str, str], where: str, picked: bool = True) -> dict:
    """The values object whose keys `names` maps to `model`'s fields; `picked`: the template passes
    each key it finds (a null one left out, so nullable), else the object passes whole."""
    required = set(model.model_json_schema().get("required", ()))
    props = {k: _property(model, f, f"{where}.{k}") for k, f in names.items()}
    out = {
        "type": "object",
        "additionalProperties": False,
        "required": [k for k, f in names.items() if f in required],
        "properties": {k: p if names[k] in required or not picked else _nullable(p) for k, p in props.items()},
    }
    if not out["required"]:
        del out["required"]
    extra = OBJECT_EXTRAS.get(where, {})
    return {**out, **extra, "properties": {**out["properties"], **extra.get("properties", {})}}


def _flat(model, names: dict[str, str]) -> dict:
    """Top-level values that are `model`'s fields: each nullable unless the chart requires it."""
    props = {k: _property(model, f, k) for k, f in names.items()}
    return {k: p if k in REQUIRED else _nullable(p) for k, p in props.items()}


def _parallelism_cap() -> dict:
    """maxParallelism unset: MissionDefaultsConfig's default, which parallelism may not pass. (Its validator
    compares the two; a JSON schema compares a value with a constant only, so when both are set,
    templates/_validate.tpl is the check.)"""
    names = {f: chart_keys.values_name(f) for f in ("parallelism", "max_parallelism")}
    cap = MissionDefaultsConfig.model_fields["max_parallelism"].default
    return {
        "if": {"properties": {names["max_parallelism"]: {"type": "null"}}},
        "then": {"properties": {names["parallelism"]: {"maximum": cap}}},
    }


def schema() -> dict:
    keys = chart_keys.keys()
    tolerations = {"type": "array", "items": _object(TolerationConfig, keys["toleration"], "toleration")}
    generated = {
        **_flat(CatchupResource, keys["catchup"]),
        **{k: _object(model, {f: f for f in model.model_fields}, k, picked=False) for k, model in PASS_THROUGH.items()},
        **_flat(MissionDefaultsConfig, keys["missionDefaults"]),
        **_flat(KubernetesConfig, keys["kubernetes"]),
        "extraTolerations": _nullable(tolerations),
        "kubelet": _object(KubernetesConfig, keys["kubelet"], "kubelet"),
        "tiers": {"type": "array", "minItems": 1, "items": {"$ref": "#/definitions/tier"}},
        "noProfileTier": {"$ref": "#/definitions/tier"},
        "unprofiledTier": {"$ref": "#/definitions/tier"},
        "catalog": _nullable({"type": "array", "items": {"$ref": "#/definitions/shape"}}),
    }
    assert not set(generated) & set(CHART_ONLY), sorted(set(generated) & set(CHART_ONLY))
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "catchup-assets values",
        "description": "GENERATED by `uv run python -m catchup_assets.defs.resources.chart_schema`: do not edit",
        "type": "object",
        "additionalProperties": False,  # a misspelt or unknown value is refused, not ignored
        "required": [*CHART_REQUIRED, *REQUIRED],
        **_parallelism_cap(),
        "definitions": {
            **DEFINITIONS,
            "tier": _object(TierConfig, keys["tier"], "tier"),
            "shape": _object(ShapeConfig, keys["shape"], "shape"),
        },
        "properties": {**CHART_ONLY, **generated},
    }


def rules() -> dict:
    """What templates/_validate.tpl compares against: the default of each value a rule compares (a null
    value takes it), and the code's limits, so the template never states a number of its own."""
    keys = chart_keys.keys()
    models = {"catchup": CatchupResource, "missionDefaults": MissionDefaultsConfig, "kubernetes": KubernetesConfig}
    defaults = {}
    for block, model in models.items():
        for key, field in keys[block].items():
            default = model.model_fields[field].get_default(call_default_factory=True)
            if isinstance(default, str | int | float | bool) or default is None:
                defaults[key] = default
    waits = {"apiWaitCapSeconds", "apiWaitBudgetSeconds"}
    assert waits <= set(defaults), sorted(waits - set(defaults))
    return {
        "defaults": defaults,
        "limits": {
            "maxRanges": MAX_RANGES,
            "checkpointLedgers": CHECKPOINT_LEDGERS,
            "maxLedger": MAX_LEDGER,
            "maxDiskBytes": MAX_DISK_BYTES,
            "maxNodeCpu": MAX_NODE_CPU,
        },
        "controlPlaneTaints": list(CONTROL_PLANE_TAINTS),
        # The shapes a tier names when the values give no catalog, as the code resolves them (sizing.resolve_shape).
        "defaultCatalog": [
            {
                "name": s.name,
                "memoryBytes": s.memory_bytes,
                "allocatableMemoryBytes": s.allocatable_memory_bytes,
                "allocatableCpu": s.allocatable_cpu,
                "onDemandHourly": s.on_demand_hourly,
            }
            for s in DEFAULT_CATALOG.shapes
        ],
        # catalog.eks_allocatable's figures, for a shape the values give without its allocatable.
        "allocatable": {
            "vmMemoryOverhead": VM_MEMORY_OVERHEAD,
            "kubeReservedMiB": KUBE_RESERVED_MIB,
            "kubeReservedMiBPerPod": KUBE_RESERVED_MIB_PER_POD,
            "evictionHardBytes": EVICTION_HARD_BYTES,
            "cpuReservedFirst": list(CPU_RESERVED_FIRST),
            "cpuReservedRest": CPU_RESERVED_REST,
        },
    }


def texts() -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    dump = lambda doc: json.dumps(doc, indent=2, ensure_ascii=False) + "\n"  # noqa: E731
    return {SCHEMA_PATH: dump(schema()), KEYS_PATH: dump(chart_keys.keys()), RULES_PATH: dump(rules())}


def main(argv: list[str]) -> int:
    stale = [p for p, text in texts().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p.relative_to(CHART.parents[1])} is stale: run python -m {__spec__.name}", file=sys.stderr)
        return 1 if stale else 0
    for p, text in texts().items():
        p.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
