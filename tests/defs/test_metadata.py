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


def _core(level: str, message: str, partition: str = "default") -> str:
    from catchup_assets.sim.core_log import log_line

    return log_line(partition, level, message, when="2026-12-01T18:48:15.713")


def _report(*, foreign: str | None = None) -> list[str]:
    """stellar-core's exit report of `--metric ledger.transaction.apply`, as the simulator prints it
    (sim/core_log.py: reportCfgMetrics and medida's ConsoleReporter, line for line)."""
    from catchup_assets.sim.core_log import tx_apply_report

    lines = tx_apply_report(12, 3.5, when="2026-12-01T18:48:15.713")
    if foreign is not None:  # another thread's line lands inside the block (L24)
        lines.insert(4, foreign)
    return lines


def said(line: str) -> str:
    """A line from its "[Partition LEVEL]" on: how a record's `last error` quotes it."""
    return line[line.index(" [") + 1 :]


FATAL = _core("FATAL", 'Got an exception: Invariant "ConservationOfLumens" does not hold on ledger 2: lumens 9 != 10')
DESTROYED = _core("INFO", "Application destroyed")
EVICTION = _core("INFO", "Background eviction scan: idle (0)", partition="Bucket")
LONG_INFO = _core("INFO", "Catching up to ledger 10000000: " + "x" * 400, partition="History")
LONG_ERROR = _core("ERROR", "Got an exception: " + "y" * 450 + " THE END", partition="History")
MISSING = [
    _core("INFO", ""),
    _core("WARNING", "Metric not found: ledger.nope"),
    _core("INFO", "Update REPORT_METRICS value in configuration file to only include available metrics:"),
    _core("INFO", "    ledger.ledger.close"),
    _core("INFO", ""),
]


@pytest.mark.parametrize(
    ("lines", "shown", "left_out", "last_error"),
    [
        # The condemned attempt as the simulator fails it: the report between destructing and FATAL.
        (
            [_core("INFO", "Application destructing"), *_report(), DESTROYED, FATAL],
            ["Application destructing", "Application destroyed", FATAL],
            ["metric 'ledger.transaction.apply'", "count = 12", "calls/ms", "99.9%"],
            said(FATAL),
        ),
        # Another partition's line inside the block is not the report's: kept.
        ([*_report(foreign=EVICTION), FATAL], [EVICTION, FATAL], ["count = 12", "sum = "], said(FATAL)),
        # A metric that is not registered: the warning and the list of available ones are the report's too.
        ([*MISSING, DESTROYED], ["Application destroyed"], ["Metric not found", "ledger.ledger.close"], None),
        # Outside a report a "label = value" line is the log's own.
        ([_core("INFO", "           count = 3"), DESTROYED], ["count = 3"], [], None),
        # An error line is whole however long; any other is shortened; the last error is the latest.
        ([LONG_ERROR, LONG_INFO], [LONG_ERROR, "…"], ["x" * 200], said(LONG_ERROR)),
        # Many lines: the last ones that fit the UI's inline limit, in order, the FATAL last.
        ([_core("INFO", f"line {i}") for i in range(200)] + [FATAL], ["line 199", FATAL], ["line 150"], said(FATAL)),
    ],
)
def test_the_log_tail_drops_the_metric_report_and_keeps_error_lines_whole(lines, shown, left_out, last_error):
    """Issue 22 item 3: what a condemned range's pane shows of its log, inline (under 1000 characters)."""
    from catchup_assets.defs.metadata.log_tail import escape, tail_markdown

    tail, error = tail_markdown(lines)
    assert len(tail) < 1000  # the UI renders it in place, not behind [Show Markdown]
    for text in shown:
        assert escape(text) in tail, text
    for text in left_out:
        assert escape(text) not in tail, text
    assert error == last_error
    if FATAL in lines:
        assert tail.endswith(escape(FATAL))
