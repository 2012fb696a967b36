"""`lengths: auto`: the uniform grid or the profile cut, whichever the forecasts under noise favour (issue 37).

Pure. Both plans are forecast at the mission's slots under the profile's runtime
spread (core/forecast/spread.py: an expected makespan with its p10-p90 band), with
their node-hours and dollars. The cut is taken when its expected makespan is at
least `MIN_SAVING` shorter than the grid's and its node-hours at most
`cut_node_hours_cap` times the grid's: a cut pays some setups again (about 9% more
node-hours on the workload model at 2096 slots), and a cut that barely finishes
sooner is not worth new range keys. Otherwise, and with no profile to cut to, the grid.
The choice keeps both forecasts, so whoever prints it shows the trade: the hours
saved beside the node-hours and dollars they cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from catchup_assets.core.errors import check_number
from catchup_assets.core.forecast.cost import mission_cost, significant
from catchup_assets.core.forecast.forecast import RangeEstimate
from catchup_assets.core.forecast.spread import makespan_band
from catchup_assets.core.size.sizing import Placement

# The cut's expected makespan must be at least this share shorter than the grid's (issue 37 item 1).
MIN_SAVING = 0.05
# Draws per plan: on the workload model at 2096 slots, 50 put the grid's expected makespan 0.5% and the
# cut's 0.2% from 200 draws' (6.88 h, 3.33 h), against the 51% between them; a quarter of the time.
CHOICE_DRAWS = 50
CAP_FIELD = "cut_node_hours_cap"  # MissionConfig's and mission_defaults' name for the bound, named in the refusal


@dataclass(frozen=True)
class PlanForecast:
    """One plan at the mission's slots under runtime spread: seconds, node-hours and dollars."""

    lengths: str  # uniform | profile
    ranges: int
    expected_seconds: float  # the mean makespan over the draws
    p10_seconds: float
    p90_seconds: float
    node_hours: float
    dollars: float

    def scaled(self, time: float) -> PlanForecast:
        """Every figure that grows with time (all but the count) times `time` (a demo's production scale)."""
        return replace(
            self,
            expected_seconds=self.expected_seconds * time,
            p10_seconds=self.p10_seconds * time,
            p90_seconds=self.p90_seconds * time,
            node_hours=self.node_hours * time,
            dollars=self.dollars * time,
        )


def plan_forecast(
    lengths: str, est: Sequence[RangeEstimate], slots: int, sigma: float, placement: Placement, draws: int
) -> PlanForecast:
    """`est` (one plan's ranges in dispatch order) forecast under `sigma` at `slots`, with its cost."""
    band = makespan_band([e.seconds for e in est], slots, sigma, draws=draws)
    cost = mission_cost((e.use() for e in est), placement)
    return PlanForecast(
        lengths, len(est), band.expected_seconds, band.p10_seconds, band.p90_seconds, cost.node_hours, cost.dollars
    )


@dataclass(frozen=True)
class LengthsChoice:
    lengths: str  # what auto chose: uniform or profile
    grid: PlanForecast
    cut: PlanForecast | None  # None: no profile times a range, nothing to cut to
    node_hours_cap: float
    sigma: float  # the runtime spread both were forecast under
    min_saving: float = MIN_SAVING
    cut_is_grid: bool = False  # the cut left every grid range as it is: nothing to choose

    @property
    def saving(self) -> float:
        """The share of the grid's expected makespan the cut saves (negative: the cut is slower)."""
        if self.cut is None or not self.grid.expected_seconds:
            return 0.0
        return 1.0 - self.cut.expected_seconds / self.grid.expected_seconds

    @property
    def node_hours_ratio(self) -> float:
        if self.cut is None or not self.grid.node_hours:
            return 1.0
        return self.cut.node_hours / self.grid.node_hours

    def scaled(self, time: float) -> LengthsChoice:
        return replace(self, grid=self.grid.scaled(time), cut=None if self.cut is None else self.cut.scaled(time))

    def why(self) -> str:
        """Which plan, and why, with the trade: hours saved against the extra node-hours and dollars."""
        g, c = self.grid, self.cut
        if c is None:
            return "auto: the uniform grid (no previous profile times a range: nothing to cut to)"
        trade = (
            f"expected {_h(c.expected_seconds)} against the grid's {_h(g.expected_seconds)} "
            f"({_sooner(self.saving)}, {_h(g.expected_seconds - c.expected_seconds)} saved) "
            f"for {self.node_hours_ratio:.3f}x the grid's node-hours "
            f"({c.node_hours - g.node_hours:+,.0f} node-hours, {c.dollars - g.dollars:+,.2f} USD)"
        )
        if self.cut_is_grid:
            return f"auto: the uniform grid: no cut of it is sooner at these slots (expected {_h(g.expected_seconds)})"
        if self.lengths == "profile":
            return f"auto: the profile cut, {trade}: at least {self.min_saving:.0%} sooner, within {self._cap()}"
        if self.saving < self.min_saving:
            return f"auto: the uniform grid: the profile cut is {trade}, less than {self.min_saving:.0%} sooner"
        return f"auto: the uniform grid: the profile cut is {trade}, above {self._cap()}"

    def _cap(self) -> str:
        return f"{CAP_FIELD} {self.node_hours_cap:g}"


def choose_lengths(
    grid: PlanForecast,
    cut: PlanForecast | None,
    node_hours_cap: float,
    sigma: float,
    min_saving: float = MIN_SAVING,
    cut_is_grid: bool = False,
) -> LengthsChoice:
    """The cut when it is at least `min_saving` sooner (expected) at most `node_hours_cap` x the grid's
    node-hours; else, and with no cut (or a cut that is the grid itself: `cut_is_grid`), the grid."""
    check_number(CAP_FIELD, node_hours_cap, 1.0)
    check_number("min_saving", min_saving, 0.0)
    choice = LengthsChoice("uniform", grid, cut, node_hours_cap, sigma, min_saving, cut_is_grid)
    if cut_is_grid:
        return choice
    # The cut was searched within the cap on the same node shares (cut.py node_shares), summed in another
    # order: a cut at the cap must not be refused by the last bits of a float.
    if cut is not None and choice.saving >= min_saving and choice.node_hours_ratio <= node_hours_cap * (1 + 1e-9):
        return replace(choice, lengths="profile")
    return choice


def choice_rows(choice: LengthsChoice) -> list[dict]:
    """Both forecasts as rows (the command line's and the metadata's table), the chosen one marked."""
    plans = [p for p in (choice.grid, choice.cut) if p is not None]
    return [
        {
            "lengths": p.lengths,
            "note": "chosen" if p.lengths == choice.lengths else "",
            "ranges": p.ranges,
            "expected_makespan_h": significant(p.expected_seconds / 3600),
            "p10_h": significant(p.p10_seconds / 3600),
            "p90_h": significant(p.p90_seconds / 3600),
            "node_hours": significant(p.node_hours),
            "cost_usd": round(p.dollars, 2),
        }
        for p in plans
    ]


def _sooner(saving: float) -> str:
    return f"{saving:.0%} sooner" if saving >= 0 else f"{-saving:.0%} later"


def _h(seconds: float) -> str:
    # Hours to the hundredth; a figure under 0.1 h (a demo's measured seconds, in its run's log) to 3 digits.
    hours = seconds / 3600
    return f"{hours:.2f} h" if abs(hours) >= 0.1 or not hours else f"{significant(hours, 3):g} h"
