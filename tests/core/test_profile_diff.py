"""The profile diff's pure core (catchup_assets/core/aggregate/band_diff.py), on plain tables of cases."""

import math

import pyarrow as pa
import pytest

from catchup_assets.core.aggregate.band_diff import (
    Side,
    band_label,
    band_of,
    check_diff_columns,
    compare,
    requested_by_range,
)
from catchup_assets.core.aggregate.diff_display import display_rows, image_text, legend, regression_rows
from catchup_assets.core.text import text_table
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.tables import BAND_SCHEMA, band_table

GiB = 1024**3
BAND = 10_000  # ledgers per band in these cases


def row(last: int, peak_gib: float = 4, seconds: float = 100, ooms: int = 0, completed: bool = True, **extra) -> dict:
    first = last - 4999
    return {
        "range_key": f"{first:010d}-{last:010d}",
        "first_ledger": first,
        "last_ledger": last,
        "peak_anon_bytes": int(peak_gib * GiB),
        "seconds": seconds,
        "oom_count": ooms,
        "completed": completed,
        "mission": "m",
        **extra,
    }


def key(last: int) -> str:
    return f"{last - 4999:010d}-{last:010d}"


def side(name, rows, requested_gib=None, image=None) -> Side:
    requested = None if requested_gib is None else {key(k): int(v * GiB) for k, v in requested_gib.items()}
    return Side(name, rows, requested, image)


def test_bands_hold_each_range_by_its_last_ledger():
    assert [band_of(last, BAND) for last in (1, 5000, 10_000, 10_001, 20_000, 20_001)] == [0, 0, 0, 1, 1, 2]
    assert band_label(0, 5_000_000) == "0-5M"
    assert band_label(11, 5_000_000) == "55-60M"
    assert band_label(1, 1_250_000) == "1.25-2.5M"


# Each case: A's rows, B's rows, the band's (ranges, peak B/A median, peak B/A max, time B/A).
BAND_CASES = [
    ("same workload", [row(5000), row(10_000)], [row(5000), row(10_000)], (2, 1.0, 1.0, 1.0)),
    (
        "one peak doubled, time halved",
        [row(5000, 4, 100), row(10_000, 4, 300)],
        [row(5000, 8, 50), row(10_000, 4, 150)],
        (2, 1.5, 2.0, 0.5),
    ),
    (
        "median of three",
        [row(5000), row(8000), row(10_000)],
        [row(5000, 2), row(8000, 4), row(10_000, 6)],
        (3, 1, 1.5, 1),
    ),
    ("incomplete in B: left out", [row(5000), row(10_000)], [row(5000), row(10_000, 9, completed=False)], (1, 1, 1, 1)),
    ("no seconds in A: no time ratio", [row(5000, seconds=None)], [row(5000)], (1, 1, 1, None)),
]


@pytest.mark.parametrize("a_rows, b_rows, want", [c[1:] for c in BAND_CASES], ids=[c[0] for c in BAND_CASES])
def test_a_band_s_ratios(a_rows, b_rows, want):
    diff = compare(side("a", a_rows), side("b", b_rows), BAND, threshold=2.5)
    (band,) = diff.bands
    got = (band["ranges"], band["peak_ratio_median"], band["peak_ratio_max"], band["seconds_ratio"])
    assert got == tuple(w if w is None else pytest.approx(w) for w in want)


def test_requested_memory_per_band_is_the_drop_sizing_made_even_when_peaks_are_equal():
    """The demo's case: the same workload measured twice; A unprofiled (12 GiB each, one range OOMed
    and climbed to 18), B sized from A's profile."""
    a = side("a", [row(5000, 2), row(10_000, 14, ooms=1), row(15_000, 3)], {5000: 12, 10_000: 12 + 18, 15_000: 12})
    b = side("b", [row(5000, 2), row(10_000, 14), row(15_000, 3)], {5000: 3.5, 10_000: 18.5, 15_000: 4.75})
    diff = compare(a, b, BAND)
    first, second = diff.bands
    assert first["peak_ratio_median"] == second["peak_ratio_median"] == 1.0
    assert first["requested_a_bytes"] == 42 * GiB and first["requested_b_bytes"] == 22 * GiB
    assert first["requested_ratio"] == pytest.approx(22 / 42)
    assert second["requested_ratio"] == pytest.approx(4.75 / 12)
    assert (first["ooms_a"], first["ooms_b"]) == (1, 0)
    assert diff.totals["requested_ratio"] == pytest.approx(26.75 / 54)
    assert diff.regressions == []


