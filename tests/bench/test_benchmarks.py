"""Each benchmark's smoke version, so the benchmarks cannot rot (issue 6). No timing is asserted."""

from __future__ import annotations

from benchmarks import cost, makespan, profile_build
from benchmarks.harness.report import table_rows


def test_makespan_smoke(tmp_path):
    assert makespan.main(["--smoke", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "makespan.md").read_text()
    assert "command: `uv run python -m benchmarks.makespan" in text and "machine:" in text
    rows = table_rows(text)
    assert [(r[0], r[1]) for r in rows[:6]] == [
        (o, s) for s in ("6", "12") for o in ("tip-first", "oldest-first", "longest-first")
    ]
    assert all(float(r[4]) >= 1.0 for r in rows)  # never below the lower bound
    assert rows[-1][0] == "tip-first (no profile)" and "oom" in rows[-1][6]


def test_profile_build_smoke(tmp_path):
    assert profile_build.main(["--smoke", "--out", str(tmp_path)]) == 0
    rows = table_rows((tmp_path / "profile_build.md").read_text())
    assert len(rows) == 9 and all(float(r[1]) >= 0 for r in rows)
    assert rows[-1][0].startswith("profile + tier map with the snapshot")


def test_cost_smoke(tmp_path):
    assert cost.main(["--smoke", "--out", str(tmp_path)]) == 0
    rows = table_rows((tmp_path / "cost.md").read_text())
    assert [r[0] for r in rows] == [
        "flat", "default ladder", "default ladder packed", "fitted ladder", "no profile (catch-all, tip-first)"
    ]  # fmt: skip
    ratio = {r[0]: float(r[3]) for r in rows}
    assert ratio["flat"] == 1.0 and ratio["fitted ladder"] <= ratio["default ladder packed"] < ratio["default ladder"]
    assert {r[7] for r in rows[:4]} == {"0"}  # sized from the profile: no OOM on any ladder


def test_ondemand_smoke(tmp_path):
    """Issue 21: the fallback off and after 1, 3, 5 reclaims; moving ranges to on-demand buys them out of spot."""
    from benchmarks import ondemand

    assert ondemand.main(["--smoke", "--out", str(tmp_path)]) == 0
    rows = table_rows((tmp_path / "ondemand.md").read_text())
    assert [r[0] for r in rows] == ["off", "after 1", "after 3", "after 5"]
    fallback = {r[0]: float(r[7]) for r in rows}
    reclaims = {r[0]: int(r[8]) for r in rows}
    assert fallback["off"] == 0 and fallback["after 1"] > fallback["after 3"] > 0
    assert reclaims["after 1"] < reclaims["after 3"] < reclaims["off"]  # on-demand attempts are never reclaimed


def test_kpis_smoke(tmp_path):
    """Issue 23: the workload model's KPIs, unprofiled then profiled; the profile cuts slack and OOM hits."""
    from benchmarks import kpis

    assert kpis.main(["--smoke", "--out", str(tmp_path)]) == 0
    rows = table_rows((tmp_path / "kpis.md").read_text())
    assert [r[0].split(" (")[0] for r in rows] == ["no profile", "profiled"]
    slack = [float(r[1].rstrip("%")) for r in rows]
    assert 0 < slack[1] < slack[0] < 100


def test_range_lengths_smoke(tmp_path):
    """Issue 25 item 5: the replayed cut against the uniform grid, at smoke size."""
    from benchmarks import range_lengths

    assert range_lengths.main(["--smoke", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "range_lengths.md").read_text()
    assert "| 30 | 20 | profile |" in text and "| 30 | 20 | uniform |" in text


def test_cut_generated_smoke(tmp_path):
    """Issue 37 item 3: lengths auto on seeded generated profiles, at smoke size."""
    from benchmarks import cut_generated

    assert cut_generated.main(["--smoke", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "cut_generated.md").read_text()
    rows = table_rows(text, "Plans")
    assert [r[0] for r in rows] == ["1", "2"]  # one row a seed
    assert {r[5] for r in rows} <= {"uniform", "profile"}
    targets = [r[0] for r in table_rows(text, "Targets")]
    assert targets[:3] == ["median / grid", "worst / bound", "worst node-hours / grid"]
    assert targets[3] == "profiles within 1.12 x their bound"


def test_forecast_spread_smoke(tmp_path):
    """Issue 26 item 5: the forecast's band against a replayed mission, at smoke size."""
    from benchmarks import forecast_spread

    assert forecast_spread.main(["--smoke", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "forecast_spread.md").read_text()
    assert "| 0.1 | 0.1 |" in text
    (row,) = table_rows(text, "Forecast and replays")
    # The replay is its draw list-scheduled, give or take what the dispatcher adds (reclaims, OOMs, polls).
    assert abs(float(row[11].rstrip("%"))) < 10.0
    assert row[12].endswith(")") and row[14].endswith("%")
