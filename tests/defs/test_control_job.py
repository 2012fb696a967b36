"""mission_control_job writes the same control record as the CLI, and refuses bad input naming the field."""

import dagster as dg
import pytest

from catchup_assets.defs.control import mission_control_job
from catchup_assets.defs.definitions import defs as location
from catchup_assets.store import layout
from catchup_assets.store.control import ControlStore
from catchup_assets.store.root import Store
from dagster_defs import catchup, defs, plan_config

RANGE = dg.AssetKey("range_catchup")
WITH_CONTROL = dg.Definitions(
    assets=defs.assets, jobs=[*defs.jobs, mission_control_job], resources={"catchup": catchup}
)


def control(instance, mission, action, value=None):
    job = WITH_CONTROL.resolve_job_def("mission_control_job")
    config = {"mission": mission, "action": action, "value": value}
    return job.execute_in_process(
        run_config={"ops": {"set_mission_control": {"config": config}}}, instance=instance, raise_on_error=False
    )


@pytest.fixture
def planned(instance):
    assert (
        WITH_CONTROL.resolve_job_def("mission_plan_job")
        .execute_in_process(run_config=plan_config("m1", 3), instance=instance)
        .success
    )
    return instance, Store(catchup.root())


def test_the_job_is_in_the_code_location():
    assert location.resolve_job_def("mission_control_job").name == "mission_control_job"


def test_the_job_writes_the_record_and_logs_an_observation(planned):
    instance, store = planned
    result = control(instance, "m1", "parallelism", 2)
    assert result.success
    c = ControlStore(store, "m1").read()
    assert c.parallelism == 2 and c.history[-1].who.startswith("dagster:run ")
    assert control(instance, "m1", "pause").success
    c = ControlStore(store, "m1").read()
    assert c.paused and [h.action for h in c.history] == ["parallelism", "pause"]
    observed = instance.fetch_observations(RANGE, limit=10).records
    metadata = [r.asset_observation.metadata for r in observed]
    assert {m["control"].value for m in metadata} == {
        "parallelism 2 (by " + c.history[0].who + ")",
        c.history[1].line(),
    }
    assert any(m["paused"].value is True and m["live_parallelism"].value == 2 for m in metadata)


@pytest.mark.parametrize(
    "mission, action, value, named",
    [
        ("m1", "parallelism", 0, "parallelism: must be >= 1"),
        ("m1", "parallelism", 10_000, "parallelism: 10000 is above this deployment's cap, max_parallelism = 2000"),
        ("m1", "parallelism", None, "value: parallelism needs a value"),
        ("m1", "drain", 3, "value: drain takes no value"),
        ("m2", "pause", None, "mission 'm2' has no plan"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(planned, mission, action, value, named):
    instance, store = planned
    result = control(instance, mission, action, value)
    assert not result.success
    failure = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
    assert named in failure
    assert not store.exists(layout.control("m1")) and not store.exists("m2")
