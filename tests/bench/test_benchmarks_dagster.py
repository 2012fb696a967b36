"""The Dagster backfill benchmark's smoke version: the UI's backfill path end to end, no timing asserted."""

from __future__ import annotations

import psutil
import pytest

from benchmarks import dagster_backfill
from benchmarks.harness.report import table_rows
from pg_server import missing_reason


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
@pytest.mark.parametrize("storage", ["sqlite", "postgres"])
def test_dagster_backfill_smoke(tmp_path, storage):
    if storage == "postgres" and missing_reason():
        pytest.skip(missing_reason())
    children = {p.pid for p in psutil.Process().children(recursive=True)}
    out = dagster_backfill.bench(["--smoke", "--storage", storage, "--out", str(tmp_path)])
    d, direct = out["dagster"], out["direct"]

    # One backfill, one run, launched by the queue daemon into its own process, drove every range:
    # the 2 whose archive is broken condemned (the run fails), the 38 others done.
    assert d["run_status"] == "FAILURE" and d["backfill_status"] == "COMPLETED_FAILED"
    assert d["materialized"] == 38 and d["condemned"] == 2
    # Issue 26: planned as one subset, marked by the run: the condemned FAILED, the rest MATERIALIZED;
    # as 20 were live, no more than those 20 were in progress and none yet failed.
    assert d["marks_at_end"] == {"FAILED": 2, "MATERIALIZED": 38}
    assert d["marks_after_live"].get("IN_PROGRESS", 0) <= 20 and "FAILED" not in d["marks_at_live"]
    live = [n for n in d["notes"] if n["event"] == "live"]
    assert len(live) == 1 and live[0]["held"] >= 20
    run_pid = d["events"]["times"]["RUN_START"][1]
    step_pid = d["events"]["times"]["STEP_START"][1]
    loaded = {n["pid"] for n in d["notes"] if n["event"] == "location_loaded"}
    assert {run_pid, step_pid} <= loaded and run_pid != step_pid  # run worker and step worker, each its own process
    assert live[0]["pid"] == step_pid  # the attempts were submitted by the step's dispatcher
    by_type = d["events"]["by_type"]
    # The daemon's one planned event, then the run's own for each range it started, but for ranges done
    # (at 20000x) before their mark was written: those need none. The condemned always have theirs.
    assert by_type["ASSET_MATERIALIZATION"] == 38 and 1 + 2 <= by_type["ASSET_MATERIALIZATION_PLANNED"] <= 41
    assert d["events"]["count"] > 80 and d["events"]["serialized_bytes"] > 0 and d["history_bytes"] > 0
    assert direct["done"] == 38 and direct["submits"] >= 40

    text = out["path"].read_text()
    assert out["path"] == tmp_path / ("dagster_backfill.md" if storage == "sqlite" else "dagster_backfill_postgres.md")
    assert "command: `uv run python -m benchmarks.dagster_backfill" in text and "machine:" in text
    assert ("(Postgres storage)" in text.splitlines()[0]) == (storage == "postgres")
    captions = (
        "Launch to 20 attempts live (40 partitions, one run; seconds since the mutation was sent)",
        "Event log of the run that drove all 40 ranges",
        "Wall time of the run against the same mission without Dagster",
    )
    rows = {r[0]: r[1:] for c in captions for r in table_rows(text, c)}
    for label in (
        "backfill requested: GraphQL launchPartitionBackfill returned",
        "RUN_START event",
        "STEP_START event",
        "first attempt submitted",
        "20 attempts live",
    ):
        assert rows[label][0] != "n/a", label
    assert rows["event-log entries of the run"][0] == str(d["events"]["count"])
    growth = "SQLite growth" if storage == "sqlite" else "Postgres database growth (pg_database_size)"
    assert any(label.startswith(growth) for label in rows)
    assert "run_mission without Dagster (same workload, backend, poll)" in rows
    # Nothing the benchmark started is left running.
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= children


def test_attempt_observations_smoke(tmp_path):
    """Issue 23: every attempt's two observations reach the event log, one row each; no timing asserted."""
    from benchmarks import attempt_observations

    out = attempt_observations.bench(["--smoke", "--out", str(tmp_path)])
    assert out["observations"] == 80 and out["added_rows"] == 80  # one event-log row per observation
    rows = table_rows((tmp_path / "attempt_observations.md").read_text())
    assert [r[0] for r in rows][-2:] == [
        "**the observations' cost**",
        "latest_marks over 40 ranges, each newest word an attempt's start",
    ]
    assert rows[-2][1] == "**80**"
