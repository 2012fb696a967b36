"""`catchup-assets demo` end to end, as a user runs it: what it leaves behind is a Dagster
instance the UI can open, with every range's partition materialized, and the Parquet files."""

import io
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from catchup_assets.cli.demo.run import run_demo
from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.defs.assets.range_assets import MISSION_TAG, ledger_ranges_partitions_def
from workspaces import load_repository

RANGES = 4  # the `demo` fixture's (conftest.py): `catchup-assets demo --ranges 4`
RANGE = dg.AssetKey("range_catchup")


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


def test_issue36_the_demo_prints_no_traceback(demo):
    """Issue 36 item 5: its first run once printed 4 `sqlite3.ProgrammingError` tracebacks: the catchup
    resource's plain `process_config_and_initialize()` entered an ephemeral DagsterInstance (in-memory
    SQLite) that only garbage collection closed, and SQLAlchemy's pool logged each connection it then
    failed to reset. The context-manager form (defs/resources/deployment.py) closes it in order."""
    _, _, proc = demo
    assert "Traceback" not in proc.stderr and "ProgrammingError" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.slow  # `dagster dev` for its first sensor ticks, ~40 s: `uv run pytest -m slow`
def test_issue36_dagster_dev_on_the_demo_prints_no_traceback(demo, tmp_path):
    """Issue 36 item 5: `dagster dev` printed 62 "SQLite objects created in a thread" tracebacks in 17
    minutes, the first with the first sensor ticks: the same ephemeral instance, entered by a sensor's
    resource on a gRPC thread of the code server and closed by garbage collection on another."""
    d, _, _ = demo
    home = shutil.copytree(d / "dagster_home", tmp_path / "dagster_home")  # any run a tick makes stays here
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "CATCHUP_STORAGE_ROOT"} | {"DAGSTER_HOME": str(home)}
    dev = Path(sys.executable).parent / "dagster"
    cmd = [str(dev), "dev", "-w", str(d / "workspace.yaml"), "-p", str(port)]
    log_path = tmp_path / "dagster_dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            # Every sensor running by default (notify, mission_plan, mission_finished) ticks once, then once more.
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline and log_path.read_text().count("SensorDaemon") < 12:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                time.sleep(1)
            time.sleep(10)  # a tick's resources torn down and collected
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    text = log_path.read_text()
    assert text.count("SensorDaemon") >= 12, text[-3000:]
    assert "Traceback" not in text and "ProgrammingError" not in text, text[-3000:]


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
        # One view per mission: each mission's profile is its own partition of range_profile.
        profiles = instance.fetch_materializations(dg.AssetKey("range_profile"), limit=10).records
        assert sorted((r.partition_key, r.asset_materialization.metadata["mission"].value) for r in profiles) == sorted(
            (m, m) for m in missions
        )
        a, b = missions
        diff = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("profile_diff"), asset_partitions=[b]), limit=1
        ).records[0]
        assert (diff.asset_materialization.metadata["a_mission"].value, diff.partition_key) == (a, b)


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
    # Fixed at load (issue 22): nothing of it is launch config; the Resources page shows its settings.
    resource = repo.get_resource("catchup")
    assert resource.configured_values == {} and resource.config_field_snaps == []
    assert f"storage root: `{d / 'storage'}`" in resource.description
    assert "memory scale: x0.005" in resource.description
    assert "measured seconds x 3,000,000 (a simulated stellar-core)" in resource.description
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


def markdown_rows(text: str) -> dict[str, dict[str, str]]:
    """The rows of the first Markdown table in `text`, by their first cell."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    return {r[0]: dict(zip(header, r, strict=True)) for r in rows}


def sized_requests(mission_dir: Path) -> pd.Series:
    """Memory requested per range by the attempts sizing answers for (completed or OOMed), from
    the attempt records themselves: what profile_diff must have summed."""
    attempts = pd.read_parquet(mission_dir / "attempts")
    sized = attempts[attempts["outcome"].isin(["ok", "oom"])]
    return sized.groupby("range_key")["memory_request_bytes"].sum()


def test_profile_diff_of_the_second_mission_shows_the_memory_requested_drop_by_band(demo):
    """Item 7's done-when: the demo's two missions replay the same simulated history, so their
    peaks are about equal; the second, sized from the first's profile, requests less memory."""
    d, (a, b), _ = demo
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        records = instance.fetch_materializations(dg.AssetKey("profile_diff"), limit=10).records
    meta = {r.asset_materialization.metadata["mission"].value: r.asset_materialization.metadata for r in records}
    assert set(meta) == {a, b}
    # The first mission had no previous profile: materialized, saying so.
    assert "without a previous profile" in meta[a]["compared_with"].value
    assert meta[a]["image"].value == "simulated (catchup-sim-core)"
    mb = meta[b]
    assert (mb["a_mission"].value, mb["b_mission"].value) == (a, b)
    assert mb["a_image"].value == mb["b_image"].value == "simulated (catchup-sim-core)"
    assert mb["ranges_compared"].value == RANGES
    assert mb["requested_ratio"].value < 1
    assert mb["requested_b_gib"].value < mb["requested_a_gib"].value
    assert mb["plot"].value.startswith("![plot](data:image/png;base64,")
    bands = markdown_rows(mb["bands"].value)
    # 4 ranges of 15M ledgers: one per band, each band named by the range's last ledger.
    assert list(bands) == ["10-15M", "25-30M", "40-45M", "55-60M", "all"]
    assert all(bands[k]["ranges"] == "1" for k in ("10-15M", "25-30M", "40-45M", "55-60M"))
    # Light history: the first mission ran it on the 12 GiB catch-all, the second sized it to a
    # few GiB. The top band's one range peaks near the catch-all (about 9 GiB): sized with its
    # margin and headroom it may get as much as the catch-all gave it, so no drop is claimed there.
    for band in ("10-15M", "25-30M", "40-45M"):
        assert float(bands[band]["req B/A"]) < 0.75, bands[band]
    # The table's figures are the attempt records' own, band by band (read with pandas here).
    table = pd.read_parquet(mb["profile_diff_path"].value)
    assert table["band"].tolist() == ["10-15M", "25-30M", "40-45M", "55-60M"]
    for side, mission in (("a", a), ("b", b)):
        want = sized_requests(d / "storage" / mission).sort_index().tolist()
        assert table[f"requested_{side}_bytes"].tolist() == want
    ratios = (table["requested_b_bytes"] / table["requested_a_bytes"]).tolist()
    assert ratios == pytest.approx(table["requested_ratio"].tolist())
    assert [f"{r:.2f}" for r in ratios] == [bands[k]["req B/A"] for k in table["band"]]
    # Same simulated workload: peaks about equal (sampled RSS of a small process varies a little).
    assert table["peak_ratio_median"].between(0.75, 1.33).all()


