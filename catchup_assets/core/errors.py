"""One root for every error the project raises on purpose, so a caller can tell ours from a bug.

    CatchupError
      ConfigError      refused input: a setting, a file, a key, a profile; the message names it.
                       A ValueError too, so code that guards a parse with `except ValueError` keeps working.
      StateError       durable state of the wrong shape: a mission file, a record, a backend's state file.
                       A ValueError too, for the same reason.
      BackendError     the backend protocol's errors (core/dispatch/ports.py): AlreadyExists, Busy, ...
      ...              the rest name their stage: StorageError (store/), TipUnavailable (mission/), ...

An exception that is not a CatchupError is a bug or an outside failure (a library's, the OS's); the
few places that catch everything say why, beside the `except` (docs/design.md, "Errors").
"""

import dataclasses
import functools
import operator
import typing
from typing import Any


class CatchupError(Exception):
    """The root of the errors this project raises on purpose."""


class ConfigError(CatchupError, ValueError):
    """Input refused before anything is dispatched; the message names the field or file."""


class StateError(CatchupError, ValueError):
    """Durable state of the wrong shape: what the storage root holds is not what was written."""


def check_number(name: str, value: object, low: float, above: bool = False) -> None:
    """`value` a finite number >= `low` (> with `above`), else refused naming `name` (L34).

    The bound's own comparison lets NaN through (`nan < 1.0` is false) and infinity past
    any lower bound: a margin of NaN sized every range NaN bytes.
    """
    check_value(name, value, {"gt" if above else "ge": low})


# A bound as a dataclass field declares it (`bounded`), by pydantic's names for it; each its comparison and sign.
BOUNDS = {"gt": (operator.gt, ">"), "ge": (operator.ge, ">="), "lt": (operator.lt, "<"), "le": (operator.le, "<=")}


def bounded(default: object, description: str | None = None, **bounds: float) -> Any:
    """A dataclass field with its bounds declared (`gt`, `ge`, `lt`, `le`, as pydantic names them).

    The dataclass checks them (`check_bounds`); its Dagster config and the chart's values schema
    read the same declaration (defs/resources/policies.py), so a bound is written once.
    """
    assert set(bounds) <= set(BOUNDS), sorted(bounds)
    meta = {**bounds, **({"description": description} if description else {})}
    return dataclasses.field(default=default, metadata=meta)


def declared_bounds(cls: type, name: str) -> dict[str, float]:
    """The bounds field `name` of dataclass `cls` declares (`bounded`): {} when none."""
    (f,) = [f for f in dataclasses.fields(cls) if f.name == name]
    return {k: v for k, v in f.metadata.items() if k in BOUNDS}


@functools.cache
def integer_fields(cls: type) -> frozenset[str]:
    """The fields of dataclass `cls` typed `int` (or `int | None`): a bound on them takes integers only."""
    hints = typing.get_type_hints(cls)
    return frozenset(n for n, h in hints.items() if int in (h, *typing.get_args(h)) and float not in typing.get_args(h))


def check_value(name: str, value: object, bounds: dict[str, float], integer: bool = False) -> None:
    """`value` within `bounds`, finite, and an integer when `integer`; else refused naming `name` (L34).

    A bound's own comparison lets NaN through (`nan < 1.0` is false) and infinity past any lower bound.
    """
    rule = " and ".join(f"{BOUNDS[k][1]} {v:g}" for k, v in bounds.items())
    if integer:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer {rule}, got {value!r}")
        if not all(BOUNDS[k][0](value, v) for k, v in bounds.items()):
            raise ConfigError(f"{name} must be {rule}, got {value!r}")
        return
    finite = isinstance(value, int | float) and not isinstance(value, bool) and value - value == 0
    if not finite or not all(BOUNDS[k][0](value, v) for k, v in bounds.items()):
        raise ConfigError(f"{name} must be a finite number {rule}, got {value!r}")


def check_bounds(obj: object, where: str = "") -> None:
    """Each field of dataclass `obj` within the bounds it declares (None: unset, passes), else refused
    naming it: `<where> '<field>'`, or the field alone without `where`."""
    integers = integer_fields(type(obj))
    for f in dataclasses.fields(obj):
        bounds, value = declared_bounds(type(obj), f.name), getattr(obj, f.name)
        if bounds and value is not None:
            check_value(f"{where} {f.name!r}" if where else f.name, value, bounds, f.name in integers)
