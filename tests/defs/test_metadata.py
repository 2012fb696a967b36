"""What the operator reads in the UI (issue 14 item 5): units in names, rounding, inline plots."""

import pytest

from catchup_assets.defs.metadata.plots import SPARKS, sparkline
from catchup_assets.defs.metadata.tables import markdown_table, mib


@pytest.mark.parametrize(
    ("points", "line"),
    [
        ([], ""),
        ([(1, None)], ""),
        ([(1, 0), (2, 0)], "▁▁"),  # all zero: flat, not a division by zero
        ([(1, 1), (2, 8)], "▂█"),  # 1/8 of the tallest: the second of eight levels
        ([(1, 8), (2, None), (3, 4)], "█▅"),  # two distinct x: two bins; a missing y is left out
        ([(5, 2), (5, 8)], "█"),  # one bin keeps its highest
    ],
)
def test_sparkline(points, line):
    assert sparkline(points) == line


def test_a_long_profile_stays_one_short_line_the_ui_shows_inline():
    line = sparkline([(i * 16000, float(i % 7)) for i in range(4000)])
    assert len(line) == 60 and set(line) <= set(SPARKS)


@pytest.mark.parametrize(
    ("value", "cell"),
    [(0.0087, "0.0087"), (0.040394567714797124, "0.0404"), (5.86, "5.86"), (12345.6, "12,346"), (0.0, "0")],
)
def test_floats_are_rounded_to_what_they_mean(value, cell):
    """A demo's 0.0087 h reads as 0.0087, not 0.0; a production figure gets its thousands separator."""
    table = markdown_table([{"x": value}], ["x"]).value
    assert table.splitlines()[-1] == f"| {cell} |"


def test_bytes_read_as_mib_to_a_tenth():
    assert mib(26624 * 1024**2) == 26624.0 and mib(16_252_928) == 15.5 and mib(None) is None
