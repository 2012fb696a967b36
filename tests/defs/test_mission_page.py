"""Issue 36 item 2: a mission's page (range_profile's partition of the mission) and its run's `catchup/progress`
tag show this mission's counts and time to go while it runs, and how it ended. Real runs on the local backend
and a real temporary instance; what is asserted is what the instance holds."""

import dagster as dg
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.results import Status
from catchup_assets.core.forecast.time_to_go import TimeToGo
from catchup_assets.defs.assets.range_assets import MISSION_TAG
from catchup_assets.defs.mission.mission_page import running_metadata, running_tag, to_go_metadata
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from dagster_defs import defs, plan_config

PROFILE = dg.AssetKey("range_profile")


def run(instance, keys, mission):
    tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1], MISSION_TAG: mission}
    return defs.resolve_job_def("range_catchup_job").execute_in_process(
        instance=instance, tags=tags, raise_on_error=False
    )


def page(instance, mission: str, run_id: str) -> list[dict]:
    """The run's observations of the mission's page, oldest first, as plain values."""
    one = dg.AssetRecordsFilter(asset_key=PROFILE, asset_partitions=[mission])
    records = instance.fetch_observations(one, limit=100).records
    mine = [r for r in reversed(records) if r.run_id == run_id]
    return [{k: v.value for k, v in r.asset_observation.metadata.items()} for r in mine]


def plan(instance, mission, n, **extra) -> list[str]:
    before = set(instance.get_dynamic_partitions("ledger_ranges"))
    job = defs.resolve_job_def("mission_plan_job")
    assert job.execute_in_process(run_config=plan_config(mission, n, **extra), instance=instance).success
    return sorted(set(instance.get_dynamic_partitions("ledger_ranges")) - before) or sorted(before)


def test_issue36_a_missions_page_shows_its_counts_while_it_runs_then_how_it_ended(instance):
    keys = plan(instance, "m1", 3)
    done = run(instance, keys, "m1")
    assert done.success
    seen = page(instance, "m1", done.run_id)
    first, last = seen[0], seen[-1]
    # The first status: not all done yet, every range of this run counted, and no profile to time them.
    assert first["state"] == "running"
    assert first["done"] < first["ranges"] == 3
    assert first["done"] + first["running"] + first["pending"] + first["queued"] == 3
    assert first["time_to_go"] == "time to go unknown until a range completes (no profile)"
    assert {k: last[k] for k in ("state", "progress", "done", "left", "time_to_go")} == {
        "state": "ended: completed",
        "progress": "3 of 3 done",
        "done": 3,
        "left": 0,
        "time_to_go": "ended",
    }
    assert instance.get_run_by_id(done.run_id).tags["catchup/progress"] == "completed: all 3 ranges done"
    # Each links the page itself (the run's log shows the link): the partition's events.
    assert {o["mission_page"] for o in seen} == {"/assets/range_profile?view=events&partition=m1"}


def test_issue36_a_profiled_missions_page_shows_its_time_to_go_from_the_start(instance):
    keys = plan(instance, "m1", 3)
    assert run(instance, keys, "m1").success
    assert defs.resolve_job_def("profile_job").execute_in_process(instance=instance, partition_key="m1").success
    keys = plan(instance, "m2", 3, previous_profile="latest")
    second = run(instance, keys, "m2")
    assert second.success
    first = page(instance, "m2", second.run_id)[0]
    assert first["done"] < 3
    assert 0 < first["time_to_go_p10_seconds"] <= first["time_to_go_seconds"] <= first["time_to_go_p90_seconds"]
    assert "to go (p10" in first["time_to_go"]
    assert page(instance, "m1", second.run_id) == []  # the other mission's page is not this run's


def test_issue36_a_drained_missions_page_says_drained_with_its_unstarted_count(instance, tmp_path):
    keys = plan(instance, "m1", 3)
    ControlStore(Store(tmp_path / "storage"), "m1").write(MissionControl(drain=True))  # as the CLI's drain
    drained = run(instance, keys, "m1")
    last = page(instance, "m1", drained.run_id)[-1]
    assert (last["state"], last["not_started"], last["left"]) == ("ended: drained", 3, 3)
    assert last["why"] == "drained: 0 of 3 ranges done, 3 left (3 not started, 0 stopped, 0 condemned)"
    assert instance.get_run_by_id(drained.run_id).tags["catchup/progress"] == last["why"]


TO_GO = TimeToGo(expected_seconds=3 * 3600, p10_seconds=2.5 * 3600, p90_seconds=3.6 * 3600, pace=1.0, left=5)


@pytest.mark.parametrize(
    ("to_go", "expected"),
    [
        (None, {"time_to_go": "not estimated yet"}),
        (TimeToGo(0, 0, 0, 1.0, left=0), {"time_to_go": "nothing left"}),
        (
            TimeToGo(0, 0, 0, 1.0, left=4, known=False),
            {"time_to_go": "time to go unknown until a range completes (no profile)"},
        ),
        (
            TO_GO,
            {
                "time_to_go": "~3.0 h to go (p10 2.5 h, p90 3.6 h; pace x1.00 of the profile)",
                "time_to_go_seconds": 10800.0,
                "time_to_go_p10_seconds": 9000.0,
                "time_to_go_p90_seconds": 12960.0,
            },
        ),
    ],
)
def test_issue36_the_time_to_go_on_the_page_in_hours_or_words(to_go, expected):
    assert to_go_metadata(to_go) == expected


def test_issue36_the_pages_counts_and_tag_are_the_status_lines():
    status = Status(
        passes=9, completed=120, in_flight=43, queued=237, condemned=2, total=402, other_live=0,
        control="paused, parallelism 40 (planned 400)", pending=3, to_go=TO_GO,
    )  # fmt: skip
    meta = running_metadata("m1", status)
    keys = ("state", "control", "progress", "done", "running", "pending", "queued", "condemned")
    assert {k: meta[k] for k in keys} == {
        "state": "paused",
        "control": "paused, parallelism 40 (planned 400)",
        "progress": "120 of 402 done",
        "done": 120,
        "running": 40,
        "pending": 3,
        "queued": 237,
        "condemned": 2,
    }
    assert running_tag(status) == (
        "120/402 done, 40 running, 3 pending, 237 queued, 2 condemned; "
        "~3.0 h to go (p10 2.5 h, p90 3.6 h; pace x1.00 of the profile)"
    )


def test_issue36_an_unreadable_control_record_is_said_on_the_page(instance, tmp_path):
    """A record edited by hand to a value no deployment allows: the run goes on as planned, and its page says why
    the record was not obeyed (it was only a warning in the run's log)."""
    keys = plan(instance, "m1", 3)
    record = b'{"paused": false, "parallelism": 1000000000000, "drain": false, "history": []}'
    Store(tmp_path / "storage").write_bytes(layout.control("m1"), record)
    done = run(instance, keys, "m1")
    assert done.success
    said = [e["control"] for e in page(instance, "m1", done.run_id) if "control" in e]
    assert said and all(c.startswith("control record unreadable (running as planned): ") for c in said), said
    assert "parallelism 1000000000000 is not an integer from 1 to" in said[0]
