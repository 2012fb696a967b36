"""Two profiles cut otherwise compared by ledger band (issue 37 item 2): core/aggregate/band_match.py and
band_figures.py through `band_diff.compare`, on plain tables of cases.

Bands of 10000 ledgers here. A's ranges are a grid of 5000; B's are cut otherwise: split, merged or
kept. Every range replays one history: 1 s per ledger plus a setup of 100 s, peak 1 GiB per band.
"""

import pytest

from catchup_assets.core.aggregate.band_diff import Side, compare
from catchup_assets.core.aggregate.band_match import band_of, rows_by_key, span_of
from catchup_assets.core.aggregate.diff_display import display_rows, summary_lines

GiB = 1024**3
BAND = 10_000
SETUP = 100.0


def r(first: int, last: int, completed: bool = True, setup: float = SETUP) -> dict:
    return {
        "range_key": f"{first:010d}-{last:010d}",
        "first_ledger": first,
        "last_ledger": last,
        "peak_anon_bytes": (1 + band_of(last, BAND)) * GiB,
        "seconds": setup + (last - first + 1),
        "setup_seconds": setup,
        "oom_count": 0,
        "completed": completed,
        "mission": "m",
    }


GRID = [r(1, 5000), r(5001, 10_000), r(10_001, 15_000), r(15_001, 20_000)]

# (what, B's rows, per band: (by key, A by band, B by band), left out)
CASES = [
    ("the same grid: all by key", GRID, [(2, 0, 0), (2, 0, 0)], {}),
    (
        "the tip split in two: the rest by key",
        [*GRID[:3], r(15_001, 17_500), r(17_501, 20_000)],
        [(2, 0, 0), (1, 1, 2)],
        {},
    ),
    ("the old two merged", [r(1, 10_000), *GRID[2:]], [(0, 2, 1), (2, 0, 0)], {}),
    (
        "merged across the band's edge: the band below still compared, by the ledgers it shares",
        [r(1, 15_000), GRID[3]],
        [(0, 2, 0), (1, 1, 1)],
        {},
    ),
    ("B never reached the second band", [r(1, 10_000)], [(0, 2, 1)], {"only_in_a": 2}),
    (
        "a piece that never completed: left out, its band compared on the rest",
        [*GRID[:3], r(15_001, 17_500, completed=False), r(17_501, 20_000)],
        [(2, 0, 0), (1, 1, 1)],
        {"not_completed_in_b": 1},
    ),
]


