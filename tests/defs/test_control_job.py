"""mission_control_job writes the same control record as the CLI, and refuses bad input naming the field."""

import dagster as dg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.definitions import defs as location
from catchup_assets.defs.mission.control_job import mission_control_job
from catchup_assets.defs.mission.run_context import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import mission_doc, save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table
from dagster_defs import catchup, defs, plan_config
from fakes import FakeBackend, FakeClock, Script

RANGE = dg.AssetKey("range_catchup")
SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)
WITH_CONTROL = dg.Definitions(
    assets=defs.assets, jobs=[*defs.jobs, mission_control_job], resources={"catchup": catchup}
)


def control(instance, mission, action, value=None, tags=None):
    job = WITH_CONTROL.resolve_job_def("mission_control_job")
    config = {"mission": mission, "action": action, "value": value}
    return job.execute_in_process(
        run_config={"ops": {"set_mission_control": {"config": config}}},
        instance=instance,
        raise_on_error=False,
        tags=tags,
    )


@pytest.fixture
def planned(instance):
    """A mission planned on the storage root (its mission.json and plan), as mission_plan leaves it."""
    store = Store(catchup.root())
    cfg = MissionConfig("m1", SPAN, store.root, parallelism=4)
    save_mission(store, cfg, max_parallelism=8)  # the deployment's cap when it was planned
    write_table(store, layout.plan("m1"), prepare(cfg).plan)
    return instance, store


@pytest.fixture
def planned_in_dagster(instance):
    """A mission planned by mission_plan_job: its ranges are partitions."""
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
        ("m1", "parallelism", 10_000, "parallelism: 10000 is above the cap 8 (max_parallelism in "),
        # issue 36: below this deployment's 2000, above the 8 the mission was planned under: refused
        ("m1", "parallelism", 9, "parallelism: 9 is above the cap 8 (max_parallelism in "),
        ("m1", "parallelism", None, "value: parallelism needs a value"),
        ("m1", "drain", 3, "value: drain takes no value"),
        ("m2", "pause", None, "mission 'm2' has no plan"),
    ],
)
def test_L34_bad_input_is_refused_naming_the_field_and_writes_nothing(planned, mission, action, value, named):
    instance, store = planned
    result = control(instance, mission, action, value)
    assert not result.success
    failure = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
    assert named in failure
    assert not store.exists(layout.control("m1")) and not store.exists("m2")


def test_issue36_mission_plan_keeps_the_deployments_cap_and_the_job_refuses_above_it(planned_in_dagster):
    """The cap is in the mission's record from the moment it is planned: the next control above it,
    from a deployment whose cap was raised since, is still refused naming where it is set."""
    instance, store = planned_in_dagster
    kept = mission_doc(store, "m1")["max_parallelism"]
    assert kept == catchup.mission_defaults.max_parallelism
    result = control(instance, "m1", "parallelism", kept + 1)
    failure = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
    assert not result.success and f"parallelism: {kept + 1} is above the cap {kept} (max_parallelism in " in failure
    assert control(instance, "m1", "parallelism", kept).success
    assert ControlStore(store, "m1").read().parallelism == kept


def test_issue36_a_who_with_a_newline_is_refused_naming_the_tag(planned):
    instance, store = planned
    result = control(instance, "m1", "pause", tags={"dagster/user": "alice\nmission m1: control: resume"})
    failure = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
    assert not result.success and "dagster/user tag: 'alice\\nmission" in failure
    assert not store.exists(layout.control("m1"))


def test_L34_resume_of_a_finished_mission_is_refused_naming_the_action_and_writes_nothing(instance):
    """Issue 21: the job refuses a resume of a finished mission as the CLI does (test_cli_control)."""
    store = Store(catchup.root())
    cfg = MissionConfig("m1", SPAN, store.root, parallelism=4, poll_seconds=5)
    save_mission(store, cfg)
    clock = FakeClock()  # every range run to completion on the fake cluster
    assert run_mission(prepare(cfg), FakeBackend(clock, lambda s: Script(seconds=5)), clock=clock).condemned == {}
    result = control(instance, "m1", "resume")
    assert not result.success
    failure = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
    assert "action: resume refused: the mission is finished" in failure
    assert not store.exists(layout.control("m1"))


def test_a_paused_and_drained_run_shows_paused_fails_no_partition_and_a_later_run_completes(planned_in_dagster):
    """range_catchup under a control set from the job: the dispatching check reads paused, each
    change is an observation of the run, the drained run succeeds with its ranges left unstarted
    (not failed), and after a resume a later run materializes every one."""
    instance, store = planned_in_dagster
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert control(instance, "m1", "pause").success and control(instance, "m1", "drain").success
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: "m1"}
    job = WITH_CONTROL.resolve_job_def("range_catchup_job")
    result = job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)
    # drained: nothing condemned, nothing failed; Canceled as a stop is (issue 36), not a green Success
    assert instance.get_run_by_id(result.run_id).status == dg.DagsterRunStatus.CANCELED
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    dispatching = [c for c in checks if c.check_name == "dispatching"]
    assert dispatching and all(not c.passed and c.metadata["why"].value.startswith("paused") for c in dispatching)
    assert all(c.severity == dg.AssetCheckSeverity.WARN for c in dispatching)
    seen = [
        e.event_specific_data.asset_observation.metadata
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    assert any("drain (by dagster:run" in m["control"].value and m["now"].value.startswith("draining") for m in seen)
    status = instance.get_status_by_partition(RANGE, keys, ledger_ranges_partitions_def)
    assert set(status.values()) == {None}  # left unstarted: missing, not failed
    assert RecordStore(store, "m1").load()[0] == {}  # nothing started
    assert control(instance, "m1", "resume").success
    assert job.execute_in_process(instance=instance, tags=tags, raise_on_error=False).success
    status = instance.get_status_by_partition(RANGE, keys, ledger_ranges_partitions_def)
    assert {s.value for s in status.values()} == {"MATERIALIZED"}


def test_issue36_with_no_mission_given_the_job_controls_the_newest_planned_one(planned_in_dagster):
    instance, store = planned_in_dagster
    result = control(instance, "", "pause")
    assert result.success and ControlStore(store, "m1").read().paused
    assert instance.get_run_by_id(result.run_id).tags[MISSION_TAG] == "m1"


def test_issue36_with_no_mission_given_and_none_planned_the_job_refuses_in_one_line(instance):
    result = control(instance, "", "pause")
    failure = " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)
    assert not result.success and "mission: none given and no mission planned yet" in failure


@pytest.mark.parametrize(
    "mission, action, value",
    [("m1", "parallelism", 10_000), ("m2", "pause", None)],
    ids=["over-the-cap", "unknown-mission"],
)
def test_issue46_a_refused_control_is_one_run_tagged_with_its_mission_saying_one_sentence(
    planned, mission, action, value
):
    """Issue 46 failure 3 (refused runs carry no `catchup/mission` tag): the refusal's run is found by the
    mission it named, its failure our sentence alone (no chained cause beneath it), an op's failure, which the
    instance's run_retries (retry_on_asset_or_op_failure: false, tests/defs/test_workspace.py) never relaunches."""
    instance, _ = planned
    result = control(instance, mission, action, value)
    assert not result.success
    [run] = instance.get_runs(dg.RunsFilter(tags={"catchup/mission": mission}))
    assert run.run_id == result.run_id
    [step] = [e for e in result.all_events if e.is_step_failure]
    data = step.step_failure_data
    said = data.user_failure_data.description
    assert said.startswith(f"mission_control_job for mission {mission!r} refused: ") and "\n" not in said
    assert data.error.cause is None and data.error.context is None
