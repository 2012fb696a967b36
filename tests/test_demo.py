"""`catchup-assets demo` end to end, as a user runs it: what it leaves behind is a Dagster
instance the UI can open, with every range's partition materialized, and the Parquet files."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.assets import MISSION_TAG, ledger_ranges_partitions_def
from catchup_assets.demo import DemoSettings, run_demo
from test_workspace import load_repository

RANGES = 4
RANGE = dg.AssetKey("range_catchup")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("demo")
    script = Path(sys.executable).parent / "catchup-assets"
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CATCHUP_STORAGE_ROOT")}
    proc = subprocess.run(
        [str(script), "demo", "--ranges", str(RANGES), "--parallelism", "4", "--speed", "3000000"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    missions = re.findall(r"^(demo-\d{8}-\d{6}-[ab]):$", proc.stdout, re.MULTILINE)
    assert len(missions) == 2, proc.stdout
    return cwd / "demo", missions, proc


def test_prints_the_summary_and_the_command_that_opens_the_same_instance(demo):
    d, _, proc = demo
    for row in (
        "ranges",
        "retries",
        "of them after OOM",
        "memory requested (GiB)",
        "node-hours (est.)",
        "wall time (s)",
    ):
        assert re.search(rf"^\s*{re.escape(row)}\s+\S+\s+\S+$", proc.stdout, re.MULTILINE), row
    home, workspace = d / "dagster_home", d / "workspace.yaml"
    assert f"DAGSTER_HOME={home} " in proc.stdout
    assert f"dagster dev -w {workspace}" in proc.stdout
    assert "done 4/4" in proc.stderr  # the progress bar, from durable state


def test_instance_holds_the_runs_and_every_range_partition_materialized(demo):
    d, missions, _ = demo
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        runs = instance.get_runs()
        by_mission = {m: sorted(r.job_name for r in runs if r.tags.get(MISSION_TAG) == m) for m in missions}
        assert by_mission == {m: ["mission_plan_job", "profile_job", "range_catchup_job"] for m in missions}
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        keys = instance.get_dynamic_partitions(ledger_ranges_partitions_def.name)
        assert len(keys) == RANGES
        for run in (r for r in runs if r.job_name == "range_catchup_job"):
            # One run per mission over all its ranges.
            assert (run.tags[ASSET_PARTITION_RANGE_START_TAG], run.tags[ASSET_PARTITION_RANGE_END_TAG]) == (
                keys[0],
                keys[-1],
            )
        status = instance.get_status_by_partition(RANGE, keys, ledger_ranges_partitions_def)
        assert set(status.values()) == {dg.AssetPartitionStatus.MATERIALIZED}
        records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=RANGE), limit=100).records
        for mission in missions:
            mine = [r for r in records if r.asset_materialization.metadata["mission"].value == mission]
            assert sorted(r.partition_key for r in mine) == keys
            for r in mine:
                meta = r.asset_materialization.metadata
                assert meta["attempts"].value >= 1
                assert meta["tier"].value
                assert meta["peak_anon_mib"].value > 0
        profiles = instance.fetch_materializations(dg.AssetKey("range_profile"), limit=10).records
        assert {r.asset_materialization.metadata["mission"].value for r in profiles} == set(missions)


def test_both_missions_parquet_files_read_with_pandas(demo):
    d, missions, _ = demo
    a, b = (d / "storage" / m for m in missions)
    for m in (a, b):
        plan = pd.read_parquet(m / "plan.parquet")
        profile = pd.read_parquet(m / "range_profile.parquet")
        tiers = pd.read_parquet(m / "tier_map.parquet")
        attempts = pd.read_parquet(m / "attempts")
        assert len(plan) == len(profile) == len(tiers) == RANGES
        assert (profile["peak_anon_bytes"] > 0).all()
        assert set(attempts["range_key"]) == set(plan["range_key"])
    # The second mission is sized from the first's profile, longest first.
    plan_b = pd.read_parquet(b / "plan.parquet")
    assert plan_b["profiled"].all()
    ordered = plan_b.sort_values("dispatch_rank")["predicted_seconds"].tolist()
    assert ordered == sorted(ordered, reverse=True)


def test_the_ui_code_location_uses_the_demo_resources(demo):
    d, _, _ = demo
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        _, repo = load_repository(d / "workspace.yaml", instance)
    config = {k: json.loads(v) for k, v in repo.get_resource("catchup").configured_values.items()}
    assert config["storage_root"] == str(d / "storage")
    assert config["memory_scale"] == pytest.approx(1 / 200)
    assert config["sim_speed"] == 3_000_000
    assert {"range_catchup_job", "mission_plan_job", "profile_job"} <= {j.name for j in repo.get_all_jobs()}


class FailingArchive(DemoSettings):
    """The demo with one range whose history archive is corrupt: it fails for real, every time."""

    def catchup(self):
        return {**super().catchup(), "sim_fail_targets": [self.span().ledgers_per_range]}


def test_L9_a_condemned_range_is_named_and_the_demo_exits_non_zero(tmp_path):
    out = io.StringIO()
    settings = FailingArchive(tmp_path / "demo", ranges=8, parallelism=8, speed=10_000_000, disruption_rate=0)
    assert run_demo(settings, out=out) == 1
    first = settings.span().ledgers_per_range
    condemned = re.findall(r"^  condemned (\S+): (.*)$", out.getvalue(), re.MULTILINE)
    # Both missions ran to the end; each names the range and why (no automatic retry of it).
    assert [k for k, _ in condemned] == [f"{1:010d}-{first:010d}"] * 2
    assert all("failed" in why for _, why in condemned)
    with dg.DagsterInstance.from_config(str(tmp_path / "demo" / "dagster_home")) as instance:
        failed = [r for r in instance.get_runs() if r.status == dg.DagsterRunStatus.FAILURE]
        assert sorted(r.job_name for r in failed) == ["range_catchup_job"] * 2
