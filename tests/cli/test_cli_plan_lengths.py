"""`catchup-assets plan --lengths profile` on the workload model (issue 25 item 4 and its Done-when), and
with no --lengths, `auto` (issue 37's Done-when).

The issues' command at full size (4000 ranges, 2096 slots) took ~17 s here (the cut's search, auto's
forecasts of both plans and the cost tables); here a quarter of the model at a quarter of the slots,
the same shape: the tip's range far longer than work per slot. The full size is in the slow tier.
"""

import re

import pytest

from catchup_assets.cli.main import run

SLOTS = 524


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("workload") / "m.parquet")
    assert run(["workload", "--out", out, "--ranges", "1000"]) == 0
    return out


def plan(capsys, profile: str, lengths: str, slots: int = SLOTS) -> str:
    assert run(["plan", "--profile", profile, "--parallelism", str(slots), "--lengths", lengths]) == 0
    return capsys.readouterr().out


def configured_makespan(out: str) -> float:
    """makespan_h of the first what-if table's configured row."""
    header, row = None, None
    for line in out.splitlines():
        cells = line.split()
        if cells[:2] == ["slots", "note"] and header is None:
            header = cells
        elif header and row is None and "configured" in cells:
            row = cells
    assert header and row, out
    return float(row[header.index("makespan_h")])


def test_issue25_a_profile_cut_plan_is_at_most_0_6_of_the_uniform_makespan(workload, capsys):
    cut = plan(capsys, workload, "profile")
    uniform = plan(capsys, workload, "uniform")
    assert configured_makespan(cut) <= 0.6 * configured_makespan(uniform)
    # The usual table, then how the span was cut and its longest range, then the two side by side.
    assert "lengths   profile: " in cut and "grid ranges cut" in cut and "longest predicted range" in cut
    assert "profile_makespan_h  uniform_makespan_h" in cut
    assert "lengths   uniform: 1000 ranges of 16000 ledgers" in uniform
    assert "profile_makespan_h" not in uniform
    assert "cost " in cut and "cost " in uniform


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
def test_issue25_the_same_profile_and_slots_print_the_same_cut(workload, capsys):
    first = plan(capsys, workload, "profile")
    assert plan(capsys, workload, "profile") == first
    assert plan(capsys, workload, "profile", slots=SLOTS * 2) != first


def auto(capsys, profile: str, slots: int) -> str:
    """`catchup-assets plan` with no --lengths: auto, the default (issue 37)."""
    assert run(["plan", "--profile", profile, "--parallelism", str(slots)]) == 0
    return capsys.readouterr().out


def choice_table(out: str) -> dict[str, dict[str, str]]:
    """The auto table's rows by lengths: {"uniform": {...}, "profile": {...}}."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("lengths auto: both plans")) + 1
    header = lines[at].split()
    rows = {}
    for line in lines[at + 1 : at + 3]:
        cells = line.split()
        if "chosen" not in cells:
            cells.insert(1, "")
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def check_auto(out: str, chosen: str) -> None:
    """The plan says which auto took and why, with both forecasts (makespan, p10-p90, node-hours, dollars)."""
    [why] = [line.strip() for line in out.splitlines() if line.strip().startswith("auto: ")]
    rows = choice_table(out)
    assert rows[chosen]["note"] == "chosen" and {r["note"] for r in rows.values()} == {"chosen", ""}
    grid, cut = rows["uniform"], rows["profile"]
    assert all(float(r["p10_h"]) <= float(r["expected_makespan_h"]) <= float(r["p90_h"]) for r in rows.values())
    if chosen == "profile":
        assert f"lengths   profile: {cut['ranges']} ranges" in out and "grid ranges cut" in out
        assert why.startswith("auto: the profile cut, expected") and "within cut_node_hours_cap 1.1" in why, why
        assert float(cut["expected_makespan_h"]) <= 0.95 * float(grid["expected_makespan_h"])
        assert float(cut["node_hours"]) <= 1.10 * float(grid["node_hours"])
        # The trade beside the hours saved: the extra node-hours and dollars, as the table's (rounded) figures say.
        found = re.search(r"for ([\d.]+)x .* \(\+([\d,]+) node-hours, \+([\d.,]+) USD\)", why)
        ratio, hours, usd = (float(g.replace(",", "")) for g in found.groups())
        g_nh, c_nh = float(grid["node_hours"]), float(cut["node_hours"])
        assert (ratio, hours) == (pytest.approx(c_nh / g_nh, abs=0.001), pytest.approx(c_nh - g_nh, abs=1))
        assert usd == pytest.approx(float(cut["cost_usd"]) - float(grid["cost_usd"]), abs=0.011)
    else:
        assert f"lengths   uniform: {grid['ranges']} ranges of 16000 ledgers" in out
        assert why.startswith("auto: the uniform grid"), why
        assert "profile_makespan_h" not in out  # no cut planned: no cut what-if


def test_issue37_with_no_lengths_the_plan_cuts_at_524_slots_and_keeps_the_grid_at_100(workload, capsys):
    """A quarter of the Done-when's mission at a quarter of its slots, the same shape (the full one: below)."""
    check_auto(auto(capsys, workload, SLOTS), "profile")
    check_auto(auto(capsys, workload, 100), "uniform")


@pytest.mark.slow  # the cut search over 4000 ranges at 2096 slots, then at 400: ~24 s measured (2 cores, shared)
def test_issue37_with_no_lengths_a_4000_range_mission_cuts_at_2096_slots_and_keeps_the_grid_at_400(tmp_path, capsys):
    out = str(tmp_path / "m.parquet")
    assert run(["workload", "--out", out, "--ranges", "4000"]) == 0
    capsys.readouterr()
    cut = auto(capsys, out, 2096)
    check_auto(cut, "profile")
    assert "lengths   profile: 5020 ranges" in cut
    check_auto(auto(capsys, out, 400), "uniform")
