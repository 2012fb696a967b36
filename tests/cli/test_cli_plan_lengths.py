"""`catchup-assets plan --lengths profile` on the workload model (issue 25 item 4 and its Done-when).

The issue's command at full size (4000 ranges, 2096 slots) takes about 5 s; here a quarter of the
model at a quarter of the slots, the same shape: the tip's range far longer than work per slot.
"""

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
