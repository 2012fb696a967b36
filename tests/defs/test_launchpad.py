"""A safe launchpad (issue 14 item 4): the deployment's defaults, refusals naming the field, history kept.

Run through the demo's own code location (the file the UI loads) with the run config the
launchpad sends for mission_plan: {"ops": {"mission_plan": {"config": {...}}}}.
"""

from pathlib import Path

import dagster as dg
import pytest

from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.defs.assets.launchpad import MissionPlanConfig, check_limits, superseded
from catchup_assets.defs.assets.range_assets import MISSION_TAG
from catchup_assets.defs.instance.ownership import SUPERSEDED
from catchup_assets.defs.location import load_location, write_location
from catchup_assets.defs.resources import MissionDefaultsConfig

RANGE = dg.AssetKey("range_catchup")
PARTITIONS = "ledger_ranges"


@pytest.fixture
def demo(tmp_path):
    """The demo's code location (8 ranges, 4 at once) and a fresh instance, as `catchup-assets demo` writes them."""
    settings = DemoSettings(tmp_path, ranges=8, parallelism=4)
    write_location(tmp_path, settings.catchup())
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        yield settings, load_location(tmp_path), instance


def launch(defs: dg.Definitions, instance, config: dict, job: str = "mission_plan_job", **kw):
    return defs.resolve_job_def(job).execute_in_process(
        run_config={"ops": {"mission_plan": {"config": config}}}, instance=instance, raise_on_error=False, **kw
    )


def failure(result) -> str:
    return " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)


def defaults_offered(defs: dg.Definitions) -> dict:
    """What the launchpad pre-fills: the defaults of mission_plan's config schema."""
    ops = defs.resolve_job_def("mission_plan_job").run_config_schema.config_type.fields["ops"]
    fields = ops.config_type.fields["mission_plan"].config_type.fields["config"].config_type.fields
    return {name: f.default_value for name, f in fields.items() if f.default_provided}


def test_the_demos_launchpad_offers_the_demos_grid_and_parallelism(demo):
    settings, defs, _ = demo
    span = settings.span()
    offered = defaults_offered(defs)
    assert offered["first_ledger"] == span.first_ledger and offered["last_ledger"] == span.last_ledger
    assert offered["ledgers_per_range"] == span.ledgers_per_range and offered["overlap"] == span.overlap
    assert offered["parallelism"] == settings.parallelism
    # The plain code location (production) asks for the tip and offers production's grid.
    from catchup_assets.defs.definitions import defs as production

    plain = defaults_offered(production)
    assert "last_ledger" not in plain and plain["ledgers_per_range"] == 16000 and plain["parallelism"] == 1000


def test_launching_with_nothing_filled_in_plans_the_demos_ranges(demo):
    settings, defs, instance = demo
    result = launch(defs, instance, {})
    assert result.success, failure(result)
    assert instance.get_dynamic_partitions(PARTITIONS) == [r.key for r in plan_ranges(settings.span())]
    [run] = instance.get_runs()
    # Launched without a tag (as from the UI): the run carries its mission from the plan on.
    meta = instance.get_latest_materialization_event(dg.AssetKey("mission_plan")).asset_materialization.metadata
    assert run.tags[MISSION_TAG] == meta["mission"].value
    assert "each MiB requested here stands for 200 MiB in production" in meta["scale"].value


def test_a_plan_on_another_grid_that_would_retire_the_demos_partitions_is_refused(demo):
    _, defs, instance = demo
    assert launch(defs, instance, {"mission": "a"}).success
    before = instance.get_dynamic_partitions(PARTITIONS)
    # What an operator gets by filling only last_ledger on production's launchpad.
    result = launch(defs, instance, {"mission": "b", "ledgers_per_range": 16000, "overlap": 320})
    assert not result.success
    text = failure(result)
    assert "would retire 8 of the 8 existing partitions" in text and "max_retire_share" in text
    assert "ledgers_per_range = 16000" in text and "overlap = 320" in text
    assert instance.get_dynamic_partitions(PARTITIONS) == before  # nothing retired, nothing added