def test_requested_is_unknown_when_a_side_does_not_know_every_compared_range():
    a = side("a", [row(5000), row(10_000)], {5000: 12})  # 10_000's request missing: no partial sum
    b = side("b", [row(5000), row(10_000)], {5000: 4, 10_000: 4})
    (band,) = compare(a, b, BAND).bands
    assert band["requested_a_bytes"] is None and band["requested_ratio"] is None
    assert band["requested_b_bytes"] == 8 * GiB
    (band,) = compare(side("a", [row(5000)]), side("b", [row(5000)]), BAND).bands
    assert band["requested_a_bytes"] is None and band["requested_b_bytes"] is None


# Each case: A's row, B's row, the regressions found as (what, ratio) at threshold 1.25.
REGRESSION_CASES = [
    ("peak grew 1.5x", row(5000, 4), row(5000, 6), [("peak", 1.5)]),
    ("peak grew exactly 1.25x: not past", row(5000, 4), row(5000, 5), []),
    ("seconds grew 2x", row(5000, seconds=100), row(5000, seconds=200), [("seconds", 2.0)]),
    ("both grew", row(5000, 4, 100), row(5000, 8, 300), [("peak", 2.0), ("seconds", 3.0)]),
    ("shrank", row(5000, 8, 300), row(5000, 4, 100), []),
    ("new OOM, completed", row(5000), row(5000, ooms=1), [("new_oom", None)]),
    ("new OOM, never completed", row(5000), row(5000, 9, ooms=3, completed=False), [("new_oom", None)]),
    ("OOMed in both: not new", row(5000, ooms=1), row(5000, ooms=2), []),
    ("OOM gone", row(5000, ooms=2), row(5000), []),
    ("peak grew but A incomplete: not compared", row(5000, 1, completed=False, ooms=1), row(5000, 9, ooms=1), []),
]


@pytest.mark.parametrize("a_row, b_row, want", [c[1:] for c in REGRESSION_CASES], ids=[c[0] for c in REGRESSION_CASES])
def test_a_range_regresses_past_the_threshold_or_by_a_new_oom(a_row, b_row, want):
    diff = compare(side("a", [a_row]), side("b", [b_row]), BAND, threshold=1.25)
    assert [(r["what"], r["ratio"]) for r in diff.regressions] == [(w, pytest.approx(x) if x else x) for w, x in want]
    assert all(r["range_key"] == key(5000) for r in diff.regressions)
    assert diff.new_ooms == [key(5000) for w, _ in want if w == "new_oom"]
    if want:
        assert sum(b["regressed"] for b in diff.bands) == 1  # one range, however many ways


def test_left_out_ranges_are_counted_by_reason():
    a = [row(5000), row(10_000), row(15_000, completed=False, ooms=1), row(20_000)]
    b = [row(5000), row(10_000, completed=False, ooms=1), row(15_000), row(25_000)]
    diff = compare(side("a", a), side("b", b), BAND)
    assert diff.compared == 1
    assert diff.left_out == {"only_in_a": 1, "only_in_b": 1, "not_completed_in_a": 1, "not_completed_in_b": 1}


def test_a_band_with_only_a_new_oom_still_shows():
    diff = compare(
        side("a", [row(5000), row(25_000)]), side("b", [row(5000), row(25_000, ooms=2, completed=False)]), BAND
    )
    assert [(b["band"], b["ranges"], b["ooms_b"], b["regressed"]) for b in diff.bands] == [
        ("0-0.01M", 1, 0, 0),
        ("0.02-0.03M", 0, 2, 1),
    ]


def test_requested_by_range_counts_the_completed_attempt_and_the_oom_rungs_not_the_cloud_s_retries():
    def rec(k, n, outcome, gib):
        return AttemptRecord("m", k, n, outcome=outcome, memory_request_bytes=int(gib * GiB))

    records = [
        rec(key(5000), 1, "oom", 12),
        rec(key(5000), 2, "disrupted", 18),  # a spot reclaim: not the sizing's
        rec(key(5000), 3, "ok", 18),
        rec(key(10_000), 1, "ok", 4),
        rec(key(15_000), 1, None, 4),  # in flight
        AttemptRecord("m", key(15_000), 2, outcome="ok"),  # no request recorded
    ]
    assert requested_by_range(records) == {key(5000): 30 * GiB, key(10_000): 4 * GiB}


HOSTILE_ROWS = [
    ("peak NaN", dict(peak_anon_bytes=math.nan)),
    ("peak negative", dict(peak_anon_bytes=-5)),
    ("seconds a string", dict(seconds="soon")),
    ("peak None", dict(peak_anon_bytes=None)),
]


