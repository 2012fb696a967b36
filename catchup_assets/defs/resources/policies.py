"""The four policy configs, generated from the frozen policy dataclasses: one edit per new knob.

`Strict` is the base of every config here that refuses a misspelt key (L34). `bounds_schema` carries
the bounds a dataclass field declares (core/errors.py, `bounded`) into a config field's JSON schema,
and so into the chart's values schema (chart_schema.py); the dataclass checks them, once.
"""

import typing
from dataclasses import fields as dataclass_fields

import dagster as dg
import pydantic

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.errors import declared_bounds
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.sizing import MemoryLadder, SizingPolicy
from catchup_assets.core.units import GiB


class Strict(dg.Config):
    # A misspelt knob is refused at load, not silently left at its default (L34); so is a NaN or an
    # infinity (YAML's .nan and .inf), which pass every bound's comparison (`gt=0`) whatever the field.
    model_config = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)


# pydantic's (and `bounded`'s) name for a bound -> JSON Schema's.
_JSON_SCHEMA = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def bounds_schema(cls: type, name: str, per: float = 1) -> dict:
    """The bounds dataclass `cls` declares for field `name`, as JSON Schema keywords (in units of `per`).

    A config field given these as `json_schema_extra` shows them in its schema without checking them
    itself: the dataclass it becomes checks them, naming the knob in its own words (L34).
    """
    out = {_JSON_SCHEMA[k]: v / per for k, v in declared_bounds(cls, name).items()}
    return {k: int(v) if v == int(v) else v for k, v in out.items()}


def config_of(policy: type, name: str, doc: str) -> type[dg.Config]:
    """A Dagster config with the fields of the frozen dataclass `policy`, by name and default.

    A `*_bytes` field is set in GiB, as `*_gib`: what an operator reads in the
    launchpad. Adding a field to the policy adds it here, to the launchpad and to
    the chart's pass-through values, with nothing else to write.
    """
    hints = typing.get_type_hints(policy)
    spec = {}
    for f in dataclass_fields(policy):
        if f.name.endswith("_bytes"):
            optional = type(None) in typing.get_args(hints[f.name])
            default = None if f.default is None else f.default / GiB
            bounds = bounds_schema(policy, f.name, per=GiB)
            spec[f.name[: -len("_bytes")] + "_gib"] = (float | None if optional else float, bounded(default, bounds))
        else:
            spec[f.name] = (hints[f.name], bounded(f.default, bounds_schema(policy, f.name)))
    return pydantic.create_model(name, __base__=Strict, __doc__=doc, **spec)


def bounded(default, bounds: dict):
    """A config field's default, with `bounds` (JSON Schema keywords) in its schema when it has any."""
    return pydantic.Field(default=default, json_schema_extra=bounds) if bounds else default


def policy_of(policy: type, config: dg.Config):
    """The dataclass value a `config_of` config holds; the dataclass validates it, naming the field."""
    values = {}
    for f in dataclass_fields(policy):
        if f.name.endswith("_bytes"):
            gib = getattr(config, f.name[: -len("_bytes")] + "_gib")
            values[f.name] = None if gib is None else int(gib * GiB)
        else:
            values[f.name] = getattr(config, f.name)
    return policy(**values)


SizingConfig = config_of(SizingPolicy, "SizingConfig", "How a profiled range is sized (L27).")
LadderConfig = config_of(MemoryLadder, "LadderConfig", "How an OOMed range's memory climbs (L6).")
DiskConfig = config_of(DiskPolicy, "DiskConfig", "Ephemeral storage from the profile, climbing after evictions.")
RetryConfig = config_of(RetryPolicy, "RetryConfig", "Retries each outcome class may spend (L5).")
