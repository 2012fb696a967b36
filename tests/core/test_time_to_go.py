"""A running mission's time to go (core/forecast/time_to_go.py) as a table (issue 36 item 2)."""

from __future__ import annotations

import math

import pytest

from catchup_assets.core.forecast.time_to_go import Done, InFlight, TimeToGo, pace, time_to_go

H = 3600.0

# in flight (predicted, running), waiting (predicted), done (predicted, measured), slots -> expected seconds
CASES = [
    ("nothing left", [], [], [], 4, 0.0),
    ("one in flight, half run", [InFlight(2 * H, H)], [], [], 4, H),
    ("late in flight: holds a floor of its seconds", [InFlight(H, 3 * H)], [], [], 4, 0.05 * H),
    ("waiting ranges fill the free slots", [], [H, H, H, H], [], 2, 2 * H),
    (
        "a waiting range starts when the first in flight ends",
        [InFlight(H, 0.5 * H), InFlight(3 * H, 0)],
        [H],
        [],
        2,
        3 * H,
    ),
    ("longest first: the schedule keeps the dispatcher's order", [], [3 * H, H, H, H], [], 2, 3 * H),
    ("unprofiled: the median of the others", [], [H, None, 3 * H], [], 3, 3 * H),
    ("no profile: the median of what this mission completed", [], [None, None], [Done(None, 600)] * 3, 1, 1200),
    ("this mission runs twice the profile: twice the time", [], [H, H], [Done(H, 2 * H)] * 3, 1, 4 * H),
    ("a pace needs three completions", [], [H], [Done(H, 2 * H)] * 2, 1, H),
    (
        "more in flight than slots (a lowered cap): the first ends free nothing",
        [InFlight(H, 0), InFlight(2 * H, 0)],
        [H],
        [],
        1,
        3 * H,
    ),
]


@pytest.mark.parametrize("why, in_flight, waiting, done, slots, expected", CASES, ids=[c[0] for c in CASES])
def test_issue36_time_to_go_is_what_is_left_over_the_live_slots(why, in_flight, waiting, done, slots, expected):
    eta = time_to_go(in_flight, waiting, done, slots, sigma=0.0, draws=2)
    assert eta.expected_seconds == pytest.approx(expected)
    assert eta.left == len(in_flight) + len(waiting)


def test_issue36_the_band_holds_the_expected_time_and_widens_with_the_spread():
    waiting = [H] * 40
    narrow = time_to_go([], waiting, [], 8, sigma=0.05)
    wide = time_to_go([], waiting, [], 8, sigma=0.3)
    assert narrow.p10_seconds <= narrow.expected_seconds <= narrow.p90_seconds
    assert wide.p90_seconds - wide.p10_seconds > narrow.p90_seconds - narrow.p10_seconds
    assert time_to_go([], waiting, [], 8, sigma=0.3) == wide  # seeded: the same inputs, the same band


def test_issue36_pace_reads_only_the_ranges_the_profile_covers():
    assert pace([Done(H, 2 * H), Done(None, 9 * H), Done(H, 2 * H), Done(2 * H, 4 * H)]) == pytest.approx(2.0)
    assert "to go" in time_to_go([], [H], [], 1).line() and time_to_go([], [], [], 1).line() == "nothing left"


def test_issue36_with_no_profile_and_nothing_completed_the_time_to_go_is_unknown_not_zero():
    eta = time_to_go([InFlight(None, 100.0)], [None, None], [], 2)
    assert not eta.known and eta.line() == "time to go unknown until a range completes (no profile)"


NAN = float("nan")


@pytest.mark.parametrize(
    "why, in_flight, waiting, done",
    [
        ("a NaN prediction", [], [H, NAN], []),
        ("a negative prediction", [], [H, -H], []),
        ("a NaN measured range", [], [H, H], [Done(H, NAN)] * 3),
        ("a NaN running time", [InFlight(H, NAN)], [H], []),
    ],
)
def test_issue36_a_torn_figure_is_taken_as_unknown_never_a_nan_time_to_go(why, in_flight, waiting, done):
    eta = time_to_go(in_flight, waiting, done, 1, sigma=0.0, draws=2)
    assert math.isfinite(eta.expected_seconds) and eta.expected_seconds >= H and "nan" not in eta.line()


@pytest.mark.parametrize(
    ("expected", "p10", "p90", "line"),
    [
        (3 * 3600, 2.5 * 3600, 3.6 * 3600, "~3.0 h to go (p10 2.5 h, p90 3.6 h; pace x1.00 of the profile)"),
        (1800, 1500, 2400, "~30 min to go (p10 25 min, p90 40 min; pace x1.00 of the profile)"),
        # A tail (or the demo) under a minute: seconds, never "0 min to go".
        (4, 3.8, 70, "~4 s to go (p10 4 s, p90 1 min; pace x1.00 of the profile)"),
    ],
)
def test_issue36_the_time_to_go_reads_in_hours_minutes_or_seconds(expected, p10, p90, line):
    assert TimeToGo(expected, p10, p90, pace=1.0, left=3).line() == line
