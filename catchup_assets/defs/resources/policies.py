"""The four policy configs, generated from the frozen policy dataclasses: one edit per new knob.

`Strict` is the base of every config here that refuses a misspelt key (L34).
"""

import typing
from dataclasses import fields as dataclass_fields

import dagster as dg
import pydantic

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.sizing import MemoryLadder, SizingPolicy
from catchup_assets.core.units import GiB


class Strict(dg.Config):
    # A misspelt knob is refused at load, not silently left at its default (L34); so is a NaN or an
    # infinity (YAML's .nan and .inf), which pass every bound's comparison (`gt=0`) whatever the field.
    model_config = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)


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
            spec[f.name[: -len("_bytes")] + "_gib"] = (
                float | None if optional else float,
                None if f.default is None else f.default / GiB,
            )
        else:
            spec[f.name] = (hints[f.name], f.default)
    return pydantic.create_model(name, __base__=Strict, __doc__=doc, **spec)


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
