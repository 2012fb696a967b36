"""An API object's JSON read through its client model's names and types, without building the model.

`ApiClient.deserialize` turns a LIST of 2000 Jobs and 2000 pods into ~160000
model objects: seconds of CPU and ~100 MiB at once on every pass
(benchmarks/results/dispatcher_cost.md). A `ModelView` answers the same
attribute reads (`pod.status.container_statuses[0].state.terminated.exit_code`)
from the decoded JSON, converting only what is read. Names and types come from
the model class's own `attribute_map` and `openapi_types`, so a view reads
exactly what the model would: `host_ip` from `hostIP`, date-times as
timezone-aware datetimes, maps as dicts, absent fields as None.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from kubernetes import client as k8s


class ModelView:
    __slots__ = ("_data", "_model")

    def __init__(self, data: dict, model: type):
        self._data = data
        self._model = model

    def __getattr__(self, name: str) -> Any:
        try:
            key = self._model.attribute_map[name]
        except KeyError:
            raise AttributeError(f"{self._model.__name__} has no attribute {name!r}") from None
        return _convert(self._data.get(key), self._model.openapi_types[name])

    def __repr__(self) -> str:
        return f"ModelView({self._model.__name__}, {self._data!r})"


def _convert(value: Any, typ: str) -> Any:
    if value is None:
        return None
    if typ.startswith("list["):
        inner = typ[5:-1]
        return [_convert(v, inner) for v in value]
    if typ.startswith(("dict(", "dict[")):
        return value
    if typ == "datetime":
        return datetime.fromisoformat(value)
    if typ in ("str", "int", "float", "bool", "object", "date"):
        return value
    return ModelView(value, getattr(k8s.models, typ))


def list_items(body: bytes, item_model: type) -> list[ModelView]:
    """The items of a LIST's whole JSON body (read unpreloaded), as views of `item_model`."""
    return [ModelView(item, item_model) for item in json.loads(body).get("items") or []]
