"""The sensors, evaluated against a real temporary instance after real materializations and runs."""

import dagster as dg
import pytest
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END,
)
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START,
)

from catchup_assets.core.values.ledger_range import format_key
from catchup_assets.defs.assets.profile_diff import profile_diff
from catchup_assets.defs.assets.range_assets import (
    MISSION_TAG,
    PLAN_KEY,
    mission_plan,
    range_catchup,
)
from catchup_assets.defs.assets.range_profile import range_profile, tier_map
from catchup_assets.defs.assets.tier_ladder import tier_ladder
from catchup_assets.defs.mission.jobs import mission_plan_job, profile_job, range_catchup_job
from catchup_assets.defs.resources import CatchupResource, deployment_catchup, deployment_resource
from catchup_assets.defs.sensors.mission_finished import mission_finished_sensor
from catchup_assets.defs.sensors.mission_plan import mission_plan_sensor, read_plan_keys
from catchup_assets.defs.sensors.next_mission import PREVIOUS_MISSION_TAG, next_mission_sensor
from history_archive import WELL_KNOWN, HistoryArchive

R = 1_250_048  # a multiple of 64, so a few ranges cover a few million quick simulated ledgers
SENSORS = [mission_plan_sensor, mission_finished_sensor, next_mission_sensor]
# Three-range plans whose tip grows: one superseded partition is a third of them (max_retire_share).
SETTINGS = dict(
    memory_scale=1 / 200,
    sim_speed=300000,
    poll_seconds=0.2,
    status_every=5,
    mission_defaults={"max_retire_share": 1.0},
)


def key(i: int, last: int | None = None) -> str:
    """The i-th range of the grid (0-based), or its partial tip ending at `last`."""
    return format_key(i * R + 1, last or (i + 1) * R)


@pytest.fixture
def env(tmp_path):
    # Bound as the code location binds it (fixed): the sensors that take `catchup` get it all the same.
    resources = {"catchup": deployment_resource(CatchupResource(storage_root=str(tmp_path / "storage"), **SETTINGS))}
    defs = dg.Definitions(
        assets=[mission_plan, range_catchup, range_profile, tier_map, profile_diff, tier_ladder],
        jobs=[mission_plan_job, range_catchup_job, profile_job],
        sensors=SENSORS,
        resources=resources,
    )
    with dg.instance_for_test() as instance:
        yield instance, defs, resources


def plan(env, mission: str, first: int, last: int, **config) -> int:
    instance, _, resources = env
    config = {
        "mission": mission,
        "first_ledger": first,
        "last_ledger": last,
        "ledgers_per_range": R,
        "overlap": 0,
        "parallelism": 4,
        # On the grid, whose keys the sensors add ahead of the plan (L38); auto, the default, is carried
        # as asked and cut or not by mission_plan (tests/defs/test_profile_lengths.py, issue 37).
        "lengths": "uniform",
        **config,
    }
    assert dg.materialize(
        [mission_plan], instance=instance, resources=resources, run_config={"ops": {"mission_plan": {"config": config}}}
    ).success
    return latest(instance, PLAN_KEY).storage_id


def latest(instance, asset_key) -> dg.EventLogRecord:
    return instance.fetch_materializations(asset_key, limit=1).records[0]


def tick(env, sensor, cursor=None):
    instance, defs, resources = env
    # With its ref, as the daemon's: a request's partition is checked against the instance's partitions.
    # Entered, as the daemon enters it: the deployment's resource is a context manager.
    with dg.build_sensor_context(
        instance=instance, instance_ref=instance.get_ref(), cursor=cursor, definitions=defs, resources=resources
    ) as context:
        return sensor.evaluate_tick(context)


def spans(data) -> list[tuple[str, str]]:
    return [(r.tags[RANGE_START], r.tags[RANGE_END]) for r in data.run_requests]


