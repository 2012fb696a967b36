"""The worker-log reader: bounded lines (L29), medida tx-apply (L24), resume facts (L16)."""

from __future__ import annotations

import pytest

from catchup_assets.core.measure.logparse import (
    WorkerLogFacts,
    iter_lines,
    parse_tx_apply,
    parse_worker_log,
)

P = "2026-11-29T07:52:44.123 GABCD [Perf INFO] "
FOREIGN = "2026-11-29T07:52:44.124 GABCD [Overlay INFO] Dropping peer 10.0.0.7:11625: idle"


def block(
    count: str | None = "123456",
    total: str | None = "1.47073e+06ms",
    name: str = "ledger.transaction.apply",
    foreign: int = 0,
) -> list[str]:
    lines = [P + f"{name}:", P + "  type: timer"]
    if count is not None:
        lines.append(P + f"  count = {count}")
    lines += [FOREIGN] * foreign
    lines += [P + "  event type: calls", P + "  mean = 11.9ms"]
    if total is not None:
        lines.append(P + f"  sum = {total}")
    return lines + [P + "  median = 7.1ms", P + "  99.9% = 400ms"]


OTHER = block("999", "5e+09ms", name="ledger.transaction.count")

TX_APPLY_CASES = [
    ("L24 plain", block("1200", "3456.5ms"), (1200, 3.4565)),
    ("L24 scientific sum", block("123456", "1.47073e+06ms"), (123456, 1470.73)),
    ("L24 scientific, capital E, negative exponent", block("5", "2.5E-01s"), (5, 0.25)),
    ("L24 unit us", block("7", "1500000us"), (7, 1.5)),
    ("L24 unit ns", block("7", "3e9ns"), (7, 3.0)),
    ("L24 seconds unit", block("7", "12s"), (7, 12.0)),
    ("L24 91 interleaved foreign lines", block("88", "1.2e+07ms", foreign=91), (88, 12000.0)),
    ("L24 later header ends the block", block("10", None) + OTHER, (10, None)),
    ("L24 other metric before ours is ignored", OTHER + block("10", "10ms"), (10, 0.01)),
    ("L24 missing sum gives count only", block("42", None), (42, None)),
    # stellar-core writes one exit report: one after it is not the core's (issue 45, failure 25)
    ("L24 issue45 two blocks: the first, the core's, is taken", block("1", "1ms") + block("2", "2e+03ms"), (1, 0.001)),
    ("L24 no block", [FOREIGN, P + "  count = 5", P + "  sum = 5ms"], (None, None)),
    (
        "L24 bare medida lines without a log prefix",
        ["ledger.transaction.apply:", "  type: timer", "  count = 3", "  sum = 4.5ms"],
        (3, 0.0045),
    ),
    (
        "L24 foreign line mentioning count is not the count",
        [P + "ledger.transaction.apply:", FOREIGN + " peer count = 77", P + "  count = 3", P + "  sum = 1ms"],
        (3, 0.001),
    ),
]


# stellar-core's exit report for `--metric ledger.transaction.apply`, verbatim in
# shape: reportCfgMetrics (src/main/ApplicationImpl.cpp) logs an empty line,
# `metric 'NAME':`, each line of medida's ConsoleReporter::Process(Timer&)
# (stellar/medida console_reporter.cc) and an empty line, all on DEFAULT_LOG.
D = "2026-11-29T07:52:44.123 GDKXE [default INFO] "
REAL = [
    D,
    D + "metric 'ledger.transaction.apply':",
    D + "           count = 1532",
    D + "       mean rate = 25.3321 calls/ms",
    D + "   1-minute rate = 21.7042 calls/ms",
    D + "   5-minute rate = 5.10937 calls/ms",
    D + "  15-minute rate = 1.7316 calls/ms",
    D + "             min = 0.012345ms",
    D + "             max = 4.56789ms",
    D + "            mean = 0.187654ms",
    D + "          stddev = 0.234567ms",
    D + "             sum = 1.47073e+06ms",
    D + "          median = 0.123456ms",
    D + "             75% = 0.2ms",
    D + "             95% = 0.5ms",
    D + "             98% = 0.9ms",
    D + "             99% = 1.2ms",
    D + "           99.9% = 4.1ms",
    D,
]
CLOSE = [D, D + "metric 'ledger.ledger.close':", D + "           count = 640", D + "             sum = 9.1e+06ms", D]
TX_COUNT = [D, D + "metric 'ledger.transaction.count':", D + "             min = 0", D + "             sum = 777", D]
OTHER_THREAD = "2026-11-29T07:52:44.124 GDKXE [Bucket INFO] Background eviction scan: idle"
# What the Kubernetes log API prepends with timestamps=true.
K8S = "2026-11-29T07:52:44.123456789Z "

