"""workspace.yaml and dagster.yaml as `dagster dev` reads them: the code location, then the instance."""

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.run_coordinator import QueuedRunCoordinator

from catchup_assets.defs.location import INSTANCE_YAML, write_home
from workspaces import load_repository

ROOT = Path(__file__).resolve().parents[2]
ASSETS = {"mission_plan", "range_catchup", "range_profile", "tier_map", "profile_diff", "tier_ladder"}
CHECKS = {
    ("range_profile", "covers_mission"),
    ("range_profile", "no_measurement_free_rows"),
    ("tier_map", "every_range_placed"),
}
JOBS = {"mission_plan_job", "range_catchup_job", "profile_job", "mission_cleanup_job", "mission_control_job"}
SENSORS = {
    "mission_plan_sensor": dg.DefaultSensorStatus.RUNNING,
    "mission_finished_sensor": dg.DefaultSensorStatus.RUNNING,
    "next_mission_sensor": dg.DefaultSensorStatus.STOPPED,
    "notify_sensor": dg.DefaultSensorStatus.RUNNING,  # skips, saying why, until a channel and token are set
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    write_home(home)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # `working_directory: .` means the repository root
        with dg.DagsterInstance.from_config(str(home)) as instance:
            return load_repository(ROOT / "workspace.yaml", instance)


def test_workspace_loads_every_asset_check_and_job(repo):
    name, repo = repo
    assert name == "catchup_assets"
    assert {n.asset_key.to_user_string() for n in repo.get_asset_node_snaps()} == ASSETS
    checks = {(c.asset_key.to_user_string(), c.name) for c in repo.get_asset_check_node_snaps()}
    assert CHECKS <= checks
    assert JOBS <= {j.name for j in repo.get_all_jobs()}
    node = repo.get_asset_node_snap(dg.AssetKey("range_catchup"))
    assert node.partitions is not None  # the dynamic ledger_ranges partitions


def test_workspace_declares_the_sensors_with_their_default_status(repo):
    _, repo = repo
    found = {s.name: s.default_status for s in repo.get_sensors()}
    assert SENSORS.items() <= found.items(), found


def test_repository_dagster_yaml_is_the_one_the_demo_writes(tmp_path):
    assert (ROOT / "dagster.yaml").read_text() == INSTANCE_YAML
    assert write_home(tmp_path / "home").read_text() == INSTANCE_YAML


def test_instance_queues_runs_and_retries_only_dead_run_workers(tmp_path):
    home = tmp_path / "home"
    write_home(home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # Dagster's queue, tagging backfill runs with their mission as they queue (defs/instance/run_coordinator.py).
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert type(instance.run_coordinator).__name__ == "MissionRunCoordinator"
        queue = instance.run_coordinator.get_run_queue_config()
        assert queue.max_concurrent_runs == 10
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
        # A run failed by condemned ranges (the asset's Failure) waits for an operator (L9).
        assert instance.get_settings("run_retries")["retry_on_asset_or_op_failure"] is False
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 300
        assert not instance.telemetry_enabled
        # SQLite under the home, not a temporary directory.
        assert str(instance.root_directory) == str(home)
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"
