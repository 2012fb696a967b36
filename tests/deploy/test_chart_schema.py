"""The chart's values.schema.json and files/keys.json are what the resource's config models generate.

Regenerate with `uv run python -m catchup_assets.defs.resources.chart_schema`.
"""

from __future__ import annotations

import json

import pydantic
from pydantic import Field

from catchup_assets.defs.resources import chart_keys, chart_schema
from catchup_assets.defs.resources.k8s import KubernetesConfig


def test_the_committed_schema_and_keys_are_what_the_models_generate():
    for path, text in chart_schema.texts().items():
        assert path.read_text() == text, f"{path.name} is stale: run python -m {chart_schema.__name__}"
    assert chart_schema.main(["--check"]) == 0


def test_a_field_added_to_a_model_is_a_value_and_makes_the_committed_files_stale(monkeypatch):
    grown = pydantic.create_model(
        "KubernetesConfig", __base__=KubernetesConfig, new_knob_seconds=(int | None, Field(default=None, ge=1))
    )
    monkeypatch.setattr(chart_keys, "KubernetesConfig", grown)
    monkeypatch.setattr(chart_schema, "KubernetesConfig", grown)
    assert chart_keys.keys()["kubernetes"]["newKnobSeconds"] == "new_knob_seconds"
    assert chart_schema.schema()["properties"]["newKnobSeconds"] == {"minimum": 1, "type": ["integer", "null"]}
    assert chart_schema.main(["--check"]) == 1  # the test above then fails until they are regenerated


def test_every_value_the_template_passes_is_a_resource_field():
    keys = json.loads(chart_schema.KEYS_PATH.read_text())
    from catchup_assets.defs.resources import CatchupResource, MissionDefaultsConfig, TierConfig

    assert set(keys["catchup"].values()) <= set(CatchupResource.model_fields)
    assert set(keys["missionDefaults"].values()) == set(MissionDefaultsConfig.model_fields)
    assert set(keys["kubernetes"].values()) | set(keys["kubelet"].values()) <= set(KubernetesConfig.model_fields)
    assert set(keys["tier"].values()) == set(TierConfig.model_fields)