REAL_CASES = [
    ("L24 stellar-core's quoted header and logger prefix", REAL, (1532, 1470.73)),
    ("L24 the report between other metrics' blocks", CLOSE + REAL + TX_COUNT, (1532, 1470.73)),
    ("L24 other threads between count and sum", REAL[:3] + [OTHER_THREAD] * 91 + REAL[3:], (1532, 1470.73)),
    (
        "L24 another thread's line shaped like a field is not ours",
        REAL[:3] + ["2026-11-29T07:52:44.124 GDKXE [Bucket INFO]              sum = 5ms"] + REAL[3:],
        (1532, 1470.73),
    ),
    ("L24 Kubernetes timestamps before each line", [K8S + ln for ln in REAL], (1532, 1470.73)),
    (
        "L24 metric not registered: a warning, no block",
        [
            D,
            "2026-11-29T07:52:44.123 GDKXE [default WARNING] Metric not found: ledger.transaction.apply",
            D + "Update REPORT_METRICS value in configuration file to only include available metrics:",
            D + "    ledger.transaction.apply",
            D,
        ],
        (None, None),
    ),
    (
        "L24 catchup's multi-line configuration is no block",
        [
            "2026-11-29T07:52:44.123 GDKXE [History INFO] Starting catchup with configuration:",
            "  lastClosedLedger: 1",
            "  toLedger: 640",
            "  count: 320",
        ],
        (None, None),
    ),
]


@pytest.mark.parametrize("lines,expected", [c[1:] for c in REAL_CASES], ids=[c[0] for c in REAL_CASES])
def test_L24_parse_stellar_core_s_report(lines: list[str], expected: tuple) -> None:
    count, seconds = parse_tx_apply(lines)
    assert count == expected[0]
    assert seconds == (None if expected[1] is None else pytest.approx(expected[1]))


@pytest.mark.parametrize("size", [1, 7, 64, 333, 4096])
def test_L24_L29_report_split_across_reads_after_progress_meters(size: int) -> None:
    """Meters before the report, then the report cut into reads at any byte."""
    meters = b"".join(b"Downloading bucket %d%%\r" % i for i in range(0, 100, 3))
    data = meters + ("\n".join(CLOSE + REAL + TX_COUNT) + "\n").encode()
    assert parse_tx_apply(iter_lines(chunked(data, size))) == (1532, pytest.approx(1470.73))


@pytest.mark.parametrize("lines,expected", [c[1:] for c in TX_APPLY_CASES], ids=[c[0] for c in TX_APPLY_CASES])
def test_L24_parse_tx_apply(lines: list[str], expected: tuple) -> None:
    count, seconds = parse_tx_apply(lines)
    assert count == expected[0]
    assert seconds == (None if expected[1] is None else pytest.approx(expected[1]))


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


SPLIT_CASES = [
    ("L29 carriage-return meters become lines", [b"a 10%\rb 20%\rc 30%\ndone\n"], ["a 10%", "b 20%", "c 30%", "done"]),
    ("L29 crlf is one terminator", [b"x\r\ny\r\n"], ["x", "y"]),
    ("L29 crlf split across chunks", [b"x\r", b"\ny\n"], ["x", "y"]),
    ("L29 empty chunk between cr and lf", [b"x\r", b"", b"\ny"], ["x", "y"]),
    ("L29 blank lines kept", [b"a\n\nb"], ["a", "", "b"]),
    ("L29 last line without terminator", [b"one\ntwo"], ["one", "two"]),
    ("L29 line split mid-line", [b"hel", b"lo wor", b"ld\nnext\n"], ["hello world", "next"]),
    ("L29 multibyte char split across chunks", chunked("é€😀\n".encode(), 1), ["é€😀"]),
    ("L29 invalid utf-8 is replaced", [b"ok\xff\xfeok\n"], ["ok\ufffd\ufffdok"]),
    ("L29 truncated utf-8 at end", [b"ab\xe2\x82"], ["ab\ufffd"]),
]


