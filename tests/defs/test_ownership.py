"""A run launched from the UI works on the mission that owns its partitions (issue 14 item 5).

A backfill of failed partitions carries no catchup/mission tag: it runs on the mission
that condemned them, never silently on the newest plan, and is tagged with it.
"""

import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.defs.assets.range_assets import MISSION_TAG
from catchup_assets.defs.instance.ownership import MissionAmbiguous, owning_mission
from kit.assets import failure_text, plan, run_ranges, with_resource

A, B, C = "0000000001-0000000064", "0000000065-0000000128", "0000000129-0000000192"


@pytest.mark.parametrize(
    ("keys", "condemned", "newest", "mission"),
    [
        ([A, B], {}, "new", "new"),  # nothing failed: the newest plan
        ([A], {A: "old"}, "new", "old"),  # a failed range of an earlier mission
        ([A, B], {A: "old", B: "old"}, "new", "old"),
        ([A, B], {A: "new"}, "new", "new"),  # failed in the newest mission, with its other ranges
        ([], {}, "new", "new"),  # an unpartitioned asset
    ],
)
def test_owning_mission(keys, condemned, newest, mission):
    assert owning_mission(keys, condemned, newest).mission == mission


@pytest.mark.parametrize(
    ("keys", "condemned", "newest", "says"),
    [
        ([A, B], {A: "m1", B: "m2"}, "m3", "condemned by 2 missions (m1: 1 (0000000001-0000000064); m2: 1"),
        ([A, C], {A: "old"}, "new", "1 others (0000000129-0000000192) belong to no failure of it"),
        ([A], {}, None, "no mission_plan has been materialized"),
    ],
)
def test_ambiguous_partitions_are_refused_saying_how_to_choose(keys, condemned, newest, says):
    with pytest.raises(MissionAmbiguous) as err:
        owning_mission(keys, condemned, newest)
    assert says in str(err.value)
    if newest:
        assert "catchup/mission=<name>" in str(err.value)


def untagged_run(instance, keys, d=None):
    """What a backfill launched from the UI's partitions page runs: the keys, no mission tag."""
    from dagster_defs import defs

    job = (d or defs).resolve_job_def("range_catchup_job")
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]}
    return job.execute_in_process(instance=instance, tags=tags, raise_on_error=False)


def test_a_ui_backfill_of_failed_ranges_runs_on_the_mission_that_condemned_them(instance):
    assert plan(instance, "m1", 3).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    bad = keys[1]
    assert not run_ranges(instance, keys, "m1", with_resource(sim_fail_targets=[int(bad[-10:])])).success
    assert plan(instance, "m2", 3).success  # a newer mission on the same grid
    result = untagged_run(instance, [bad])
    assert result.success, failure_text(result)
    [mat] = result.get_asset_materialization_events()
    assert mat.materialization.metadata["mission"].value == "m1"
    assert instance.get_run_by_id(result.run_id).tags[MISSION_TAG] == "m1"
    # With the range fixed, its partition belongs to no failure: the next untagged run is the newest plan's.
    again = untagged_run(instance, [keys[0]])
    assert again.success and instance.get_run_by_id(again.run_id).tags[MISSION_TAG] == "m2"


def test_a_ui_backfill_mixing_two_missions_failures_is_refused(instance):
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert not run_ranges(instance, keys[:1], "m1", with_resource(sim_fail_targets=[int(keys[0][-10:])])).success
    assert plan(instance, "m2", 2).success
    assert not run_ranges(instance, keys[1:], "m2", with_resource(sim_fail_targets=[int(keys[1][-10:])])).success
    result = untagged_run(instance, keys)
    assert not result.success
    text = failure_text(result)
    assert "condemned by 2 missions (m1: 1" in text and "m2: 1" in text
    assert result.get_asset_materialization_events() == []
