"""The assets on a real temporary Dagster instance, attempts on the local backend."""

import logging
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.defs.metadata.log_tail import escape
from catchup_assets.defs.resources import CatchupResource, TierConfig
from dagster_defs import catchup, defs
from kit.assets import RANGE, failure_text, plan, run_ranges, statuses, with_resource

ROOT = Path(__file__).resolve().parents[2]


def test_L9_condemned_range_fails_alone_and_rematerializing_it_completes(instance):
    assert plan(instance, "m1", 4).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert keys == sorted(keys) and len(keys) == 4  # ascending, once
    bad = keys[1]
    broken = with_resource(sim_fail_targets=[int(bad[-10:])])
    result = run_ranges(instance, keys, "m1", broken)
    assert not result.success
    assert bad in failure_text(result) and "failed budget spent" in failure_text(result)
    st = statuses(instance, keys)
    assert st[bad] == dg.AssetPartitionStatus.FAILED
    assert [st[k] for k in keys if k != bad] == [dg.AssetPartitionStatus.MATERIALIZED] * 3
    # The archive is fixed; the operator re-materializes only the failed partition.
    again = run_ranges(instance, [bad], "m1")
    assert again.success
    assert set(statuses(instance, keys).values()) == {dg.AssetPartitionStatus.MATERIALIZED}
    mats = instance.fetch_materializations(RANGE, limit=50).records
    assert sorted(m.partition_key for m in mats) == sorted(keys)  # one each: nothing ran twice


def test_range_materialization_carries_the_range_measurements(instance):
    plan(instance, "m1", 2)
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert run_ranges(instance, keys, "m1").success
    meta = instance.fetch_materializations(RANGE, limit=5).records[0].asset_materialization.metadata
    assert meta["attempts"].value >= 1 and meta["outcomes"].value.endswith("ok")
    assert meta["tier"].value == "nebula" and meta["peak_anon_mib"].value > 0
    assert meta["seconds"].value > 0 and meta["log_path"].value.endswith(".log.gz")


def test_profile_and_tier_map_assets_pass_their_checks_and_feed_the_next_plan(instance, tmp_path):
    plan(instance, "m1", 3)
    keys = instance.get_dynamic_partitions("ledger_ranges")
    run_ranges(instance, keys, "m1")
    result = defs.resolve_job_def("profile_job").execute_in_process(instance=instance, partition_key="m1")
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {
        "covers_mission": True,
        "no_measurement_free_rows": True,
        "only_completed_chains_size": True,
        "every_range_placed": True,
    }
    meta = {e.asset_key.path[-1]: e.materialization.metadata for e in result.get_asset_materialization_events()}
    assert meta["range_profile"]["profiled_ranges"].value == 3
    assert meta["range_profile"]["plot"].value.startswith("![plot](data:image/png;base64,")
    spark = meta["range_profile"]["memory_by_ledger"].value
    assert len(spark.split("`")[1]) == 3 and "GiB" in spark  # one block per range, inline in the UI
    assert sum(meta["tier_map"]["ranges_per_tier"].value.values()) == 3
    # Planned without a previous profile: profile_diff materializes, saying there is nothing to compare.
    assert "without a previous profile" in meta["profile_diff"]["compared_with"].value
    assert not (tmp_path / "storage/m1/profile_diff.parquet").exists()
    profile = meta["range_profile"]["profile_path"].value
    assert len(pd.read_parquet(profile)) == 3
    # On the grid: auto (the default, issue 37) cuts the longest of 3 ranges at 4 slots.
    nxt = plan(instance, "m2", 3, previous_profile=profile, order="longest-first", lengths="uniform")
    pmeta = nxt.asset_materializations_for_node("mission_plan")[0].metadata
    assert pmeta["profiled_ranges"].value == 3 and "nebula" not in pmeta["ranges_per_tier"].value
    assert pmeta["new_partitions"].value == 0  # same keys as m1: the grid is fixed
    # The planner: 3 ranges at parallelism 4 take as long as the longest measured range, in production
    # hours (the simulated core's seconds times its speed, as the demo's summary counts them).
    longest = pd.read_parquet(profile)["seconds"].max() * catchup.sim_speed
    assert pmeta["predicted_makespan_hours"].value == pytest.approx(longest / 3600, rel=5e-3)
    assert "| 2 |" in pmeta["what_if"].value and "configured" in pmeta["what_if"].value
    # Issue 21: beside the what-if, what moving reclaimed ranges to on-demand would cost.
    assert pmeta["on_demand_fallback"].value.startswith("on-demand fallback after 3 reclaims")
    # Issue 15: what m1 cost (every attempt), what m2 will cost on m1's tier map, and m2's plan says the same.
    prof, tmap = meta["range_profile"], meta["tier_map"]
    assert prof["actual_cost_usd"].value > 0 and "no previous profile" in prof["predicted_cost"].value
    assert prof["actual_spot_usd"].value == prof["actual_cost_usd"].value  # the default tiers are priced at spot
    assert prof["actual_on_demand_fallback_usd"].value == 0  # nothing reclaimed: nothing moved to on-demand
    assert tmap["next_mission_cost_usd"].value == pmeta["predicted_cost_usd"].value > 0
    assert 0 < pmeta["predicted_cost_ratio_to_flat"].value < 1
    assert "| flat |" in pmeta["predicted_cost_per_tier"].value and "spot" in pmeta["predicted_cost_per_tier"].value
    # tier_ladder: fitted to m1's profile, never dearer than the ladder in use, its values in production GiB.
    ladder = meta["tier_ladder"]
    assert 0 < ladder["fitted_cost_usd"].value <= ladder["in_use_cost_usd"].value
    assert ladder["makespan_within_tolerance"].value
    values = yaml.safe_load(open(ladder["tier_ladder_path"].value).read())
    assert values["tiers"][-1]["memoryCutGib"] == 48  # the top tier holds the memory ladder's cap (L6)