def run_job(env, name: str, **kwargs) -> dg.ExecuteInProcessResult:
    instance, defs, _ = env
    return defs.resolve_job_def(name).execute_in_process(instance=instance, raise_on_error=False, **kwargs)


def test_a_new_plan_becomes_one_run_over_its_keys_once(env):
    assert tick(env, mission_plan_sensor).skip_message
    plan_id = plan(env, "m1", 1, 3 * R)
    data = tick(env, mission_plan_sensor)
    [request] = data.run_requests
    assert request.job_name == "range_catchup_job"
    assert spans(data) == [(key(0), key(2))]
    assert request.tags[MISSION_TAG] == "m1"
    assert request.run_key == f"m1:{key(0)}...{key(2)}"
    assert data.cursor == str(plan_id)
    again = tick(env, mission_plan_sensor, data.cursor)
    assert not again.run_requests and again.skip_message


def test_a_plan_not_contiguous_in_insertion_order_becomes_one_run_per_group(env):
    plan(env, "later", R + 1, 3 * R)  # inserts ranges 1, 2
    first = tick(env, mission_plan_sensor)
    assert spans(first) == [(key(1), key(2))]
    plan(env, "earlier", 1, 2 * R)  # appends range 0 after them: 1, 2, 0 (later's runs have ended: none is live)
    assert env[0].get_dynamic_partitions("ledger_ranges") == [key(1), key(2), key(0)]
    data = tick(env, mission_plan_sensor, first.cursor)
    assert spans(data) == [(key(1), key(1)), (key(0), key(0))]
    assert [r.run_key for r in data.run_requests] == [
        f"earlier:{key(1)}...{key(1)}",
        f"earlier:{key(0)}...{key(0)}",
    ]


def test_two_plans_over_the_same_ledgers_never_dispatch_at_once(env):
    """Issue 21: planned back to back before either ran, two missions sharing range 1 would have been
    launched in one tick (two dispatchers, two budgets over one range). The second waits, naming the
    first, until the first's run has ended."""
    instance, defs, _ = env
    later_id = plan(env, "later", R + 1, 3 * R)  # ranges 1, 2
    plan(env, "earlier", 1, 2 * R)  # ranges 0, 1: range 1 is also later's
    data = tick(env, mission_plan_sensor)
    assert spans(data) == [(key(1), key(2))]  # later alone
    assert data.cursor == str(later_id)  # earlier is still ahead of the cursor
    [request] = data.run_requests
    run = instance.create_run_for_job(
        defs.resolve_job_def("range_catchup_job"), tags=request.tags, status=dg.DagsterRunStatus.STARTED
    )

    waiting = tick(env, mission_plan_sensor, data.cursor)
    assert not waiting.run_requests
    assert waiting.skip_message.startswith("mission earlier waits: 1 of its ranges (first " + key(1))
    assert "held by mission later" in waiting.skip_message and run.run_id in waiting.skip_message

    instance.report_run_canceled(run)  # later's run has ended: earlier goes
    launched = tick(env, mission_plan_sensor, waiting.cursor or data.cursor)
    assert [r.tags[MISSION_TAG] for r in launched.run_requests] == ["earlier", "earlier"]


def test_a_superseded_tip_leaves_no_stale_key_and_the_later_plan_runs_live_keys(env):
    tip = 2 * R + 600_000
    first = plan(env, "short", 1, tip)
    data = tick(env, mission_plan_sensor)
    assert spans(data) == [(key(0), key(2, tip))]
    second = plan(env, "long", 1, 4 * R)
    assert env[0].get_dynamic_partitions("ledger_ranges") == [key(0), key(1), key(2), key(3)]
    data = tick(env, mission_plan_sensor, data.cursor)
    assert spans(data) == [(key(0), key(3))]
    assert data.cursor == str(second)
    # Both plans seen at once: the short one runs without its retired tip, and the long one, over the
    # same ledgers, waits for it (issue 21: two missions never dispatch over one range at once).
    both = tick(env, mission_plan_sensor, str(first - 1))
    assert spans(both) == [(key(0), key(1))]
    assert both.cursor == str(first)