@pytest.mark.parametrize("chunks,expected", [c[1:] for c in SPLIT_CASES], ids=[c[0] for c in SPLIT_CASES])
def test_L29_iter_lines(chunks: list[bytes], expected: list[str]) -> None:
    assert list(iter_lines(chunks)) == expected


@pytest.mark.parametrize("chunk_size", [4096, 65536, 1 << 20, 6 << 20])
def test_L29_five_megabyte_blob_is_bounded_and_later_lines_survive(chunk_size: int) -> None:
    blob = b"#" * (5 * 1024 * 1024)
    data = b"before\n" + blob + b"\n" + P.encode() + b"  count = 9\nafter\n"
    lines = list(iter_lines(chunked(data, chunk_size), max_line=65536))
    assert lines == ["before", "#" * 65536, P + "  count = 9", "after"]


def test_L29_unterminated_blob_at_end_is_bounded() -> None:
    lines = list(iter_lines(chunked(b"x" * 300_000, 1000), max_line=1000))
    assert lines == ["x" * 1000]


def test_L29_multibyte_chars_count_as_characters_when_bounding() -> None:
    lines = list(iter_lines([("é" * 10 + "\nz").encode()], max_line=4))
    assert lines == ["éééé", "z"]


def test_L29_L24_progress_meter_and_block_through_the_whole_pipeline() -> None:
    text = "\n".join(block("321", "6.5e+05ms", foreign=3)) + "\n"
    data = b"".join(b"%d%%\r" % i for i in range(100000)) + text.encode()
    assert parse_tx_apply(iter_lines(chunked(data, 8191))) == (321, pytest.approx(650.0))


WORKER_CASES = [
    (
        "L16 fresh start",
        [
            "WORKER: range K target 640 count 320",
            "RESUME DECLINED: no range marker in the data dir (never started here)",
        ]
        + block("5", "2ms"),
        WorkerLogFacts(None, True, False, 5, 0.002),
    ),
    (
        "L16 resumed with a timestamp prefix",
        ["2026-11-29T07:52:44.000000000Z RESUME: range 0000016001-0000032000 from LCL 20031 toward target 32000"]
        + block("7", "1.5e+03ms"),
        WorkerLogFacts(20031, False, False, 7, 1.5),
    ),
    (
        "L16 already complete",
        ["RESUME: range a b from LCL 3 already complete: LCL 640 >= target 640"],
        WorkerLogFacts(640, False, True, None, None),
    ),
    ("L16 no decision line", [FOREIGN], WorkerLogFacts(None, None, False, None, None)),
    (
        "L16 L24 interleaved block, later header",
        block("9", None, foreign=91) + OTHER + ["RESUME: range K from LCL 100 toward target 200"],
        WorkerLogFacts(100, False, False, 9, None),
    ),
]


@pytest.mark.parametrize("lines,expected", [c[1:] for c in WORKER_CASES], ids=[c[0] for c in WORKER_CASES])
def test_L16_L24_parse_worker_log(lines: list[str], expected: WorkerLogFacts) -> None:
    facts = parse_worker_log(iter(lines))  # an iterator: one pass is all it gets
    expected_seconds = expected.tx_apply_seconds
    assert facts.tx_apply_seconds == (None if expected_seconds is None else pytest.approx(expected_seconds))
    assert facts == WorkerLogFacts(**{**expected.__dict__, "tx_apply_seconds": facts.tx_apply_seconds})