@pytest.mark.parametrize(
    "extra, field",
    [
        (dict(first_ledger=10, last_ledger=5), "last_ledger"),
        (dict(parallelism=0), "parallelism"),
        (dict(ledgers_per_range=1000), "ledgers_per_range"),
        (dict(mission_name="Bad Name"), "mission: 'Bad Name' is invalid"),
        (dict(deadline_seconds=-5), "deadline_seconds"),
        (dict(deadline_seconds=0), "deadline_seconds"),  # none is null, written one way (issue 20)
    ],
)
def test_L34_bad_mission_config_is_refused_naming_the_field(instance, extra, field):
    result = plan(instance, extra.pop("mission_name", "m1"), 2, **extra)
    assert not result.success and field in failure_text(result)
    assert instance.get_dynamic_partitions("ledger_ranges") == []  # nothing planned, nothing dispatched


def test_L34_unknown_order_is_refused_at_launch(instance):
    with pytest.raises(dg.DagsterInvalidConfigError, match="order"):
        plan(instance, "m1", 2, order="newest-first")


def test_L34_bad_tier_ladder_is_refused_at_load_naming_the_tier():
    with pytest.raises(Exception, match="tier 'tiny'"):
        CatchupResource(tiers=[TierConfig(name="tiny", memory_cut_gib=8, node_memory_gib=4, cpu=1)])


def test_L35_previous_profile_with_no_ranges_is_refused(instance, tmp_path):
    empty = tmp_path / "empty.parquet"
    # Each column of the type store/tables.py declares (a wrong type is refused before "no ranges").
    dtypes = {"range_key": "string", "last_ledger": "int64", "peak_anon_bytes": "int64"}
    dtypes |= {"peak_working_set_bytes": "int64", "seconds": "float64"}
    pd.DataFrame({c: pd.Series(dtype=t) for c, t in dtypes.items()}).to_parquet(empty)
    result = plan(instance, "m1", 2, previous_profile=str(empty))
    assert not result.success and "has no ranges" in failure_text(result)


def test_L35_missing_previous_profile_is_refused_naming_it_and_plans_nothing(instance, tmp_path):
    nope = str(tmp_path / "nope.parquet")
    result = plan(instance, "m1", 2, previous_profile=nope)
    assert not result.success and f"previous profile {nope} does not exist" in failure_text(result)
    assert "previous_profile: previous profile" in failure_text(result)
    assert "none plans the mission unprofiled" in failure_text(result)
    assert not list((tmp_path / "storage").glob("*/plan.parquet"))  # refused before anything is written


