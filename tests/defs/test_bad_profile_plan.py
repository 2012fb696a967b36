"""A bad previous profile through mission_plan (issue 24 item 4; L35): what `plan --profile` warns or
refuses, the run's own log says to the operator who launched it, naming the file and the row."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.core.values.ledger_range import format_key
from catchup_assets.defs.location import load_location, write_location
from catchup_assets.store.tables import PROFILE_SCHEMA

SIZE = 16000


def rows(n: int) -> list[dict]:
    return [
        {
            "range_key": format_key(i * SIZE + 1, (i + 1) * SIZE),
            "first_ledger": i * SIZE + 1,
            "last_ledger": (i + 1) * SIZE,
            "peak_anon_bytes": 2**26,
            "peak_working_set_bytes": 2**26,
            "seconds": 10.0,
            "mission": "m0",
        }
        for i in range(n)
    ]


@pytest.fixture
def demo(tmp_path):
    settings = DemoSettings(tmp_path, ranges=8, parallelism=4)
    write_location(tmp_path, settings.catchup())
    (tmp_path / "home").mkdir()
    # As every instance of ours runs: the package's loggers managed (dagster.yaml's python_logs), so what the
    # store warns of reaches the run's log, and once.
    logs = yaml.safe_load((Path(__file__).resolve().parents[2] / "dagster.yaml").read_text())["python_logs"]
    with dg.instance_for_test(temp_dir=str(tmp_path / "home"), overrides={"python_logs": logs}) as instance:
        yield load_location(tmp_path), instance
        # The run's sqlite connections go while the instance is open, not at a later test's collection.
        gc.collect()


def plan(demo, profile: str):
    defs, instance = demo
    result = defs.resolve_job_def("mission_plan_job").execute_in_process(
        run_config={"ops": {"mission_plan": {"config": {"mission": "m1", "previous_profile": profile}}}},
        instance=instance,
        raise_on_error=False,
    )
    logged = [e.user_message for e in instance.all_logs(result.run_id) if e.level == 30]  # WARNING
    return result, logged


def test_L35_mission_plan_warns_of_skipped_and_repeated_rows_in_its_run_log(demo, tmp_path):
    path = tmp_path / "range_profile.parquet"
    bad = rows(10) + [rows(3)[2], {**rows(11)[10], "last_ledger": 2**62}]
    pq.write_table(pa.Table.from_pylist(bad, schema=PROFILE_SCHEMA), path)
    result, logged = plan(demo, str(path))
    assert result.success
    key = format_key(2 * SIZE + 1, 3 * SIZE)
    assert any(f"{path}: 1 range key(s) repeated, the last row of each is kept" in m and f"{key} rows 3, 11" in m
               for m in logged), logged  # fmt: skip
    assert any(re.search(rf"{path}: row 12 \(\S+\) skipped: last_ledger 4611686018427387904", m) for m in logged)
    # Each once: the run re-logged what the store's logger had already put there.
    assert sum("skipped: last_ledger" in m for m in logged) == 1, logged
    assert sum("range key(s) repeated" in m for m in logged) == 1, logged


def test_L35_mission_plan_refuses_a_peak_stored_as_a_string_naming_the_column(demo, tmp_path):
    path = tmp_path / "range_profile.parquet"
    schema = pa.schema([pa.field("peak_anon_bytes", pa.string()) if f.name == "peak_anon_bytes" else f
                        for f in PROFILE_SCHEMA])  # fmt: skip
    pq.write_table(pa.Table.from_pylist([r | {"peak_anon_bytes": "67108864"} for r in rows(4)], schema=schema), path)
    result, _ = plan(demo, str(path))
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert "column peak_anon_bytes is string, not int64" in str(failure.event_specific_data.error)
    assert f"previous_profile: previous profile {path}" in str(failure.event_specific_data.error)
