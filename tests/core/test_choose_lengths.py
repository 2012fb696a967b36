"""`lengths: auto` as a plain table (issue 37 items 1, 4): grid and cut forecasts in, the choice and its reason out."""

import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.choose_lengths import PlanForecast, choice_rows, choose_lengths

H = 3600.0


def plan(lengths: str, hours: float, node_hours: float, dollars: float = 0.0, ranges: int = 4000) -> PlanForecast:
    return PlanForecast(lengths, ranges, hours * H, 0.95 * hours * H, 1.05 * hours * H, node_hours, dollars)


# grid h, cut h, grid node-hours, cut node-hours, cap -> chosen, words the reason holds
CASES = [
    # The workload model at 2096 slots, as `catchup-assets plan` forecasts it (issue 37's figures).
    (6.84, 3.32, 3489, 3820, 1.10, "profile", ["51% sooner", "1.095x", "within cut_node_hours_cap 1.1"]),
    (10.0, 9.5, 100, 100, 1.10, "profile", ["5% sooner"]),  # exactly 5% sooner: taken
    (10.0, 9.51, 100, 100, 1.10, "uniform", ["less than 5% sooner"]),  # just short of it
    (10.0, 5.0, 100, 110, 1.10, "profile", ["1.100x"]),  # exactly at the cap: taken
    (10.0, 5.0, 100, 111, 1.10, "uniform", ["1.110x", "above cut_node_hours_cap 1.1"]),
    (10.0, 5.0, 100, 111, 1.20, "profile", ["within cut_node_hours_cap 1.2"]),  # a deployment's own cap
    (10.0, 5.0, 100, 90, 1.00, "profile", ["0.900x"]),  # a cut that is cheaper too
    (10.0, 11.0, 100, 100, 1.10, "uniform", ["10% later", "-1.00 h saved"]),  # slower
]


@pytest.mark.parametrize(("grid_h", "cut_h", "grid_nh", "cut_nh", "cap", "chosen", "words"), CASES)
def test_issue37_auto_takes_the_cut_when_5_percent_sooner_within_the_node_hours_cap(
    grid_h, cut_h, grid_nh, cut_nh, cap, chosen, words
):
    choice = choose_lengths(plan("uniform", grid_h, grid_nh), plan("profile", cut_h, cut_nh), cap, sigma=0.1)
    assert choice.lengths == chosen
    why = choice.why()
    assert why.startswith("auto: the profile cut" if chosen == "profile" else "auto: the uniform grid")
    for w in words:
        assert w in why, why


def test_issue37_the_reason_puts_hours_saved_beside_extra_node_hours_and_dollars():
    choice = choose_lengths(plan("uniform", 6.84, 3489, 212.96), plan("profile", 3.32, 3820, 236.15), 1.10, 0.1)
    assert "(51% sooner, 3.52 h saved) for 1.095x the grid's node-hours (+331 node-hours, +23.19 USD)" in choice.why()
    rows = choice_rows(choice)
    assert [(r["lengths"], r["note"], r["expected_makespan_h"], r["node_hours"], r["cost_usd"]) for r in rows] == [
        ("uniform", "", 6.84, 3489, 212.96),
        ("profile", "chosen", 3.32, 3820, 236.15),
    ]
    assert (rows[1]["p10_h"], rows[1]["p90_h"]) == (3.154, 3.486)
    # At a demo's scale every time figure grows alike; the choice does not change.
    scaled = choice.scaled(1000.0)
    assert scaled.lengths == "profile" and "3520.00 h saved" in scaled.why() and "+23,190.00 USD" in scaled.why()


def test_issue37_no_cut_or_a_cut_that_is_the_grid_is_the_grid():
    grid = plan("uniform", 14.09, 3489)
    assert choose_lengths(grid, None, 1.10, 0.1).why() == (
        "auto: the uniform grid (no previous profile times a range: nothing to cut to)"
    )
    same = choose_lengths(grid, plan("profile", 14.09, 3489), 1.10, 0.1, cut_is_grid=True)
    assert same.lengths == "uniform"
    assert same.why() == "auto: the uniform grid: no cut of it is sooner at these slots (expected 14.09 h)"
    assert [r["note"] for r in choice_rows(same)] == ["chosen", ""]


@pytest.mark.parametrize("cap", [0.99, float("nan"), float("inf"), "1.1"])
def test_issue37_a_cap_below_1_or_not_a_number_is_refused_naming_it(cap):
    with pytest.raises(ConfigError, match="cut_node_hours_cap"):
        choose_lengths(plan("uniform", 10, 100), plan("profile", 5, 100), cap, 0.1)
