"""`lengths: auto` is the launch form's and the deployment's default, and its node-hours cap a deployment
setting, validated where it is set and carried into the mission (issue 37 items 1 and 4)."""

import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.assets.launchpad import MissionPlanConfig, mission_plan_config
from catchup_assets.defs.resources import CatchupResource, MissionDefaultsConfig


def test_issue37_auto_is_the_default_of_the_form_the_deployment_and_the_mission():
    defaults = MissionDefaultsConfig()
    assert (defaults.lengths, defaults.cut_node_hours_cap) == ("auto", 1.1)
    form = mission_plan_config(defaults).model_fields["lengths"]
    assert form.default == "auto" and "auto: the profile cut when" in form.description
    assert MissionPlanConfig.model_fields["lengths"].default == "auto"
    assert MissionConfig("m1", MissionSpan(1, 64), "memory://x").lengths == "auto"
    # A deployment that chose otherwise offers its own.
    assert mission_plan_config(MissionDefaultsConfig(lengths="uniform")).model_fields["lengths"].default == "uniform"


def test_issue37_the_deployment_s_cap_reaches_the_mission(tmp_path):
    catchup = CatchupResource(storage_root=str(tmp_path), mission_defaults={"cut_node_hours_cap": 1.25})
    cfg = MissionPlanConfig(last_ledger=64).to_mission(catchup)
    assert (cfg.lengths, cfg.cut_node_hours_cap) == ("auto", 1.25)


@pytest.mark.parametrize("cap", [0.9, float("nan"), float("inf")])
def test_issue37_a_cap_below_1_or_not_finite_is_refused_naming_it(cap):
    with pytest.raises(ValueError, match="cut_node_hours_cap"):
        MissionDefaultsConfig(cut_node_hours_cap=cap)
    with pytest.raises(ConfigError, match="cut_node_hours_cap"):
        MissionConfig("m1", MissionSpan(1, 64), "memory://x", cut_node_hours_cap=cap)
