"""The forecast under noise (issue 26 item 5): a seeded Monte Carlo over the list schedule, by tables of cases."""

from __future__ import annotations

import math

import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.forecast.forecast import list_schedule
from catchup_assets.core.forecast.spread import makespan_band, spread_from_history

# 40 ranges of 1-6 h on 10 slots: a tail of long ranges, as at the tip.
SECONDS = [3600.0 * (1 + 5 * i / 39) for i in range(40)][::-1]


def test_no_spread_is_the_exact_forecast():
    band = makespan_band(SECONDS, 10, 0.0, draws=5)
    exact = list_schedule(SECONDS, 10)
    assert band.expected_seconds == pytest.approx(exact) == band.p10_seconds == band.p90_seconds


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.2])
def test_a_spread_raises_the_expected_makespan_above_the_exact_one_and_brackets_it(sigma):
    """The mission ends with its slowest draw: the mean of the makespans is above the makespan of the means."""
    band = makespan_band(SECONDS, 10, sigma)
    exact = list_schedule(SECONDS, 10)
    assert band.p10_seconds < band.expected_seconds < band.p90_seconds
    assert band.expected_seconds > exact


def test_wider_spread_wider_band_and_seeded():
    narrow, wide = makespan_band(SECONDS, 10, 0.05), makespan_band(SECONDS, 10, 0.2)
    assert wide.p90_seconds - wide.p10_seconds > 2 * (narrow.p90_seconds - narrow.p10_seconds)
    assert makespan_band(SECONDS, 10, 0.1, seed=3) == makespan_band(SECONDS, 10, 0.1, seed=3)
    assert makespan_band(SECONDS, 10, 0.1, seed=3) != makespan_band(SECONDS, 10, 0.1, seed=4)


@pytest.mark.parametrize(
    "request_share, low, high",
    [
        (2.0, 0.0, 0.0),  # requests far above the peaks: no draw OOMs
        (1.0, 15.0, 25.0),  # requests at the peaks: about half the ranges' draws are above
        (1e-9, 40.0, 40.0),  # requests below every peak: every range OOMs once
    ],
)
def test_oom_retries_from_the_peaks_spread_against_the_requests(request_share, low, high):
    peaks = [4e9] * 40
    band = makespan_band(
        SECONDS, 10, 0.0, peaks=peaks, requests=[p * request_share for p in peaks], memory_sigma=0.1, draws=50
    )
    assert low <= band.expected_oom_retries <= high
    # An OOM costs a tenth of the run before the retry runs it whole.
    if high == 40.0:
        assert band.expected_seconds == pytest.approx(list_schedule([s * 1.1 for s in SECONDS], 10))


@pytest.mark.parametrize(
    "kw, named",
    [
        (dict(sigma=-0.1), "sigma"),
        (dict(sigma=float("nan")), "sigma"),
        (dict(sigma=[0.1] * 3), "sigma: one per range"),
        (dict(memory_sigma=-1.0), "memory_sigma"),
        (dict(draws=1), "draws"),
        (dict(memory_sigma=0.1, peaks=[1.0], requests=[1.0]), "peaks and requests"),
    ],
)
def test_bad_spread_input_is_refused_naming_it(kw, named):
    with pytest.raises(ConfigError, match=named):
        makespan_band(SECONDS, 10, **kw)


@pytest.mark.parametrize(
    "predicted, measured, expected",
    [
        ([100.0] * 12, [100.0] * 12, 0.0),  # ran as planned
        ([100.0] * 12, [100.0 * math.e**0.1, 100.0 * math.e**-0.1] * 6, 0.1),  # +-10% in log
        ([100.0] * 9, [110.0] * 9, None),  # too few to say
        ([None, 0.0, 100.0] * 4, [100.0, 100.0, None] * 4, None),  # no range with both
    ],
)
def test_the_spread_a_mission_showed_against_its_plan(predicted, measured, expected):
    got = spread_from_history(predicted, measured)
    assert got == (None if expected is None else pytest.approx(expected))