@pytest.mark.parametrize(
    "lines, expected",
    [
        # forged or corrupt numbers cost their one measurement, never the record's write (L12)
        (REAL[:2] + [D + "           count = 99999999999999999999999"] + REAL[3:], (None, 1470.73)),
        (REAL[:2] + [D + "           count = " + "9" * 5000] + REAL[3:], (None, 1470.73)),
        (REAL[:11] + [D + "             sum = 1e400ms"] + REAL[12:], (1532, None)),
        (REAL[:11] + [D + "             sum = -5ms"] + REAL[12:], (1532, None)),
    ],
)
def test_L12_an_implausible_number_is_dropped_with_a_warning(lines, expected, caplog):
    count, seconds = parse_tx_apply(lines)
    assert count == expected[0]
    assert seconds == (None if expected[1] is None else pytest.approx(expected[1]))
    assert "out of range, dropped" in caplog.text or "9" * 5000 in "".join(lines)


def test_L12_a_forged_resume_lcl_is_dropped():
    facts = parse_worker_log(["RESUME: range K from LCL 12345678901234567890123 toward target 640"])
    assert facts.resumed_from_ledger is None and facts.fresh_start is False


def test_L4_the_worker_s_verdict_and_a_verification_failure_are_what_the_log_says_went_wrong() -> None:
    """The worker's `WORKER FAILED:` line (a catchup that exited 0 short of its target) is the
    last error; a verification failure is kept beside it, though a later ERROR line follows."""
    stamp = "2026-12-01T10:00:00.000 GABCD"
    short = parse_worker_log(
        [f"{stamp} [History INFO] Catchup finished", "WORKER FAILED: catchup exited 0 at LCL 447, short of target 640"]
    )
    assert short.last_error == "WORKER FAILED: catchup exited 0 at LCL 447, short of target 640"
    assert short.verification_failed is None
    verify = parse_worker_log(
        [
            f"{stamp} [History ERROR] Catchup material failed verification - hash mismatch, propagating failure",
            f"{stamp} [History ERROR] One or more of history archives may be corrupted.",
        ]
    )
    assert verify.verification_failed == (
        "[History ERROR] Catchup material failed verification - hash mismatch, propagating failure"
    )
    assert verify.last_error == "[History ERROR] One or more of history archives may be corrupted."


def _parser_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "catchup_assets.core.measure.logparse"]


def test_issue45_failure22_a_count_that_did_not_parse_is_not_replaced_by_a_later_count_line(caplog):
    """Failure 22: the block's first `count` line is its count: one that does not parse leaves the
    count out (one warning, one note), and a second `count` line further down is not taken for it."""
    lines = REAL[:2] + [D + "           count = 15\ufffd32"] + REAL[3:11] + [D + "           count = 7"] + REAL[11:]
    facts = parse_worker_log(lines, source="attempt K-a003")
    assert facts.tx_apply_count is None and facts.tx_apply_seconds == pytest.approx(1470.73)
    assert facts.notes == ("tx-apply count '15\ufffd32' unparsed",)
    (warning,) = _parser_warnings(caplog)
    assert (
        warning.startswith("worker log of attempt K-a003: ledger.transaction.apply count") and "15\ufffd32" in warning
    )


def test_issue45_failure25_later_exit_reports_are_one_warning_and_never_read(caplog):
    """Failure 25: three reports, the later two garbage: the first is taken, its figures kept; one
    warning names every later report's line, and nothing in them is parsed or warned of."""
    garbage = REAL[:2] + [D + "           count = NaN"] + REAL[3:11] + [D + "             sum = nan"] + REAL[12:]
    lines = REAL + garbage + garbage
    facts = parse_worker_log(lines, source="attempt K-a001")
    assert (facts.tx_apply_count, facts.tx_apply_seconds) == (1532, pytest.approx(1470.73))
    later = [2 + len(REAL), 2 + 2 * len(REAL)]
    assert facts.notes == (f"exit report 1 of 3 taken (line 2; later: {later[0]}, {later[1]})",)
    (warning,) = _parser_warnings(caplog)
    assert "3 ledger.transaction.apply exit reports; the first (line 2) taken" in warning
    assert f"(line {later[0]}, {later[1]})" in warning
