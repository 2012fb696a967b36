"""What `lengths: auto` saves (issue 37 item 1): the plan it applied, so every run of the mission runs the same
ranges, and what was asked, so the next mission asks it again; missions saved before it still load."""

import json

import pytest

from catchup_assets.cli.main import run
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.saved import load_mission, mission_ranges, save_mission
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table

SPAN = MissionSpan(1, 3_200_000, 16000, 320)  # the workload model's 200 ranges


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("workload") / "m.parquet")
    assert run(["workload", "--out", out, "--ranges", "200"]) == 0
    return out


def planned(root, profile: str | None, slots: int, **extra):
    """Plan and save a mission as mission_plan does: its plan table, then mission.json."""
    store = Store(str(root))
    cfg = MissionConfig("m1", SPAN, str(root), parallelism=slots, previous_profile=profile, **extra)
    prepared = prepare(cfg)
    write_table(store, layout.plan("m1"), prepared.plan)
    save_mission(store, prepared.config, prepared.previous)
    return store, prepared


@pytest.mark.parametrize(
    ("slots", "applied"),
    [(105, "profile"), (20, "uniform")],  # half the ranges: the tip's range is the makespan; a tenth: work is
)
def test_issue37_auto_saves_its_choice_and_a_later_run_reads_the_same_ranges(tmp_path, workload, slots, applied):
    store, prepared = planned(tmp_path, workload, slots)
    assert MissionConfig("x", SPAN, "memory://x").lengths == "auto"  # the default
    doc = json.loads(store.read_bytes(layout.mission_file("m1")))
    assert (doc["lengths"], doc["lengths_asked"]) == (applied, "auto")
    assert prepared.lengths_choice.lengths == applied and prepared.lengths_note.startswith("auto: ")
    loaded = load_mission(store, "m1")
    assert (loaded.lengths, loaded.lengths_asked) == (applied, "auto")
    ranges = mission_ranges(store, loaded)
    assert ranges == sorted(prepared.ordered)
    assert (ranges == plan_ranges(SPAN)) == (applied == "uniform")
    # A backfill prepares the saved ranges as they are: no new choice, the same keys.
    again = prepare(loaded, planned=ranges)
    assert sorted(again.keys) == sorted(prepared.keys) and again.lengths_choice is None


def test_issue37_auto_with_no_profile_is_the_grid_and_says_so(tmp_path):
    store, prepared = planned(tmp_path, None, 105)
    assert prepared.config.lengths == "uniform" and prepared.cut is None
    assert prepared.lengths_note == "auto: the uniform grid (no previous profile times a range: nothing to cut to)"
    assert mission_ranges(store, load_mission(store, "m1")) == plan_ranges(SPAN)


@pytest.mark.parametrize(
    ("saved", "lengths"),
    [
        ({"lengths": "uniform"}, "uniform"),
        ({"lengths": "profile"}, "profile"),
        ({}, "uniform"),  # saved before missions saved their lengths: the grid was all there was
    ],
)
def test_issue37_a_mission_saved_before_auto_loads_as_it_was_planned(tmp_path, workload, saved, lengths):
    store, prepared = planned(tmp_path, workload, 105, lengths="profile")
    doc = json.loads(store.read_bytes(layout.mission_file("m1")))
    doc = {k: v for k, v in doc.items() if k not in ("lengths", "lengths_asked")} | saved
    store.write_bytes(layout.mission_file("m1"), json.dumps(doc).encode())
    loaded = load_mission(store, "m1")
    assert (loaded.lengths, loaded.lengths_asked) == (lengths, None)
    expected = sorted(prepared.ordered) if lengths == "profile" else plan_ranges(SPAN)
    assert mission_ranges(store, loaded) == expected


@pytest.mark.parametrize(
    ("field", "value"),
    [("lengths", "fastest"), ("lengths_asked", "cut"), ("cut_node_hours_cap", 0.9), ("cut_node_hours_cap", "nan")],
)
def test_issue37_a_bad_lengths_or_cap_is_refused_naming_the_field(field, value):
    value = float(value) if value == "nan" else value
    with pytest.raises(ConfigError, match=field):
        MissionConfig("m1", SPAN, "memory://x", **{field: value})
