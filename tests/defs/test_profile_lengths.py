"""Ranges cut to the profile, end to end on the local backend (issue 25 item 4 and its Done-when).

Mission a runs on the uniform grid and is profiled; mission b is planned from that profile with
`lengths: profile` for more slots than a has ranges, so its slowest range is cut. Everything below
is read from what the runs materialized, the partitions the instance holds and the profile written.
"""

import dagster as dg
import pandas as pd
import pytest

from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.defs.instance.ownership import SUPERSEDED, latest_marks
from catchup_assets.defs.sensors.next_mission import next_mission_sensor
from dagster_defs import catchup, defs, plan_config
from kit.assets import failure_text, run_ranges, statuses

PARTITIONS = "ledger_ranges"
# Two missions, two profiles and a backfill each: ~40 s alone, past the default 300 s on a machine under load.
pytestmark = pytest.mark.timeout(900)
N, FIRST = 10, 38  # the heaviest ranges of the 48: the more replay each holds, the more a cut saves


def plan(instance, mission: str, n: int, **extra):
    job = defs.resolve_job_def("mission_plan_job")
    return job.execute_in_process(run_config=plan_config(mission, n, **extra), instance=instance, raise_on_error=False)


def profile(instance, mission: str) -> str:
    result = defs.resolve_job_def("profile_job").execute_in_process(instance=instance, partition_key=mission)
    assert result.success
    events = result.get_asset_materialization_events()
    [meta] = [e.materialization.metadata for e in events if e.asset_key == dg.AssetKey("range_profile")]
    return meta["profile_path"].value


@pytest.fixture
def profiled(instance):
    """Mission a: N uniform ranges at the top of the simulated history, run and profiled."""
    assert plan(instance, "a", N, first_range=FIRST, parallelism=4, lengths=None).success  # the default: auto
    keys = instance.get_dynamic_partitions(PARTITIONS)
    assert run_ranges(instance, keys, "a").success
    return keys, profile(instance, "a")


def test_issue25_a_mission_cut_to_the_profile_runs_its_cut_ranges_and_marks_the_grid_ones_superseded(
    instance, profiled
):
    grid, path = profiled
    result = plan(
        instance,
        "b",
        N,
        first_range=FIRST,
        parallelism=2 * N,
        previous_profile=path,
        lengths="profile",
        order="longest-first",
    )
    assert result.success, failure_text(result)
    meta = result.asset_materializations_for_node("mission_plan")[0].metadata
    assert meta["lengths"].value == "profile" and meta["ranges_cut"].value >= 1
    # The what-if puts the cut beside the uniform grid at the same slots, and the cut is not slower.
    table = meta["what_if_lengths"].value
    assert "profile_makespan_h" in table and "uniform_makespan_h" in table
    assert meta["predicted_makespan_hours"].value < meta["longest_predicted_hours"].value * 1.001 + 1e-9
    planned = pd.read_parquet(meta["plan_path"].value)["range_key"].tolist()
    cut = sorted(set(planned) - set(grid))
    gone = meta["superseded_partitions"].value
    assert cut and gone and not set(gone) & set(planned)
    # Every grid range is covered exactly once by the new plan's ranges.
    spans = sorted(parse_key(k) for k in planned)
    assert spans[0].first == parse_key(grid[0]).first and spans[-1].last == parse_key(grid[-1]).last
    assert all(a.last + 1 == b.first for a, b in zip(spans, spans[1:], strict=False))
    # The grid ranges a ran are kept, with their history, and marked superseded.
    marks = latest_marks(instance, gone)
    assert {k: kind for k, (kind, _) in marks.items()} == dict.fromkeys(gone, SUPERSEDED)

    # The operator backfills every partition for b: the superseded ones are not run, the cut ones complete.
    keys = instance.get_dynamic_partitions(PARTITIONS)
    assert set(cut) <= set(keys)
    run = run_ranges(instance, keys, "b")
    assert run.success, failure_text(run)
    done = {e.partition for e in run.get_asset_materialization_events()}
    assert done == set(planned)
    assert set(statuses(instance, cut).values()) == {dg.AssetPartitionStatus.MATERIALIZED}

    # b's profile has a row per planned range, each with setup and replay read from the worker's phase lines.
    rows = pd.read_parquet(profile(instance, "b")).set_index("range_key")
    assert sorted(rows.index) == sorted(planned)
    for key in cut:
        assert rows.loc[key, "setup_seconds"] > 0 and rows.loc[key, "replay_seconds"] > 0
        assert rows.loc[key, "setup_seconds"] < rows.loc[key, "seconds"]

    # next_mission_sensor carries the choice; the keys are mission_plan's to add once it cuts.
    with dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), definitions=defs, resources={"catchup": catchup}
    ) as context:
        data = next_mission_sensor.evaluate_tick(context)
    [request] = data.run_requests
    assert request.run_config["ops"]["mission_plan"]["config"]["lengths"] == "profile"
    assert not data.dynamic_partitions_requests