def test_L35_no_previous_profile_is_an_unprofiled_mission(instance):
    result = plan(instance, "m1", 2, previous_profile="")
    assert result.success
    meta = result.asset_materializations_for_node("mission_plan")[0].metadata
    assert meta["profiled_ranges"].value == 0 and meta["ranges_per_tier"].value == {"nebula": 2}
    assert "no prediction" in meta["forecast"].value and "predicted_makespan_hours" not in meta


def test_our_range_tags_are_dagster_s():
    """The tag names are Dagster's documented ones; its constants are private, so compared here."""
    from dagster._core.storage.tags import WILL_RETRY_TAG as DAGSTER_WILL_RETRY

    from catchup_assets.defs.assets.range_assets import RANGE_END_TAG, RANGE_START_TAG, WILL_RETRY_TAG

    assert (RANGE_START_TAG, RANGE_END_TAG, WILL_RETRY_TAG) == (
        ASSET_PARTITION_RANGE_START_TAG,
        ASSET_PARTITION_RANGE_END_TAG,
        DAGSTER_WILL_RETRY,
    )


@pytest.mark.parametrize("mission", ["m9", "Bad;name"])
def test_L34_profile_job_of_an_unknown_mission_is_refused_and_writes_nothing(instance, tmp_path, mission):
    plan(instance, "m1", 2)
    instance.add_dynamic_partitions("missions", [mission])  # as the UI's "add partition" can
    result = defs.resolve_job_def("profile_job").execute_in_process(
        instance=instance, partition_key=mission, raise_on_error=False
    )
    assert not result.success
    assert "range_profile" in failure_text(result) and (
        "has no plan" in failure_text(result) or "mission name" in failure_text(result)
    )
    assert not list((tmp_path / "storage").glob("*/range_profile.parquet"))  # no empty profile left behind


def step_failure(result: dg.ExecuteInProcessResult):
    """The one step failure's error and the reason the UI shows beside it (its Failure's description)."""
    [failed] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    data = failed.event_specific_data
    return data.error, data.user_failure_data


@pytest.mark.parametrize(
    ("mission", "says"),
    [("m9", "range_profile: mission 'm9' has no plan"), ("Bad;name", "partition 'Bad;name' of missions")],
)
def test_issue36_a_refusal_is_its_reason_with_no_exception_beneath_it(instance, mission, says):
    """Issue 36 item 5: a refused input was a Failure raised `from` the error, whose own traceback the
    run's log printed under "caused by"; now the reason, naming what was wrong, is the whole of it."""
    plan(instance, "m1", 2)
    instance.add_dynamic_partitions("missions", [mission])
    result = defs.resolve_job_def("profile_job").execute_in_process(
        instance=instance, partition_key=mission, raise_on_error=False
    )
    error, reason = step_failure(result)
    assert error.cls_name == "Failure" and error.cause is None and error.context is None
    assert says in reason.description and "\n" not in reason.description


def test_issue36_a_condemned_range_fails_the_step_with_its_reason_and_no_exception_beneath_it(instance):
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    result = run_ranges(instance, keys, "m1", with_resource(sim_fail_targets=[int(keys[0][-10:])]))
    error, reason = step_failure(result)
    assert error.cls_name == "Failure" and error.cause is None and error.context is None
    assert reason.description.startswith(f"1 of 2 ranges did not complete:\n{keys[0]}: failed budget spent")