def test_parallelism_above_the_deployments_cap_is_refused_naming_it(demo):
    _, defs, instance = demo
    result = launch(defs, instance, {"mission": "a", "parallelism": 1000})
    assert not result.success
    assert "parallelism 1000 is above this deployment's cap, mission_defaults.max_parallelism = 4" in failure(result)
    assert instance.get_dynamic_partitions(PARTITIONS) == []


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
def test_a_grown_tip_supersedes_one_partition_and_keeps_its_history(demo, tmp_path):
    settings, _, instance = demo
    # 1 of 8 partitions is more than the default 5%: this deployment allows a quarter.
    wide = settings.catchup()
    wide["mission_defaults"] = {**wide["mission_defaults"], "max_retire_share": 0.25}
    write_location(tmp_path / "wide", wide)
    defs = load_location(tmp_path / "wide")
    span = settings.span()
    per = span.ledgers_per_range
    # Mission a stops mid-range (a tip that has not filled its range yet) and runs its partial tip.
    short = {"mission": "a", "last_ledger": span.last_ledger - per // 2}
    assert launch(defs, instance, short).success
    tip = instance.get_dynamic_partitions(PARTITIONS)[-1]
    tags = {"dagster/asset_partition_range_start": tip, "dagster/asset_partition_range_end": tip, MISSION_TAG: "a"}
    assert defs.resolve_job_def("range_catchup_job").execute_in_process(instance=instance, tags=tags).success
    # Never-run partition of another plan: deleted when superseded.
    instance.add_dynamic_partitions(PARTITIONS, ["0060000001-0060000064"])
    grown = launch(defs, instance, {"mission": "b", "last_ledger": span.last_ledger + 64})
    assert grown.success, failure(grown)
    keys = instance.get_dynamic_partitions(PARTITIONS)
    assert tip in keys and "0060000001-0060000064" not in keys  # history kept, the unrun one gone
    meta = grown.asset_materializations_for_node("mission_plan")[0].metadata
    assert meta["superseded_partitions"].value == sorted([tip, "0060000001-0060000064"])
    assert meta["deleted_partitions"].value == ["0060000001-0060000064"]
    observed = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[tip]), 10).records
    # The attempt chain's own observations (issue 23) are not marks: the one mark is the superseding.
    [mark] = [r for r in observed if r.asset_observation.metadata["kind"].value != "attempt"]
    assert mark.asset_observation.metadata["kind"].value == SUPERSEDED
    assert mark.asset_observation.metadata["superseded_by"].value == [keys[-2]]
    history = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[tip]), 5)
    assert len(history.records) == 1
    # A backfill of every partition for mission b leaves the superseded one alone.
    every = {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}
    run = defs.resolve_job_def("range_catchup_job").execute_in_process(
        instance=instance, tags={**every, MISSION_TAG: "b"}, raise_on_error=False
    )
    assert run.success, failure(run)
    done = {e.partition for e in run.get_asset_materialization_events()}
    assert tip not in done and done == {r.key for r in plan_ranges(MissionSpan(1, span.last_ledger + 64, per, 0))}
    # Planned again, the marked partition is not counted as retired a second time.
    again = launch(defs, instance, {"mission": "c", "last_ledger": span.last_ledger + 64})
    assert again.success
    assert again.asset_materializations_for_node("mission_plan")[0].metadata["superseded_partitions"].value == []


@pytest.mark.parametrize(
    ("existing", "keys", "gone"),
    [
        ([], ["0000000001-0000000064"], []),
        (["0000000001-0000000064"], ["0000000001-0000000064"], []),
        (["0000000001-0000000032"], ["0000000001-0000000064"], ["0000000001-0000000032"]),  # a tip that grew
        (["0000000065-0000000128"], ["0000000001-0000000064"], []),  # beside, not over
        (["0000000001-0000000128"], ["0000000001-0000000064", "0000000065-0000000128"], ["0000000001-0000000128"]),
    ],
)
def test_superseded_keys(existing, keys, gone):
    assert superseded(existing, keys) == gone