@pytest.mark.parametrize("bad", [c[1] for c in HOSTILE_ROWS], ids=[c[0] for c in HOSTILE_ROWS])
def test_a_value_no_measurement_can_have_is_not_compared_and_raises_nothing(bad):
    diff = compare(side("a", [row(5000), row(10_000)]), side("b", [row(5000, **bad), row(10_000)]), BAND)
    (band,) = diff.bands
    assert band["ranges"] == 2 and diff.regressions == []
    assert band["peak_ratio_median"] == 1.0 and band["seconds_ratio"] is not None


def test_rows_without_a_usable_last_ledger_are_skipped():
    diff = compare(side("a", [row(5000), {"range_key": "x"}]), side("b", [row(5000, last_ledger=None)]), BAND)
    assert diff.compared == 0 and diff.left_out["only_in_a"] == 1


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(band_ledgers=0), "band_ledgers"),
        (dict(threshold=1.0), "threshold"),
        (dict(threshold=math.inf), "threshold"),
    ],
)
def test_bad_settings_are_refused_naming_them(kwargs, says):
    with pytest.raises(ValueError, match=says):
        compare(side("a", []), side("b", []), **{"band_ledgers": BAND, **kwargs})


def test_a_profile_lacking_a_column_the_diff_reads_is_refused_naming_its_file():
    check_diff_columns(
        BAND_SCHEMA.names + ["range_key", "last_ledger", "peak_anon_bytes", "oom_count", "completed", "seconds"], "ok"
    )
    with pytest.raises(ValueError, match=r"profile /x/p.parquet lacks column\(s\) \['oom_count', 'completed'\]"):
        check_diff_columns(["range_key", "last_ledger", "peak_anon_bytes", "seconds"], "/x/p.parquet")


def test_the_table_carries_the_bands_and_names_both_missions_and_images():
    image = {"image": "stellar/stellar-core:22@sha256:abc", "tag": "22", "digest": "sha256:abc"}
    diff = compare(side("a", [row(5000)], {5000: 12}, image), side("b", [row(5000)], {5000: 4}), BAND)
    table = band_table(diff)
    assert table.schema.equals(BAND_SCHEMA)
    assert table.num_rows == 1 and table.column("requested_ratio")[0].as_py() == pytest.approx(1 / 3)
    meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    assert meta["catchup_assets.diff.a"] == "a" and "sha256:abc" in meta["catchup_assets.diff.a_image"]
    assert image_text(image) == "stellar/stellar-core:22@sha256:abc"  # the digest is in the reference
    assert (
        image_text({"image": "/usr/bin/stellar-core", "digest": "sha256:f00"}) == "/usr/bin/stellar-core (sha256:f00)"
    )
    assert image_text(None).startswith("unknown")
    assert pa.Table.from_pylist([], schema=BAND_SCHEMA).num_rows == 0


def test_display_rounds_memory_to_its_unit_and_ratios_to_two_decimals():
    a = side("a", [row(5000, 4.04, 100)], {5000: 12})
    b = side("b", [row(5000, 4.5, 130)], {5000: 6})
    diff = compare(a, b, BAND, threshold=1.1)
    columns, rows = display_rows(diff)
    assert rows[-1][0] == "all" and legend(diff).startswith("memory in GiB.")
    got = dict(zip(columns, rows[0], strict=True))
    assert (got["peak A"], got["peak B/A med"], got["time B/A"]) == ("4.0", "1.11", "1.30")
    assert (got["req A"], got["req B/A"]) == ("12.0", "0.50")
    # A demo's memory x 1/200: scaled back to production GiB; figures under a GiB read in MiB.
    small = compare(side("a", [row(5000, 0.02)], {5000: 0.06}), side("b", [row(5000, 0.02)], {5000: 0.03}), BAND)
    columns, rows = display_rows(small)
    assert legend(small).startswith("memory in MiB.") and dict(zip(columns, rows[0], strict=True))["req A"] == "61.4"
    columns, rows = display_rows(small, 1 / 200)
    assert dict(zip(columns, rows[0], strict=True))["req A"] == "12.0"
    assert legend(small, 1 / 200).startswith("memory in GiB (the measured figures x 200).")
    _, reg = regression_rows(diff)
    assert [r[1] for r in reg] == ["peak", "seconds"] and reg[1][2:] == ["100.0 s", "130.0 s", "1.30"]
    assert text_table(*display_rows(diff)).splitlines()[0].split()[0] == "band"