def test_issue25_a_backfill_of_a_cut_mission_runs_its_saved_ranges_not_the_grid(instance, profiled):
    grid, path = profiled
    assert plan(
        instance, "b", N, first_range=FIRST, parallelism=2 * N, previous_profile=path, lengths="profile"
    ).success
    planned = pd.read_parquet(
        instance.get_latest_materialization_event(dg.AssetKey("mission_plan"))
        .asset_materialization.metadata["plan_path"]
        .value
    )["range_key"].tolist()
    [piece, *_] = sorted(set(planned) - set(grid))
    # One cut range alone, as a backfill of one failed partition runs it.
    run = run_ranges(instance, [piece], "b")
    assert run.success, failure_text(run)
    assert [e.partition for e in run.get_asset_materialization_events()] == [piece]


def test_issue25_lengths_profile_without_a_profile_plans_the_grid_and_says_so(instance):
    result = plan(instance, "a", 3, lengths="profile", previous_profile="none")
    assert result.success, failure_text(result)
    meta = result.asset_materializations_for_node("mission_plan")[0].metadata
    assert meta["lengths"].value.startswith("uniform (lengths profile: no previous profile")
    assert "ranges_cut" not in meta and len(instance.get_dynamic_partitions(PARTITIONS)) == 3


def test_issue37_auto_the_default_is_saved_as_chosen_and_the_next_mission_asks_it_again(instance, profiled):
    """Mission a was planned with no `lengths`: auto, unprofiled, the grid. The sensor carries auto (not the
    grid it chose), and mission_plan, not the sensor, adds the keys of whatever auto then plans."""
    grid, _ = profiled
    first = instance.get_latest_materialization_event(dg.AssetKey("mission_plan")).asset_materialization.metadata
    assert first["lengths"].value.startswith("uniform (auto: the uniform grid (no previous profile")
    assert first["lengths_asked"].value == "auto" and "lengths_choice" not in first
    with dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), definitions=defs, resources={"catchup": catchup}
    ) as context:
        data = next_mission_sensor.evaluate_tick(context)
    [request] = data.run_requests
    config = request.run_config["ops"]["mission_plan"]["config"]
    assert config["lengths"] == "auto" and not data.dynamic_partitions_requests
    result = defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config=request.run_config, instance=instance, tags=request.tags, raise_on_error=False
    )
    assert result.success, failure_text(result)
    meta = result.asset_materializations_for_node("mission_plan")[0].metadata
    # Which one depends on the seconds a measured (the simulated history, run for real): either, saying why.
    applied, why = meta["lengths"].value.split(" ", 1)
    assert why.startswith({"uniform": "(auto: the uniform grid: ", "profile": "(auto: the profile cut, "}[applied])
    # Both forecasts, and what the cut costs beside the time it saves, at production scale.
    table = meta["lengths_choice"].value
    assert "expected_makespan_h" in table and "p10_h" in table and "cost_usd" in table and "chosen" in table
    assert {"cut_hours_saved", "cut_extra_node_hours", "cut_extra_usd", "cut_node_hours_ratio"} <= set(meta)
    planned = pd.read_parquet(meta["plan_path"].value)["range_key"].tolist()
    assert set(planned) <= set(instance.get_dynamic_partitions(PARTITIONS))
    assert (sorted(planned) == sorted(grid)) == (applied == "uniform")