@pytest.mark.parametrize(
    ("existing", "retiring", "refused"),
    [(0, 0, False), (100, 5, False), (100, 6, True), (48, 48, True), (3751, 1, False)],
)
def test_retire_share_limit(existing, retiring, refused):
    config = MissionPlanConfig(last_ledger=64_000_000)
    defaults = MissionDefaultsConfig(max_retire_share=0.05)
    if refused:
        with pytest.raises(ValueError, match=r"max_retire_share = 5%"):
            check_limits(config, defaults, existing, retiring)
    else:
        check_limits(config, defaults, existing, retiring)


def test_bad_deployment_defaults_are_refused_at_load(tmp_path):
    with pytest.raises(ValueError, match=r"parallelism \(8\) must be <= max_parallelism \(4\)"):
        write_location(tmp_path, {"mission_defaults": {"parallelism": 8, "max_parallelism": 4}})
    with pytest.raises(ValueError, match="ledgers_per_range must be a positive multiple of 64"):
        write_location(tmp_path, {"mission_defaults": {"last_ledger": 1000, "ledgers_per_range": 100}})
    assert not (tmp_path / "catchup.json").exists()


def test_the_demo_location_file_is_the_same_text_for_every_demo(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_location(a, DemoSettings(a, ranges=8).catchup())
    write_location(b, DemoSettings(b, ranges=48).catchup())
    assert Path(a / "catchup_location.py").read_text() == Path(b / "catchup_location.py").read_text()


def test_issue45_a_profile_url_resolved_from_an_env_var_with_credentials_is_refused_in_the_run(demo, monkeypatch):
    """Failure 4.1, the run's own check: Dagster resolves `{env: NAME}` itself, so a URL with a password reaches
    mission_plan only there (the run config holds the reference); it is refused before the profile is read, naming
    what it carries and not its value, and nothing is planned."""
    _, defs, instance = demo
    monkeypatch.setenv("CATCHUP_TEST_PROFILE_URL", "https://ops:hunter2-pw@h.example/m1/range_profile.parquet")
    result = defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config={"ops": {"mission_plan": {"config": {"previous_profile": {"env": "CATCHUP_TEST_PROFILE_URL"}}}}},
        instance=instance,
        raise_on_error=False,
    )
    said = failure(result)
    assert "mission_plan config refused: previous_profile carries credentials inline (userinfo)" in said
    assert "previous_profile_secret_env" in said and "hunter2" not in said
    assert instance.get_dynamic_partitions(PARTITIONS) == []
    assert "hunter2" not in str(result.dagster_run.run_config)  # what Dagster keeps: the reference


def test_issue45_the_profile_choice_line_names_a_storage_root_without_its_credentials():
    """The choice's line is logged and kept as metadata (failure 4.2's event log): a root URL's password stays out."""
    from catchup_assets.defs.assets.launchpad import choose_profile

    choice = choose_profile("latest", "memory://ops:hunter2-pw@empty-root/missions")
    assert choice.path is None and "memory://***@empty-root/missions" in choice.why and "hunter2" not in choice.why


def test_issue45_a_secret_env_the_run_does_not_have_is_refused_naming_the_variable(demo, monkeypatch):
    """The by-reference path's own failure: the variable is missing from the run's environment. The plan is
    refused before anything is read or planned, naming the field and the variable and how to give it."""
    _, defs, instance = demo
    monkeypatch.delenv("CATCHUP_TEST_NO_SUCH_SECRET", raising=False)
    result = launch(
        defs,
        instance,
        {"previous_profile": "https://h.example/m1/range_profile.parquet",
         "previous_profile_secret_env": "CATCHUP_TEST_NO_SUCH_SECRET"},
    )  # fmt: skip
    said = failure(result)
    assert "previous_profile_secret_env: the environment variable CATCHUP_TEST_NO_SUCH_SECRET is not set" in said
    assert "Kubernetes Secret" in said and instance.get_dynamic_partitions(PARTITIONS) == []
