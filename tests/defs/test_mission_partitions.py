"""One view per mission (issue 22): the assets after range_catchup are partitioned by mission.

On a real temporary instance, attempts on the local backend: what the runs materialized and
what the instance holds, per partition.
"""

import shutil

import dagster as dg

from catchup_assets.defs.mission.mission_partitions import MISSIONS
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from dagster_defs import defs
from kit.assets import failure_text, plan, run_ranges

VIEWS = ("range_profile", "tier_map", "profile_diff", "tier_ladder")


def latest(instance, asset: str, partition: str) -> dg.EventLogRecord:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    assert records, f"{asset} has no partition {partition}"
    return records[0]


def profile(instance, mission):
    result = defs.resolve_job_def("profile_job").execute_in_process(instance=instance, partition_key=mission)
    assert result.success
    return result


def test_two_missions_are_two_partitions_and_b_s_diff_reads_a_against_b(instance, tmp_path):
    assert plan(instance, "m1", 3).success
    assert instance.get_dynamic_partitions(MISSIONS) == ["m1"]  # mission_plan adds its mission
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert run_ranges(instance, keys, "m1").success
    profile(instance, "m1")
    m1_profile = latest(instance, "range_profile", "m1").asset_materialization.metadata["profile_path"].value
    assert plan(instance, "m2", 3, previous_profile=m1_profile, order="longest-first").success
    assert run_ranges(instance, keys, "m2").success
    profile(instance, "m2")

    assert instance.get_dynamic_partitions(MISSIONS) == ["m1", "m2"]
    for asset in VIEWS:
        assert instance.get_materialized_partitions(dg.AssetKey(asset)) == {"m1", "m2"}, asset
    # Each partition holds its own mission's view, on the same files as before (store/layout.py).
    for mission in ("m1", "m2"):
        meta = latest(instance, "range_profile", mission).asset_materialization.metadata
        assert meta["mission"].value == mission and meta["profiled_ranges"].value == 3
        assert meta["profile_path"].value == str(tmp_path / "storage" / mission / "range_profile.parquet")
        assert latest(instance, "tier_map", mission).asset_materialization.metadata["mission"].value == mission
    # m2's diff is m1 (what m2 was sized from) against m2; m1's has nothing before it.
    diff_m2 = latest(instance, "profile_diff", "m2").asset_materialization.metadata
    assert (diff_m2["a_mission"].value, diff_m2["b_mission"].value) == ("m1", "m2")
    assert diff_m2["ranges_compared"].value == 3
    assert (
        "without a previous profile"
        in latest(instance, "profile_diff", "m1").asset_materialization.metadata["compared_with"].value
    )

    # A third mission sized from m1 too, profiled last: its diff still reads m1, not the newest before it (m2).
    assert plan(instance, "m3", 3, previous_profile=m1_profile).success
    assert run_ranges(instance, keys, "m3").success
    profile(instance, "m3")
    assert latest(instance, "profile_diff", "m3").asset_materialization.metadata["a_mission"].value == "m1"
    # Re-profiling m1 later leaves m2's and m3's views as they were: one view per mission.
    before = latest(instance, "range_profile", "m2").storage_id
    profile(instance, "m1")
    assert latest(instance, "range_profile", "m2").storage_id == before


def test_a_run_tagged_with_another_mission_is_refused_before_anything_is_written(instance, tmp_path):
    assert plan(instance, "m1", 2).success
    instance.add_dynamic_partitions(MISSIONS, ["m2"])
    result = defs.resolve_job_def("profile_job").execute_in_process(
        instance=instance, partition_key="m2", tags={"catchup/mission": "m1"}, raise_on_error=False
    )
    assert not result.success and "tagged catchup/mission=m1" in failure_text(result)
    assert not list((tmp_path / "storage").glob("*/range_profile.parquet"))


def test_an_upgraded_instance_adopts_the_missions_already_on_its_storage_root(instance, tmp_path):
    """Missions planned before the views were partitioned have no partition: the sensor adds them,
    the one it profiles among them, and its run profiles that partition."""
    assert plan(instance, "m1", 2).success
    assert run_ranges(instance, instance.get_dynamic_partitions("ledger_ranges"), "m1").success
    shutil.copytree(tmp_path / "storage" / "m1", tmp_path / "storage" / "old-mission")
    (tmp_path / "storage" / "not-a-mission").mkdir()  # no plan: not a mission's directory
    (tmp_path / "storage" / "Bad_Name").mkdir()
    instance.delete_dynamic_partition(MISSIONS, "m1")  # as an instance from before the change holds
    with dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), definitions=defs, resources=defs.resources
    ) as context:
        data = mission_finished_sensor.evaluate_tick(context)
    [added] = data.dynamic_partitions_requests
    assert (added.partitions_def_name, list(added.partition_keys)) == (MISSIONS, ["m1", "old-mission"])
    [request] = data.run_requests
    assert (request.job_name, request.partition_key) == ("profile_job", "m1")
    instance.add_dynamic_partitions(MISSIONS, added.partition_keys)  # what the daemon does first
    result = defs.resolve_job_def("profile_job").execute_in_process(
        instance=instance, partition_key=request.partition_key, tags=request.tags
    )
    assert result.success and instance.get_materialized_partitions(dg.AssetKey("range_profile")) == {"m1"}
    # The next plan adopts what it finds too, as it adds its own.
    instance.delete_dynamic_partition(MISSIONS, "old-mission")
    assert plan(instance, "m2", 2).success
    assert instance.get_dynamic_partitions(MISSIONS) == ["m1", "m2", "old-mission"]
