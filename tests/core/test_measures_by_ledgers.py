"""The next mission reads a cut profile as it reads a grid profile: by the ledgers a range covers (issue 37 item 2).

Pure (core/size/measures.py, `ProfileIndex.lookup_span`, what sizing and the forecast call). One
history measured twice: by the uniform grid (four ranges of 16000 ledgers, setup 60 s each) and
cut to its profile (the two old ranges merged into one, the third split in two, the tip's kept).
A grid range sized from the cut profile and a cut range sized from the grid profile each get the
peak and the seconds of the ledgers they cover, not one row borrowed by its end.
"""

from __future__ import annotations

import pytest

from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB


def m(first: int, last: int, seconds: float, peak_gib: float, setup: float = 60.0) -> RangeMeasure:
    return RangeMeasure(last, int(peak_gib * GiB), None, seconds, None, first, setup)


# (first, last, seconds, peak GiB): replay 40, 140, 1000 and 1600 s after a 60 s setup.
G1, G2, G3, G4 = m(1, 16_000, 100, 1), m(16_001, 32_000, 200, 2), m(32_001, 48_000, 1060, 3), m(48_001, 64_000, 1660, 4)
# The same ledgers cut: G1 + G2 merged (one setup), G3 in two pieces (a setup each), G4 kept.
C1, C2, C3 = m(1, 32_000, 60 + 40 + 140, 2), m(32_001, 40_000, 60 + 500, 3), m(40_001, 48_000, 60 + 500, 3)
GRID = [G1, G2, G3, G4]
CUT = [C1, C2, C3, G4]


def without(rows: list[RangeMeasure], gone: RangeMeasure) -> list[RangeMeasure]:
    return [r for r in rows if r is not gone]  # a range of that mission that never completed: no row


CASES = [
    # (what, profile rows, first, last, peak GiB, seconds)
    ("grid range inside a merged row: its share of the replay", CUT, 1, 16_000, 2, 60 + 180 / 2),
    ("the merged row's other grid range", CUT, 16_001, 32_000, 2, 60 + 180 / 2),
    ("grid range its pieces cover: both pieces' replay, one setup", CUT, 32_001, 48_000, 3, 1060),
    ("the key both missions kept: its own row", CUT, 48_001, 64_000, 4, 1660),
    ("merged range from the grid: both replays, one setup", GRID, 1, 32_000, 2, 240),
    ("a piece from the grid: its share of its parent's replay", GRID, 32_001, 40_000, 3, 560),
    ("the other piece", GRID, 40_001, 48_000, 3, 560),
    ("grid range whose own row is gone: the row above (L25)", without(GRID, G2), 16_001, 32_000, 3, 1060),
    ("merged range over a gone row: the gap sized as the row above", without(GRID, G2), 1, 32_000, 3, 100 + 1000),
    ("a gap in the middle: the row above it", without(GRID, G2), 1, 48_000, 3, 100 + 1000 + 1000),
    ("grid range over a gone piece: the piece above it", without(CUT, C2), 32_001, 48_000, 3, 1060),
]


@pytest.mark.parametrize("rows, first, last, peak, seconds", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_issue37_a_range_is_sized_by_the_ledgers_it_covers_whichever_way_the_profile_was_cut(
    rows, first, last, peak, seconds
):
    got = ProfileIndex(rows).lookup_span(first, last)
    assert (got.peak_anon_bytes, got.seconds) == (int(peak * GiB), pytest.approx(seconds))


def test_issue37_the_whole_span_predicts_the_same_work_from_either_profile_but_the_setups_the_cut_changed():
    grid, cut = ProfileIndex(GRID), ProfileIndex(CUT)
    from_cut = sum(cut.lookup_span(r.first_ledger, r.last_ledger).seconds for r in GRID)
    from_grid = sum(grid.lookup_span(r.first_ledger, r.last_ledger).seconds for r in CUT)
    # Every ledger's replay counted once; the setups as the reading ranges pay them. The grid read
    # from the cut: C1's setup paid by G1 and G2 (+60), C2's and C3's by G3 alone (-60).
    assert from_cut == pytest.approx(sum(r.seconds for r in CUT) + 60 - 60)
    # The cut read from the grid: G1's and G2's setups paid once by C1 (-60), G3's by C2 and C3 (+60).
    assert from_grid == pytest.approx(sum(r.seconds for r in GRID) - 60 + 60)


def test_issue37_a_grid_range_sized_from_a_cut_profile_gets_at_least_the_peak_of_its_ledgers():
    placement = Placement()
    for r in GRID:
        from_cut = placement.size(r.last_ledger, ProfileIndex(CUT), first_ledger=r.first_ledger)
        own = placement.size(r.last_ledger, ProfileIndex(GRID), first_ledger=r.first_ledger)
        assert from_cut.profiled and from_cut.base_memory_bytes >= own.base_memory_bytes
