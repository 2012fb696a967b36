"""The mission planner's forecast: a list schedule over the previous profile (issue 6)."""

from __future__ import annotations

import pytest

from catchup_assets.core.forecast.forecast import RangeEstimate, estimates, forecast, list_schedule, what_if
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange, format_key


@pytest.mark.parametrize(
    "seconds, slots, makespan",
    [
        ([], 3, 0.0),
        ([5.0], 3, 5.0),
        ([4.0, 3.0, 2.0, 1.0], 2, 5.0),  # longest first packs: 4+1 and 3+2
        ([1.0, 2.0, 3.0, 4.0], 2, 6.0),  # shortest first leaves the 4 to run alone at the end
        ([3.0, 3.0, 3.0], 1, 9.0),
        ([10.0, 1.0, 1.0, 1.0], 2, 10.0),  # the longest range is the bound
    ],
)
def test_list_schedule(seconds, slots, makespan):
    assert list_schedule(seconds, slots) == makespan


def test_list_schedule_refuses_no_slots():
    with pytest.raises(ValueError, match="slots"):
        list_schedule([1.0], 0)


def est(seconds: float, share: float = 1.0, measured: bool = True) -> RangeEstimate:
    return RangeEstimate("k", seconds, share, measured)


def test_forecast_bound_node_hours_and_ratio():
    f = forecast([est(7200), est(3600, 0.5), est(3600, 0.5, measured=False)], slots=2)
    assert f.makespan_seconds == 7200
    assert f.lower_bound_seconds == 7200  # max(longest 7200, 14400 / 2)
    assert f.node_hours == pytest.approx(2 + 0.5 + 0.5)
    assert (f.work_hours, f.ranges, f.estimated, f.ratio) == (4.0, 3, 1, 1.0)
    f1 = forecast([est(7200), est(3600), est(3600)], slots=1)
    assert (f1.makespan_seconds, f1.lower_bound_seconds) == (14400, 14400)


@pytest.mark.parametrize(
    "slots, factors, expected",
    [(10, (0.5, 1.0, 2.0), [5, 10, 20]), (1, (0.5, 1.0, 2.0), [1, 2]), (3, (1.0,), [3])],
)
def test_what_if_slots(slots, factors, expected):
    rows = what_if([est(100)] * 6, slots, factors)
    assert [f.slots for f in rows] == expected


def r(k: int) -> LedgerRange:
    return LedgerRange((k - 1) * 1000 + 1, k * 1000)


def test_estimates_borrow_from_above_and_from_the_top():
    profile = ProfileIndex([RangeMeasure(2000, 2 * GiB, None, 500.0), RangeMeasure(4000, 9 * GiB, None, 900.0)])
    ordered = [r(5), r(4), r(1)]  # r(5) is new history above the profile's top
    out = estimates(ordered, profile, Placement())
    assert [(e.key, e.seconds, e.measured) for e in out] == [
        (format_key(4001, 5000), 900.0, False),  # the top's seconds
        (format_key(3001, 4000), 900.0, True),
        (format_key(1, 1000), 500.0, False),  # the nearest measured range above
    ]
    # Ranges pay for the share of their tier's node they request (issue 15): the unprofiled one
    # 2 CPUs of an r6i.xlarge's 3.92, the 9 GiB range 12.25 GiB of an r6i.large's 14.14, the
    # 2 GiB range 3.5 GiB of an m6i.large's 6.74 (just above its 1 CPU of 1.93).
    assert [e.tier for e in out] == ["protostar", "subgiant", "dwarf"]
    assert [e.node_share for e in out] == pytest.approx([2 / 3.92, 12.25 / 14.142, 3.5 / 6.742], rel=1e-3)


def test_no_profile_no_forecast():
    assert estimates([r(1)], None, Placement()) is None
    no_seconds = ProfileIndex([RangeMeasure(2000, 2 * GiB, None, None)])
    assert estimates([r(1)], no_seconds, Placement()) is None


def test_plan_command_predicts_what_the_dispatcher_then_does(tmp_path, capsys):
    """`catchup-assets plan` on a profile, then the same mission replayed by the real dispatcher."""
    import dataclasses
    import logging

    import pyarrow.parquet as pq

    from catchup_assets.cli.main import run
    from catchup_assets.sim.workload import Workload, WorkloadShape
    from kubesim.replay import replay

    w = Workload(
        ranges=80, shape=dataclasses.replace(WorkloadShape(), disruption_share=0.0, spikes=0, mission_jitter=0.0)
    )
    path = tmp_path / "range_profile.parquet"
    pq.write_table(w.profile_table(), path)
    assert run(["plan", "--profile", str(path), "--parallelism", "8", "--what-if", "0.5", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = {ln.split()[0]: ln.split() for ln in lines if ln.strip()[:1].isdigit()}
    assert set(table) == {"4", "8"} and table["8"][1] == "configured"
    predicted_h = float(table["8"][2])
    quiet = logging.getLogger("catchup_assets")
    quiet.setLevel(logging.CRITICAL)  # the replay's stall alerts are expected
    try:
        actual = replay(w, order="longest-first", slots=8, poll_seconds=10.0)
    finally:
        quiet.setLevel(logging.NOTSET)
    assert abs(actual.makespan_seconds / 3600 - predicted_h) <= 0.01 + 10.0 * (80 / 8 + 1) / 3600
    assert float(table["4"][2]) > predicted_h  # half the slots, longer


def test_plan_command_refuses_a_missing_profile(tmp_path, capsys):
    from catchup_assets.cli.main import run

    assert run(["plan", "--profile", str(tmp_path / "nope.parquet")]) == 2
    assert f"--profile: previous profile {tmp_path / 'nope.parquet'} does not exist" in capsys.readouterr().err


def test_workload_command_writes_a_profile_plan_accepts(tmp_path, capsys):
    from catchup_assets.cli.main import run

    out = tmp_path / "model.parquet"
    assert run(["workload", "--out", str(out), "--ranges", "50"]) == 0
    assert "50 ranges" in capsys.readouterr().out
    assert run(["plan", "--profile", str(out), "--parallelism", "5"]) == 0
    assert "50 ranges, order longest-first, 0 without their own measurement" in capsys.readouterr().out
