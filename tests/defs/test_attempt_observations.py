"""Each attempt's start on its range_catchup partition, while the range runs (issue 23 item 3).

On a real temporary instance, attempts on the local backend: the partition's page shows the
chain (submitted, then running on its node) before the range's materialization, and these
observations never hide who condemned a range (defs/instance/ownership.py reads past them).
"""

import dagster as dg

from catchup_assets.defs.instance.ownership import CONDEMNED, condemned_by, latest_marks
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from dagster_defs import catchup
from kit.assets import RANGE, plan, run_ranges, with_resource


def observations(instance, key: str) -> list:
    """The range's observations, oldest first, with their storage ids."""
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[key]), limit=100, ascending=True
    ).records
    return [(r.storage_id, {k: v.value for k, v in r.asset_observation.metadata.items()}) for r in records]


def test_each_attempt_s_start_is_on_its_partition_before_the_range_completes(instance):
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    assert run_ranges(instance, keys, "m1").success
    records, _ = RecordStore(Store(catchup.root()), "m1").load()
    for key in keys:
        (mat,) = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[key]), limit=5
        ).records
        chain = [(sid, m) for sid, m in observations(instance, key) if m["kind"] == "attempt"]
        rec = records[(key, 1)]
        # Submitted, then running on its node: two rows, both before the materialization.
        assert [m["phase"] for _, m in chain] == ["pending", "running"]
        assert all(sid < mat.storage_id for sid, _ in chain)
        submitted, running = chain[0][1], chain[1][1]
        assert submitted["mission"] == running["mission"] == "m1"
        assert submitted["attempt"] == running["attempt"] == 1
        assert submitted["tier"] == running["tier"] == rec.tier
        assert submitted["memory_limit_mib"] == running["memory_limit_mib"] == round(rec.memory_limit_bytes / 2**20, 1)
        assert submitted["memory_request_mib"] == round(rec.memory_request_bytes / 2**20, 1)
        assert "node" not in submitted and running["node"] == rec.node
        assert running["started_at"] == rec.started_at  # the worker's own start (L23)


def test_attempt_starts_after_a_condemnation_leave_the_range_condemned_by_its_mission(instance):
    """A later run that starts a condemned range's attempt and dies: the range still belongs to
    the mission that condemned it, as before these observations existed."""
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    bad = keys[0]
    assert not run_ranges(instance, keys, "m1", with_resource(sim_fail_targets=[int(bad[-10:])])).success
    assert condemned_by(instance, keys) == {bad: "m1"}
    # What such a run leaves: its attempts' starts, after the condemnation, nothing after them.
    for phase in ("pending", "running"):
        instance.report_runless_asset_event(
            dg.AssetObservation(
                asset_key=RANGE, partition=bad, metadata={"mission": "m1", "kind": "attempt", "phase": phase}
            )
        )
    assert observations(instance, bad)[-1][1]["kind"] == "attempt"  # the newest word
    assert condemned_by(instance, keys) == {bad: "m1"}
    assert latest_marks(instance, [bad]) == {bad: (CONDEMNED, "m1")}
    # Completed since: no mark at all, whatever observations came before.
    assert run_ranges(instance, [bad], "m1").success
    assert latest_marks(instance, keys) == {}