def test_issue36_a_profile_that_measured_none_of_the_span_is_warned_of_once_in_the_plan_s_run(
    logged_instance, tmp_path
):
    """It once cut and sized the grid in silence, with profiled_ranges counting every range."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from catchup_assets.store.tables import PROFILE_SCHEMA

    row = {"range_key": "0050000001-0051250048", "last_ledger": 51250048, "peak_anon_bytes": 2**26, "seconds": 60.0}
    far = [{name: None for name in PROFILE_SCHEMA.names} | row]
    path = tmp_path / "far_profile.parquet"
    pq.write_table(pa.Table.from_pylist(far, schema=PROFILE_SCHEMA), path)
    result = plan(logged_instance, "m1", 2, previous_profile=str(path))  # ledgers 1-2500096
    assert result.success
    warnings = [e.user_message for e in logged_instance.all_logs(result.run_id) if e.level == logging.WARNING]
    said = [m for m in warnings if "far_profile.parquet measured ledgers" in m and "none of the span" in m]
    assert len(said) == 1, warnings
    meta = result.asset_materializations_for_node("mission_plan")[0].metadata
    assert meta["profiled_ranges"].value == 2  # each sized from the range above the span: what the warning says


def test_the_dispatcher_s_alerts_reach_the_run_s_event_log(logged_instance):
    """With the repository's instance config (python_logs), a condemned range's alert, logged by the
    dispatcher's module logger, is an event of the run: the UI shows it on the run's page."""
    inst = logged_instance
    assert plan(inst, "m1", 2).success
    keys = inst.get_dynamic_partitions("ledger_ranges")
    result = run_ranges(inst, keys, "m1", with_resource(sim_fail_targets=[int(keys[0][-10:])]))
    messages = [e.user_message for e in inst.all_logs(result.run_id) if e.level >= logging.WARNING]
    assert any(f"range {keys[0]} condemned: failed budget spent" in m for m in messages)


def test_the_plan_is_what_runs_a_profile_changed_after_planning_is_refused_naming_the_snapshot(instance, tmp_path):
    """mission_plan keeps a copy of the previous profile it sized from, with its digest: the
    original may change or vanish (it does not matter), the copy may not (dispatch refuses)."""
    import shutil

    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert run_ranges(instance, keys, "m1").success
    defs.resolve_job_def("profile_job").execute_in_process(instance=instance, partition_key="m1")
    original = tmp_path / "previous.parquet"
    shutil.copy(tmp_path / "storage/m1/range_profile.parquet", original)
    assert plan(instance, "m2", 2, previous_profile=str(original)).success
    snapshot = tmp_path / "storage/m2/previous_profile.parquet"
    assert snapshot.read_bytes() == original.read_bytes()
    original.unlink()  # gone at its URL after planning: the mission runs from its copy
    assert run_ranges(instance, keys[:1], "m2").success
    # The copy edited (a notebook "fixing" a peak): the run refuses before dispatching, naming it.
    table = pd.read_parquet(snapshot)
    table["peak_anon_bytes"] = table["peak_anon_bytes"] // 2
    table.to_parquet(snapshot)
    result = run_ranges(instance, keys[1:], "m2")
    assert not result.success and f"previous profile snapshot {snapshot} was altered" in failure_text(result)
    assert statuses(instance, keys[1:])[keys[1]] != dg.AssetPartitionStatus.MATERIALIZED


def test_a_condemned_partition_carries_this_mission_s_cause_and_log_tail(instance):
    """The partition page shows why this mission gave the range up: the cause, the outcome chain
    and the last lines of its log (stellar-core's own error), not an earlier mission's success."""
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    bad = keys[0]
    run_ranges(instance, keys, "m1", with_resource(sim_fail_targets=[int(bad[-10:])]))
    observed = [r.asset_observation for r in instance.fetch_observations(RANGE, limit=50).records]
    (obs,) = [o for o in observed if o.metadata["kind"].value == "condemned"]  # beside the attempts' starts
    assert obs.partition == bad
    meta = {k: v.value for k, v in obs.metadata.items()}
    assert meta["mission"] == "m1" and meta["outcomes"] == "failed"
    assert "failed budget spent" in meta["cause"] and "exit 1" in meta["cause"]
    # stellar-core's own last words (sim/stellar_core.py prints them as the real one does), whole
    assert "[default FATAL] Got an exception: Invariant" in meta["last_error"]
    assert meta["last_error"].endswith(f"lumens {int(bad[-10:])} != {int(bad[-10:]) + 1}")
    # The tail fits the UI's inline limit and leaves out the exit metric report the log holds.
    assert len(meta["log_tail"]) < 1000 and "metric '" not in meta["log_tail"]
    assert meta["log_tail"].endswith(escape(meta["last_error"]))
    assert meta["log_path"].endswith("a001.log.gz")
    # ... and it is the partition's latest event, the one its Events pane opens on: the attempt's start,
    # handed to the background writer first, lands before it (issue 36 item 5).
    newest = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[bad]), limit=1)
    assert newest.records[0].asset_observation.metadata["kind"].value == "condemned"


def test_the_log_tail_is_the_last_lines_and_an_unreadable_log_is_said_not_raised(tmp_path):
    import gzip

    from catchup_assets.defs.metadata.log_tail import log_tail

    log = tmp_path / "a001.log.gz"
    log.write_bytes(gzip.compress("".join(f"line {i}\n" for i in range(1000)).encode() + b"x" * 5000))
    tail, last_error = log_tail(str(log))
    lines = tail.split("\\\n")
    assert lines[-2] == "line 999" and lines[-1] == "x" * 159 + "…"  # a long line shortened
    assert last_error is None and len(tail) < 1000
    (tmp_path / "torn.log.gz").write_bytes(b"not gzip")
    tail, _ = log_tail(str(tmp_path / "torn.log.gz"))
    assert tail.startswith(escape(f"(log {tmp_path / 'torn.log.gz'} not readable"))


def health_evaluations(inst, run_id) -> list[tuple[str, bool, str]]:
    """The range_catchup checks a run evaluated, in order, as the instance holds them."""
    out = []
    for e in inst.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        ev = e.dagster_event.event_specific_data
        out.append((ev.check_name, ev.passed, ev.metadata["why"].value))
    return out


def test_Z4_a_stall_and_a_block_are_checks_and_alerts_of_the_run(logged_instance):
    """Issue 14 item 2: a stall (Z4) and stopped dispatch show on range_catchup's checks as they
    happen (failed, then passed once a range completes) and in the run's event log."""
    inst = logged_instance
    assert plan(inst, "m1", 2).success
    keys = inst.get_dynamic_partitions("ledger_ranges")
    # Unprofiled ranges that take a few seconds against a 0.5 s floor: both overdue, nothing done.
    slow = run_ranges(inst, keys, "m1", with_resource(stall_seconds=0.5, sim_speed=60_000))
    assert slow.success, failure_text(slow)
    stall = [(passed, why) for check, passed, why in health_evaluations(inst, slow.run_id) if check == "not_stalled"]
    assert stall[0][0] is False and "no range completed for" in stall[0][1] and "all 2 in flight" in stall[0][1]
    assert stall[-1][0] is True  # a range completed: the run's last word is healthy
    alerts = [e.user_message for e in inst.all_logs(slow.run_id) if e.level >= logging.WARNING]
    assert any("mission m1: stalled: no range completed" in m for m in alerts)

    assert plan(inst, "m2", 3, first_range=2).success
    keys = inst.get_dynamic_partitions("ledger_ranges")[2:]
    broken = with_resource(breaker_attempts=2, sim_fail_targets=[int(k[-10:]) for k in keys])
    blocked = run_ranges(inst, keys, "m2", broken)
    assert not blocked.success
    dispatch = [(p, why) for check, p, why in health_evaluations(inst, blocked.run_id) if check == "dispatching"]
    assert dispatch[0][0] is False and dispatch[0][1].startswith("circuit breaker: 2 attempts in a row")
    assert dispatch[-1][0] is False
    alerts = [e.user_message for e in inst.all_logs(blocked.run_id) if e.level >= logging.WARNING]
    assert any("mission m2: circuit breaker" in m for m in alerts)


def test_an_operator_s_control_change_is_warned_once_in_the_run_s_event_log(logged_instance, tmp_path):
    """The dispatcher's control reader logs each change (a managed logger: the run's log), and the run's own
    callback warned it again: with the repository's instance config each change read twice on the run's page."""
    from catchup_assets.core.dispatch.mission_control import MissionControl
    from catchup_assets.store.control_record import ControlStore
    from catchup_assets.store.root import Store

    inst = logged_instance
    assert plan(inst, "m1", 2).success
    keys = inst.get_dynamic_partitions("ledger_ranges")
    lowered = MissionControl().apply("parallelism", 1, who="op", at=0.0, max_parallelism=100)
    ControlStore(Store(tmp_path / "storage"), "m1").write(lowered)  # as `catchup-assets control` writes it
    result = run_ranges(inst, keys, "m1")
    assert result.success
    warnings = [e.user_message for e in inst.all_logs(result.run_id) if e.level == logging.WARNING]
    said = [m for m in warnings if "mission m1: control: parallelism 1 (by op)" in m]
    assert len(said) == 1, warnings