def test_each_finished_catchup_run_is_profiled_once(env):
    instance = env[0]
    plan(env, "m1", 1, 3 * R)
    [catchup_request] = tick(env, mission_plan_sensor).run_requests
    assert run_job(env, "range_catchup_job", tags=catchup_request.tags).success
    # A UI backfill run carries no mission tag; a run of a mission never planned fails.
    backfill = dg.materialize(
        [range_catchup], instance=instance, resources=env[2], tags={RANGE_START: key(0), RANGE_END: key(0)}
    )
    assert backfill.success
    doomed = run_job(
        env, "range_catchup_job", tags={RANGE_START: key(1), RANGE_END: key(1), MISSION_TAG: "never-planned"}
    )
    assert not doomed.success
    assert run_job(
        env,
        "mission_plan_job",
        run_config={
            "ops": {
                "mission_plan": {"config": {"mission": "m2", "last_ledger": R, "ledgers_per_range": R, "overlap": 0}}
            }
        },
    ).success

    data = tick(env, mission_finished_sensor)
    [m1_run] = instance.get_runs(dg.RunsFilter(job_name="range_catchup_job", tags={MISSION_TAG: "m1"}))
    # Each for its mission's partition; a mission with no plan gets none (it would be an empty view).
    assert [(r.job_name, r.tags[MISSION_TAG], r.partition_key, r.run_key) for r in data.run_requests] == [
        ("profile_job", "m1", "m1", m1_run.run_id),
        ("profile_job", "m1", "m1", backfill.run_id),  # the plan newest when it ran, not m2 planned since
    ]
    assert "never-planned" not in instance.get_dynamic_partitions("missions")
    assert tick(env, mission_finished_sensor, data.cursor).skip_message


def test_the_last_profile_of_a_mission_plans_the_next_mission_once(env):
    instance, defs, _ = env
    plan(env, "m1", 1, 3 * R)
    planned_m1 = tick(env, mission_plan_sensor)
    [catchup_request] = planned_m1.run_requests
    assert run_job(env, "range_catchup_job", tags=catchup_request.tags).success
    [profile_request] = tick(env, mission_finished_sensor).run_requests

    # Another of m1's runs still queued: this profile is not the mission's last.
    queued = instance.create_run_for_job(
        defs.resolve_job_def("range_catchup_job"), tags={MISSION_TAG: "m1"}, status=dg.DagsterRunStatus.NOT_STARTED
    )
    assert run_job(env, "profile_job", tags=profile_request.tags, partition_key=profile_request.partition_key).success
    data = tick(env, next_mission_sensor)
    assert not data.run_requests and data.skip_message
    instance.report_run_canceled(queued)

    # The profile's own run may still be running tier_map when the sensor sees the profile: it waits for the
    # run to end, its cursor kept before the profile (issue 46 failure 6).
    profiling = instance.create_run_for_job(
        defs.resolve_job_def("profile_job"), tags=profile_request.tags, status=dg.DagsterRunStatus.STARTED
    )

    assert run_job(env, "profile_job", tags=profile_request.tags, partition_key=profile_request.partition_key).success
    profile = latest(instance, dg.AssetKey("range_profile"))
    waiting = tick(env, next_mission_sensor, data.cursor)
    assert not waiting.run_requests and "m1's profile_job is still running" in waiting.skip_message
    assert int(waiting.cursor) < profile.storage_id
    instance.report_run_canceled(profiling)
    instance.delete_dynamic_partition("ledger_ranges", key(2))  # deleted in the UI: the next mission adds it back
    data = tick(env, next_mission_sensor, waiting.cursor)
    [request] = data.run_requests
    name = "m1-n2"  # the previous mission's name with a sequence
    assert request.job_name == "mission_plan_job" and request.run_key == name
    assert request.tags.items() >= {MISSION_TAG: name, PREVIOUS_MISSION_TAG: "m1"}.items()
    profile_path = profile.asset_materialization.metadata["profile_path"].value
    assert request.run_config == {
        "ops": {
            "mission_plan": {
                "config": {
                    "mission": name,
                    "first_ledger": 1,
                    "last_ledger": 3 * R,
                    "ledgers_per_range": R,
                    "overlap": 0,
                    "order": "longest-first",
                    "lengths": "uniform",  # the previous mission's (issue 25 item 4)
                    "parallelism": 4,
                    "previous_profile": profile_path,
                    "deadline_seconds": None,
                }
            }
        }
    }
    [partitions] = data.dynamic_partitions_requests
    assert (partitions.partitions_def_name, list(partitions.partition_keys)) == ("ledger_ranges", [key(2)])
    assert data.cursor == str(profile.storage_id)
    assert tick(env, next_mission_sensor, data.cursor).skip_message

    # The request really plans the next mission from the profile, and the plan sensor runs it.
    instance.add_dynamic_partitions("ledger_ranges", [key(2)])  # what the daemon does with the request
    assert run_job(env, "mission_plan_job", run_config=request.run_config, tags=request.tags).success
    planned = latest(instance, PLAN_KEY).asset_materialization.metadata
    assert planned["mission"].value == name and planned["profiled_ranges"].value == 3
    assert planned["order"].value == "longest-first"
    [next_run] = tick(env, mission_plan_sensor, planned_m1.cursor).run_requests
    assert next_run.tags[MISSION_TAG] == name
    # A later profile of m1 (say, after a backfill of failed ranges) starts no second next mission.
    assert run_job(env, "profile_job", tags=profile_request.tags, partition_key=profile_request.partition_key).success
    assert tick(env, next_mission_sensor, data.cursor).skip_message