def test_catchup_assets_diff_of_the_demo_s_two_missions(demo):
    d, (a, b), proc = demo
    assert f"catchup-assets diff --root {d / 'storage'} {a} {b} --memory-scale 0.005" in proc.stdout
    script = Path(sys.executable).parent / "catchup-assets"
    run = subprocess.run(
        [str(script), "diff", "--root", str(d / "storage"), a, b, "--memory-scale", "0.005"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert f"A  {a}  stellar-core simulated (catchup-sim-core)" in run.stdout
    assert f"B  {b}  stellar-core simulated (catchup-sim-core)" in run.stdout
    header = next(line for line in run.stdout.splitlines() if line.split()[:2] == ["band", "ranges"])
    assert "req B/A" in header
    total = next(line for line in run.stdout.splitlines() if line.split()[:1] == ["all"])
    assert total.split()[1] == str(RANGES)
    assert "regressions (peak or seconds past 1.25x, and new OOMs):" in run.stdout


def test_issue36_each_mission_s_run_log_ends_with_its_progress_line_at_info(demo):
    """The instance logs at INFO (dagster.yaml), so the dispatcher's status line reaches the run's log; a
    run tells its last one as it ends, however few passes it took (the time to go is in the line while
    ranges are left: tests/mission/test_time_to_go_replay.py)."""
    d, missions, _ = demo
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        runs = [r for r in instance.get_runs() if r.job_name == "range_catchup_job"]
        assert len(runs) == len(missions)
        for run in runs:
            lines = [e.user_message for e in instance.all_logs(run.run_id) if e.level == logging.INFO]
            progress = [m for m in lines if m.startswith("completed ") and " in flight " in m]
            assert (
                progress[-1]
                == f"completed {RANGES}/{RANGES}, in flight 0 (pending 0, running 0), queued 0, condemned 0"
            )


@pytest.mark.timeout(120)
def test_issue46_the_demo_prints_the_console_s_url_and_the_command_that_reopens_it_on_both_missions(demo):
    """Issue 46 item 1: the demo serves the console while it runs, printing its URL, and ends with the
    command that serves it again over its storage; that command, run, shows both missions finished,
    and answers a control on one (refused: a finished mission takes none, as the CLI says)."""
    import json
    import shlex
    import urllib.error
    import urllib.request

    d, missions, proc = demo
    assert re.search(r"^console: http://127\.0\.0\.1:\d+/ while the demo runs", proc.stdout, re.MULTILINE)
    command = re.search(r"catchup-assets (console --root .+)$", proc.stdout, re.MULTILINE)
    assert command, proc.stdout
    argv = shlex.split(command.group(1))
    assert argv[argv.index("--token-file") + 1] == str(d / "console_token")
    assert (d / "console_token").stat().st_mode & 0o077 == 0  # the owner's only
    script = Path(sys.executable).parent / "catchup-assets"
    server = subprocess.Popen([str(script), *argv, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"console: (http://127\.0\.0\.1:\d+)/", server.stdout.readline()).group(1)
        with urllib.request.urlopen(f"{url}/api/missions", timeout=30) as r:
            listed = {m["mission"]: m for m in json.load(r)["missions"]}
        assert sorted(listed) == sorted(missions)
        assert all((m["phase"], m["done"], m["total"]) == ("completed", RANGES, RANGES) for m in listed.values())
        token = (d / "console_token").read_text().strip()
        req = urllib.request.Request(
            f"{url}/api/missions/{missions[1]}/control", data=b'{"action": "pause"}', method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=30)
        assert refused.value.code == 422 and "the mission is finished" in json.load(refused.value)["error"]
    finally:
        server.terminate()
        server.wait(timeout=30)