@pytest.mark.parametrize("b_rows, want, left_out", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_issue37_ranges_match_by_key_else_by_band(b_rows, want, left_out):
    diff = compare(Side("a", GRID), Side("b", b_rows), BAND)
    got = [(b["ranges"], b["ranges_a_by_band"], b["ranges_b_by_band"]) for b in diff.bands]
    assert got == want
    assert diff.compared == sum(w[0] for w in want)
    assert diff.by_band == {"a": sum(w[1] for w in want), "b": sum(w[2] for w in want)}
    assert {k: v for k, v in diff.left_out.items() if v} == left_out


# (what, B's rows, per band: B's seconds per ledger over A's, given A's 1.02 s per ledger in every band)
RATE_CASES = [
    ("the same grid", GRID, [1.0, 1.0]),
    (
        "the tip split: one more setup in the top band",
        [*GRID[:3], r(15_001, 17_500), r(17_501, 20_000)],
        [1, 1.03 / 1.02],
    ),
    ("the old two merged: one setup saved", [r(1, 10_000), *GRID[2:]], [1.01 / 1.02, 1.0]),
    # 1..15000 in one: 15100 s over 15000 ledgers, two thirds of it in the band below, pro rata.
    ("merged across the edge", [r(1, 15_000), GRID[3]], [15_100 / 15_000 / 1.02, (15_100 / 3 + 5100) / 10_000 / 1.02]),
]


@pytest.mark.parametrize("b_rows, want", [c[1:] for c in RATE_CASES], ids=[c[0] for c in RATE_CASES])
def test_issue37_time_compares_per_ledger_whatever_the_cut(b_rows, want):
    diff = compare(Side("a", GRID), Side("b", b_rows), BAND)
    assert [b["seconds_per_ledger_a"] for b in diff.bands] == pytest.approx([1.02, 1.02])
    assert [b["seconds_ratio"] for b in diff.bands] == pytest.approx(want)
    # Peaks maxed per band: one history, so equal on both sides in each band the ranges end in.
    assert diff.totals["peak_a_max_bytes"] == diff.totals["peak_b_max_bytes"] == 2 * GiB


def test_issue37_requested_memory_compares_only_where_every_range_matched_by_key():
    requested = {row["range_key"]: 4 * GiB for row in GRID}
    b_rows = [r(1, 10_000), *GRID[2:]]
    b_requested = {row["range_key"]: 3 * GiB for row in b_rows}
    diff = compare(Side("a", GRID, requested), Side("b", b_rows, b_requested), BAND)
    merged, kept = diff.bands
    assert (merged["requested_a_bytes"], merged["requested_b_bytes"], merged["requested_ratio"]) == (
        8 * GiB,
        3 * GiB,
        None,  # two pods against one: a sum of requests is no like-for-like ratio
    )
    assert kept["requested_ratio"] == pytest.approx(0.75)
    assert diff.totals["requested_ratio"] is None


def test_a_row_s_ledgers_come_from_its_key_when_it_lacks_first_ledger():
    row = {k: v for k, v in r(5001, 10_000).items() if k != "first_ledger"}
    assert span_of(row) == (5001, 10_000)
    assert span_of({"range_key": "x", "last_ledger": 10}) is None
    assert list(rows_by_key([row, {"range_key": "y"}])) == [row["range_key"]]


def grown(row: dict, **values) -> dict:
    return {**row, **values}


PIECE, TIP = r(15_001, 17_500), r(17_501, 20_000)  # the tip's grid range split in two
# (what, B's rows, the regressions found as (range key, what, A, B) at threshold 1.25)
REGRESSION_CASES = [
    ("one history cut otherwise: none", [r(1, 10_000), GRID[2], PIECE, TIP], []),
    (
        "a piece's peak doubled: judged against its parent's",
        [*GRID[:3], grown(PIECE, peak_anon_bytes=4 * GiB), TIP],
        [(PIECE["range_key"], "peak", 2 * GiB, 4 * GiB)],
    ),
    (
        "a merged range slower: against both rows' replay and one setup",
        [grown(r(1, 10_000), seconds=20_200), *GRID[2:]],
        [(r(1, 10_000)["range_key"], "seconds", 10_100, 20_200)],
    ),
    (
        "a piece OOMed where its parent never did: a new OOM, completed or not",
        [*GRID[:3], grown(PIECE, oom_count=1, completed=False), TIP],
        [(PIECE["range_key"], "new_oom", 0, 1)],
    ),
]


@pytest.mark.parametrize("b_rows, want", [c[1:] for c in REGRESSION_CASES], ids=[c[0] for c in REGRESSION_CASES])
def test_issue37_a_range_of_b_whose_key_a_lacks_is_judged_against_a_s_ledgers(b_rows, want):
    diff = compare(Side("a", GRID), Side("b", b_rows), BAND, threshold=1.25)
    got = [(x["range_key"], x["what"], x["a"], x["b"]) for x in diff.regressions]
    assert got == [(k, w, pytest.approx(a), pytest.approx(b)) for k, w, a, b in want]
    assert sum(band["regressed"] for band in diff.bands) == len({k for k, *_ in want})


def test_issue37_a_new_oom_is_none_where_a_s_ledgers_oomed_too():
    a_rows = [*GRID[:3], grown(GRID[3], oom_count=2)]
    diff = compare(Side("a", a_rows), Side("b", [*GRID[:3], grown(PIECE, oom_count=1), TIP]), BAND)
    assert diff.new_ooms == []


def test_issue37_the_display_counts_both_matches_and_shows_ms_per_ledger():
    diff = compare(Side("a", GRID), Side("b", [r(1, 10_000), GRID[2], PIECE, TIP]), BAND)
    columns, rows = display_rows(diff)
    shown = {row[0]: dict(zip(columns, row, strict=True)) for row in rows}
    assert [shown[b]["ranges"] for b in ("0-0.01M", "0.01-0.02M", "all")] == ["0", "1", "1"]
    assert (shown["all"]["by band A"], shown["all"]["by band B"]) == ("3", "3")
    assert shown["0-0.01M"]["ms/ledger A"] == "1,020"  # 1.02 s per ledger: no exponent
    assert shown["0-0.01M"]["ms/ledger B"] == "1,010" and shown["0-0.01M"]["time B/A"] == "0.99"
    lines = summary_lines(diff)
    assert "matched by key: 1 ranges, measured from completed chains in both, compared range by range" in lines
    assert any(line.startswith("matched by band: 3 ranges of A, 3 of B") for line in lines)