def tick_to_tip(env, tip_source: str, cursor=None, timeout: float = 2.0):
    """next_mission_sensor with the same storage and `tip_source` configured."""
    instance, defs, _ = env
    root = deployment_catchup(defs).storage_root
    catchup = CatchupResource(storage_root=root, tip_source=tip_source, tip_timeout_seconds=timeout, **SETTINGS)
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, definitions=defs, resources={"catchup": catchup}
    ) as context:
        return next_mission_sensor.evaluate_tick(context)


def planned_span(request: dg.RunRequest) -> tuple[int, int]:
    config = request.run_config["ops"]["mission_plan"]["config"]
    return config["first_ledger"], config["last_ledger"]


def added_keys(data) -> list[str]:
    return [k for r in data.dynamic_partitions_requests for k in r.partition_keys]


def test_L38_the_next_mission_reaches_the_tip_an_archive_publishes(env, monkeypatch):
    """L38 (issue 14 item 9): the next mission ends at the archive's currentLedger, not where m1 ended;
    an archive that cannot be read holds the cursor before the profile; complete ranges keep their keys."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    instance = env[0]
    m1_tip = 2 * R + 600_000
    m1_plan = plan(env, "m1", 1, m1_tip)
    [catchup_request] = tick(env, mission_plan_sensor).run_requests
    assert run_job(env, "range_catchup_job", tags=catchup_request.tags).success
    [profile_request] = tick(env, mission_finished_sensor).run_requests
    assert run_job(env, "profile_job", tags=profile_request.tags, partition_key=profile_request.partition_key).success
    profile = latest(instance, dg.AssetKey("range_profile"))
    assert instance.get_dynamic_partitions("ledger_ranges") == [key(0), key(1), key(2, m1_tip)]
    # Checkpoint ledgers, (ledger + 1) % 64 == 0: inside range 3, grown within it, then past its end.
    tip, grown, crossed = 3 * R + 64 * 1000 - 1, 3 * R + 64 * 5000 - 1, 4 * R + 64 * 10 - 1

    with HistoryArchive() as archive:
        source, has_url = archive.url("/core_live_001"), archive.url("/core_live_001" + WELL_KNOWN)
        # Nothing published there: no plan, and the cursor stays just before the profile.
        down = tick_to_tip(env, source)
        assert not down.run_requests and not down.dynamic_partitions_requests
        assert has_url in down.skip_message and "HTTP 404" in down.skip_message
        assert down.cursor == str(profile.storage_id - 1)
        # An archive slower than tip_timeout_seconds: the same, and the cursor still does not move.
        archive.routes["/core_live_001" + WELL_KNOWN] = lambda h: archive.stop.wait(10)
        slow = tick_to_tip(env, source, down.cursor, timeout=0.5)
        assert not slow.run_requests and "timed out" in slow.skip_message and slow.cursor == down.cursor

        # The archive answers: the next tick plans from the held cursor, up to its tip.
        archive.serve_tip(tip, "/core_live_001")
        data = tick_to_tip(env, source, slow.cursor)
        [request] = data.run_requests
        assert planned_span(request) == (1, tip)
        assert request.tags[PREVIOUS_MISSION_TAG] == "m1"
        # The partition set gets the ranges m1 never had: range 2 whole, and the new tip range.
        assert added_keys(data) == [key(2), key(3, tip)]
        assert data.cursor == str(profile.storage_id)
        assert tick_to_tip(env, source, data.cursor).skip_message  # each profile plans once

        # The tip grows: the complete ranges keep their keys; only the tip range's key changes.
        archive.serve_tip(grown, "/core_live_001")
        assert planned_span(tick_to_tip(env, source, slow.cursor).run_requests[0]) == (1, grown)
        assert added_keys(tick_to_tip(env, source, slow.cursor)) == [key(2), key(3, grown)]
        archive.serve_tip(crossed, "/core_live_001")
        assert added_keys(tick_to_tip(env, source, slow.cursor)) == [key(2), key(3), key(4, crossed)]

    # A fixed ledger is the tip; one below where m1 ended leaves m1's end; none keeps m1's span.
    assert planned_span(tick_to_tip(env, str(tip)).run_requests[0]) == (1, tip)
    low = tick_to_tip(env, "1000")
    assert planned_span(low.run_requests[0]) == (1, m1_tip) and not added_keys(low)
    assert planned_span(tick_to_tip(env, "").run_requests[0]) == (1, m1_tip)

    # The request plans that mission for real, and its ranges run up to the tip range.
    instance.add_dynamic_partitions("ledger_ranges", added_keys(data))  # what the daemon does with the request
    assert run_job(env, "mission_plan_job", run_config=request.run_config, tags=request.tags).success
    planned = latest(instance, PLAN_KEY).asset_materialization.metadata
    assert sorted(read_plan_keys(planned["plan_path"].value)) == [key(0), key(1), key(2), key(3, tip)]
    runs = tick(env, mission_plan_sensor, str(m1_plan)).run_requests
    assert runs and all(r.tags[MISSION_TAG] == request.tags[MISSION_TAG] for r in runs)
    assert runs[-1].tags[RANGE_END] == key(3, tip)


def test_the_code_location_loads_with_its_sensors():
    from catchup_assets.defs.definitions import defs

    dg.Definitions.validate_loadable(defs)
    status = {s.name: s.default_status for s in defs.sensors}
    assert status == {
        "mission_plan_sensor": dg.DefaultSensorStatus.RUNNING,
        "mission_finished_sensor": dg.DefaultSensorStatus.RUNNING,
        "next_mission_sensor": dg.DefaultSensorStatus.STOPPED,
        "notify_sensor": dg.DefaultSensorStatus.RUNNING,  # it skips, saying why, until Slack is configured
    }
    assert "operator's decision" in next_mission_sensor.description
